"""Runs a researcher can trust, in all three scripts: atomic checkpoints, an exact --resume, guards against non-finite
numbers, and hostile input refused with a message that says what to change (evaluate.py's: test_evaluate.py)."""
import math
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import kernels.advantage
import p3o_atari
import p3o_ocean
import ppo_baseline
from in_process import run_script

ROOT = Path(__file__).resolve().parents[1]
# Each script on a tiny Ocean bandit: 8 envs x 16 steps, 2 minibatches (the Atari scripts reach it as ocean/NAME)
SCRIPTS = {"p3o_ocean.py": (p3o_ocean, "bandit"), "ppo_baseline.py": (ppo_baseline, "ocean/bandit"), "p3o_atari.py": (p3o_atari, "ocean/bandit")}
TINY = dict(num_envs=8, num_steps=16, num_minibatches=2, update_epochs=2, progress=False)


def tiny_args(script, **overrides):
    module, env_id = SCRIPTS[script]
    return module.Args(env_id=env_id, **{**TINY, **overrides})


def the_run(tmp_path):
    (run_dir,) = (tmp_path / "runs").iterdir()
    return run_dir


def keep_every_checkpoint(module, tmp_path, monkeypatch):
    """Every checkpoint the run writes is also kept as tmp_path/iteration{N}.pt."""
    save = module.save_checkpoint

    def keep_copies(path, state):
        save(path, state)
        shutil.copy(path, tmp_path / f"iteration{state['iteration']}.pt")

    monkeypatch.setattr(module, "save_checkpoint", keep_copies)


def assert_same_state(a, b):
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), name
    for group_a, group_b in zip(a["optimizer"]["state"].values(), b["optimizer"]["state"].values()):
        for key in group_a:
            assert torch.equal(torch.as_tensor(group_a[key]), torch.as_tensor(group_b[key])), key


# ---------------------------------------------------------------------------------------------------------
# Checkpoints and --resume
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", SCRIPTS)
def test_resume_reaches_the_same_parameters(script, tmp_path, monkeypatch):
    """A run resumed from its iteration-3 checkpoint ends bit-identical to the uninterrupted run (CPU,
    --torch-deterministic): parameters, Adam's moments, the LR schedule's position and every random number."""
    module, _ = SCRIPTS[script]
    monkeypatch.chdir(tmp_path)
    keep_every_checkpoint(module, tmp_path, monkeypatch)
    module.train(tiny_args(script, total_timesteps=128 * 7, save_interval=3, learning_rate=1e-2))
    assert sorted(p.name for p in tmp_path.glob("iteration*.pt")) == ["iteration3.pt", "iteration6.pt", "iteration7.pt"]
    uninterrupted = torch.load(tmp_path / "iteration7.pt", weights_only=True)

    args, checkpoint = module.resume_args(module.Args(resume=str(tmp_path / "iteration3.pt"), progress=False))
    assert checkpoint["iteration"] == 3 and checkpoint["global_step"] == 3 * 128
    result = module.train(args, checkpoint)
    assert result["steps"] == 7 * 128 and result["run"] == uninterrupted["run_name"]
    resumed = torch.load(the_run(tmp_path) / "checkpoint.pt", weights_only=True)
    assert resumed["iteration"] == 7
    assert_same_state(uninterrupted, resumed)
    assert resumed["history"] == uninterrupted["history"]

    # Control: the test can fail. A different seed's run does not end in the same state.
    shutil.rmtree(tmp_path / "runs")
    module.train(tiny_args(script, total_timesteps=128 * 7, save_interval=3, learning_rate=1e-2, seed=2))
    with pytest.raises(AssertionError):
        assert_same_state(uninterrupted, torch.load(the_run(tmp_path) / "checkpoint.pt", weights_only=True))


