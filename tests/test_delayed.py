"""envs/delayed.py: late rewards for any Gymnasium env. Every reward arrives exactly K steps late inside its episode
(or summed every K steps), what is owed is paid at the episode's last step so returns are unchanged, nothing owed
crosses episodes or envs of a vector env, a bad K is refused in one line, and the scripts train on its ids."""
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import p3o_atari
import ppo_baseline
from envs import delayed


class Paying(gym.Env):
    """Episodes that pay the given rewards, one a step, and end after the last one, terminated or truncated as asked.
    The observation is the step number, so a test can line steps up."""

    def __init__(self, rewards=(1.0,), truncate=False):
        self.rewards, self.truncate, self.t = list(rewards), truncate, 0
        self.observation_space = gym.spaces.Box(0, 1e6, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        reward, self.t = self.rewards[self.t], self.t + 1
        last = self.t == len(self.rewards)
        return np.array([self.t], dtype=np.float32), reward, last and not self.truncate, last and self.truncate, {}


def expected(rewards, delay, summed):
    """What the wrapper must pay at each step of one episode: each reward `delay` steps later (or the sum since the
    last payment at every `delay`-th step), and whatever is still owed at the last step."""
    paid = [0.0] * len(rewards)
    for t, reward in enumerate(rewards):
        at = (t // delay + 1) * delay - 1 if summed else t + delay
        paid[min(at, len(rewards) - 1)] += reward
    return paid


def play(env, steps, seed=0):
    env.reset(seed=seed)
    return [env.step(0)[1:4] for _ in range(steps)]


@given(rewards=st.lists(st.integers(-3, 3).map(float), min_size=1, max_size=40), delay=st.integers(1, 12),
       summed=st.booleans(), truncate=st.booleans())
def test_each_reward_arrives_k_steps_late_and_the_return_is_unchanged(rewards, delay, summed, truncate):
    env = delayed.DelayedRewards(Paying(rewards, truncate), delay, summed)
    for episode in range(2):  # the second episode owes nothing to the first
        steps = play(env, len(rewards), seed=episode)
        paid = [reward for reward, _, _ in steps]
        assert paid == expected(rewards, delay, summed)
        assert sum(paid) == sum(rewards)
        assert [terminated or truncated for _, terminated, truncated in steps] == [False] * (len(rewards) - 1) + [True]


def test_a_reward_32_steps_late_by_hand():
    """One reward at step 3 of a 100-step episode arrives at step 35, one at step 90 at the last step (summed: at
    steps 31 and 95, the 32nd and the 96th)."""
    rewards = [0.0] * 100
    rewards[3], rewards[90] = 1.0, 2.0
    paid = [reward for reward, _, _ in play(delayed.DelayedRewards(Paying(rewards), 32), 100)]
    assert [(t, r) for t, r in enumerate(paid) if r] == [(35, 1.0), (99, 2.0)]
    summed = [reward for reward, _, _ in play(delayed.DelayedRewards(Paying(rewards), 32, summed=True), 100)]
    assert [(t, r) for t, r in enumerate(summed) if r] == [(31, 1.0), (95, 2.0)]  # the 32nd and 96th steps


def test_nothing_owed_crosses_episodes_or_envs_of_a_vector_env():
    """Two envs with episodes of 5 and 7 steps paying 1, 2, 3, ... under Gymnasium's next-step autoreset, delay 3:
    each episode pays exactly its own rewards, shifted, with its rest at its last step, and each reset step pays 0."""
    lengths = (5, 7)
    envs = gym.vector.SyncVectorEnv(
        [lambda n=n: delayed.DelayedRewards(Paying([float(t + 1) for t in range(n)]), 3) for n in lengths],
        autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)
    envs.reset(seed=0)
    paid = np.array([envs.step(np.zeros(2, dtype=np.int64))[1] for _ in range(24)])
    for column, n in enumerate(lengths):
        one = expected([float(t + 1) for t in range(n)], 3, False) + [0.0]  # an episode, then its reset step
        assert list(paid[:, column]) == (one * 4)[:24], (column, paid[:, column])


@pytest.mark.parametrize("delay", [0, -3, 2.5, "32", True, None])
def test_a_bad_delay_is_refused_in_one_line(delay):
    with pytest.raises(ValueError) as error:
        delayed.register("CartPole-v1", delay)
    assert "\n" not in str(error.value) and "whole number of steps >= 1" in str(error.value)
    with pytest.raises(ValueError):
        delayed.DelayedRewards(Paying(), delay)


def test_ids_are_registered_for_minatar_and_for_any_gymnasium_id():
    assert delayed.register("CartPole-v1", 50) == "CartPole-Delay50-v1"
    assert delayed.register("CartPole-v1", 50, summed=True) == "CartPole-Sum50-v1"
    for game in delayed.MINATAR_GAMES:
        for delay in delayed.DELAYS:
            assert f"MinAtar/{game}-Delay{delay}-v1" in gym.registry and f"MinAtar/{game}-Sum{delay}-v1" in gym.registry
    wrapper = gym.make("CartPole-Delay50-v1")
    while not isinstance(wrapper, delayed.DelayedRewards):
        wrapper = wrapper.env
    assert isinstance(wrapper.env, gym.wrappers.TimeLimit)  # the base's limit is inside: a truncation pays what is owed


@pytest.mark.parametrize("script", [p3o_atari, ppo_baseline])
def test_the_scripts_log_the_same_episodes_with_rewards_late(script):
    """The scripts' Gymnasium envs over MinAtar Breakout as it ships and 32 steps late, same seeds and actions: the
    per-step rewards differ, but every episode's logged return, score and length are the same."""
    device, actions = torch.device("cpu"), torch.tensor([1, 2, 0, 1])
    runs = []
    for env_id in ("MinAtar/Breakout-v1", "envs.delayed:MinAtar/Breakout-Delay32-v1"):
        envs = script.GymnasiumEnvs(env_id, 4, device, seed=3)
        envs.reset()
        steps = [envs.step(actions) for _ in range(400)]
        runs.append(([s[1] for s in steps], [(s[4]["episode_return"], s[4]["score"], s[4]["episode_length"]) for s in steps]))
    (plain_rewards, plain_info), (late_rewards, late_info) = runs
    assert sum(int(x[2].gt(0).sum()) for x in plain_info) >= 4  # episodes ended
    assert not all(torch.equal(a, b) for a, b in zip(plain_rewards, late_rewards))
    assert all(torch.equal(x, y) for a, b in zip(plain_info, late_info) for x, y in zip(a, b))


def test_a_module_id_trains_into_a_run_folder_safe_in_a_path(tmp_path):
    """`--env-id envs.delayed:MinAtar/Breakout-Delay32-v1` trains, and its run folder holds neither ':' nor '/'."""
    from in_process import run_script

    root = Path(__file__).resolve().parents[1]
    flags = ["--num-envs", 4, "--num-steps", 32, "--num-minibatches", 2, "--update-epochs", 1, "--total-timesteps",
             4 * 32 * 2, "--save-interval", 0, "--no-progress"]
    done = run_script(root / "p3o_atari.py", "--env-id", "envs.delayed:MinAtar/Breakout-Delay32-v1", *flags, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (folder,) = (tmp_path / "runs").iterdir()
    assert folder.name.startswith("envs.delayed_MinAtar_Breakout-Delay32-v1__p3o_atari__1__"), folder.name
    assert ":" not in folder.name


def test_an_unregistered_delay_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        p3o_atari.check_args(p3o_atari.Args(env_id="envs.delayed:MinAtar/Breakout-Delay33-v1"))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean" in err and "Breakout-Delay32-v1" in err, err
