"""Rule tests for the Ocean sanity-check environments (cheap: the whole file runs in seconds on CPU)."""

import math

import pytest
import torch

from p3o_ocean import OCEAN_ENVS, Bandit, Choice, Delay, Forage, Mixed, Password, Spread, Squared, Stochastic

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(autouse=True, scope="module")
def single_thread():
    # These tensors are tiny: intra-op threads only add overhead (and stall badly on a busy 2-core box).
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def assert_close(actual, expected, atol=1e-5):
    # torch.testing.assert_close costs seconds of lazy imports on its first call; this is enough here.
    assert actual.shape == expected.shape and torch.allclose(actual, expected, rtol=0, atol=atol), (actual, expected)


def random_actions(env, gen):
    return torch.randint(env.num_actions, (env.num_envs,), generator=gen).to(env.device)


def run(env, policy, steps):
    """Roll out `policy(obs, t)` for `steps` steps; returns the stacked step outputs (on CPU)."""
    obs = env.reset()
    out = {"obs": [obs], "reward": [], "terminated": [], "truncated": [], "score": [], "ret": [], "len": []}
    for t in range(steps):
        obs, reward, terminated, truncated, info = env.step(policy(obs, t))
        for k, v in zip(
            ["obs", "reward", "terminated", "truncated", "score", "ret", "len"],
            [obs, reward, terminated, truncated, info["score"], info["episode_return"], info["episode_length"]],
        ):
            out[k].append(v.cpu())
    return {k: torch.stack(v) for k, v in out.items()}


def episode_scores(roll):
    done = roll["terminated"] | roll["truncated"]
    return roll["score"][done]


def cue(obs):
    """Cue bit of Delay / Spread / Mixed observations (the last two columns are the one-hot cue) and of Choice's
    (columns 1 and 2; the last is the far reward pending)."""
    return (obs[:, 1:3] if obs.shape[1] == 4 else obs[:, -2:]).argmax(1)


# --------------------------------------------------------------------------- generic interface


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(OCEAN_ENVS))
def test_interface(name, device):
    cls = OCEAN_ENVS[name]
    assert 0.0 < cls.solved_score <= cls.optimal_score <= 1.0
    assert isinstance(cls.default_timesteps, int) and cls.default_timesteps > 0
    assert cls.__doc__ and "Optimal score" in cls.__doc__ and "Solved" in cls.__doc__
    # All suite options arrive as kwargs; each env ignores the ones it does not use.
    env = cls(16, device=device, seed=3, delay=2, forage_distance=5, password_length=4)
    obs = env.reset()
    assert obs.shape == (16, env.obs_dim) and obs.dtype == torch.float32 and obs.device.type == device
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(random_actions(env, gen))
        assert obs.shape == (16, env.obs_dim) and obs.dtype == torch.float32
        assert reward.shape == (16,) and reward.dtype == torch.float32
        assert terminated.dtype == torch.bool and truncated.dtype == torch.bool
        assert terminated.shape == truncated.shape == (16,)
        assert set(info) == {"score", "episode_return", "episode_length"}
        assert info["score"].dtype == torch.float32 and info["score"].shape == (16,)
        assert info["episode_return"].dtype == torch.float32
        assert info["episode_length"].dtype == torch.int64
        for t in [obs, reward, terminated, truncated, *info.values()]:
            assert t.device.type == device


@pytest.mark.parametrize("name", list(OCEAN_ENVS))
def test_info_bookkeeping_and_no_dead_steps(name):
    """info matches returns/lengths accumulated outside the env; every step belongs to an episode."""
    env = OCEAN_ENVS[name](64, seed=1)
    gen = torch.Generator().manual_seed(1)
    roll = run(env, lambda obs, t: random_actions(env, gen), 200)
    ret, length, finished = torch.zeros(64), torch.zeros(64, dtype=torch.int64), 0
    for t in range(200):
        ret += roll["reward"][t]
        length += 1
        done = roll["terminated"][t] | roll["truncated"][t]
        assert not (roll["terminated"][t] & roll["truncated"][t]).any()
        assert_close(roll["ret"][t][done], ret[done])
        assert torch.equal(roll["len"][t][done], length[done])
        assert ((roll["score"][t] >= 0) & (roll["score"][t] <= 1)).all()
        finished += int(done.sum())
        ret[done], length[done] = 0.0, 0
    assert finished >= 64  # every env finished at least one episode in 200 steps


