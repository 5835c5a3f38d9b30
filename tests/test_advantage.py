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
from p3o_ocean import CLOCK_PRIOR, CLOCK_RATE, CLOCK_ROWS, MAX_SIGMA, MIN_SIGMA, episode_ends, episode_inside, episode_windows, p3o_advantage, step_clock_table, tie_z, window_mu, window_sum_variance

TOL = dict(atol=1e-5, rtol=1e-5)


def check_all_agree(*inputs, lam=0.8, tied=None):
    """The three implementations agree; returns the twin's advantage."""
    twin = p3o_advantage(*inputs, lam, tied)
    host = host_advantage(*inputs, lam, tied)
    ref = reference_advantage(*inputs, lam, tied)
    assert twin.dtype == torch.float32 and twin.shape == inputs[0].shape
    assert torch.isfinite(twin).all() and torch.isfinite(host).all()
    torch.testing.assert_close(twin.double(), ref, **TOL)
    torch.testing.assert_close(host.double(), ref, **TOL)
    torch.testing.assert_close(host, twin, **TOL)
    return twin


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
    lam = draw(st.one_of(st.sampled_from([0.0, 0.8, 1.0]), st.floats(0.0, 1.0)))
    tied = torch.rand(H, generator=g) < draw(st.sampled_from([0.0, 0.3, 1.0]))
    return (rewards, terminals, mu, sigma, tail_mu), lam, tied


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(advantage_inputs())
def test_kernel_twin_and_reference_agree_on_random_inputs(drawn):
    inputs, lam, tied = drawn
    check_all_agree(*inputs, lam=lam, tied=tied)


@pytest.mark.parametrize("lam", [1.0, 0.8])
def test_agree_with_a_done_at_every_position(lam):
    inputs = done_at_every_position()  # env n has its only terminal at t = n (n = T: none)
    T, N, H = inputs[2].shape
    advantages = check_all_agree(*inputs, lam=lam)
    # A window never looks past its terminal: the next episode's rewards never reach an ended one.
    rewards, terminals, mu, sigma, tail_mu = inputs
    changed = rewards.clone()
    for n in range(T):
        changed[n + 1 :, n] += 100.0
    after = check_all_agree(changed, terminals, mu, sigma, tail_mu, lam=lam)
    for n in range(T):
        assert torch.equal(after[: n + 1, n], advantages[: n + 1, n])
        assert (after[n + 1 :, n] != advantages[n + 1 :, n]).all()


@pytest.mark.parametrize("shape", list(EDGE_SHAPES))
def test_edge_cases_are_finite_and_agree(shape):
    for _, inputs in edge_cases(shape):
        H = inputs[2].shape[-1]
        for lam, tied in ((1.0, None), (0.8, None), (0.0, torch.arange(H) % 2 == 0)):
            check_all_agree(*inputs, lam=lam, tied=tied)


def test_dones_at_every_step_leave_only_the_first_offset():
    g = torch.Generator().manual_seed(2)
    T, N, H = 5, 4, 7
    rewards, mu, sigma = torch.randn(T, N, generator=g), torch.randn(T, N, H, generator=g), torch.rand(H, generator=g) + 0.1
    omega = sigma**-2
    expected = (omega[0] * rewards - (omega * mu).sum(-1)) / omega.max()  # every later target is the episode's 0
    for lam in (1.0, 0.5):
        advantages = check_all_agree(rewards, torch.ones(T, N), mu, sigma, torch.randn(N, H, generator=g), lam=lam)
        torch.testing.assert_close(advantages, expected, **TOL)


