"""p3o_atari.py and ppo_baseline.py under torchrun, two gloo ranks on this CPU: one model (the same parameters on
every rank), every statistic over the global batch (equal to one process's on the ranks' batches joined), a
checkpoint written under torchrun resumes under torchrun, bad launches are refused, and a plain run computes
exactly what it computed before torchrun came in."""
import importlib.util
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import p3o_atari
import ppo_baseline

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = {"p3o_atari.py": p3o_atari, "ppo_baseline.py": ppo_baseline}
# ocean/delay (episodes of 68 steps, cut by every rollout) at H = 16: the tie's z-scores, the lambda-returns over the
# rollout's tail and the clock table all run. 2 ranks x 4 envs x 16 steps.
FLAGS = ["--env-id", "ocean/delay", "--num-envs", "8", "--num-steps", "16", "--num-minibatches", "2", "--update-epochs", "2",
         "--learning-rate", "1e-2", "--no-progress", "--seed", "3"]
P3O_FLAGS = ["--horizon", "16"]


def torchrun(out, script, *flags, nproc=2):
    """Launch `script` under torchrun through tests/torchrun_worker.py, gloo on the CPU; returns the finished process."""
    out.mkdir(exist_ok=True)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
               str(ROOT / "tests" / "torchrun_worker.py"), str(out), str(ROOT / script), *flags]
    environment = {**__import__("os").environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, cwd=out, capture_output=True, text=True, timeout=300, env=environment)


@pytest.fixture(scope="module")
def launch(tmp_path_factory):
    """p3o_atari.py, 2 ranks, 6 iterations, a checkpoint every 3: the run every test below reads (one launch)."""
    out = tmp_path_factory.mktemp("torchrun")
    run = torchrun(out, "p3o_atari.py", *FLAGS, *P3O_FLAGS, "--total-timesteps", str(128 * 6), "--save-interval", "3")
    assert run.returncode == 0, run.stderr[-3000:]
    return out, run, [torch.load(out / f"rank{rank}.pt", weights_only=False) for rank in (0, 1)]


def test_one_model_on_every_rank(launch):
    """Both ranks end with the same parameters and clock table, bit for bit, and rank 0's checkpoint holds them; rank 0
    alone printed, logged and saved, and the steps and games it logged are the global ones."""
    out, run, ranks = launch
    assert ranks[0]["world_size"] == 2
    for name, value in ranks[0]["model"].items():
        assert torch.equal(value, ranks[1]["model"][name]), name
    assert ranks[0]["model"]["clock_table"].any()
    checkpoint = torch.load(out / "iteration6.pt", weights_only=True)
    for name, value in checkpoint["model"].items():
        assert torch.equal(value, ranks[0]["model"][name]), name
    assert checkpoint["global_step"] == 128 * 6 and len(checkpoint["ranks"]) == 1
    assert not torch.equal(checkpoint["next_obs"], checkpoint["ranks"][0]["next_obs"])  # each rank its own envs (seeded from seed + rank x its envs)
    assert run.stdout.count("ocean/delay: return") == 1 and run.stdout.count("advantage: PyTorch twin") == 1
    assert len(list((out / "runs").iterdir())) == 1
    assert len(checkpoint["history"][0]) == 8  # 2 x 4 envs x 96 steps: 8 games of 68 steps ended, 4 on each rank


def join(name, inputs):
    """The inputs of one process holding both ranks' batches: joined along the envs (or the decisions)."""
    a, b = inputs
    if name in ("masked_mean", "explained_variance"):  # sums over every entry
        return [torch.cat([x.reshape(-1), y.reshape(-1)]) for x, y in zip(a, b)]
    if name == "step_clock_table":  # the table (the same on both ranks), then each rank's minibatch of decisions
        assert torch.equal(a[0], b[0])
        return [a[0].clone()] + [torch.cat([x, y]) for x, y in zip(a[1:], b[1:])]
    if name == "tie_z":  # rewards, terminals, mu [T, N, ...]; tail_mu [N, H]; score, valid [T, N]
        return [torch.cat([x, y], dim=0 if i == 3 else 1) for i, (x, y) in enumerate(zip(a, b))]
    return [torch.cat([x, y], dim=1) for x, y in zip(a, b)]  # window_sum_variance: [T, N, ...]