@pytest.mark.parametrize("name", list(OCEAN_ENVS))
def test_random_policy_is_far_from_solved(name):
    cls = OCEAN_ENVS[name]
    env = cls(512, seed=0)
    gen = torch.Generator().manual_seed(2)
    scores = episode_scores(run(env, lambda obs, t: random_actions(env, gen), 150))
    assert scores.numel() >= 1024
    assert scores.mean() < cls.solved_score - 0.05


@pytest.mark.parametrize("name", list(OCEAN_ENVS))
def test_determinism_and_seeds(name):
    def trajectory(seed):
        env = OCEAN_ENVS[name](32, seed=seed)
        gen = torch.Generator().manual_seed(7)  # same actions whatever the env seed
        roll = run(env, lambda obs, t: random_actions(env, gen), 150)
        return torch.cat([roll["obs"].flatten(), roll["reward"].flatten(), roll["score"].flatten()])

    assert torch.equal(trajectory(0), trajectory(0))
    if name not in ("stochastic", "forage"):  # these two have no randomness at all
        assert any(not torch.equal(trajectory(0), trajectory(s)) for s in (1, 2, 3))


# --------------------------------------------------------------------------- bandit


def test_bandit_rules():
    env = Bandit(4096, seed=0)
    assert env.obs_dim == 1 and env.num_actions == 4
    assert sorted(env.probs.tolist()) == pytest.approx([0.2, 0.4, 0.6, 0.8])
    best = int(env.probs.argmax())
    assert torch.equal(env.reset(), torch.ones(4096, 1))
    # Every arm pays Bernoulli(its probability); every episode is exactly one step.
    arms = torch.arange(4096) % 4
    rewards = torch.stack([env.step(arms)[1] for _ in range(10)])
    assert set(rewards.unique().tolist()) <= {0.0, 1.0}
    for a in range(4):
        assert rewards[:, arms == a].mean() == pytest.approx(float(env.probs[a]), abs=0.03)
    obs, reward, terminated, truncated, info = env.step(torch.full((4096,), best))
    assert terminated.all() and not truncated.any() and (info["episode_length"] == 1).all()
    assert torch.equal(obs, torch.ones(4096, 1))
    assert (info["score"] == 1).all() and torch.equal(info["episode_return"], reward)
    info = env.step(torch.full((4096,), (best + 1) % 4))[4]
    assert (info["score"] == 0).all()


def test_bandit_best_arm_depends_on_seed():
    assert len({int(Bandit(1, seed=s).probs.argmax()) for s in range(12)}) >= 2


# --------------------------------------------------------------------------- password


@pytest.mark.parametrize("length", [1, 3, 5])
def test_password_rules(length):
    env = Password(8, seed=4, password_length=length)
    assert env.obs_dim == length and env.num_actions == 2
    pw = env.password.clone()
    roll = run(env, lambda obs, t: pw[obs.argmax(1)], 2 * length)
    # Obs is the one-hot step index, restarting at 0 on the step that ends an episode.
    steps = torch.arange(2 * length + 1) % length
    assert torch.equal(roll["obs"], torch.eye(length)[steps][:, None].expand(-1, 8, -1))
    last = (torch.arange(2 * length) % length) == length - 1
    assert torch.equal(roll["terminated"], last[:, None].expand(-1, 8))
    assert not roll["truncated"].any()
    assert torch.equal(roll["reward"], last[:, None].float().expand(-1, 8))  # reward only at the end
    assert (episode_scores(roll) == 1).all() and (roll["len"][last] == length).all()