def test_hand_worked_example_at_lambda_one():
    # lam = 1: the targets are the rewards. T = 4 steps, one env, H = 3, the episode ends at t = 1.
    # sigma = (1, 2, 4): omega = (1, 1/4, 1/16), Z = 1.
    rewards = torch.tensor([[1.0], [2.0], [0.0], [4.0]])
    terminals = torch.tensor([[0.0], [1.0], [0.0], [0.0]])
    sigma = torch.tensor([1.0, 2.0, 4.0])
    tail_mu = torch.tensor([[10.0, 20.0, 30.0]])  # the bootstrap past the rollout's end
    # mu = 0. t=0: 1 + 0.25*2 + (1/16)*0 (after the terminal) = 1.5; t=1: 2 + 0 + 0 = 2;
    # t=2: 0 + 0.25*4 + (1/16)*10 = 1.625; t=3: 4 + 0.25*10 + (1/16)*20 = 7.75
    advantages = check_all_agree(rewards, terminals, torch.zeros(4, 1, 3), sigma, tail_mu, lam=1.0)
    torch.testing.assert_close(advantages[:, 0], torch.tensor([1.5, 2.0, 1.625, 7.75]))
    # mu = 1 everywhere: t=0: 0 + 0.25*1 + (1/16)*(0 - 1) = 0.1875; t=1: 1 + 0.25*(0 - 1) + (1/16)*(0 - 1) = 0.6875;
    # t=2: -1 + 0.25*3 + (1/16)*9 = 0.3125; t=3: 3 + 0.25*9 + (1/16)*19 = 6.4375
    advantages = check_all_agree(rewards, terminals, torch.ones(4, 1, 3), sigma, tail_mu, lam=1.0)
    torch.testing.assert_close(advantages[:, 0], torch.tensor([0.1875, 0.6875, 0.3125, 6.4375]))
    # The weights are normalised by the largest: sigma = (4, 2, 1) gives omega / Z = (1/16, 1/4, 1).
    advantages = check_all_agree(rewards, terminals, torch.zeros(4, 1, 3), sigma.flip(0), tail_mu, lam=1.0)
    torch.testing.assert_close(advantages[:, 0], torch.tensor([1 / 16 + 0.5, 2 / 16, 1.0 + 10.0, 4 / 16 + 2.5 + 20.0]))


def test_hand_worked_lambda_return():
    # T = 3 steps, one env, H = 2, sigma = 1, lam = 0.5. y[2] = (3, tail 10); y[1] = (2, 0.5 * mu[2, 0] + 0.5 * 3)
    # = (2, 1.5); y[0] = (1, 0.5 * mu[1, 0] + 0.5 * 2) = (1, 1.75). A = sum_j y[t, j] - mu[t, j].
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    mu = torch.tensor([[[0.5, 0.25]], [[1.5, 4.0]], [[0.0, 0.0]]])
    tail_mu = torch.tensor([[10.0, 20.0]])
    inputs = (rewards, torch.zeros(3, 1), mu, torch.ones(2), tail_mu)
    torch.testing.assert_close(check_all_agree(*inputs, lam=0.5)[:, 0], torch.tensor([0.5 + 1.5, 0.5 - 2.5, 3.0 + 10.0]))
    # lam = 0: offset 1 is the critic's prediction one step later, mu[t + 1, 0] (the tail's at t = 2).
    torch.testing.assert_close(check_all_agree(*inputs, lam=0.0)[:, 0], torch.tensor([0.5 + 1.25, 0.5 - 4.0, 3.0 + 10.0]))
    # Offset 1 kept: its rewards, (2, 3, tail 10), whatever lam.
    torch.testing.assert_close(check_all_agree(*inputs, lam=0.5, tied=torch.tensor([False, True]))[:, 0], torch.tensor([0.5 + 1.75, 0.5 - 1.0, 13.0]))
    # The episode ends at t = 0: its offset 1 is the episode's 0; the later decisions are another episode's.
    terminals = torch.tensor([[1.0], [0.0], [0.0]])
    advantages = check_all_agree(rewards, terminals, mu, torch.ones(2), tail_mu, lam=0.5)
    torch.testing.assert_close(advantages[:, 0], torch.tensor([0.5 - 0.25, 0.5 - 2.5, 13.0]))


def test_a_self_consistent_critic_leaves_each_reward_surprise_discounted_by_lambda():
    """mu[t, n, j] = f(t + j, n), and the tail f(T + j, n): every prediction of one reward agrees, so the lambda-return
    of offset j is (1 - lam^j) f + lam^j r while the reward is inside the rollout, and f past it. The advantage is
    then GAE's shape with the learned weights in gamma's place: sum_j w[j] lam^j (r[t + j] - f(t + j)) over the
    rewards inside the rollout. With every offset kept (or lam = 1) it is the Monte-Carlo advantage."""
    T, N, H, lam = 12, 3, 8, 0.7
    g = torch.Generator().manual_seed(7)
    f = torch.randn(T + H, N, generator=g)
    mu = torch.stack([f[t : t + H].T for t in range(T)])  # [T, N, H]
    rewards, sigma = torch.randn(T, N, generator=g), torch.rand(H, generator=g) + 0.5
    inputs = (rewards, torch.zeros(T, N), mu, sigma, f[T:].T.contiguous())
    w = sigma**-2 / (sigma**-2).max()
    expected = torch.zeros(T, N)
    for t in range(T):
        for j in range(min(H, T - t)):
            expected[t] += w[j] * lam**j * (rewards[t + j] - f[t + j])
    torch.testing.assert_close(check_all_agree(*inputs, lam=lam), expected, **TOL)
    monte_carlo = check_all_agree(*inputs, lam=1.0)
    torch.testing.assert_close(check_all_agree(*inputs, lam=lam, tied=torch.ones(H, dtype=torch.bool)), monte_carlo, **TOL)
    expected_mc = torch.stack([sum(w[j] * (rewards[t + j] - f[t + j]) for j in range(min(H, T - t))) for t in range(T)])
    torch.testing.assert_close(monte_carlo, expected_mc, **TOL)


