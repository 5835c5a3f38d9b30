"""Bad flags stop p3o_ocean.py before any env or device is touched, with a clear message and exit code 2."""
from pathlib import Path

import pytest

from in_process import run_script
from p3o_ocean import Args, check_args

SCRIPT = Path(__file__).resolve().parents[1] / "p3o_ocean.py"


def run(*flags, cwd):  # in this process: test_atari.py and test_checkpoints.py start the scripts for real
    return run_script(SCRIPT, *flags, cwd=cwd)


@pytest.mark.parametrize(
    "flags, message",
    [
        (dict(horizon=0), "--horizon must be >= 1"),
        (dict(horizon=-3), "--horizon must be >= 1"),
        (dict(num_envs=100, num_steps=3, num_minibatches=7), "--num-minibatches 7 must divide the batch"),
        (dict(env_id="breakout"), "is not an Ocean env"),
        (dict(delay=0), "--delay must be >= 1"),
        (dict(spread=0), "--spread must be >= 1"),
        (dict(choice_distance=0), "--choice-distance must be >= 1"),
        (dict(choice_near_reward=1.0), "--choice-near-reward must be in [0, 1)"),
        (dict(choice_near_reward=float("nan")), "--choice-near-reward must be in [0, 1)"),
        (dict(reward_noise=-0.5), "--reward-noise must be >= 0"),
        (dict(reward_noise=float("nan")), "--reward-noise must be >= 0"),
        (dict(window_loss_coef=-1.0), "--window-loss-coef must be >= 0"),
        (dict(window_loss_coef=float("nan")), "--window-loss-coef must be >= 0"),
        (dict(value_fraction=0.0), "--value-fraction must be in (0, 1]"),
        (dict(value_fraction=1.5), "--value-fraction must be in (0, 1]"),
        (dict(value_fraction=float("nan")), "--value-fraction must be in (0, 1]"),
        (dict(total_timesteps=-5), "--total-timesteps must be >= 0"),
    ],
)
def test_bad_flags_are_rejected(flags, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        check_args(Args(**flags))
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_good_flags_pass():
    check_args(Args())
    check_args(Args(env_id="delay", horizon=1, num_envs=3, num_steps=5, num_minibatches=5))


@pytest.mark.parametrize(
    "flags, message",
    [(["--env-id", "squard"], "did you mean squared"), (["--weight-norm", "mean"], "weight-norm")],  # ours, then tyro's
)
def test_bad_flags_exit_non_zero_before_training(flags, message, tmp_path):
    result = run(*flags, cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr, result.stderr
    assert not (tmp_path / "runs").exists()  # nothing was started


def test_one_env_runs_end_to_end_and_prints_the_table(tmp_path):
    result = run("--env-id", "bandit", "--num-envs", "64", "--num-steps", "8", "--num-minibatches", "2", "--total-timesteps", "2048", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "PyTorch twin" in result.stdout  # one line says which advantage runs
    table = result.stdout.splitlines()[-1].split()
    assert table[0] == "bandit" and table[3] == "2,048"
    assert len(list((tmp_path / "runs").iterdir())) == 1
