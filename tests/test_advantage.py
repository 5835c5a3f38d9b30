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
from p3o_ocean import CLOCK_ROWS, MAX_SIGMA, MIN_SIGMA, arriving_effects, earlier_effects, effect_floor_at, effect_sigma, episode_ends, episode_inside, episode_windows, fit_clock_table, window_reach, fit_effect_head, fitted_sigma, ridge_path, later_effects, p3o_advantage, variable_horizon

TOL = dict(atol=1e-5, rtol=1e-5)


def check_all_agree(*inputs, **options):
    twin_a, twin_w = p3o_advantage(*inputs, **options)
    host_a, host_w = host_advantage(*inputs, **options)
    ref_a, ref_w = reference_advantage(*inputs, **options)
    assert twin_w.dtype == torch.int64 and twin_a.dtype == torch.float32
    assert torch.isfinite(twin_a).all() and torch.isfinite(host_a).all()
    assert torch.equal(twin_w, ref_w) and torch.equal(host_w, ref_w)
    torch.testing.assert_close(twin_a.double(), ref_a, **TOL)
    torch.testing.assert_close(host_a.double(), ref_a, **TOL)
    torch.testing.assert_close(host_a, twin_a, **TOL)
    return twin_a, twin_w


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
    sigma_r = draw(st.sampled_from([0.0, 0.3, 1.0, float(rewards.std(correction=0))]))
    tail_mu = torch.randn(N, H, generator=g) if draw(st.booleans()) else None
    options = dict(
        puf=draw(st.sampled_from([0.0, 0.5, 1.0])),
        weight_norm=draw(st.sampled_from(["max", "sum"])),
        min_horizon=draw(st.sampled_from([0, 1, 3, 16, 40])),
        cut=draw(st.sampled_from([0.0, 0.5, 0.95, 2.0])),
        tail_mu=tail_mu,
        zeros_after_terminal=draw(st.booleans()),
    )
    return (rewards, terminals, mu, sigma, sigma_r), options


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(advantage_inputs())
def test_kernel_twin_and_reference_agree_on_random_inputs(case):
    inputs, options = case
    check_all_agree(*inputs, **options)


@pytest.mark.parametrize("zeros_after_terminal", [False, True])
@pytest.mark.parametrize("weight_norm", ["max", "sum"])
@pytest.mark.parametrize("tail", [False, True])
def test_agree_with_a_done_at_every_position(weight_norm, tail, zeros_after_terminal):
    inputs = done_at_every_position()  # env n has its only terminal at t = n (n = T: none)
    T, N, H = inputs[2].shape
    tail_mu = torch.randn(N, H, generator=torch.Generator().manual_seed(1)) if tail else None
    _, window = check_all_agree(*inputs, weight_norm=weight_norm, min_horizon=0, cut=0.0, tail_mu=tail_mu, zeros_after_terminal=zeros_after_terminal)
    for n in range(T):  # windows before the terminal stop on it (or run on, on its zeros, to H)
        for t in range(n + 1):
            assert window[t, n] == (H if zeros_after_terminal else min(H, n - t + 1))
    _, window = check_all_agree(*inputs, weight_norm=weight_norm, min_horizon=2, cut=0.95, tail_mu=tail_mu, zeros_after_terminal=zeros_after_terminal)
    # and windows after it never look back: the next episode's rewards never reach an ended one (both cases agree
    # with the reference, whose targets after a terminal are 0 or cut)


@pytest.mark.parametrize("shape", list(EDGE_SHAPES))
@pytest.mark.parametrize("puf", [0.0, 1.0])
def test_edge_cases_are_finite_and_agree(shape, puf):
    for _, inputs, options in edge_cases(shape, puf):
        check_all_agree(*inputs, **options)


def test_dones_at_every_step_end_every_window_at_its_first_offset():
    g = torch.Generator().manual_seed(2)
    T, N, H = 5, 4, 7
    inputs = (torch.randn(T, N, generator=g), torch.ones(T, N), torch.randn(T, N, H, generator=g), torch.rand(H, generator=g) + 0.1, 0.7)
    for tail_mu in (None, torch.randn(N, H, generator=g)):
        _, window = check_all_agree(*inputs, min_horizon=0, cut=0.0, tail_mu=tail_mu)
        assert (window == 1).all()
        _, window = check_all_agree(*inputs, min_horizon=0, cut=0.0, tail_mu=tail_mu, zeros_after_terminal=True)
        assert (window == H).all()