def test_password_one_wrong_bit_gets_nothing():
    L = 5
    env = Password(L, seed=0, password_length=L)
    pw = env.password.clone()
    flip = torch.eye(L, dtype=torch.int64)  # env i gets bit i wrong
    roll = run(env, lambda obs, t: (pw[t] + flip[:, t]) % 2, L)
    assert roll["terminated"][-1].all() and (roll["reward"] == 0).all() and (roll["score"] == 0).all()


def test_password_random_is_one_in_32():
    env = Password(4096, seed=1)
    gen = torch.Generator().manual_seed(3)
    scores = episode_scores(run(env, lambda obs, t: random_actions(env, gen), 10))
    assert scores.numel() == 2 * 4096
    assert scores.mean() == pytest.approx(1 / 32, abs=0.008)


# --------------------------------------------------------------------------- stochastic


def binomial_expected_score(q, n=10, p=0.7):
    return sum(math.comb(n, k) * q**k * (1 - q) ** (n - k) * (1 - abs(k / n - p) / max(p, 1 - p)) for k in range(n + 1))


def test_stochastic_optimum_is_exact():
    best = max(binomial_expected_score(i / 20000) for i in range(20001))
    assert Stochastic.optimal_score == pytest.approx(best, abs=1e-6)
    assert Stochastic.solved_score == math.floor(0.95 * Stochastic.optimal_score * 100) / 100
    # Deterministic policies (always 0 / always 1) are clearly below solved.
    assert binomial_expected_score(1.0) < Stochastic.solved_score - 0.2
    assert binomial_expected_score(0.0) == 0.0


def test_stochastic_reward_formula():
    env = Stochastic(11, seed=0)
    n0 = torch.arange(11)  # env i plays action 0 exactly i times
    roll = run(env, lambda obs, t: (t % 10 >= n0).long(), 20)
    assert (roll["obs"] == 0).all() and roll["obs"].shape[-1] == 1
    ends = torch.tensor([t % 10 == 9 for t in range(20)])
    assert torch.equal(roll["terminated"], ends[:, None].expand(-1, 11)) and not roll["truncated"].any()
    assert (roll["reward"][~ends] == 0).all()
    expected = 1 - (n0 / 10 - 0.7).abs() / 0.7
    assert_close(roll["reward"][9], expected)
    assert_close(roll["reward"][19], expected)  # second episode counts afresh
    assert roll["reward"][9, 7] == 1.0


@pytest.mark.parametrize("q,lo,hi", [(0.7137633, 0.835, 0.846), (1.0, 0.57, 0.58), (0.0, 0.0, 0.0)])
def test_stochastic_policies(q, lo, hi):
    env = Stochastic(4096, seed=0)
    gen = torch.Generator().manual_seed(5)
    scores = episode_scores(run(env, lambda obs, t: (torch.rand(4096, generator=gen) >= q).long(), 20))
    assert lo <= scores.mean() <= hi
    assert (scores.mean() >= Stochastic.solved_score) == (q not in (0.0, 1.0))


# --------------------------------------------------------------------------- squared


def squared_greedy(obs):
    """Move towards the target: rows first, then columns."""
    agent, target = obs.view(-1, 2, Squared.size**2).argmax(2).unbind(1)
    ar, ac, tr, tc = agent // 7, agent % 7, target // 7, target % 7
    act = torch.zeros_like(agent)
    act = torch.where(tc > ac, 4, act)
    act = torch.where(tc < ac, 3, act)
    act = torch.where(tr > ar, 2, act)
    act = torch.where(tr < ar, 1, act)
    return act