@pytest.mark.parametrize("script, env_id", [("p3o_ocean.py", "delay"), ("p3o_atari.py", "ocean/delay")])
def test_resume_with_the_clock_mid_episode_is_exact(script, env_id, tmp_path, monkeypatch):
    """--clock reads each env's count of its episode's decisions, which the checkpoint's env state carries: delay's
    68-step episodes are cut by the iteration-3 checkpoint (48 steps in), and the resumed run still ends
    bit-identical, the clock table (a buffer of the model) included. Control: a clock that restarted at 0 would not.
    (The running table moves at every optimizer step, so the checkpoint carries what three iterations taught it.)"""
    module, _ = SCRIPTS[script]
    monkeypatch.chdir(tmp_path)
    keep_every_checkpoint(module, tmp_path, monkeypatch)
    module.train(module.Args(env_id=env_id, **TINY, total_timesteps=128 * 7, save_interval=3, learning_rate=1e-2, horizon=16, clock=True, seed=2))
    uninterrupted = torch.load(tmp_path / "iteration7.pt", weights_only=True)
    assert uninterrupted["model"]["clock_table"].any()

    args, checkpoint = module.resume_args(module.Args(resume=str(tmp_path / "iteration3.pt"), progress=False))
    module.train(args, checkpoint)
    assert_same_state(uninterrupted, torch.load(the_run(tmp_path) / "checkpoint.pt", weights_only=True))

    shutil.rmtree(tmp_path / "runs")
    checkpoint["envs"]["episode_length"].zero_()  # the control: the clock restarts mid-episode
    module.train(args, checkpoint)
    with pytest.raises(AssertionError):
        assert_same_state(uninterrupted, torch.load(the_run(tmp_path) / "checkpoint.pt", weights_only=True))