def test_hand_worked_example():
    # T = 4 steps, one env, H = 3, the episode ends at t = 1. sigma = (1, 2, 4): omega = (1, 1/4, 1/16).
    rewards = torch.tensor([[1.0], [2.0], [0.0], [4.0]])
    terminals = torch.tensor([[0.0], [1.0], [0.0], [0.0]])
    mu = torch.zeros(4, 1, 3)
    sigma = torch.tensor([1.0, 2.0, 4.0])
    options = dict(min_horizon=16, cut=0.95)  # no variable-horizon cut: min_horizon > H
    # t=0: offsets 0, 1 (terminal at t=1 ends it): max norm Z=1: 1*1 + 0.25*2 = 1.5; sum norm Z=1.25: 1.2
    # t=1: offset 0 only: 2 (either norm)
    # t=2: offsets 0, 1 (rollout ends): max: 0 + 0.25*4 = 1; sum: 1 / 1.25 = 0.8
    # t=3: offset 0: 4
    for weight_norm, expected in [("max", [1.5, 2.0, 1.0, 4.0]), ("sum", [1.2, 2.0, 0.8, 4.0])]:
        advantages, window = check_all_agree(rewards, terminals, mu, sigma, 1.0, weight_norm=weight_norm, **options)
        torch.testing.assert_close(advantages[:, 0], torch.tensor(expected))
        assert window[:, 0].tolist() == [2, 1, 2, 1]
    # The tail bootstrap continues t=2 and t=3 past the rollout's end with tail_mu = (10, 20, 30):
    # t=2: 0 + 0.25*4 + (1/16)*10 = 1.625 (max); t=3: 4 + 0.25*10 + (1/16)*20 = 7.75 (max)
    tail_mu = torch.tensor([[10.0, 20.0, 30.0]])
    advantages, window = check_all_agree(rewards, terminals, mu, sigma, 1.0, weight_norm="max", tail_mu=tail_mu, **options)
    torch.testing.assert_close(advantages[:, 0], torch.tensor([1.5, 2.0, 1.625, 7.75]))
    assert window[:, 0].tolist() == [2, 1, 3, 3]
    # puf = 1 with sigma_r = 2 subtracts 1/4 from every omega: (0.75, 0, 0); t=0: 0.75*1 / 0.75 = 1
    advantages, _ = check_all_agree(rewards, terminals, mu, sigma, 2.0, puf=1.0, **options)
    torch.testing.assert_close(advantages[:, 0], torch.tensor([1.0, 2.0, 0.0, 4.0]))
    # Variable horizon: sigma_r = 2, cut 0.95: the first j >= 1 with sigma > 1.9 is j = 1, so h = 1.
    advantages, window = check_all_agree(rewards, terminals, mu, sigma, 2.0, min_horizon=1, cut=0.95)
    assert window[:, 0].tolist() == [1, 1, 1, 1]
    torch.testing.assert_close(advantages[:, 0], rewards[:, 0])
    # Zeros after the terminal, with mu = 1 everywhere. Cut (P3O.md): t=0: 0 + 0.25*1 = 0.25; t=1: 1;
    # t=2: -1 + 0.25*3 = -0.25; t=3: 3. Zeros: the ended episode's windows run to H = 3 with target 0:
    # t=0: 0 + 0.25*1 + (1/16)*(0 - 1) = 0.1875; t=1: 1 + 0.25*(0 - 1) + (1/16)*(0 - 1) = 0.6875; t=2, t=3 as cut.
    ones = torch.ones(4, 1, 3)
    advantages, window = check_all_agree(rewards, terminals, ones, sigma, 1.0, **options)
    torch.testing.assert_close(advantages[:, 0], torch.tensor([0.25, 1.0, -0.25, 3.0]))
    advantages, window = check_all_agree(rewards, terminals, ones, sigma, 1.0, zeros_after_terminal=True, **options)
    torch.testing.assert_close(advantages[:, 0], torch.tensor([0.1875, 0.6875, -0.25, 3.0]))
    assert window[:, 0].tolist() == [3, 3, 2, 1]
    # With the bootstrap too: the ended windows keep their zeros (never tail_mu); t=2: -1 + 0.25*3 + (1/16)*9 =
    # 0.3125; t=3: 3 + 0.25*9 + (1/16)*19 = 6.4375.
    advantages, window = check_all_agree(rewards, terminals, ones, sigma, 1.0, zeros_after_terminal=True, tail_mu=tail_mu, **options)
    torch.testing.assert_close(advantages[:, 0], torch.tensor([0.1875, 0.6875, 0.3125, 6.4375]))
    assert window[:, 0].tolist() == [3, 3, 3, 3]