def test_squared_greedy_reaches_target_in_manhattan_steps():
    env = Squared(1024, seed=0)
    assert env.obs_dim == 98 and env.num_actions == 5

    def check_fresh_and_get_distance(obs):
        assert (obs.sum(1) == 2).all() and (obs[:, :49].argmax(1) == 24).all()  # agent at the centre
        target = obs[:, 49:].argmax(1)
        return (target // 7 - 3).abs() + (target % 7 - 3).abs()

    obs = env.reset()
    start = torch.zeros(1024, dtype=torch.int64)
    end = check_fresh_and_get_distance(obs)  # step count at which each env's episode must end
    assert end.min() >= 1 and end.max() <= 6
    for t in range(1, 25):
        obs, reward, terminated, truncated, info = env.step(squared_greedy(obs))
        assert torch.equal(terminated, end == t) and not truncated.any()
        assert torch.equal(reward, terminated.float())
        assert (info["score"][terminated] == 1).all()
        assert torch.equal(info["episode_length"][terminated], (end - start)[terminated])
        # Same-step autoreset: finished envs already show a fresh episode (agent back at the centre).
        start[terminated] = t
        end[terminated] = t + check_fresh_and_get_distance(obs[terminated])


def test_squared_targets_uniform_and_never_centre():
    env = Squared(4096, seed=0)
    targets = torch.cat([env.reset()[:, 49:].argmax(1) for _ in range(6)])
    counts = torch.bincount(targets, minlength=49)
    assert counts[24] == 0
    assert counts.sum() == 6 * 4096 and counts[counts > 0].numel() == 48
    assert counts.max() < 1.25 * 6 * 4096 / 48 and counts[torch.arange(49) != 24].min() > 0.75 * 6 * 4096 / 48


def test_squared_walls_and_truncation():
    env = Squared(256, seed=1)
    roll = run(env, lambda obs, t: torch.full((256,), 1 if t < 5 else 3), 9)
    agent = roll["obs"][:, :, :49].argmax(2)
    alive = ~(roll["terminated"].cumsum(0).bool())
    # After 5 ups the row is clamped at 0, then lefts walk to column 0 (where still in episode 1).
    assert (agent[4][alive[3]] // 7 == 0).all() and (agent[4][alive[3]] % 7 == 3).all()
    assert (agent[8][alive[7]] == 0).all()
    # Staying put never reaches the target: truncation after exactly 14 steps with reward 0.
    env = Squared(256, seed=0)
    roll = run(env, lambda obs, t: torch.zeros(256, dtype=torch.int64), 28)
    ends = torch.tensor([t % 14 == 13 for t in range(28)])
    assert torch.equal(roll["truncated"], ends[:, None].expand(-1, 256)) and not roll["terminated"].any()
    assert (roll["reward"] == 0).all() and (roll["len"][ends] == 14).all() and (roll["score"] == 0).all()


# --------------------------------------------------------------------------- delay


@pytest.mark.parametrize("D", [1, 4, 7])
def test_delay_optimal_policy_and_timing(D):
    env = Delay(64, seed=0, delay=D)
    assert env.obs_dim == 2 and env.num_actions == 2
    T = 64 + D
    roll = run(env, lambda obs, t: cue(obs), 2 * T)
    steps = torch.arange(2 * T) % T
    assert (roll["obs"].sum(-1) == 1).all()
    assert torch.equal(roll["terminated"], (steps == T - 1)[:, None].expand(-1, 64)) and not roll["truncated"].any()
    # No reward before step D; one reward per step from D on, through the last step.
    assert torch.equal(roll["reward"], (steps >= D)[:, None].float().expand(-1, 64))
    done = roll["terminated"]
    assert (roll["score"][done] == 1).all() and (roll["ret"][done] == 64).all() and (roll["len"][done] == T).all()


@pytest.mark.parametrize("D", [1, 4, 7])
def test_delay_reward_lands_exactly_d_steps_later(D):
    k = torch.tensor([0, 10, 63, 64, 64 + D - 1])  # env i is right only at step k[i]
    env = Delay(len(k), seed=0, delay=D)
    roll = run(env, lambda obs, t: torch.where(t == k, cue(obs), 1 - cue(obs)), 64 + D)
    for i, ki in enumerate(k.tolist()):
        expected = torch.zeros(64 + D)
        if ki < 64:  # only the first 64 decisions are scored
            expected[ki + D] = 1.0
        assert torch.equal(roll["reward"][:, i], expected)
    assert (roll["score"][-1] == 0).all()  # accuracy 1/64 is far below chance


def test_delay_score_is_twice_accuracy_minus_one():
    env = Delay(4, seed=0)
    n_right = torch.tensor([64, 48, 32, 0])  # env i is right on its first n_right[i] decisions
    roll = run(env, lambda obs, t: torch.where(t < n_right, cue(obs), 1 - cue(obs)), 68)
    assert_close(roll["score"][-1], torch.tensor([1.0, 0.5, 0.0, 0.0]))
    assert_close(roll["ret"][-1], n_right.float())


def test_delay_rejects_zero_delay_and_cues_are_fair():
    with pytest.raises(AssertionError):
        Delay(1, delay=0)
    env = Delay(4096, seed=0)
    assert cue(env.reset()).float().mean() == pytest.approx(0.5, abs=0.03)


def test_delay_reward_noise_is_zero_mean_and_leaves_the_score_alone():
    noiseless, noisy = Delay(2048, seed=5, delay=3), Delay(2048, seed=5, delay=3, reward_noise=0.5)
    a, b = (run(env, lambda obs, t: cue(obs), 67) for env in (noiseless, noisy))
    noise = b["reward"] - a["reward"]
    assert noise.mean().abs() < 0.01 and noise.std() == pytest.approx(0.5, rel=0.02)
    assert torch.equal(a["score"], b["score"]) and (b["score"][-1] == 1).all()
    with pytest.raises(AssertionError):
        Delay(1, reward_noise=-1.0)


# --------------------------------------------------------------------------- spread


@pytest.mark.parametrize("S", [1, 5, 32])
def test_spread_pays_each_decision_in_equal_parts_from_its_own_step(S):
    k = torch.tensor([0, 10, 63])  # env i is right only at step k[i]
    env = Spread(len(k), seed=0, spread=S)
    assert env.episode_steps == 63 + S and env.obs_dim == 2 and env.num_actions == 2
    roll = run(env, lambda obs, t: torch.where(t == k, cue(obs), 1 - cue(obs)), 63 + S)
    for i, ki in enumerate(k.tolist()):
        expected = torch.zeros(63 + S)
        expected[ki : ki + S] = 1.0 / S
        assert_close(roll["reward"][:, i], expected)
    assert roll["terminated"][-1].all() and not roll["terminated"][:-1].any()
    assert_close(roll["ret"][-1], torch.ones(3))


def test_spread_optimal_policy_pays_the_running_share_of_the_last_s_decisions():
    S = 8
    env = Spread(4, seed=1, spread=S)
    roll = run(env, lambda obs, t: cue(obs), 2 * (63 + S))
    u = torch.arange(63 + S)
    expected = (torch.minimum(u, torch.tensor(63)) - torch.clamp(u - S + 1, min=0) + 1).float() / S  # decisions paid at step u
    assert_close(roll["reward"][: 63 + S, 0], expected)
    assert_close(roll["reward"][63 + S :, 0], expected)  # the next episode starts clean
    assert (roll["score"][roll["terminated"]] == 1).all() and torch.allclose(roll["ret"][roll["terminated"]], torch.tensor(64.0))


# --------------------------------------------------------------------------- choice


@pytest.mark.parametrize("D", [1, 5, 16])
def test_choice_far_pays_one_d_steps_later_near_pays_0_7_at_once(D):
    env = Choice(3, seed=0, choice_distance=D)
    assert env.obs_dim == 4 and env.num_actions == 2
    L = 4 * (D + 1)
    far_in_round_0_only = lambda obs, t: torch.where(obs[:, 0] == 1, torch.tensor([1, 0, int(t == 0)]), 1 - cue(obs))
    roll = run(env, far_in_round_0_only, 2 * L)
    steps = torch.arange(2 * L) % L
    choice_steps = steps % (D + 1) == 0
    assert (roll["obs"][:-1][choice_steps][:, :, 0] == 1).all() and (roll["obs"][:-1][~choice_steps][:, :, 0] == 0).all()
    assert (roll["obs"][:-1][choice_steps][:, :, 1:] == 0).all()  # no cue, nothing pending at the choice step
    # far pending shows from the step after a far choice to the step that pays it
    assert torch.equal(roll["obs"][:-1][:, 0, 3], (~choice_steps).float()) and (roll["obs"][:-1][:, 1, 3] == 0).all()
    assert (roll["obs"][:-1][~choice_steps][:, :, 1:3].sum(-1) == 1).all()
    # env 0 always far: 1.0 at each round's last step; env 1 always near: 0.7 at each choice; cues all missed
    assert torch.equal(roll["reward"][:, 0], (steps % (D + 1) == D).float())
    assert torch.equal(roll["reward"][:, 1], choice_steps.float() * 0.7)
    assert torch.equal(roll["terminated"], (steps == L - 1)[:, None].expand(-1, 3))
    done = roll["terminated"]
    assert_close(roll["score"][done], torch.tensor([1.0, 0.0, 0.25, 1.0, 0.0, 0.0]))
    assert roll["len"][done].eq(L).all()


def test_choice_near_reward_is_the_flags():
    """--choice-near-reward sets what the near choice pays at once (the 10% margin probe's 0.9); the far one stays 1.0."""
    env = Choice(2, seed=0, choice_distance=3, choice_near_reward=0.9)
    roll = run(env, lambda obs, t: torch.where(obs[:, 0] == 1, torch.tensor([0, 1]), 1 - cue(obs)), 16)
    round_step = torch.arange(16) % 4
    assert_close(roll["reward"][round_step == 0, 0], torch.full((4,), 0.9))  # env 0 near: 0.9 at each choice
    assert torch.equal(roll["reward"][:, 1], (round_step == 3).float())  # env 1 far: 1.0 three steps later


def test_choice_cues_pay_a_tenth_when_matched():
    env = Choice(2, seed=3, choice_distance=4)
    roll = run(env, lambda obs, t: torch.where(obs[:, 0] == 1, torch.tensor([0, 0]), torch.stack([cue(obs)[0], 1 - cue(obs)[1]])), 20)
    cue_step = torch.arange(20) % 5 != 0
    assert_close(roll["reward"][cue_step, 0], torch.full((16,), 0.1))
    assert (roll["reward"][cue_step, 1] == 0).all() and torch.allclose(roll["reward"][~cue_step], torch.tensor(0.7))


# --------------------------------------------------------------------------- forage


@pytest.mark.parametrize("F", [4, 16])
def test_forage_far_near_and_timeout(F):
    env = Forage(3, seed=0, forage_distance=F)
    assert env.obs_dim == F + 3 and env.num_actions == 2
    # env 0: always right (far), env 1: always left (near), env 2: dithers (times out)
    steps = 8 * F
    roll = run(env, lambda obs, t: torch.tensor([1, 0, t % 2]), steps)
    assert (roll["obs"].sum(-1) == 1).all() and (roll["obs"][0].argmax(-1) == 2).all()  # start at 0
    t = torch.arange(steps)
    assert torch.equal(roll["terminated"][:, 0], t % F == F - 1)
    assert torch.equal(roll["reward"][:, 0], (t % F == F - 1).float())
    assert torch.equal(roll["terminated"][:, 1], t % 2 == 1)
    assert_close(roll["reward"][:, 1], 0.1 * (t % 2 == 1).float())
    assert torch.equal(roll["truncated"][:, 2], t % (4 * F) == 4 * F - 1) and not roll["terminated"][:, 2].any()
    assert (roll["reward"][:, 2] == 0).all() and not roll["truncated"][:, :2].any()
    done = roll["terminated"] | roll["truncated"]
    assert (roll["obs"][1:][done].argmax(-1) == 2).all()  # same-step autoreset back to position 0
    assert_close(roll["score"][:, 0][done[:, 0]], torch.ones(8))
    assert_close(roll["score"][:, 1][done[:, 1]], torch.full((4 * F,), 0.1))
    assert (roll["len"][:, 2][done[:, 2]] == 4 * F).all()


def test_forage_position_tracks_moves():
    env = Forage(1, seed=0)
    roll = run(env, lambda obs, t: torch.tensor([1 if t < 3 else 0]), 5)
    assert roll["obs"][:, 0].argmax(-1).tolist() == [2, 3, 4, 5, 4, 3]


# --------------------------------------------------------------------------- mixed


def test_mixed_optimal_and_partial_policies():
    env = Mixed(4, seed=0)
    assert env.obs_dim == 3 and env.num_actions == 2
    # env 0: optimal, env 1: only the long cue right, env 2: only the short cues right, env 3: all wrong
    long_right = torch.tensor([True, True, False, False])
    short_right = torch.tensor([True, False, True, False])

    def policy(obs, t):
        right = long_right if t % 32 == 0 else short_right
        return torch.where(right, cue(obs), 1 - cue(obs))

    roll = run(env, policy, 64)
    steps = torch.arange(64) % 32
    assert torch.equal(roll["obs"][:, :, 0], (torch.arange(65) % 32 == 0)[:, None].float().expand(-1, 4))
    assert (roll["obs"][:, :, 1:].sum(-1) == 1).all()
    assert torch.equal(roll["terminated"], (steps == 31)[:, None].expand(-1, 4)) and not roll["truncated"].any()
    expected = 0.1 * ((steps >= 1)[:, None] & short_right).float() + 1.0 * ((steps == 31)[:, None] & long_right).float()
    assert_close(roll["reward"], expected)
    assert_close(roll["score"][31], torch.tensor([1.0, 0.5, 0.5, 0.0]))
    assert_close(roll["score"][63], torch.tensor([1.0, 0.5, 0.5, 0.0]))
    assert_close(roll["ret"][31], torch.tensor([4.1, 1.0, 3.1, 0.0]))
    assert (roll["len"][31] == 32).all()


def test_mixed_long_cue_must_be_remembered():
    """Copying the visible cue every step is optimal; the long cue is not in the obs after step 0."""
    env = Mixed(4096, seed=0)
    roll = run(env, lambda obs, t: cue(obs), 32)
    assert (episode_scores(roll) == 1).all()
    first_cue = cue(roll["obs"][0])
    # The cue at step 1 is a fresh, independent draw (not a copy of the long cue).
    assert (cue(roll["obs"][1]) == first_cue).float().mean() == pytest.approx(0.5, abs=0.03)


# --------------------------------------------------------------------------- scripted optimal policies


def optimal_policy(name, env):
    if name == "bandit":
        return lambda obs, t: torch.full((env.num_envs,), int(env.probs.argmax()))
    if name == "password":
        return lambda obs, t: env.password[obs.argmax(1)]
    if name == "stochastic":
        gen = torch.Generator().manual_seed(0)
        return lambda obs, t: (torch.rand(env.num_envs, generator=gen) >= 0.7137633).long()
    if name == "squared":
        return lambda obs, t: squared_greedy(obs)
    if name == "forage":
        return lambda obs, t: torch.ones(env.num_envs, dtype=torch.int64)
    if name == "choice":
        return lambda obs, t: torch.where(obs[:, 0] == 1, 1, cue(obs))  # far at the choice step
    return lambda obs, t: cue(obs)  # delay, mixed, spread


@pytest.mark.parametrize("name", list(OCEAN_ENVS))
def test_scripted_optimal_policy_solves(name):
    cls = OCEAN_ENVS[name]
    env = cls(512, seed=0)
    scores = episode_scores(run(env, optimal_policy(name, env), 150))
    assert scores.numel() >= 1024
    assert scores.mean() >= cls.solved_score
    assert scores.mean() == pytest.approx(cls.optimal_score, abs=0.01)