def test_tie_z_finds_the_offset_the_action_moves():
    """The score (the action's centred log-prob) moves the reward 5 steps later; elsewhere z is about |N(0, 1)|.
    Decisions that are not valid do not count."""
    T, N, H = 64, 32, 8
    g = torch.Generator().manual_seed(8)
    score = torch.randn(T, N, generator=g)
    rewards = torch.randn(T, N, generator=g)
    rewards[5:] += 0.5 * score[:-5]
    valid = torch.rand(T, N, generator=g) > 0.2
    inputs = rewards, torch.zeros(T, N), torch.zeros(T, N, H), torch.zeros(N, H)
    z = tie_z(*inputs, score, valid)
    assert z[5] > 8 and (z[torch.arange(H) != 5] < 3.5).all(), z
    scrambled = torch.zeros(T, N, H)
    scrambled[~valid] = 1e6
    torch.testing.assert_close(tie_z(rewards, torch.zeros(T, N), scrambled, torch.zeros(N, H), score, valid), z)


def test_tie_z_over_blocks_of_envs_is_the_whole_batchs_correlation():
    """tie_z builds the targets a block of envs at a time (256 envs a block at T = 64, H = 128); over 600 envs, three
    blocks, with terminals and a tail, it is |corr| * sqrt(n) computed at once from episode_windows' targets."""
    T, N, H = 64, 600, 128
    g = torch.Generator().manual_seed(11)
    rewards, score, mu, tail_mu = torch.randn(T, N, generator=g), torch.randn(T, N, generator=g), torch.randn(T, N, H, generator=g), torch.randn(N, H, generator=g)
    terminals = (torch.rand(T, N, generator=g) < 0.05).float()
    valid = torch.rand(T, N, generator=g) > 0.1
    targets, _ = episode_windows(rewards, terminals, H, tail_mu)
    residual, scores = (targets - mu)[valid].double(), score[valid].double()
    corr = residual.T @ scores / (residual.square().sum(0) * scores.square().sum()).sqrt()
    torch.testing.assert_close(tie_z(rewards, terminals, mu, tail_mu, score, valid).double(), corr.abs() * valid.sum().sqrt(), rtol=1e-4, atol=1e-4)


def test_window_mu_is_mus_sum_over_the_window_through_the_head_held_fixed():
    """The window loss's mu: the sum of mu[j] = head(hidden)[j] over j < w, each decision's own w (0 to H); its gradient
    reaches the features as that sum's would, and never the head."""
    B, F, H = 50, 8, 16
    g = torch.Generator().manual_seed(12)
    head = torch.nn.Linear(F, H)
    hidden = torch.randn(B, F, generator=g, requires_grad=True)
    window = torch.randint(0, H + 1, (B,), generator=g)
    window[:2] = torch.tensor([0, H])
    expected = torch.where(torch.arange(H) < window[:, None], head(hidden), 0.0).sum(1)
    got = window_mu(hidden, head, window)
    torch.testing.assert_close(got, expected)
    assert got[0] == 0
    weights = torch.randn(B, generator=g)
    (expected_grad,) = torch.autograd.grad((expected * weights).sum(), hidden)
    head.zero_grad()
    (got * weights).sum().backward()
    torch.testing.assert_close(hidden.grad, expected_grad)
    assert head.weight.grad is None and head.bias.grad is None


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
    advantages = p3o_advantage(rewards, terminals, mu.expand(T, N, H), torch.ones(H), torch.zeros(N, H), 1.0)  # lam = 1: the rewards
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