def test_a_resumed_run_continues_its_tensorboard_curve(tmp_path, monkeypatch):
    """Same run folder; the events the first life logged after the checkpoint it is resumed from are purged, so
    each step has one value and the curve runs on to the end."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.chdir(tmp_path)
    save = p3o_ocean.save_checkpoint

    def keep_iteration_2(path, state):
        save(path, state)
        if state["iteration"] == 2:
            shutil.copy(path, tmp_path / "two.pt")

    monkeypatch.setattr(p3o_ocean, "save_checkpoint", keep_iteration_2)
    p3o_ocean.train(tiny_args("p3o_ocean.py", total_timesteps=128 * 4, save_interval=2))  # logs steps 128 .. 512
    time.sleep(1.1)  # the second life's event file gets its own name
    args, checkpoint = p3o_ocean.resume_args(p3o_ocean.Args(resume=str(tmp_path / "two.pt"), progress=False))
    p3o_ocean.train(args, checkpoint)  # logs 384 and 512 again
    run_dir = the_run(tmp_path)
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 2
    events = EventAccumulator(str(run_dir))
    events.Reload()
    assert [e.step for e in events.Scalars("charts/SPS")] == [128, 256, 384, 512]


def test_a_kill_during_a_write_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p3o_ocean.train(tiny_args("p3o_ocean.py", total_timesteps=128 * 2, save_interval=1))
    path = the_run(tmp_path) / "checkpoint.pt"
    before = path.read_bytes()

    def dies_half_way(state, file):  # a torch.save that writes half a file, then the process is "killed"
        Path(file).write_bytes(before[: len(before) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        p3o_ocean.save_checkpoint(str(path), {"anything": 1})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert p3o_ocean.load_checkpoint(str(path), "--resume")["iteration"] == 2


def test_sigkill_while_checkpointing_then_resume(tmp_path):
    """The real thing: p3o_ocean.py writing a checkpoint every iteration, killed with SIGKILL at a moment the
    test does not choose, then resumed from the command line. The checkpoint it left loads, holds the last
    iteration it saw or a later one, and the resumed run finishes in the state of a run never killed."""
    flags = ["--env-id", "bandit", "--num-envs", "8", "--num-steps", "16", "--num-minibatches", "2", "--total-timesteps", str(128 * 60), "--save-interval", "1", "--no-progress"]
    run = subprocess.Popen([sys.executable, str(ROOT / "p3o_ocean.py"), *flags], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen, deadline = 0, time.time() + 240
    while seen < 10 and time.time() < deadline and run.poll() is None:
        paths = list(tmp_path.glob("runs/*/checkpoint.pt"))
        if paths:
            seen = max(seen, torch.load(paths[0], weights_only=True)["iteration"])
        time.sleep(0.05)
    assert run.poll() is None, run.stderr.read().decode()[-2000:]
    time.sleep(0.137)
    run.send_signal(signal.SIGKILL)
    run.wait()
    (path,) = tmp_path.glob("runs/*/checkpoint.pt")
    killed_at = torch.load(path, weights_only=True)["iteration"]  # loads: the kill did not corrupt it
    assert seen <= killed_at < 60
    resumed = subprocess.run([sys.executable, str(ROOT / "p3o_ocean.py"), "--resume", str(path), "--no-progress"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"resumed at iteration {killed_at}" in resumed.stdout
    final = torch.load(path, weights_only=True)
    assert final["iteration"] == 60 and final["global_step"] == 128 * 60

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    never_killed = run_script(ROOT / "p3o_ocean.py", *flags[:-3], "--save-interval", "60", "--no-progress", cwd=fresh)  # no kill: in this process
    assert never_killed.returncode == 0, never_killed.stderr[-2000:]
    (reference,) = fresh.glob("runs/*/checkpoint.pt")
    assert_same_state(torch.load(reference, weights_only=True), final)


# ---------------------------------------------------------------------------------------------------------
# Numerical guards
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("where", ["advantage", "update"])
def test_non_finite_numbers_stop_the_run_with_a_crash_checkpoint(script, where, tmp_path, monkeypatch):
    """A NaN reward (advantage) or a NaN loss (update): the run stops before the parameters change, names the
    tensor, keeps the last good state in crash.pt (resumable), and exits non-zero."""
    module, _ = SCRIPTS[script]
    monkeypatch.chdir(tmp_path)
    if where == "advantage":
        step = p3o_ocean.Bandit.step

        def nan_at_step_40(self, actions):
            self.calls = getattr(self, "calls", 0) + 1
            obs, reward, *rest = step(self, actions)
            return (obs, reward * math.nan, *rest) if self.calls == 40 else (obs, reward, *rest)

        monkeypatch.setattr(p3o_ocean.Bandit, "step", nan_at_step_40)
        args = tiny_args(script, total_timesteps=128 * 4)
    else:
        args = tiny_args(script, total_timesteps=128 * 4, ent_coef=math.nan)
    with pytest.raises(SystemExit) as exit_info:
        module.train(args)
    message = str(exit_info.value.code)
    expected = "non-finite rewards in the advantage at iteration 3" if where == "advantage" else "non-finite loss in the update (epoch 0, minibatch 0) at iteration 1"
    assert expected in message, message
    crash = module.load_checkpoint(str(the_run(tmp_path) / "crash.pt"), "--resume")
    assert all(torch.isfinite(value).all() for value in crash["model"].values())
    assert crash["iteration"] == (2 if where == "advantage" else 0)


@pytest.mark.parametrize("script", ["p3o_ocean.py", "p3o_atari.py"])
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_mu_stops_the_run_at_the_advantage(script, bad, tmp_path, monkeypatch):
    """The advantage's guard reads the advantages, not all of mu: one non-finite prediction, at one offset of one
    decision in the rollout, must still stop the run there, before the update."""
    module, _ = SCRIPTS[script]
    monkeypatch.chdir(tmp_path)
    forward = module.Agent.get_action_and_value
    calls = []

    def bad_mu_at_step_40(self, x, clock, action=None, **kwargs):
        sampled, logprob, entropy, mu = forward(self, x, clock, action, **kwargs)
        if action is None:  # the rollout's forward pass (the update passes the actions taken)
            calls.append(1)
            if len(calls) == 40:
                mu = mu.clone()
                mu[3, 7] = bad
        return sampled, logprob, entropy, mu

    monkeypatch.setattr(module.Agent, "get_action_and_value", bad_mu_at_step_40)
    with pytest.raises(SystemExit) as exit_info:
        module.train(tiny_args(script, total_timesteps=128 * 4, horizon=8))
    assert "non-finite advantages in the advantage at iteration 3" in str(exit_info.value.code)
    assert module.load_checkpoint(str(the_run(tmp_path) / "crash.pt"), "--resume")["iteration"] == 2


# ---------------------------------------------------------------------------------------------------------
# Hostile input: refused before anything starts, with what to change
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", SCRIPTS)
def test_bad_resume_files_are_refused(script, tmp_path, monkeypatch, capsys):
    module, _ = SCRIPTS[script]
    monkeypatch.chdir(tmp_path)
    module.train(tiny_args(script, total_timesteps=128))
    good = the_run(tmp_path) / "checkpoint.pt"
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good.read_bytes()[:1000])
    text = tmp_path / "notes.txt"
    text.write_text("not a checkpoint")
    not_ours = tmp_path / "weights.pt"
    torch.save({"model": {}}, not_ours)
    other_script = "p3o_ocean.py" if script != "p3o_ocean.py" else "ppo_baseline.py"
    other = tmp_path / "other.pt"
    torch.save({**torch.load(good, weights_only=True), "script": other_script}, other)
    older = tmp_path / "older.pt"  # written before a flag existed
    state = torch.load(good, weights_only=True)
    torch.save({**state, "args": {name: value for name, value in state["args"].items() if name != "seed"}}, older)
    for path, message in [
        (tmp_path / "missing.pt", "no such file"),
        (truncated, "not a readable checkpoint"),
        (text, "not a readable checkpoint"),
        (not_ours, "not a checkpoint of these scripts"),
        (other, f"written by {other_script}, not {script}: use that script"),
        (older, f"written before {script} had ['seed']: resume it with the version that wrote it"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            module.resume_args(module.Args(resume=str(path)))
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err, path


def test_resume_keeps_the_runs_args_and_says_which_flags_it_ignored(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    p3o_ocean.train(tiny_args("p3o_ocean.py", total_timesteps=128, horizon=8))
    path = str(the_run(tmp_path) / "checkpoint.pt")
    args, _ = p3o_ocean.resume_args(p3o_ocean.Args(resume=path, horizon=64, learning_rate=0.5, progress=False))
    assert args.horizon == 8 and args.learning_rate == 3e-3 and args.env_id == "bandit" and not args.progress
    assert "ignored: --learning-rate, --horizon" in capsys.readouterr().err


@pytest.mark.parametrize("script", SCRIPTS)
def test_two_runs_started_in_the_same_second_get_their_own_folders(script, tmp_path, monkeypatch):
    """The second run takes {name}-2 and leaves the first run's files byte for byte as they were."""
    module, _ = SCRIPTS[script]
    monkeypatch.chdir(tmp_path)
    clock = iter(range(10**9))  # both runs start within the same second: a clock that creeps
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0 + next(clock) * 1e-4)
    first = module.train(tiny_args(script, total_timesteps=128))["run"]
    files = {path: path.read_bytes() for path in (tmp_path / "runs" / first).iterdir()}
    assert files
    second = module.train(tiny_args(script, total_timesteps=128))["run"]
    assert second == f"{first}-2"
    assert {path: path.read_bytes() for path in (tmp_path / "runs" / first).iterdir()} == files
    assert (tmp_path / "runs" / second / "checkpoint.pt").exists()