def test_every_statistic_is_the_global_batchs(launch):
    """Each call of a function that takes a statistic over the batch, on each rank, equals the same function run in
    one process on both ranks' inputs joined: advantage normalisation, losses, KL and clip fraction (masked_mean),
    explained variance, the window loss's variance, the tie's z-scores and the clock table's step."""
    _, _, ranks = launch
    calls = [rank["calls"] for rank in ranks]
    assert [name for name, _, _ in calls[0]] == [name for name, _, _ in calls[1]]
    seen = set()
    for (name, inputs0, result0), (_, inputs1, result1) in zip(*calls):
        seen.add(name)
        expected = getattr(p3o_atari, name)(*join(name, [inputs0, inputs1]))
        if name == "step_clock_table":
            expected = join(name, [inputs0, inputs1])[0]
            p3o_atari.step_clock_table(expected, *join(name, [inputs0, inputs1])[1:])
            assert torch.equal(result0, result1)  # one table on every rank
        for result in (result0, result1):
            if isinstance(expected, float):
                assert (math.isnan(expected) and math.isnan(result)) or math.isclose(result, expected, rel_tol=1e-4, abs_tol=1e-5), name
            else:
                assert torch.allclose(result, expected, rtol=1e-4, atol=1e-5), name
    assert seen == {"masked_mean", "explained_variance", "window_sum_variance", "tie_z", "step_clock_table"}
    # Control: a rank's statistic is not its own batch's alone (the ranks' batches differ).
    name, inputs, result = next(call for call in calls[1] if call[0] == "window_sum_variance")
    assert not torch.allclose(p3o_atari.window_sum_variance(*inputs), result)


def test_a_checkpoint_written_under_torchrun_resumes_under_torchrun(launch, tmp_path):
    """Resumed from iteration 3 under torchrun, every rank continues its own envs and random numbers, and the run ends
    bit-identical to the one never interrupted. Resuming it with another world size is refused (exit 2)."""
    out, _, ranks = launch
    shutil.copytree(out / "runs", tmp_path / "runs")
    resumed = torchrun(tmp_path, "p3o_atari.py", "--resume", str(out / "iteration3.pt"), "--no-progress")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed at iteration 3" in resumed.stdout
    uninterrupted, final = torch.load(out / "iteration6.pt", weights_only=True), torch.load(tmp_path / "iteration6.pt", weights_only=True)
    for name, value in uninterrupted["model"].items():
        assert torch.equal(value, final["model"][name]), name
    for name, value in ranks[1]["model"].items():
        assert torch.equal(value, torch.load(tmp_path / "rank1.pt", weights_only=False)["model"][name]), name
    assert torch.equal(uninterrupted["ranks"][0]["envs"]["episode_length"], final["ranks"][0]["envs"]["episode_length"])
    assert final["history"] == uninterrupted["history"]


@pytest.mark.parametrize("world_size", ["1", "3"])
def test_a_checkpoint_resumes_only_with_the_world_size_that_wrote_it(launch, world_size, monkeypatch, capsys):
    out, _, _ = launch
    monkeypatch.setenv("WORLD_SIZE", world_size)
    with pytest.raises(SystemExit) as exit_info:
        p3o_atari.resume_args(p3o_atari.Args(resume=str(out / "iteration3.pt")))
    assert exit_info.value.code == 2
    assert f"written by 2 rank(s), resumed by {world_size}: resume it with the world size that wrote it (torchrun --nproc_per_node 2)" in capsys.readouterr().err


def test_ppo_baseline_under_torchrun(tmp_path):
    """The baseline shares the machinery line for line: one model on both ranks, global statistics."""
    run = torchrun(tmp_path, "ppo_baseline.py", *FLAGS, "--total-timesteps", str(128 * 3))
    assert run.returncode == 0, run.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{rank}.pt", weights_only=False) for rank in (0, 1)]
    for name, value in ranks[0]["model"].items():
        assert torch.equal(value, ranks[1]["model"][name]), name
    for (name, inputs0, result0), (_, inputs1, result1) in zip(ranks[0]["calls"], ranks[1]["calls"]):
        expected = getattr(ppo_baseline, name)(*join(name, [inputs0, inputs1]))
        assert math.isclose(float(result0), float(expected), rel_tol=1e-4, abs_tol=1e-5) or math.isnan(float(expected)), name
    assert {name for name, _, _ in ranks[0]["calls"]} == {"masked_mean", "explained_variance"}