def test_zeros_after_terminal_charge_an_early_end_with_what_it_forgoes():
    """The survival bias of P3O.md's cut window, in its smallest form. From one state, half the decisions end the
    episode at once (reward 0) and half go on to a reward of 1 three steps later. mu at the value loss's optimum,
    the mean target of each offset over the pairs the loss keeps: cut, only the surviving episodes reach offsets
    1..3, so mu = (0, 0, 0, 1) and both actions get advantage 0; with zeros after the terminal, mu = (0, 0, 0, 0.5),
    and ending early costs 0.5, going on gains 0.5."""
    T, N, H = 4, 8, 4
    ends_early = torch.arange(N) % 2 == 0
    terminals = torch.zeros(T, N)
    terminals[0, ends_early] = 1.0  # the episode ends at t = 0
    terminals[3, ~ends_early] = 1.0
    rewards = torch.zeros(T, N)
    rewards[3, ~ends_early] = 1.0
    expected = {False: (0.0, 0.0), True: (-0.5, 0.5)}
    for zeros_after_terminal, (early, on) in expected.items():
        targets, window = episode_windows(rewards, terminals, H, zeros_after_terminal=zeros_after_terminal)
        kept = torch.arange(H) < window[0, :, None]  # the decisions at t = 0, all from the same state
        mu = torch.where(kept, targets[0], 0.0).sum(0) / kept.sum(0)
        advantages, _ = p3o_advantage(rewards, terminals, mu.expand(T, N, H), torch.ones(H), 1.0, cut=0.0, zeros_after_terminal=zeros_after_terminal)
        torch.testing.assert_close(advantages[0, ends_early], torch.full((N // 2,), early))
        torch.testing.assert_close(advantages[0, ~ends_early], torch.full((N // 2,), on))


def test_variable_horizon():
    sigma = torch.tensor([0.1, 0.2, 0.5, 0.9, 1.0, 0.1])
    assert int(variable_horizon(sigma, 1.0, min_horizon=0, cut=0.95)) == 4
    assert int(variable_horizon(sigma, 1.0, min_horizon=5, cut=0.95)) == 6  # none past 5: H
    assert int(variable_horizon(sigma, 1.0, min_horizon=0, cut=0.0)) == 6  # cut off
    assert int(variable_horizon(sigma, 0.3, min_horizon=1, cut=0.95)) == 2


def test_episode_windows_targets_and_lengths():
    rewards = torch.arange(1.0, 6.0)[:, None]  # T = 5, N = 1
    terminals = torch.tensor([[0.0], [0.0], [1.0], [0.0], [0.0]])
    targets, k = episode_windows(rewards, terminals, 3)
    assert targets.shape == (5, 1, 3)
    assert targets[0, 0].tolist() == [1.0, 2.0, 3.0] and targets[3, 0].tolist() == [4.0, 5.0, 0.0]
    assert k[:, 0].tolist() == [3, 2, 1, 2, 1]
    targets, k = episode_windows(rewards, terminals, 3, tail_mu=torch.tensor([[7.0, 8.0, 9.0]]))
    assert targets[4, 0].tolist() == [5.0, 7.0, 8.0] and k[:, 0].tolist() == [3, 2, 1, 3, 3]
    # Zeros after the terminal: the ended episode's windows run to H on zeros, never into the next episode's
    # rewards (4, 5) nor into tail_mu; the open ones are as before.
    targets, k = episode_windows(rewards, terminals, 3, tail_mu=torch.tensor([[7.0, 8.0, 9.0]]), zeros_after_terminal=True)
    assert targets[:, 0].tolist() == [[1.0, 2.0, 3.0], [2.0, 3.0, 0.0], [3.0, 0.0, 0.0], [4.0, 5.0, 7.0], [5.0, 7.0, 8.0]]
    assert k[:, 0].tolist() == [3, 3, 3, 3, 3]
    targets, k = episode_windows(rewards, terminals, 3, zeros_after_terminal=True)
    assert targets[3, 0].tolist() == [4.0, 5.0, 0.0] and k[:, 0].tolist() == [3, 3, 3, 2, 1]
    # The pairs inside the episode and the rollout, whatever the windows run on over: the first k of all.
    assert episode_inside(episode_ends(terminals), 3)[:, 0].tolist() == [3, 2, 1, 2, 1]
    assert episode_inside(episode_ends(terminals), 2)[:, 0].tolist() == [2, 2, 1, 2, 1]


def test_fitted_sigma_is_the_rms_residual_of_each_offset_over_kept_pairs():
    rewards = torch.arange(1.0, 6.0)[:, None]  # T = 5, N = 1; an episode ends at step 2
    terminals = torch.tensor([[0.0], [0.0], [1.0], [0.0], [0.0]])
    targets, k = episode_windows(rewards, terminals, 4)  # k = 3, 2, 1, 2, 1
    mu, learned = torch.zeros(5, 1, 4), torch.full((4,), 0.7)
    # Offset 0: rewards 1..5; offset 1: 2, 3, 5 (decisions 0, 1, 3); offset 2: 3 (decision 0); offset 3: no
    # window reaches it, so it keeps the given (learned) sigma.
    torch.testing.assert_close(fitted_sigma(targets, mu, k, learned), torch.tensor([11.0, 38 / 3, 9.0, 0.49]).sqrt())
    # Step 1 is no decision (window 0) and decision 0's window is cut to 2: offset 2 is no longer reached either.
    window = k * torch.tensor([[1], [0], [1], [1], [1]])
    window[0] = 2
    torch.testing.assert_close(fitted_sigma(targets, mu, window, learned), torch.tensor([51 / 4, 29 / 2, 0.49, 0.49]).sqrt())
    # The floor lifts the fitted offsets below it (offset 0: 3.57), not the learned ones.
    torch.testing.assert_close(fitted_sigma(targets, mu, window, learned, floor=3.7), torch.tensor([3.7, (29 / 2) ** 0.5, 0.7, 0.7]))
    # Residuals, not rewards: a perfect prediction at offset 0 gives sigma 0 there (the advantage clamps it).
    mu[..., 0] = rewards
    assert fitted_sigma(targets, mu, k, learned)[0] == 0


def test_fitted_sigma_minimises_the_value_nll():
    """The closed form is the optimum of the value loss over log_sigma: p3o_ocean.train's NLL, per offset."""
    g = torch.Generator().manual_seed(0)
    T, N, H = 20, 3, 6
    rewards = (torch.rand(T, N, generator=g) < 0.3).float()
    terminals = (torch.rand(T, N, generator=g) < 0.15).float()
    targets, k = episode_windows(rewards, terminals, H)
    mu = torch.rand(T, N, H, generator=g) * 0.5
    kept = torch.arange(H) < k[..., None]
    residual = torch.where(kept, targets - mu, 0.0).reshape(-1, H)
    counts = kept.reshape(-1, H).sum(0)
    assert (counts > 0).all()

    def nll(log_sigma):
        return (0.5 * torch.exp(-2 * log_sigma) * residual.square().sum(0) + log_sigma * counts).sum() / counts.sum()

    log_sigma = fitted_sigma(targets, mu, k, torch.ones(H)).log().requires_grad_()
    nll(log_sigma).backward()
    assert log_sigma.grad.abs().max() < 1e-5
    for shift in (-0.1, 0.1):
        assert nll(log_sigma.detach() + shift) > nll(log_sigma.detach())


def test_effect_sigma_weighs_each_offset_by_its_share_of_the_actions_total_effect():
    rewards = torch.arange(1.0, 6.0)[:, None]  # T = 5, N = 1, as above: windows k = 3, 2, 1, 2, 1
    terminals = torch.tensor([[0.0], [0.0], [1.0], [0.0], [0.0]])
    targets, k = episode_windows(rewards, terminals, 4)
    mu, probs = torch.zeros(5, 1, 4), torch.full((5, 1, 2), 0.5)
    # Squared residuals summed per offset over the kept pairs: 55, 38, 9 and 0 (offset 3 is never reached).
    # An untrained head (q = 0): no effect anywhere, equal weights, the advantage a plain sum of residuals.
    q = torch.zeros(5, 1, 2, 4)
    sigma = effect_sigma(targets, mu, probs, q, k)
    assert torch.equal(sigma, torch.full((4,), MAX_SIGMA))
    flat, _ = p3o_advantage(rewards, terminals, mu, sigma, 1.0, cut=0.0)
    torch.testing.assert_close(flat, torch.stack([targets[t, 0, : k[t, 0]].sum() for t in range(5)])[:, None])
    # Action 1 adds 2 at offset 0: effect +-1 there and in total, so Cov = 0.5 * 1 + 0.5 * 1 = 1 per decision,
    # 5 in all, over 55: weight 1/11; the offsets without effect get 0, or `floor` times the largest weight.
    q[:, :, 1, 0] = 2.0
    torch.testing.assert_close(effect_sigma(targets, mu, probs, q, k), torch.tensor([11.0**0.5, MAX_SIGMA, MAX_SIGMA, MAX_SIGMA]))
    torch.testing.assert_close(effect_sigma(targets, mu, probs, q, k, floor=0.5), torch.tensor([11.0, 22.0, 22.0, 22.0]).sqrt())
    # An effect spread over offsets 0 and 1 (+1 each for action 1): effect +-0.5 at each; the total is +-1 where the
    # window keeps both (decisions 0, 1, 3) and +-0.5 where it keeps one (2, 4): Cov 2.0 at offset 0, 1.5 at 1.
    q.zero_()
    q[:, :, 1, :2] = 1.0
    torch.testing.assert_close(effect_sigma(targets, mu, probs, q, k), torch.tensor([55 / 2.0, 38 / 1.5, MAX_SIGMA**2, MAX_SIGMA**2]).sqrt())
    # A near reward bought with a larger loss later (+1 at offset 0, -2 at 1): offset 0's effect opposes the total
    # where the window sees both, and its weight falls to 0: Cov = 2 * 0.25 - 3 * 0.25 < 0.
    q[:, :, 1, 1] = -2.0
    sigma = effect_sigma(targets, mu, probs, q, k)
    assert sigma[0] == MAX_SIGMA and sigma[1] < MAX_SIGMA
    # Probabilities weigh the effect: a deterministic policy has no alternative action, so no effect at all.
    assert torch.equal(effect_sigma(targets, mu, torch.tensor([1.0, 0.0]).expand(5, 1, 2), q, k), torch.full((4,), MAX_SIGMA))


def test_effect_memory_averages_the_weight_curves_of_the_batches_and_floors_the_average():
    """--effect-memory: each batch's weights, scaled to a largest of 1, go into the running curve in place as
    memory * curve + (1 - memory) * them, and the floor applies to the curve, not to the batch. A weight that
    spikes at a different offset in each batch (noise) ends up spread; one at the same offset stays sharp."""
    rewards = torch.arange(1.0, 6.0)[:, None]
    terminals = torch.tensor([[0.0], [0.0], [1.0], [0.0], [0.0]])
    targets, k = episode_windows(rewards, terminals, 4)
    mu, probs = torch.zeros(5, 1, 4), torch.full((5, 1, 2), 0.5)
    q = torch.zeros(5, 1, 2, 4)
    q[:, :, 1, 0] = 2.0  # the batch's weights: 1/11 at offset 0, 0 elsewhere (above)
    curve = torch.zeros(4)
    sigma = effect_sigma(targets, mu, probs, q, k, floor=0.5, curve=curve, memory=0.75)
    torch.testing.assert_close(curve, torch.tensor([0.25, 0.0, 0.0, 0.0]))  # 0.75 * 0 + 0.25 * [1, 0, 0, 0]
    torch.testing.assert_close(sigma, torch.tensor([4.0, 8.0, 8.0, 8.0]).sqrt())  # 1 / the floored curve
    # The same batch again: the curve keeps its shape (and the sigma its ratios), whatever its scale.
    effect_sigma(targets, mu, probs, q, k, curve=curve, memory=0.75)
    torch.testing.assert_close(curve, torch.tensor([0.4375, 0.0, 0.0, 0.0]))
    # The effect moves to offset 1 (its batch weight 0.75 / 38 there, scaled to 1): both offsets now hold weight.
    q.zero_()
    q[:, :, 1, 1] = 2.0
    sigma = effect_sigma(targets, mu, probs, q, k, curve=curve, memory=0.75)
    torch.testing.assert_close(curve, torch.tensor([0.328125, 0.25, 0.0, 0.0]))
    torch.testing.assert_close(sigma, curve.clamp(min=MIN_SIGMA**2).rsqrt())
    # Without memory the batch alone decides: offset 0 drops to no weight at once.
    assert effect_sigma(targets, mu, probs, q, k)[0] == MAX_SIGMA


def test_window_reach_is_the_advantages_window_before_the_variable_horizon():
    terminals = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    rewards, tail_mu = torch.zeros(5, 2), torch.zeros(2, 6)
    for tail in (False, True):
        for zeros_after_terminal in (False, True):
            _, k = episode_windows(rewards, terminals, 6, tail_mu if tail else None, zeros_after_terminal)
            assert torch.equal(window_reach(episode_ends(terminals), 6, tail, zeros_after_terminal), k)
    # Env 0: 2, 1 to its terminal, then a cut window: 3, 2, 1 to the rollout's end, or 6 over the tail.
    assert window_reach(episode_ends(terminals), 6)[:, 0].tolist() == [2, 1, 3, 2, 1]
    assert window_reach(episode_ends(terminals), 6, tail=True)[:, 0].tolist() == [2, 1, 6, 6, 6]


def test_the_window_scaled_effect_floor_keeps_the_floors_total_weight_at_h_32s():
    ones = torch.ones(128, 3)
    # Episodes of 32 steps, aligned with the rollout (mixed): no window reaches past 32 offsets at any H.
    ends = episode_ends((torch.arange(128) % 32 == 31).float()[:, None].expand(128, 3))
    for horizon in (16, 32, 128, 256):
        reach = window_reach(ends, horizon, tail=True)
        assert effect_floor_at(0.5, "window", horizon, reach, ones).item() == 0.5
    # Episodes of 68 steps (delay at D = 4): the rollout cuts the second one, whose windows run on over the tail.
    ends = episode_ends((torch.arange(128) == 67).float()[:, None].expand(128, 3))
    reach32, reach128 = window_reach(ends, 32, tail=True), window_reach(ends, 128, tail=True)
    assert effect_floor_at(0.5, "window", 32, reach32, ones).item() == 0.5
    floor = effect_floor_at(0.5, "window", 128, reach128, ones).item()
    # floor times the kept pairs at H = 128 is 0.5 times those at H = 32.
    assert abs(floor * reach128.sum().item() - 0.5 * reach32.sum().item()) < 1e-3 * reach32.sum().item()
    assert 0.1 < floor < 0.25
    # Decisions that are not (valid 0) do not count; with none, the floor is 0 rather than NaN.
    valid = torch.zeros(128, 3)
    valid[:68] = 1  # only the first episode, which ends inside the rollout: its windows stop at 68 - t
    expected = 0.5 * reach128[:68].clamp(max=32).sum().item() / reach128[:68].sum().item()
    assert abs(effect_floor_at(0.5, "window", 128, reach128, valid).item() - expected) < 1e-6
    assert effect_floor_at(0.5, "window", 128, reach128, torch.zeros(128, 3)).item() == 0.0


def test_the_horizon_scaled_effect_floor_and_no_scaling():
    assert effect_floor_at(0.5, "horizon", 32, None, None) == 0.5
    assert effect_floor_at(0.5, "horizon", 128, None, None) == 0.25 and effect_floor_at(0.5, "horizon", 8, None, None) == 1.0  # at most 1
    for horizon in (16, 64, 128, 256):  # (H - 1) * floor^2 within 4% of H = 32's at every H
        assert abs((horizon - 1) * effect_floor_at(0.5, "horizon", horizon, None, None) ** 2 / (31 * 0.25) - 1) < 0.04
    assert effect_floor_at(0.5, "none", 256, None, None) == 0.5 and effect_floor_at(0.0, "horizon", 16, None, None) == 0.0
    with pytest.raises(ValueError, match="window, horizon or none"):  # an old checkpoint's bool is not taken as none
        effect_floor_at(0.5, True, 128, None, None)


def test_fit_effect_head_recovers_each_actions_linear_residuals_inside_the_windows():
    """Residuals that are an exact linear function of the features, a different one per action: the closed-form
    fit recovers it (cross-validation picks a small ridge), reads offsets outside a window as 0, ignores autoreset
    steps, and leaves an action nobody took at q = 0."""
    generator = torch.Generator().manual_seed(2)
    B, F, A, H = 4000, 5, 3, 4
    hidden = torch.randn(B, F, generator=generator)
    actions = torch.randint(0, 2, (B,), generator=generator)  # action 2 is never taken
    true_w, true_b = torch.randn(A, H, F, generator=generator), torch.randn(A, H, generator=generator)
    residual = torch.einsum("ahf,bf->bah", true_w, hidden)[torch.arange(B), actions] + true_b[actions]
    window = torch.full((B,), H)
    window[:1000] = 2  # offsets 2 and 3 of these decisions are outside their windows: they count as 0
    window[1000:1100] = 0  # autoreset steps: their residuals are garbage and must not count
    residual[1000:1100] = 1e6
    weight, bias = fit_effect_head(hidden, actions, residual, window, A, num_envs=8)
    assert weight.shape == (A * H, F) and bias.shape == (A * H,)
    weight, bias = weight.view(A, H, F), bias.view(A, H)
    torch.testing.assert_close(weight[:2, :2], true_w[:2, :2], atol=0.02, rtol=0.0)
    torch.testing.assert_close(bias[:2, :2], true_b[:2, :2], atol=0.02, rtol=0.0)
    # At offsets 2 and 3, a quarter of each action's kept decisions read 0: the fit is shrunk towards 0, not exact.
    assert (weight[:2, 2:] - 0.75 * true_w[:2, 2:]).abs().max() < 0.3 and (weight[:2, 2:] - true_w[:2, 2:]).abs().max() > 0.05
    assert not weight[2].any() and not bias[2].any()
    q = torch.einsum("ahf,bf->bah", weight, hidden) + bias
    assert q.abs().max() < 100  # the autoreset rows' 1e6 did not leak in


@pytest.mark.parametrize("num_envs", [8, 1])
def test_fit_effect_head_stays_at_no_effect_where_the_features_predict_nothing_out_of_sample(num_envs):
    """Residuals that are pure noise, against many features and few decisions per action (Breakout's regime:
    512 features, ~250 decisions): a least-squares fit interpolates the batch's noise, and the subtractions would
    add it to the advantage. Cross-validation across the halves of the envs (of the rollout, with one env) must
    keep q at no effect, or so near it that q on fresh states stays far below the noise it would have fitted (the
    choice is made per offset, so by chance some offsets keep a heavily shrunk fit)."""
    generator = torch.Generator().manual_seed(3)
    B, F, A, H = 1024, 512, 4, 8
    hidden = torch.randn(B, F, generator=generator).relu()
    actions = torch.randint(0, A, (B,), generator=generator)
    residual = torch.randn(B, H, generator=generator)
    weight, bias = fit_effect_head(hidden, actions, residual, torch.full((B,), H), A, num_envs)
    fresh = torch.randn(B, F, generator=generator).relu()
    q = fresh @ weight.T + bias
    assert q.std() < 0.1  # the fixed ridge's interpolating fit gives q of the residuals' own size: std 1.01
    # The same features with a real effect of action 0 (its residuals shifted by +1 at every offset): that is
    # predictable out of sample, and the head finds it.
    residual[actions == 0] += 1.0
    weight, bias = fit_effect_head(hidden, actions, residual, torch.full((B,), H), A, num_envs)
    q = (fresh @ weight.T + bias).view(B, A, H)
    assert (q[:, 0].mean() - 1.0).abs() < 0.2 and q[:, 1:].abs().mean() < 0.1


def test_fit_clock_table_recovers_the_mean_residual_at_each_clock_and_offset():
    """Residuals that depend on the decision's clock s and the offset j, plus noise: with hundreds of decisions per
    clock, cross-validation keeps the shrinkage small and the table is the cell means. Offsets outside a window and
    autoreset steps (window 0) do not count, and every clock from CLOCK_ROWS - 1 on shares the last row."""
    generator = torch.Generator().manual_seed(4)
    T, N, H = 64, 64, 6
    clocks = torch.randint(0, 20, (T, N), generator=generator)
    clocks[:, :4] = CLOCK_ROWS + torch.randint(-1, 40, (T, 4), generator=generator)  # the last row, shared
    true = torch.randn(CLOCK_ROWS, H, generator=generator)
    residual = true[clocks.clamp(max=CLOCK_ROWS - 1)] + 0.1 * torch.randn(T, N, H, generator=generator)
    window = torch.full((T, N), H)
    window[:, 10:20] = 3  # offsets 3 .. 5 of these decisions are past their windows: garbage there
    residual[:, 10:20, 3:] = 1e6
    window[:, 20:22] = 0  # autoreset steps
    residual[:, 20:22] = -1e6
    table = fit_clock_table(clocks, residual, window, N)
    assert table.shape == (CLOCK_ROWS, H) and table.dtype == torch.float32
    seen = torch.zeros(CLOCK_ROWS, dtype=torch.bool)
    seen[clocks.clamp(max=CLOCK_ROWS - 1).unique()] = True
    torch.testing.assert_close(table[seen], true[seen], atol=0.05, rtol=0.0)
    assert not table[~seen].any()  # a clock no decision had keeps 0


@pytest.mark.parametrize("num_envs", [8, 1])
def test_fit_clock_table_stays_near_zero_where_the_clock_predicts_nothing(num_envs):
    """Breakout's regime: about 1,000 decisions a batch spread over hundreds of clocks, and residuals that are noise
    to the clock. Unshrunk, each cell would be the mean of a handful of residuals, noise that the baseline would carry
    into every advantage; cross-validated across the env halves (the rollout's, with one env), the table stays at or
    near 0 (it is chosen per offset, so by chance some offsets keep a heavily shrunk fit). With the same clocks and a
    real clock effect, the table predicts fresh residuals better than no table and better than the unshrunk means."""
    generator = torch.Generator().manual_seed(5)
    T, H = 1024 // num_envs, 16
    clocks = torch.randint(0, 300, (T, num_envs), generator=generator)
    rows = clocks.clamp(max=CLOCK_ROWS - 1)
    window = torch.full((T, num_envs), H)
    counts = torch.zeros(CLOCK_ROWS).index_add_(0, rows.view(-1), torch.ones(T * num_envs)).clamp(min=1)[:, None]

    def batch(effect):  # residuals: noise, plus `effect` for the decisions from clock 100 on
        return torch.randn(T, num_envs, H, generator=generator) + effect * (clocks >= 100)[..., None].float()

    def fresh_error(table, effect):  # squared error on a fresh batch with the same clocks
        return (batch(effect) - table[rows]).square().mean().item()

    for effect in (0.0, 1.0):
        residual = batch(effect)
        table = fit_clock_table(clocks, residual, window, num_envs)
        means = torch.zeros(CLOCK_ROWS, H).index_add_(0, rows.view(-1), residual.view(-1, H)) / counts
        errors = {name: sum(fresh_error(t, effect) for _ in range(20)) / 20 for name, t in (("table", table), ("none", torch.zeros_like(table)), ("means", means))}
        if effect == 0.0:  # chosen per offset, a few offsets keep a heavily shrunk fit by chance: about +1% (seed 5)
            assert table.std() < 0.08 and errors["table"] < 1.02 * errors["none"], errors
            assert errors["table"] < errors["means"] - 0.1, errors  # the unshrunk means fit each batch's noise: +25%
        else:  # measured: 1.17 against 1.24 (unshrunk) and 1.66 (none)
            assert errors["table"] < errors["means"] - 0.03 and errors["table"] < errors["none"] - 0.1, errors
            assert 0.4 < table[100:].mean() < 1.1  # shrunk toward 0: about 3 decisions a cell


@pytest.mark.parametrize("rows", [40, 12])
def test_ridge_path_gives_the_ridge_solution_at_every_penalty_through_either_gram(rows):
    """The fit at penalty r is (X'X + r I)^-1 X'Y, whether through the features' gram (more rows than features)
    or the rows' own (fewer: the dual form, Breakout's regime); the two agree with each other and the direct solve."""
    generator = torch.Generator().manual_seed(5)
    xs, ys = torch.randn(rows, 20, generator=generator, dtype=torch.float64), torch.randn(rows, 3, generator=generator, dtype=torch.float64)
    gram, cross = xs.T @ xs, xs.T @ ys
    paths = [ridge_path(gram, cross)] + ([ridge_path(gram, cross, (xs, ys))] if rows < 20 else [])
    for r in (1e-3, 1.0, 1e3):
        direct = torch.linalg.solve(gram + r * torch.eye(20, dtype=torch.float64), cross)
        for evals, basis, coords in paths:
            assert basis.shape == (20, len(evals)) and coords.shape == (len(evals), 3) and (evals >= 0).all()
            torch.testing.assert_close(basis @ (coords / (evals[:, None] + r)), direct, rtol=1e-7, atol=1e-9)
    if rows < 20:
        assert len(paths[1][0]) == rows  # the dual form decomposes a rows x rows matrix, not the features'


def test_fit_effect_head_survives_an_eigendecomposition_that_fails_to_converge(monkeypatch):
    """LAPACK's eigh failed to converge on a Breakout gram at 200k steps and killed the run; the SVD of the same
    matrix must stand in and give the same head."""
    generator = torch.Generator().manual_seed(4)
    B, F, A, H = 512, 6, 2, 3
    hidden, actions = torch.randn(B, F, generator=generator), torch.randint(0, A, (B,), generator=generator)
    residual = hidden[:, :H] * (actions[:, None] == 0) + 0.1 * torch.randn(B, H, generator=generator)
    expected = fit_effect_head(hidden, actions, residual, torch.full((B,), H), A, 8)

    def fails(matrix):
        raise torch.linalg.LinAlgError("linalg.eigh: The algorithm failed to converge")

    monkeypatch.setattr(torch.linalg, "eigh", fails)
    for got, want in zip(fit_effect_head(hidden, actions, residual, torch.full((B,), H), A, 8), expected):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert expected[0].abs().max() > 0.5  # a real fit was compared, not two zero heads


def test_later_effects_sum_each_later_decisions_effect_at_the_right_offset():
    # T = 3, N = 1, two actions at 0.5 each; action 1 adds m + 1 at offset m, so decision s's effect at offset m is
    # +(m + 1) / 2 if it took action 1 and -(m + 1) / 2 if it took action 0. Actions 1, 0, 1.
    q = torch.zeros(3, 1, 2, 3)
    q[:, :, 1] = torch.arange(1.0, 4.0)
    probs, actions, valid = torch.full((3, 1, 2), 0.5), torch.tensor([[1], [0], [1]]), torch.ones(3, 1)
    later = later_effects(arriving_effects(q, probs, actions, valid), torch.zeros(3, 1))
    # The reward 1 step after decision 0 answers to decision 1 at its offset 0 (-0.5); the reward 2 steps after it
    # to decision 1 at offset 1 (-1) and decision 2 at offset 0 (+0.5). Decision 1: decision 2 at offset 0.
    # Offset 0 never has a later decision, and rewards past the rollout (t + j >= 3) get nothing.
    torch.testing.assert_close(later[:, 0], torch.tensor([[0.0, -0.5, -0.5], [0.0, 0.5, 0.0], [0.0, 0.0, 0.0]]))
    # An autoreset step (valid 0) is not a decision: decision 1 contributes nothing.
    later = later_effects(arriving_effects(q, probs, actions, torch.tensor([[1.0], [0.0], [1.0]])), torch.zeros(3, 1))
    torch.testing.assert_close(later[:, 0], torch.tensor([[0.0, 0.0, 0.5], [0.0, 0.5, 0.0], [0.0, 0.0, 0.0]]))


def test_later_effects_have_mean_zero_under_the_policy_that_acted():
    """The control variate is unbiased whatever q predicts: over actions drawn from probs, the subtracted later
    effects average to zero. 20,000 envs share one random q and policy; only their actions differ."""
    generator = torch.Generator().manual_seed(0)
    T, N, A, H = 6, 20_000, 3, 4
    q = torch.randn(T, 1, A, H, generator=generator, dtype=torch.float64).expand(T, N, A, H)
    probs = torch.softmax(2 * torch.randn(T, 1, A, generator=generator, dtype=torch.float64), -1).expand(T, N, A)
    actions = torch.multinomial(probs.reshape(-1, A), 1, generator=generator).view(T, N)
    later = later_effects(arriving_effects(q, probs, actions, torch.ones(T, N, dtype=torch.float64)), torch.zeros(T, N))
    assert later.abs().amax() > 0.5  # each draw is moved
    assert later.mean(1).abs().amax() < 0.05  # the average over draws is not (standard error about 0.015)
    # Centred on a wrong policy (uniform), the same draws are biased.
    uniform = torch.full_like(probs, 1 / A)
    assert later_effects(arriving_effects(q, uniform, actions, torch.ones(T, N, dtype=torch.float64)), torch.zeros(T, N)).mean(1).abs().amax() > 0.2


def random_effects_case(T, H, seed, N=4, A=3):
    """A random action-conditioned head q [T, N, A, H], policy, actions and terminals (30% of the steps), float64."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(T, N, A, H, generator=generator, dtype=torch.float64)
    probs = torch.softmax(torch.randn(T, N, A, generator=generator, dtype=torch.float64), -1)
    actions = torch.randint(0, A, (T, N), generator=generator)
    terminals = (torch.rand(T, N, generator=generator) < 0.3).double()
    return q, probs, actions, terminals


def effects_as_the_head_sees_them(q, probs, actions, valid):
    """effect[s, n, m]: q of the action taken less its policy mean, 0 on steps that are no decisions (the loops' input)."""
    T, N, A, H = q.shape
    taken = q.gather(2, actions[:, :, None, None].expand(T, N, 1, H)).squeeze(2)
    return (taken - (q * probs[..., None]).sum(2)) * valid[..., None]


@pytest.mark.parametrize("T, H", [(9, 4), (5, 8)])
def test_later_effects_sum_the_later_decisions_of_the_same_episode_only(T, H):
    """later[t, j] against a loop: the effects, at the reward of step t + j, of the decisions s = t + 1 .. t + j up
    to the end of t's episode; past that end (where --zeros-after-terminal reads t's targets as 0) the next
    episode's decisions are left out. 0 past the rollout."""
    q, probs, actions, terminals = random_effects_case(T, H, seed=T + 1)
    N, A = probs.shape[1:]
    valid = torch.ones(T, N, dtype=torch.float64)
    later = later_effects(arriving_effects(q, probs, actions, valid), terminals)
    effect = effects_as_the_head_sees_them(q, probs, actions, valid)
    expected = torch.zeros(T, N, H, dtype=torch.float64)
    for n in range(N):
        for t in range(T):
            end = min([s for s in range(t, T) if terminals[s, n]], default=T)
            for j in range(H):
                if t + j < T:
                    expected[t, n, j] = sum((effect[s, n, t + j - s] for s in range(t + 1, min(t + j, end) + 1)), torch.tensor(0.0, dtype=torch.float64))
    torch.testing.assert_close(later, expected)
    # the case has later decisions on both sides of an end: with no terminals, the past-the-end entries differ
    assert not torch.allclose(later, later_effects(arriving_effects(q, probs, actions, valid), torch.zeros(T, N)))
    # without terminals (the cut window's call) it is the same on every entry a window cut at the terminal reads
    unrestricted = later_effects(arriving_effects(q, probs, actions, valid))
    inside = torch.arange(T)[:, None, None] + torch.arange(H) <= episode_ends(terminals)[..., None]
    torch.testing.assert_close(unrestricted[inside], later[inside], rtol=0, atol=0)
    assert not torch.equal(unrestricted, later)


@pytest.mark.parametrize("T, H", [(9, 4), (5, 8)])
def test_earlier_effects_sum_the_earlier_decisions_of_the_same_episode(T, H):
    """earlier[t, j] against a loop: the effects, at the reward of step t + j, of the decisions s < t of t's
    episode (episodes end at terminals; an autoreset step is not a decision) that the head reaches
    (t + j - s < H); 0 past the rollout. And it is a baseline of the history alone: actions from t on do not move
    earlier[t]."""
    q, probs, actions, terminals = random_effects_case(T, H, seed=T)
    N, A = probs.shape[1:]
    valid = torch.ones(T, N, dtype=torch.float64)
    valid[1:][terminals[:-1] != 0] = 0.0  # EnvPool's way: the step after a done is the reset
    earlier = earlier_effects(arriving_effects(q, probs, actions, valid), terminals)
    effect = effects_as_the_head_sees_them(q, probs, actions, valid)
    expected = torch.zeros(T, N, H, dtype=torch.float64)
    for n in range(N):
        for t in range(T):
            start = max([s + 1 for s in range(t) if terminals[s, n]], default=0)
            for j in range(H):
                if t + j < T:
                    expected[t, n, j] = sum((effect[s, n, t + j - s] for s in range(start, t) if t + j - s < H), torch.tensor(0.0, dtype=torch.float64))
    torch.testing.assert_close(earlier, expected)
    assert earlier.abs().amax() > 0.1  # the case is not empty
    for t in range(T):
        other = actions.clone()
        other[t:] = (other[t:] + 1) % A
        moved = earlier_effects(arriving_effects(q, probs, other, valid), terminals)
        torch.testing.assert_close(moved[t], earlier[t])


def test_subtracting_later_effects_makes_the_delayed_advantage_independent_of_h():
    """A delayed reward (1 for action 1, D = 3 steps later) and the exact action-conditioned head: the reward
    ahead of a decision carries every later decision's coin flip, so the plain advantage grows noisier with H;
    with the later effects subtracted it is the decision's own effect, +-0.5, at H = 8 and H = 32 alike."""
    generator = torch.Generator().manual_seed(1)
    T, N, D = 40, 64, 3
    actions = torch.randint(0, 2, (T, N), generator=generator)
    rewards = torch.zeros(T, N)
    rewards[D:] = actions[:-D].float()
    terminals, valid, probs = torch.zeros(T, N), torch.ones(T, N), torch.full((T, N, 2), 0.5)
    own = actions.float() - 0.5
    seen = T - 32  # decisions whose H = 32 window lies inside the rollout
    plain, corrected = {}, {}
    for H in (8, 32):
        q = torch.zeros(T, N, 2, H)
        q[:, :, 1, D] = 1.0
        mu = torch.full((T, N, H), 0.5)  # at or past D: the expected reward under the policy
        for j in range(D):  # before D: the rewards already decided, which the state shows
            mu[: T - j, :, j] = rewards[j:]
        sigma = torch.ones(H)
        plain[H], _ = p3o_advantage(rewards, terminals, mu, sigma, 0.5, cut=0.0)
        corrected[H], _ = p3o_advantage(rewards, terminals, mu + later_effects(arriving_effects(q, probs, actions, valid), terminals), sigma, 0.5, cut=0.0)
        torch.testing.assert_close(corrected[H][:seen], own[:seen])
    assert (plain[32][:seen] - own[:seen]).std() > 2 * (plain[8][:seen] - own[:seen]).std()  # 28 flips against 4


def test_host_build_is_independent_of_the_launch_shape():
    g = torch.Generator().manual_seed(3)
    inputs = (torch.randn(7, 5, generator=g), (torch.rand(7, 5, generator=g) < 0.3).float(), torch.randn(7, 5, 9, generator=g), torch.rand(9, generator=g), 0.5)
    a1, w1 = host_advantage(*inputs, min_horizon=2, threads=1)
    a2, w2 = host_advantage(*inputs, min_horizon=2, threads=256)  # most of the last block is out of range
    assert torch.equal(a1, a2) and torch.equal(w1, w2)


def test_kernel_reads_only_inside_its_arrays():
    """The host build under AddressSanitizer: an out-of-bounds read or write aborts the run."""
    if subprocess.run(["g++", "-fsanitize=address", "-x", "c++", "-", "-o", "/dev/null"], input="int main(){}", text=True, capture_output=True).returncode:
        pytest.fail("g++ cannot build with -fsanitize=address on this machine")
    code = f"""
import sys; sys.path[:0] = {[str(KERNEL.parents[1]), str(KERNEL.parents[1] / 'tests')]}
import torch
from advantage_impls import host_advantage
g = torch.Generator().manual_seed(0)
for T, N, H, tail in [(1, 1, 1, False), (3, 2, 8, True), (6, 3, 4, True), (5, 4, 5, False)]:
    terminals = (torch.rand(T, N, generator=g) < 0.3).float()
    tail_mu = torch.randn(N, H, generator=g) if tail else None
    a, w = host_advantage(torch.randn(T, N, generator=g), terminals, torch.randn(T, N, H, generator=g), torch.rand(H, generator=g), 0.5,
                          min_horizon=1, tail_mu=tail_mu, threads=7, flags=("-O1", "-g", "-fsanitize=address", "-fno-omit-frame-pointer"))
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
    from p3o_ocean import load_cuda_advantage

    cuda_advantage = load_cuda_advantage()
    g = torch.Generator().manual_seed(0)
    for T, N, H, tail in [(64, 256, 128, True), (16, 33, 40, False), (3, 5, 128, True), (5, 7, 1, False)]:
        inputs = [torch.randn(T, N, generator=g), (torch.rand(T, N, generator=g) < 0.05).float(), torch.randn(T, N, H, generator=g), torch.rand(H, generator=g)]
        tail_mu = torch.randn(N, H, generator=g) if tail else None
        for weight_norm in ("max", "sum"):
            options = dict(puf=0.5, weight_norm=weight_norm, min_horizon=4, cut=0.95)
            a, w = cuda_advantage(*[x.cuda() for x in inputs], 0.8, tail_mu=None if tail_mu is None else tail_mu.cuda(), **options)
            ta, tw = p3o_advantage(*inputs, 0.8, tail_mu=tail_mu, **options)
            assert torch.equal(w.cpu(), tw)
            torch.testing.assert_close(a.cpu(), ta, **TOL)


def test_twin_env_blocks_with_a_partial_last_block():
    """T = 64, H = 128 gives the twin blocks of 256 envs: N = 300 is one full block and a partial one."""
    T, N, H = 64, 300, 128
    g = torch.Generator().manual_seed(4)
    inputs = (torch.randn(T, N, generator=g), (torch.rand(T, N, generator=g) < 0.03).float(), torch.randn(T, N, H, generator=g), torch.rand(H, generator=g) + 0.2, 0.9)
    for tail_mu in (None, torch.randn(N, H, generator=g)):
        for weight_norm in ("max", "sum"):
            twin_a, twin_w = p3o_advantage(*inputs, weight_norm=weight_norm, min_horizon=40, tail_mu=tail_mu)
            host_a, host_w = host_advantage(*inputs, weight_norm=weight_norm, min_horizon=40, tail_mu=tail_mu, threads=256)
            assert torch.equal(twin_w, host_w)
            torch.testing.assert_close(twin_a, host_a, **TOL)