def test_step_clock_table_moves_each_cell_by_its_sum_over_its_count_plus_the_prior():
    """A hand-worked step: three decisions at clock 2, one at a clock past the table (its last row), whose second
    offset is past its window (not kept, residual 0 there); every other cell stays where it was."""
    table = torch.zeros(CLOCK_ROWS, 2)
    table[7] = 0.5
    clocks = torch.tensor([2, 2, 2, CLOCK_ROWS + 40])
    residual = torch.tensor([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [4.0, 0.0]])
    in_window = torch.tensor([[True, True], [True, True], [True, True], [True, False]])
    step_clock_table(table, clocks, residual, in_window)
    expected = torch.zeros(CLOCK_ROWS, 2)
    expected[7] = 0.5
    expected[2] = CLOCK_RATE * torch.tensor([3.0, 6.0]) / (3 + CLOCK_PRIOR)
    expected[CLOCK_ROWS - 1] = CLOCK_RATE * torch.tensor([4.0, 0.0]) / torch.tensor([1 + CLOCK_PRIOR, CLOCK_PRIOR])
    torch.testing.assert_close(table, expected)


def test_step_clock_table_follows_the_cell_means_and_moves_rare_cells_slowly():
    """Steps on residuals of the current table (reward less the critic's mu less the table) at the ten cells where
    hundreds of decisions fall each minibatch, as on Ocean: the table converges to the cell means despite noise. At
    a cell where one decision falls now and then, as on Breakout, it has moved only a few percent of the way."""
    generator = torch.Generator().manual_seed(4)
    true = torch.randn(CLOCK_ROWS, 3, generator=generator)
    true[100] = torch.tensor([2.0, -2.0, 1.5])
    table = torch.zeros(CLOCK_ROWS, 3)
    for _ in range(400):
        clocks = torch.cat([torch.randint(0, 10, (4096,), generator=generator), torch.tensor([100])])
        residual = true[clocks] - table[clocks] + torch.randn(len(clocks), 3, generator=generator)
        step_clock_table(table, clocks, residual, torch.ones_like(residual, dtype=torch.bool))
    torch.testing.assert_close(table[:10], true[:10], atol=0.05, rtol=0.0)
    share = table[100] / true[100]  # one decision a step: 1 - (1 - 0.1 / 65) ** 400 = 0.46 of the way, plus noise
    assert ((share > 0.1) & (share < 0.9)).all(), share
    assert not table[10:100].any() and not table[101:].any()  # no decision, no step


def test_host_build_is_independent_of_the_block_width():
    """Threads past H only pad the block's sums with zeros: a block of 16, 64 or 256 threads gives the same bits at
    H = 9, and a block narrower than H computes something else (the test could fail)."""
    g = torch.Generator().manual_seed(3)
    inputs = (torch.randn(7, 5, generator=g), (torch.rand(7, 5, generator=g) < 0.3).float(), torch.randn(7, 5, 9, generator=g), torch.rand(9, generator=g), torch.randn(5, 9, generator=g))
    tied = torch.arange(9) % 4 == 0
    narrow, wide, widest = (host_advantage(*inputs, 0.8, tied, threads=threads) for threads in (16, 64, 256))
    assert torch.equal(narrow, wide) and torch.equal(narrow, widest)
    assert not torch.allclose(host_advantage(*inputs, 0.8, tied, threads=8), narrow)


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
                       0.8, torch.rand(H, generator=g) < 0.3, flags=("-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer"))
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
        for lam, tied in [(1.0, None), (0.8, torch.rand(H, generator=g) < 0.2)]:
            cuda_keep = tied.cuda() if tied is not None else None
            torch.testing.assert_close(cuda_advantage(*[x.cuda() for x in inputs], lam, cuda_keep).cpu(), p3o_advantage(*inputs, lam, tied), **TOL)


def test_twin_and_host_build_agree_at_a_training_shape():
    """T = 64, N = 300, H = 128: windows past the rollout's end on most decisions, terminals, kept offsets."""
    T, N, H = 64, 300, 128
    g = torch.Generator().manual_seed(4)
    inputs = (torch.randn(T, N, generator=g), (torch.rand(T, N, generator=g) < 0.03).float(), torch.randn(T, N, H, generator=g), torch.rand(H, generator=g) + 0.2, torch.randn(N, H, generator=g))
    tied = torch.arange(H) % 5 == 0
    torch.testing.assert_close(p3o_advantage(*inputs, 0.8, tied), host_advantage(*inputs, 0.8, tied, threads=256), **TOL)


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