# ---------------------------------------------------------------------------------------------------------
# Bad launches, refused before anything starts
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", SCRIPTS)
def test_num_envs_must_divide_among_the_ranks(script, monkeypatch, capsys):
    module = SCRIPTS[script]
    monkeypatch.setenv("WORLD_SIZE", "3")
    with pytest.raises(SystemExit) as exit_info:
        module.check_args(module.Args(env_id="ocean/delay", num_envs=8))
    assert exit_info.value.code == 2 and "--num-envs 8 must be divisible by the world size 3" in capsys.readouterr().err
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(SystemExit):  # 2 envs x 3 steps a rank: 4 minibatches do not divide it
        module.check_args(module.Args(env_id="ocean/delay", num_envs=8, num_steps=3, num_minibatches=4))
    assert "--num-minibatches 4 must divide each rank's batch" in capsys.readouterr().err
    module.check_args(module.Args(env_id="ocean/delay", num_envs=8))


@pytest.mark.parametrize("script", SCRIPTS)
def test_nccl_needs_a_gpu_per_rank(script, monkeypatch, capsys):
    """Two ranks on a machine with one GPU: refused with NCCL, allowed with P3O_DIST_BACKEND=gloo."""
    module = SCRIPTS[script]
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.delenv("P3O_DIST_BACKEND", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    args = module.Args(env_id="ocean/delay")
    with pytest.raises(SystemExit) as exit_info:
        module.check_args(args)
    assert exit_info.value.code == 2
    assert "2 ranks on this machine share 1 GPU(s), but NCCL needs a GPU per rank: launch --nproc_per_node 1, or let them share with P3O_DIST_BACKEND=gloo" in capsys.readouterr().err
    monkeypatch.setenv("P3O_DIST_BACKEND", "gloo")
    module.check_args(args)
    monkeypatch.setenv("P3O_DIST_BACKEND", "mpi")
    with pytest.raises(SystemExit):
        module.check_args(args)
    assert "P3O_DIST_BACKEND='mpi': nccl or gloo" in capsys.readouterr().err
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")  # one rank a machine, two machines (--nnodes 2): NCCL is fine
    monkeypatch.delenv("P3O_DIST_BACKEND")
    module.check_args(args)


# ---------------------------------------------------------------------------------------------------------
# A plain run: what it computed before torchrun came in, bit for bit
# ---------------------------------------------------------------------------------------------------------
BEFORE = "caf02dd"  # the last commit before the scripts ran under torchrun


def script_before(script, tmp_path):
    """`script` as it was at BEFORE, imported under its own name (skipped where git or that commit is missing)."""
    try:
        text = subprocess.run(["git", "show", f"{BEFORE}:{script}"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"git show {BEFORE}:{script} is unavailable here")
    path = tmp_path / f"before_{script}"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_plain_run_is_unchanged(script, tmp_path, monkeypatch):
    """The same flags through the script before and after: the same parameters and Adam state, bit for bit. P3O at
    lam = 1 against the Monte-Carlo advantage of that commit (its K = H, nothing bootstrapped): both are the rewards'."""
    monkeypatch.chdir(tmp_path)
    states = []
    for when, module in (("before", script_before(script, tmp_path)), ("now", SCRIPTS[script])):
        own = dict(horizon=16, **(dict(bootstrap_after=16) if when == "before" else dict(td_lambda=1.0))) if script == "p3o_atari.py" else {}
        args = module.Args(env_id="ocean/delay", num_envs=8, num_steps=16, num_minibatches=2, update_epochs=2, learning_rate=1e-2, total_timesteps=128 * 4, progress=False, seed=3, **own)
        result = module.train(args)
        states.append(torch.load(tmp_path / "runs" / result["run"] / "checkpoint.pt", weights_only=True))
    before, after = states
    for name, value in before["model"].items():
        assert torch.equal(value, after["model"][name]), name
    for state_before, state_after in zip(before["optimizer"]["state"].values(), after["optimizer"]["state"].values()):
        for key in state_before:
            assert torch.equal(torch.as_tensor(state_before[key]), torch.as_tensor(state_after[key])), key
    # the games' history: the last 20 returns as before; the scores now go by iteration, a (sum, count) each
    assert after["ranks"] == [] and before["history"][0] == after["history"][0]
    assert sum(total for total, _ in after["history"][1]) == sum(before["history"][1])