def test_claiming_a_run_folder_is_race_free(tmp_path, monkeypatch):
    """Folders that exist are skipped in order, and each claim creates the folder it returns."""
    monkeypatch.chdir(tmp_path)
    for name in ("a", "a-2", "a-3"):
        (tmp_path / "runs" / name).mkdir(parents=True)
    assert p3o_ocean.claim_run_folder("a") == "a-4"
    assert p3o_ocean.claim_run_folder("a") == "a-5"
    assert p3o_ocean.claim_run_folder("b") == "b"
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == ["a", "a-2", "a-3", "a-4", "a-5", "b"]


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("flags, message", [(dict(save_interval=-1), "--save-interval must be >= 0")])
def test_bad_checkpoint_flags(script, flags, message, capsys):
    module, _ = SCRIPTS[script]
    with pytest.raises(SystemExit) as exit_info:
        module.check_args(tiny_args(script, **flags))
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_resume_of_a_missing_file_exits_2_before_anything_starts(tmp_path):
    """From the command line (the other scripts share load_checkpoint verbatim: test_atari.py checks it)."""
    run = run_script(ROOT / "p3o_ocean.py", "--resume", "nowhere.pt", cwd=tmp_path)
    assert run.returncode == 2 and "--resume nowhere.pt: no such file" in run.stderr, run.stderr[-2000:]
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("module", [p3o_ocean, p3o_atari])
def test_a_kernel_that_cannot_compile_falls_back_or_stops(module, monkeypatch):
    """CuPy present, the kernel fails to compile: --kernel auto says so and runs the twin; --kernel cuda stops."""
    def broken():
        raise RuntimeError("nvrtc: error: identifier 'omega' is undefined")

    monkeypatch.setattr(kernels.advantage, "load_cuda_advantage", broken)
    advantage, note = module.select_advantage("auto", torch.device("cuda"))
    assert advantage is module.p3o_advantage
    assert "CUDA kernel unavailable: RuntimeError: nvrtc: error: identifier 'omega' is undefined" in note
    with pytest.raises(SystemExit) as exit_info:
        module.select_advantage("cuda", torch.device("cuda"))
    assert "--kernel cuda, but the CUDA kernel is unavailable: nvrtc: error" in str(exit_info.value.code)
