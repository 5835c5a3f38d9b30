"""The GPU run book (benchmarks/gpu_check.py) runs end to end at smoke sizes, so it cannot rot between the sessions
that have a GPU; and its checks can fail."""
import json
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_check  # noqa: E402
from advantage_impls import host_advantage  # noqa: E402


def test_smoke_run_measures_every_step_and_says_what_it_skipped(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), str(tmp_path / "out"), "--smoke"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    report = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    steps = report["steps"]
    assert list(steps) == gpu_check.STEPS and report["smoke"]
    assert not (tmp_path / "runs").exists()  # the training runs' folders went to a scratch directory
    assert steps["versions"]["torch"] == torch.__version__ and "envpool" in steps["versions"]

    parity = steps["parity"]
    assert parity["status"] == "ok" and parity["cases"] >= 40
    assert 0.0 <= parity["max_abs_difference"] < 1e-4

    kernel = steps["kernel"]
    assert kernel["status"] == "ok" and kernel["mu_bytes"] == 4 * kernel["T"] * kernel["N"] * kernel["H"]
    assert kernel["kernel_GBps"] > 0 and kernel["copy_GBps"] > 0 and kernel["twin_ms"] > 0

    ocean = steps["ocean"]["runs"]
    assert [row["case"] for row in ocean] == ["p3o_ocean.py H=32", "p3o_ocean.py H=128", "ppo_baseline.py"] * 2
    assert [row["num_envs"] for row in ocean] == [8] * 3 + [16] * 3
    for row in ocean:
        assert row["SPS"] > 0 and row["steps"] == 2 * row["num_envs"] * row["num_steps"]
        assert abs(sum(row["phase_share"].values()) - 1.0) < 1e-3 and {"rollout", "advantage", "update"} <= set(row["phase_share"])
    assert all(row["over_ppo"] > 0 for row in ocean if row["case"].startswith("p3o"))

    atari = steps["atari"]
    assert atari["status"] == "ok" and set(atari["median_SPS"]) == {"ppo_baseline.py", "p3o_atari.py --horizon 128"}
    assert all(sps > 0 for sps in atari["median_SPS"].values())

    log = (tmp_path / "out" / "gpu_check.log").read_text()
    assert all(f"== {name}" in log for name in gpu_check.STEPS)
    if not torch.cuda.is_available():
        assert parity["kernel"] == kernel["kernel"] == "host build (g++)"
        assert steps["sanitizer"] == {"status": "skipped", "reason": "no CUDA", "seconds": 0.0} and steps["ncu"]["status"] == "skipped"
        assert any(line.startswith("the CuPy kernel: no CUDA") for line in report["skipped"]) and "targets" not in report


def book(tmp_path, **options):
    defaults = dict(smoke=True, budget_s=540, iterations=2, repeats=1, ocean_env="squared", tool_timeout_s=10)
    return gpu_check.RunBook(tmp_path, Namespace(**{**defaults, **options}))


def test_a_failing_step_is_recorded_and_the_next_still_runs(tmp_path):
    run_book = book(tmp_path)

    def broken(_):
        raise ValueError("no such thing")

    run_book.run("broken", broken)
    assert json.loads((tmp_path / "gpu_check.json").read_text())["steps"]["broken"]["error"] == "ValueError: no such thing"
    run_book.run("versions", gpu_check.versions_step)
    steps = json.loads((tmp_path / "gpu_check.json").read_text())["steps"]
    assert steps["broken"]["status"] == "failed" and steps["versions"]["status"] == "ok"
    assert "Traceback" in (tmp_path / "gpu_check.log").read_text()


def test_steps_past_the_budget_are_skipped_not_started(tmp_path):
    run_book = book(tmp_path, budget_s=-1)
    run_book.run("versions", gpu_check.versions_step)
    assert run_book.results["steps"]["versions"]["status"] == "skipped"
    assert run_book.results["skipped"] == ["versions: out of time (--budget-s -1)"]


def test_parity_fails_on_a_kernel_that_is_slightly_off(tmp_path, monkeypatch):
    def off_by_a_little(rewards, terminals, *inputs):
        return host_advantage(rewards, terminals, *inputs) + 1e-3 * (rewards > 0)

    def reads_past_the_terminal(rewards, terminals, *inputs):
        return host_advantage(rewards, torch.zeros_like(terminals), *inputs)

    for wrong in (off_by_a_little, reads_past_the_terminal):
        monkeypatch.setattr(gpu_check, "kernel_under_test", lambda _, wrong=wrong: (wrong, wrong.__name__))
        record = gpu_check.parity_step(book(tmp_path))
        assert record["status"] == "failed" and record["outside_tolerance"], wrong.__name__
