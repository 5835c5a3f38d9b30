"""The P3O advantage: the CUDA kernel's source (host build), the PyTorch twin and a loop reference agree."""
import os
import shutil
import subprocess
import sys

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advantage_impls import EDGE_SHAPES, KERNEL, done_at_every_position, edge_cases, host_advantage, reference_advantage
from p3o_ocean import CLOCK_ROWS, MAX_SIGMA, MIN_SIGMA, centre_by_clock, episode_ends, episode_inside, episode_windows, fit_clock_table, p3o_advantage, tie_z, window_sum_variance

TOL = dict(atol=1e-5, rtol=1e-5)


def check_all_agree(*inputs, after=None, keep=None):
    """The three implementations agree on both parts; returns the twin's advantage (near + far, uncentred)."""
    twin = p3o_advantage(*inputs, after, keep)
    host = host_advantage(*inputs, after, keep)
    ref = reference_advantage(*inputs, after, keep)
    assert twin.dtype == torch.float32 and twin.shape == (2, *inputs[0].shape)
    assert torch.isfinite(twin).all() and torch.isfinite(host).all()
    torch.testing.assert_close(twin.double(), ref, **TOL)
    torch.testing.assert_close(host.double(), ref, **TOL)
    torch.testing.assert_close(host, twin, **TOL)
    return twin.sum(0)


@st.composite
def advantage_inputs(draw):
    T = draw(st.integers(1, 12))
    N = draw(st.integers(1, 4))
    H = draw(st.integers(1, 20))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(T, N, generator=g) * draw(st.sampled_from([0.0, 0.1, 1.0, 5.0]))
    terminals = (torch.rand(T, N, generator=g) < draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))).float()
    mu = torch.randn(T, N, H, generator=g)
    sigma = torch.rand(H, generator=g) * draw(st.sampled_from([0.5, 2.0, 10.0]))
    sigma[torch.rand(H, generator=g) < draw(st.sampled_from([0.0, 0.2]))] = 0.0  # sigma = 0 entries
    tail_mu = torch.randn(N, H, generator=g)
    after = draw(st.one_of(st.none(), st.integers(1, H + 1)))  # None and K >= H: no bootstrap
    keep = torch.rand(H, generator=g) < draw(st.sampled_from([0.0, 0.3, 1.0]))
    return (rewards, terminals, mu, sigma, tail_mu), after, keep


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(advantage_inputs())
def test_kernel_twin_and_reference_agree_on_random_inputs(drawn):
    inputs, after, keep = drawn
    check_all_agree(*inputs, after=after, keep=keep)


@pytest.mark.parametrize("bootstrap_after", [None, 2])
def test_agree_with_a_done_at_every_position(bootstrap_after):
    inputs = done_at_every_position()  # env n has its only terminal at t = n (n = T: none)
    T, N, H = inputs[2].shape
    advantages = check_all_agree(*inputs, after=bootstrap_after)
    # A window never looks past its terminal: the next episode's rewards never reach an ended one.
    rewards, terminals, mu, sigma, tail_mu = inputs
    changed = rewards.clone()
    for n in range(T):
        changed[n + 1 :, n] += 100.0
    after = check_all_agree(changed, terminals, mu, sigma, tail_mu, after=bootstrap_after)
    for n in range(T):
        assert torch.equal(after[: n + 1, n], advantages[: n + 1, n])
        assert (after[n + 1 :, n] != advantages[n + 1 :, n]).all()


