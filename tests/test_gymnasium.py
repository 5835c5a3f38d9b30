"""The Gymnasium path of p3o_atari.py and ppo_baseline.py: any Gymnasium id with a discrete action space (MinAtar's
games, CartPole). Its autoreset steps, whole-episode statistics, the network picked from the observation, a short
MinAtar run with checkpoint, resume and evaluation, and the refusals of what cannot train."""
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import evaluate
import p3o_atari
import ppo_baseline

SCRIPTS = {"ppo_baseline.py": ppo_baseline, "p3o_atari.py": p3o_atari}


class Countdown(gym.Env):
    """Episodes of `length` steps paying 1, 2, 3, ... (the step's number); observations are [H, W, C] grids whose
    channel c holds the step number times (c + 1), so a test can tell the layout and the step from them."""

    def __init__(self, length=3):
        self.length, self.t = length, 0
        self.observation_space = gym.spaces.Box(0, 100, shape=(5, 6, 2), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def grid(self):
        return np.stack([np.full((5, 6), self.t * (c + 1), dtype=np.float32) for c in range(2)], axis=-1)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.grid(), {}

    def step(self, action):
        self.t += 1
        return self.grid(), float(self.t), self.t == self.length, False, {}


gym.register("TestCountdown-v0", entry_point=Countdown, kwargs={"length": 3})


@pytest.mark.parametrize("script", SCRIPTS)
def test_gymnasium_envs_mask_the_autoreset_step_and_report_whole_episodes(script):
    """Episodes of 3 steps paying 1 + 2 + 3: each done step reports return 6 and length 3, the next step is the
    autoreset step (reward 0, the action ignored, not counted as a decision), and grids come channels first."""
    envs = SCRIPTS[script].GymnasiumEnvs("TestCountdown-v0", 2, torch.device("cpu"), seed=1)
    obs = envs.reset()
    assert obs.shape == (2, 2, 5, 6) and torch.equal(obs[:, 1], 2 * obs[:, 0])  # [N, C, H, W]
    assert envs.autoreset_next_step
    seen = []
    for step in range(12):
        obs, reward, terminated, truncated, info = envs.step(torch.tensor([0, 1]))
        seen.append((reward[0].item(), bool(terminated[0]), info["episode_return"][0].item(), info["episode_length"][0].item()))
        assert obs[0, 0, 0, 0].item() == [1, 2, 3, 0][step % 4]  # step 4 of each cycle is the reset observation
    assert seen[:4] == [(1.0, False, 0.0, 0), (2.0, False, 0.0, 0), (3.0, True, 6.0, 3), (0.0, False, 0.0, 0)]
    assert seen[4:8] == seen[:4] and seen[8:] == seen[:4]


def test_the_network_follows_the_observation():
    """EnvPool's frames get the Nature CNN, a small grid MinAtar's network (one 16-filter 3x3 convolution and 128
    units), a vector the MLP; anything else is refused with what to do."""
    convolutions = lambda net: [m for m in net if isinstance(m, torch.nn.Conv2d)]  # noqa: E731
    nature, width, scale = p3o_atari.make_network((4, 84, 84))
    assert (len(convolutions(nature)), width, scale) == (3, 512, 255.0)
    minatar, width, scale = p3o_atari.make_network((7, 10, 10))
    (conv,) = convolutions(minatar)
    assert (conv.in_channels, conv.out_channels, conv.kernel_size, width, scale) == (7, 16, (3, 3), 128, 1.0)
    assert minatar(torch.zeros(2, 7, 10, 10)).shape == (2, 128)
    mlp, width, _ = p3o_atari.make_network((5,))
    assert width == 64 and mlp(torch.zeros(3, 5)).shape == (3, 64)
    for shape in [(3, 210, 160), (), (4, 4)]:
        with pytest.raises(ValueError, match="no network here fits"):
            p3o_atari.make_network(shape)


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_missing_optional_package_is_named(script, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "minatar", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "minatar.gym", None)
    module = SCRIPTS[script]
    with pytest.raises(SystemExit) as exit_info:
        module.check_args(module.Args(env_id="MinAtar/Asterix-v1"))
    assert exit_info.value.code == 2
    assert "needs the package 'minatar', which is missing" in capsys.readouterr().err


@pytest.mark.parametrize("script", SCRIPTS)
def test_minatar_trains_resumes_and_evaluates(script, tmp_path, monkeypatch, capsys):
    """A few thousand steps of MinAtar Breakout: the run finishes games, writes a checkpoint that resumes (with new
    episodes, said in one line) and that evaluate.py plays."""
    module = SCRIPTS[script]
    monkeypatch.chdir(tmp_path)
    args = module.Args(env_id="MinAtar/Breakout-v1", num_envs=4, num_steps=32, num_minibatches=2, update_epochs=1, total_timesteps=4 * 32 * 4, save_interval=2, progress=False)
    module.check_args(args)
    result = module.train(args)
    assert result["steps"] == 512 and result["episodes"] >= 5 and 0 <= result["return"] < 20, result
    path = tmp_path / "runs" / result["run"] / "checkpoint.pt"
    checkpoint = module.load_checkpoint(str(path), "--resume")
    assert checkpoint["envs"] is None and checkpoint["iteration"] == 4
    checkpoint["args"]["total_timesteps"] = 4 * 32 * 6
    resumed = module.train(module.Args(**checkpoint["args"]), checkpoint)
    assert resumed["steps"] == 4 * 32 * 6
    assert "resumed at iteration 4, step 512 with new episodes (this env's state cannot be saved)" in capsys.readouterr().out
    evaluation = evaluate.evaluate(evaluate.Args(str(path), episodes=3))
    assert evaluation["episodes"] == 3 and evaluation["env"] == "MinAtar/Breakout-v1"


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_users_own_env_trains_from_its_module(script, tmp_path):
    """`--env-id module.path:EnvName-v0`, as gym.make takes it: the script imports the module, which registers the
    env, and trains on it (tests/custom_env.py, a corridor whose episodes end at its far cell)."""
    from in_process import run_script

    root = Path(__file__).resolve().parents[1]
    flags = ["--num-envs", 4, "--num-steps", 32, "--num-minibatches", 2, "--update-epochs", 1, "--total-timesteps",
             4 * 32 * 3, "--save-interval", 0, "--no-progress"]
    done = run_script(root / script, "--env-id", "tests.custom_env:CustomCorridor-v0", *flags, cwd=root)
    assert done.returncode == 0, done.stderr
    assert "tests.custom_env:CustomCorridor-v0: return" in done.stdout and "384 steps" in done.stdout, done.stdout


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_missing_env_module_is_refused_in_one_line(script, tmp_path, capsys):
    module = SCRIPTS[script]
    with pytest.raises(SystemExit) as exit_info:
        module.check_args(module.Args(env_id="tests.no_such_module:CustomCorridor-v0"))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no module 'tests.no_such_module' to import" in err and "PYTHONPATH" in err, err