@pytest.mark.parametrize("shape", list(EDGE_SHAPES))
def test_edge_cases_are_finite_and_agree(shape):
    for _, inputs in edge_cases(shape):
        for after in (None, max(1, inputs[2].shape[-1] // 2)):
            check_all_agree(*inputs, after=after)


def test_dones_at_every_step_leave_only_the_first_offset():
    g = torch.Generator().manual_seed(2)
    T, N, H = 5, 4, 7
    rewards, mu, sigma = torch.randn(T, N, generator=g), torch.randn(T, N, H, generator=g), torch.rand(H, generator=g) + 0.1
    advantages = check_all_agree(rewards, torch.ones(T, N), mu, sigma, torch.randn(N, H, generator=g))
    omega = sigma**-2
    expected = (omega[0] * rewards - (omega * mu).sum(-1)) / omega.max()  # every later target is the episode's 0
    torch.testing.assert_close(advantages, expected, **TOL)


def test_hand_worked_example():
    # T = 4 steps, one env, H = 3, the episode ends at t = 1. sigma = (1, 2, 4): omega = (1, 1/4, 1/16), Z = 1.
    rewards = torch.tensor([[1.0], [2.0], [0.0], [4.0]])
    terminals = torch.tensor([[0.0], [1.0], [0.0], [0.0]])
    sigma = torch.tensor([1.0, 2.0, 4.0])
    tail_mu = torch.tensor([[10.0, 20.0, 30.0]])  # the bootstrap past the rollout's end
    # mu = 0. t=0: 1 + 0.25*2 + (1/16)*0 (after the terminal) = 1.5; t=1: 2 + 0 + 0 = 2;
    # t=2: 0 + 0.25*4 + (1/16)*10 = 1.625; t=3: 4 + 0.25*10 + (1/16)*20 = 7.75
    advantages = check_all_agree(rewards, terminals, torch.zeros(4, 1, 3), sigma, tail_mu)
    torch.testing.assert_close(advantages[:, 0], torch.tensor([1.5, 2.0, 1.625, 7.75]))
    # mu = 1 everywhere: t=0: 0 + 0.25*1 + (1/16)*(0 - 1) = 0.1875; t=1: 1 + 0.25*(0 - 1) + (1/16)*(0 - 1) = 0.6875;
    # t=2: -1 + 0.25*3 + (1/16)*9 = 0.3125; t=3: 3 + 0.25*9 + (1/16)*19 = 6.4375
    advantages = check_all_agree(rewards, terminals, torch.ones(4, 1, 3), sigma, tail_mu)
    torch.testing.assert_close(advantages[:, 0], torch.tensor([0.1875, 0.6875, 0.3125, 6.4375]))
    # The weights are normalised by the largest: sigma = (4, 2, 1) gives omega / Z = (1/16, 1/4, 1).
    advantages = check_all_agree(rewards, terminals, torch.zeros(4, 1, 3), sigma.flip(0), tail_mu)
    torch.testing.assert_close(advantages[:, 0], torch.tensor([1 / 16 + 0.5, 2 / 16, 1.0 + 10.0, 4 / 16 + 2.5 + 20.0]))


def test_hand_worked_bootstrap():
    # T = 3 steps, one env, H = 2, K = 1, sigma = 1. Offset 1's target is mu[t + 1, 0] while t + 1 < T and t's
    # episode runs there; else the reward (or the tail past the rollout).
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    mu = torch.tensor([[[0.5, 0.25]], [[1.5, 4.0]], [[0.0, 0.0]]])
    tail_mu = torch.tensor([[10.0, 20.0]])
    inputs = (rewards, torch.zeros(3, 1), mu, torch.ones(2), tail_mu)
    near, far = p3o_advantage(*inputs, 1)
    torch.testing.assert_close(near[:, 0], torch.tensor([0.5, 0.5, 3.0]))
    torch.testing.assert_close(far[:, 0], torch.tensor([1.5 - 0.25, 0.0 - 4.0, 10.0]))
    check_all_agree(*inputs, after=1)
    # Offset 1 kept: the rewards, as without the bootstrap.
    near, far = p3o_advantage(*inputs, 1, torch.tensor([False, True]))
    torch.testing.assert_close(far[:, 0], torch.tensor([2.0 - 0.25, 3.0 - 4.0, 10.0]))
    # The episode ends at t = 0: no step t + 1 in it, so its offset 1 keeps the episode's 0.
    terminals = torch.tensor([[1.0], [0.0], [0.0]])
    near, far = p3o_advantage(rewards, terminals, mu, torch.ones(2), tail_mu, 1)
    torch.testing.assert_close(far[:, 0], torch.tensor([0.0 - 0.25, 0.0 - 4.0, 10.0]))
    check_all_agree(rewards, terminals, mu, torch.ones(2), tail_mu, after=1)


def test_a_self_consistent_critic_has_no_far_part_where_it_bootstraps():
    """mu[t, n, j] = f(t + j, n): every prediction of one reward agrees, so beyond K the bootstrapped targets equal mu
    (far = 0) for t + K < T, while the last K steps' far parts still read rewards and the tail. With every offset
    kept, the two parts add up to the Monte-Carlo advantage."""
    T, N, H, K = 12, 3, 8, 3
    g = torch.Generator().manual_seed(7)
    f = torch.randn(T + H, N, generator=g)
    mu = torch.stack([f[t : t + H].T for t in range(T)])  # [T, N, H]
    inputs = (torch.randn(T, N, generator=g), torch.zeros(T, N), mu, torch.rand(H, generator=g) + 0.5, torch.randn(N, H, generator=g))
    near, far = p3o_advantage(*inputs, K)
    assert far[: T - K].abs().max() < 1e-5 and (far[T - K :].abs() > 1e-3).all()
    monte_carlo = p3o_advantage(*inputs).sum(0)
    torch.testing.assert_close(p3o_advantage(*inputs, K, torch.ones(H, dtype=torch.bool)).sum(0), monte_carlo, **TOL)
    torch.testing.assert_close(near, p3o_advantage(*inputs, K, torch.ones(H, dtype=torch.bool))[0])


def test_tie_z_finds_the_offset_the_action_moves():
    """The score (the action's centred log-prob) moves the reward 5 steps later; elsewhere z is about |N(0, 1)|.
    Decisions that are not valid do not count."""
    T, N, H = 64, 32, 8
    g = torch.Generator().manual_seed(8)
    score = torch.randn(T, N, generator=g)
    rewards = torch.randn(T, N, generator=g)
    rewards[5:] += 0.5 * score[:-5]
    targets, _ = episode_windows(rewards, torch.zeros(T, N), H, torch.zeros(N, H))
    valid = torch.rand(T, N, generator=g) > 0.2
    z = tie_z(targets, torch.zeros(T, N, H), score, valid)
    assert z[5] > 8 and (z[torch.arange(H) != 5] < 3.5).all(), z
    scrambled = targets.clone()
    scrambled[~valid] = 1e6
    torch.testing.assert_close(tie_z(scrambled, torch.zeros(T, N, H), score, valid), z)


def test_centre_by_clock_removes_each_episode_steps_mean_over_the_valid_decisions():
    T, N = 20, 6
    g = torch.Generator().manual_seed(9)
    x = torch.randn(T, N, generator=g)
    clocks = torch.randint(0, 4, (T, N), generator=g)
    clocks[0, 0] = CLOCK_ROWS + 50  # past the table: the last row
    valid = torch.rand(T, N, generator=g) > 0.3
    valid[0, 0] = True
    centred = centre_by_clock(x, clocks, valid)
    for row in [0, 1, 2, 3]:
        cell = (clocks == row) & valid
        torch.testing.assert_close(centred[cell].mean(), torch.tensor(0.0), atol=1e-6, rtol=0)
        torch.testing.assert_close(centred[clocks == row], x[clocks == row] - x[cell].mean())
    assert centred[0, 0] == 0.0  # alone in its row
    x_changed = torch.where(valid, x, 1e3)  # what is not a decision does not move the means
    torch.testing.assert_close(centred[valid], centre_by_clock(x_changed, clocks, valid)[valid])


def test_zeros_after_terminal_charge_an_early_end_with_what_it_forgoes():
    """The survival bias of a window cut at the terminal, in its smallest form. From one state, half the decisions
    end the episode at once (reward 0) and half go on to a reward of 1 three steps later. mu at the value loss's
    optimum is the mean target of each offset, (0, 0, 0, 0.5) with the episode's zeros after its end: ending early
    costs 0.5, going on gains 0.5. (Cut at the terminal, only the surviving episodes would reach offsets 1..3, so
    mu = (0, 0, 0, 1) and both actions would get advantage 0.)"""
    T, N, H = 4, 8, 4
    ends_early = torch.arange(N) % 2 == 0
    terminals = torch.zeros(T, N)
    terminals[0, ends_early] = 1.0  # the episode ends at t = 0
    terminals[3, ~ends_early] = 1.0
    rewards = torch.zeros(T, N)
    rewards[3, ~ends_early] = 1.0
    targets, window = episode_windows(rewards, terminals, H)
    assert (window[0] == H).all()
    mu = targets[0].mean(0)  # the decisions at t = 0, all from the same state
    torch.testing.assert_close(mu, torch.tensor([0.0, 0.0, 0.0, 0.5]))
    advantages = p3o_advantage(rewards, terminals, mu.expand(T, N, H), torch.ones(H), torch.zeros(N, H)).sum(0)
    torch.testing.assert_close(advantages[0, ends_early], torch.full((N // 2,), -0.5))
    torch.testing.assert_close(advantages[0, ~ends_early], torch.full((N // 2,), 0.5))


def test_episode_windows_targets_and_lengths():
    rewards = torch.arange(1.0, 6.0)[:, None]  # T = 5, N = 1
    terminals = torch.tensor([[0.0], [0.0], [1.0], [0.0], [0.0]])
    # The ended episode's windows run to H on zeros, never into the next episode's rewards (4, 5) nor into tail_mu;
    # the open ones stop at the rollout's end (the value targets) or run on over tail_mu (the advantage's).
    targets, k = episode_windows(rewards, terminals, 3)
    assert targets.shape == (5, 1, 3)
    assert targets[:, 0].tolist() == [[1.0, 2.0, 3.0], [2.0, 3.0, 0.0], [3.0, 0.0, 0.0], [4.0, 5.0, 0.0], [5.0, 0.0, 0.0]]
    assert k[:, 0].tolist() == [3, 3, 3, 2, 1]
    targets, k = episode_windows(rewards, terminals, 3, tail_mu=torch.tensor([[7.0, 8.0, 9.0]]))
    assert targets[:, 0].tolist() == [[1.0, 2.0, 3.0], [2.0, 3.0, 0.0], [3.0, 0.0, 0.0], [4.0, 5.0, 7.0], [5.0, 7.0, 8.0]]
    assert k[:, 0].tolist() == [3, 3, 3, 3, 3]
    # The pairs inside the episode and the rollout: up to the terminal or the rollout's end.
    assert episode_inside(episode_ends(terminals), 3)[:, 0].tolist() == [3, 2, 1, 2, 1]
    assert episode_inside(episode_ends(terminals), 2)[:, 0].tolist() == [2, 2, 1, 2, 1]


def test_fit_clock_table_recovers_how_the_residual_varies_with_the_clock_at_each_offset():
    """Residuals that depend on the decision's clock s and the offset j, plus noise: with hundreds of decisions per
    clock, cross-validation keeps the shrinkage small and the table is the cell means less the offset's mean over the
    batch (that level is the critic's). Offsets outside a window and autoreset steps (window 0) do not count, every
    clock from CLOCK_ROWS - 1 on shares the last row, and a level added to every residual leaves the table as it is."""
    generator = torch.Generator().manual_seed(4)
    T, N, H = 64, 64, 6
    clocks = torch.randint(0, 20, (T, N), generator=generator)
    clocks[:, :4] = CLOCK_ROWS + torch.randint(-1, 40, (T, 4), generator=generator)  # the last row, shared
    true = torch.randn(CLOCK_ROWS, H, generator=generator) + 3.0  # a level of 3 that the table must leave out
    residual = true[clocks.clamp(max=CLOCK_ROWS - 1)] + 0.1 * torch.randn(T, N, H, generator=generator)
    window = torch.full((T, N), H)
    window[:, 10:20] = 3  # offsets 3 .. 5 of these decisions are past their windows: garbage there
    residual[:, 10:20, 3:] = 1e6
    window[:, 20:22] = 0  # autoreset steps
    residual[:, 20:22] = -1e6
    table = fit_clock_table(clocks, residual, window)
    assert table.shape == (CLOCK_ROWS, H) and table.dtype == torch.float32
    kept = (torch.arange(H) < window[..., None]).float()
    level = (true[clocks.clamp(max=CLOCK_ROWS - 1)] * kept).sum((0, 1)) / kept.sum((0, 1))  # [H], about 3
    seen = torch.zeros(CLOCK_ROWS, dtype=torch.bool)
    seen[clocks.clamp(max=CLOCK_ROWS - 1).unique()] = True
    torch.testing.assert_close(table[seen], true[seen] - level, atol=0.05, rtol=0.0)
    assert not table[~seen].any()  # a clock no decision had keeps 0
    torch.testing.assert_close(fit_clock_table(clocks, residual - 5.0, window), table, atol=1e-5, rtol=0.0)


@pytest.mark.parametrize("num_envs", [8, 1])
def test_fit_clock_table_stays_near_zero_where_the_clock_predicts_nothing(num_envs):
    """Breakout's regime: about 1,000 decisions a batch spread over hundreds of clocks, and residuals that are noise
    to the clock. Unshrunk, each cell would be the mean of a handful of residuals, noise that the baseline would carry
    into every advantage; cross-validated across the env halves (the rollout's, with one env), the table stays at or
    near 0 (it is chosen per offset, so by chance some offsets keep a heavily shrunk fit). With the same clocks and a
    real clock effect (-1 before clock 150, +1 from it: no level, which the critic would carry), the table predicts
    fresh residuals better than no table and better than the unshrunk means."""
    generator = torch.Generator().manual_seed(5)
    T, H = 1024 // num_envs, 16
    clocks = torch.randint(0, 300, (T, num_envs), generator=generator)
    rows = clocks.clamp(max=CLOCK_ROWS - 1)
    window = torch.full((T, num_envs), H)
    counts = torch.zeros(CLOCK_ROWS).index_add_(0, rows.view(-1), torch.ones(T * num_envs)).clamp(min=1)[:, None]

    def batch(effect):  # residuals: noise, plus `effect` from clock 150 on and minus it before
        return torch.randn(T, num_envs, H, generator=generator) + effect * torch.where(clocks >= 150, 1.0, -1.0)[..., None]

    def fresh_error(table, effect):  # squared error on a fresh batch with the same clocks
        return (batch(effect) - table[rows]).square().mean().item()

    for effect in (0.0, 1.0):
        residual = batch(effect)
        table = fit_clock_table(clocks, residual, window)
        means = torch.zeros(CLOCK_ROWS, H).index_add_(0, rows.view(-1), residual.view(-1, H)) / counts
        errors = {name: sum(fresh_error(t, effect) for _ in range(20)) / 20 for name, t in (("table", table), ("none", torch.zeros_like(table)), ("means", means))}
        if effect == 0.0:  # chosen per offset, a few offsets keep a heavily shrunk fit by chance: about +1% (seed 5)
            assert table.std() < 0.08 and errors["table"] < 1.02 * errors["none"], errors
            assert errors["table"] < errors["means"] - 0.1, errors  # the unshrunk means fit each batch's noise: +25%
        else:  # measured: 1.18 against 1.24 (unshrunk) and 2.00 (none)
            assert errors["table"] < errors["means"] - 0.03 and errors["table"] < errors["none"] - 0.1, errors
            assert 0.4 < table[150:].mean() < 1.1 and -1.1 < table[:150].mean() < -0.4  # shrunk: ~3 decisions a cell


def test_host_build_is_independent_of_the_launch_shape():
    g = torch.Generator().manual_seed(3)
    inputs = (torch.randn(7, 5, generator=g), (torch.rand(7, 5, generator=g) < 0.3).float(), torch.randn(7, 5, 9, generator=g), torch.rand(9, generator=g), torch.randn(5, 9, generator=g))
    one = host_advantage(*inputs, 4, threads=1)
    many = host_advantage(*inputs, 4, threads=256)  # most of the last block is out of range
    assert torch.equal(one, many)


def test_kernel_reads_rows_that_are_not_16_byte_aligned():
    """mu 4 bytes past a 16-byte boundary: the kernel must not take its 16-byte reads (a GPU faults on them), and its
    4-byte loop gives the twin's advantages. The host build runs under UndefinedBehaviorSanitizer's alignment check,
    which aborts on a misaligned 16-byte read as the GPU would; aligned, the 16-byte path gives the same advantages."""
    code = f"""
import sys; sys.path[:0] = {[str(KERNEL.parents[1]), str(KERNEL.parents[1] / 'tests')]}
import numpy as np, torch
from advantage_impls import host_advantage, host_library
from p3o_ocean import p3o_advantage
g = torch.Generator().manual_seed(5)
T, N, H = 6, 3, 8
rewards, terminals = torch.randn(T, N, generator=g), (torch.rand(T, N, generator=g) < 0.3).float()
mu, sigma, tail_mu = torch.randn(T, N, H, generator=g), torch.rand(H, generator=g) + 0.1, torch.randn(N, H, generator=g)
keep = torch.arange(H) % 3 == 0
twin = p3o_advantage(rewards, terminals, mu, sigma, tail_mu, 3, keep)
flags = ("-O1", "-fsanitize=alignment", "-fno-sanitize-recover=alignment")
torch.testing.assert_close(host_advantage(rewards, terminals, mu, sigma, tail_mu, 3, keep, flags=flags), twin, atol=1e-5, rtol=1e-5)
storage = np.zeros(mu.numel() + 4, dtype=np.float32)
start = next(k for k in range(4) if (storage.ctypes.data + 4 * k) % 16 == 4)
shifted = storage[start : start + mu.numel()]
shifted[:] = mu.numpy().ravel()
assert shifted.ctypes.data % 16 == 4
arrays = [np.ascontiguousarray(x.numpy()) for x in (rewards, terminals, sigma, tail_mu, keep.float())]
parts = np.full((2, T, N), np.nan, dtype=np.float32)
host_library(flags).launch(arrays[0].ctypes.data, arrays[1].ctypes.data, shifted.ctypes.data, arrays[2].ctypes.data, arrays[3].ctypes.data,
                           arrays[4].ctypes.data, T, N, H, 3, parts[0].ctypes.data, parts[1].ctypes.data, 32)
torch.testing.assert_close(torch.from_numpy(parts), twin, atol=1e-5, rtol=1e-5)
print("clean")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and "clean" in result.stdout, result.stderr[-3000:]


def test_kernel_reads_only_inside_its_arrays():
    """The host build under AddressSanitizer: an out-of-bounds read or write aborts the run."""
    if subprocess.run(["g++", "-fsanitize=address", "-x", "c++", "-", "-o", "/dev/null"], input="int main(){}", text=True, capture_output=True).returncode:
        pytest.fail("g++ cannot build with -fsanitize=address on this machine")
    code = f"""
import sys; sys.path[:0] = {[str(KERNEL.parents[1]), str(KERNEL.parents[1] / 'tests')]}
import torch
from advantage_impls import host_advantage
g = torch.Generator().manual_seed(0)
for T, N, H in [(1, 1, 1), (3, 2, 8), (6, 3, 4), (5, 4, 5)]:
    terminals = (torch.rand(T, N, generator=g) < 0.3).float()
    a = host_advantage(torch.randn(T, N, generator=g), terminals, torch.randn(T, N, H, generator=g), torch.rand(H, generator=g), torch.randn(N, H, generator=g),
                       max(1, H // 2), torch.rand(H, generator=g) < 0.3, threads=7, flags=("-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer"))
    assert torch.isfinite(a).all()
print("clean")
"""
    libasan = subprocess.run(["g++", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    env = dict(os.environ, LD_PRELOAD=libasan, ASAN_OPTIONS="detect_leaks=0")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0 and "clean" in result.stdout, result.stderr[-3000:]


def test_kernel_compiles_to_ptx():
    """A kernel that does not compile for the GPU cannot land: NVRTC (through CuPy, no device needed) and
    nvcc where the machine has it; ptxas then assembles the PTX for sm_90 when it is on the PATH."""
    from cupy.cuda import compiler

    ptx = compiler._NVRTCProgram(KERNEL.read_text(), "advantage.cu").compile(("-arch=compute_90",))[0]
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    assert ".entry p3o_advantage" in ptx
    if shutil.which("ptxas"):
        subprocess.run(["ptxas", "-arch=sm_90", "-o", "/dev/null", "-"], input=ptx, text=True, check=True, capture_output=True)
    if shutil.which("nvcc"):
        subprocess.run(["nvcc", "-arch=sm_90", "-c", str(KERNEL), "-o", "/dev/null"], check=True, capture_output=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; the host build above runs the same source on the CPU")
def test_cupy_kernel_agrees_with_twin_on_gpu():
    from kernels.advantage import load_cuda_advantage

    cuda_advantage = load_cuda_advantage()
    g = torch.Generator().manual_seed(0)
    for T, N, H in [(64, 256, 128), (16, 33, 40), (3, 5, 128), (5, 7, 1)]:
        inputs = [torch.randn(T, N, generator=g), (torch.rand(T, N, generator=g) < 0.05).float(), torch.randn(T, N, H, generator=g), torch.rand(H, generator=g), torch.randn(N, H, generator=g)]
        for after, keep in [(None, None), (min(32, H), torch.rand(H, generator=g) < 0.2)]:
            cuda_keep = keep.cuda() if keep is not None else None
            torch.testing.assert_close(cuda_advantage(*[x.cuda() for x in inputs], after, cuda_keep).cpu(), p3o_advantage(*inputs, after, keep), **TOL)


def test_twin_env_blocks_with_a_partial_last_block():
    """T = 64, H = 128 gives the twin blocks of 256 envs: N = 300 is one full block and a partial one."""
    T, N, H = 64, 300, 128
    g = torch.Generator().manual_seed(4)
    inputs = (torch.randn(T, N, generator=g), (torch.rand(T, N, generator=g) < 0.03).float(), torch.randn(T, N, H, generator=g), torch.rand(H, generator=g) + 0.2, torch.randn(N, H, generator=g))
    keep = torch.arange(H) % 5 == 0
    torch.testing.assert_close(p3o_advantage(*inputs, 32, keep), host_advantage(*inputs, 32, keep, threads=256), **TOL)


def test_window_sum_variance_is_the_variance_of_the_decisions_window_sums():
    """The window loss's unit: each decision's targets summed over its known offsets (below its window), and the
    population variance of those sums over the decisions marked valid, autoreset steps left out. The targets are
    episode_windows' (0 past each window: after the terminal, and past the rollout's end without a tail)."""
    generator = torch.Generator().manual_seed(6)
    T, N, H = 9, 5, 4
    rewards = torch.randn(T, N, generator=generator)
    terminals = (torch.rand(T, N, generator=generator) < 0.25).float()
    targets, window = episode_windows(rewards, terminals, H)
    valid = torch.rand(T, N, generator=generator) > 0.3
    assert (window < H).any() and (window == H).any() and terminals.any()  # both kinds of window
    sums = [float(targets[t, n, : window[t, n]].sum()) for t in range(T) for n in range(N) if valid[t, n]]
    expected = sum(s * s for s in sums) / len(sums) - (sum(sums) / len(sums)) ** 2
    assert abs(window_sum_variance(targets, valid).item() - expected) < 1e-5
    targets[~valid] = 1e6  # what is not a decision does not count
    assert abs(window_sum_variance(targets, valid).item() - expected) < 1e-5
