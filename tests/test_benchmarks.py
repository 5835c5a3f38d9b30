"""The evidence studies' machinery (benchmarks/ocean_studies.py): fair PPO settings, scores, the run cache."""
import gzip
import re
import json
import sys
from dataclasses import fields
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "research" / "tools"))  # the one-off tools (sigma_pairs)
import ocean_studies  # noqa: E402
import p3o_ocean  # noqa: E402
import ppo_baseline  # noqa: E402


def test_ppo_runs_share_every_hyperparameter_with_p3o():
    """PPO on the Ocean suite differs from P3O only in the advantage and value head: every field the two Args
    share is P3O's default, and the env, seed, budget and options are the run's."""
    run = ocean_studies.spec("ppo", "delay", 3, 1.0, gamma=0.9, delay=64)
    args, train = ocean_studies.ppo_args(run)
    assert train is ppo_baseline.train
    p3o = p3o_ocean.Args()
    shared = [f.name for f in fields(ppo_baseline.Args) if hasattr(p3o, f.name) and f.name not in ("exp_name", "env_id", "total_timesteps", "seed", "progress", "delay")]
    assert {"learning_rate", "num_envs", "num_steps", "num_minibatches", "update_epochs", "clip_coef", "ent_coef"} <= set(shared)
    for name in shared:
        assert getattr(args, name) == getattr(p3o, name), name
    assert (args.env_id, args.seed, args.gamma, args.delay) == ("ocean/delay", 3, 0.9, 64)
    assert args.total_timesteps == ocean_studies.BUDGETS["delay"] * 3 // 2  # D > 32: 1.5x the budget


def test_p3o_specs_name_the_default_horizon_so_studies_share_runs():
    plain = ocean_studies.spec("p3o", "mixed", 1, 1.0)
    explicit = ocean_studies.spec("p3o", "mixed", 1, 1.0, horizon=p3o_ocean.Args.horizon)
    assert ocean_studies.key(plain) == ocean_studies.key(explicit)
    assert ocean_studies.key(plain) != ocean_studies.key(ocean_studies.spec("p3o", "mixed", 2, 1.0))


def test_final_score_and_steps_to_solve():
    curve = [(step, score) for step, score in zip(range(1, 21), [0.1] * 15 + [0.5, 0.95, 0.8, 1.0, 0.9])]
    assert ocean_studies.final_score(curve) == pytest.approx(0.95)  # the last 10%: 2 of 20 iterations
    assert ocean_studies.final_score(curve[:5]) == pytest.approx(0.1)  # at least the last one


def test_runs_are_cached_and_resumable(tmp_path, monkeypatch):
    """Two tiny runs train once, land in the runs file with their curves, and are read back, not trained again."""
    monkeypatch.setattr(ocean_studies, "RESULTS", tmp_path)
    monkeypatch.setattr(ocean_studies, "RUNS_FILE", tmp_path / "runs.jsonl.gz")
    monkeypatch.setattr(ocean_studies, "BUDGETS", dict(ocean_studies.BUDGETS, bandit=2 * 256 * 128))
    specs = [ocean_studies.spec("p3o", "bandit", 1, 1.0, horizon=8), ocean_studies.spec("ppo", "bandit", 1, 1.0, gamma=0.9)]
    rows = ocean_studies.run_all(specs, workers=1)
    lines = gzip.decompress((tmp_path / "runs.jsonl.gz").read_bytes()).decode().splitlines()
    assert len(lines) == 2
    for row in rows:
        assert [step for step, _ in row["curve"]] == [256 * 128, 2 * 256 * 128]
        assert 0.0 <= row["score"] <= 1.0 and row["SPS"] > 0
    assert len(rows[0]["weights"]) == 8 and max(rows[0]["weights"]) == pytest.approx(1.0)  # P3O: its weight curve
    again = ocean_studies.run_all(specs, workers=1)
    assert again == rows and len(gzip.decompress((tmp_path / "runs.jsonl.gz").read_bytes()).decode().splitlines()) == 2
    assert json.loads(lines[0])["script"] == ocean_studies.script_hash(json.loads(lines[0])["algo"])


def test_a_run_cache_cut_mid_write_keeps_its_whole_rows_and_is_rewritten(tmp_path, monkeypatch):
    """A study killed while appending leaves a gzip member without its end: the rows before it are read, and the file
    is rewritten whole so that the next study's rows are readable after them."""
    runs_file = tmp_path / "runs.jsonl.gz"
    monkeypatch.setattr(ocean_studies, "RUNS_FILE", runs_file)
    rows = [dict(ocean_studies.spec("p3o", "bandit", seed, 1.0, horizon=8), score=0.5) for seed in (1, 2)]
    runs_file.write_bytes(gzip.compress(json.dumps(rows[0]).encode() + b"\n") + gzip.compress(json.dumps(rows[1]).encode() + b"\n")[:-12])
    assert list(ocean_studies.load_runs().values()) == rows[:1]
    assert gzip.decompress(runs_file.read_bytes()).decode().splitlines() == [json.dumps(rows[0])]


def test_rows_are_matched_on_their_options_not_on_other_fields():
    row = {"algo": "p3o", "env": "delay", "options": {"horizon": 128, "window_loss_coef": 0.25}, "horizon": 16.0}
    assert ocean_studies.seeds_of([row], env="delay", horizon=128) == [row]
    assert ocean_studies.seeds_of([row], env="delay", horizon=16) == []


def test_probes_name_ocean_envs_and_their_flags():
    defaults = p3o_ocean.Args()
    for name, (env, options, steps) in ocean_studies.PROBES.items():
        assert env in p3o_ocean.OCEAN_ENVS and steps % (defaults.num_envs * defaults.num_steps) == 0, name
        assert all(hasattr(defaults, flag) and getattr(defaults, flag) != value for flag, value in options.items()), name
    run = ocean_studies.spec("ppo", "delay", 1, 1.0, 393_216, delay=100, gamma=0.99)
    assert run["total_timesteps"] == 393_216 and ocean_studies.spec("ppo", "delay", 1, 0.5, 393_216)["total_timesteps"] == 196_608


def test_probe_overrides_reach_p3o_and_the_env_options_reach_ppo():
    """`probes --set`: an override replaces the probe's own option for both algorithms (the noise-free probes), a P3O
    flag reaches P3O only, and without overrides the runs are the probe's own (so the cached rows still match)."""
    plain = ocean_studies.probe_plan("noisy_delay", [1, 2], 1.0, {})
    assert plain["P3O H=128"][1]["options"] == {"delay": 16, "horizon": 128, "reward_noise": 3.0}
    assert plain["PPO 0.9"][0]["options"] == {"delay": 16, "gamma": 0.9, "reward_noise": 3.0}
    plan = ocean_studies.probe_plan("noisy_delay", [1, 2], 1.0, {"reward_noise": 0.0, "clock": False})
    assert [run["options"] for run in plan["P3O H=32"]] == [{"clock": False, "delay": 16, "horizon": 32, "reward_noise": 0.0}] * 2
    assert all(run["options"] == {"delay": 16, "gamma": gamma, "reward_noise": 0.0} for gamma in ocean_studies.GAMMAS for run in plan[f"PPO {gamma}"])


def test_confidence_intervals():
    mean, half = ocean_studies.ci95([1.0, 2.0, 3.0, 4.0])  # std 1.291, t(3) = 3.182
    assert mean == pytest.approx(2.5) and half == pytest.approx(3.182 * 1.2909944 / 2, rel=1e-4)
    gap, half = ocean_studies.difference_ci95([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])  # Welch df = 2: t = 4.303
    assert gap == pytest.approx(2.0) and half == pytest.approx(4.303 * 1.0 / 3**0.5, rel=1e-4)
    gap, half = ocean_studies.difference_ci95([0.5] * 10, [0.25] * 10)
    assert (gap, half) == (0.25, 0.0)


def test_probe_ablations_each_change_real_fields_of_the_default():
    """A misspelt field or a value equal to the default would silently rerun the default under another label."""
    defaults = p3o_ocean.Args()
    labels = [label for label, _ in ocean_studies.PROBE_ABLATIONS]
    assert labels[0] == "default" and ocean_studies.PROBE_ABLATIONS[0][1] == {} and len(set(labels)) == len(labels)
    for label, options in ocean_studies.PROBE_ABLATIONS[1:]:
        assert options and all(hasattr(defaults, field) for field in options), label
        assert any(getattr(defaults, field) != value for field, value in options.items()), label


def test_phase_times_reads_each_phase_per_iteration(tmp_path, monkeypatch):
    """benchmarks/phase_times.py: one iteration of each algorithm, its phases in seconds per iteration, the P3O phases
    the PPO run has too, and the run folders left in a scratch folder, not in the caller's."""
    import phase_times

    monkeypatch.chdir(tmp_path)
    steps = p3o_ocean.Args().num_envs * p3o_ocean.Args().num_steps  # one iteration at the studies' sizes
    ppo = phase_times.phase_times(ocean_studies.spec("ppo", "bandit", 1, 1.0, steps))
    p3o = phase_times.phase_times(ocean_studies.spec("p3o", "bandit", 1, 1.0, steps, horizon=8))
    assert {"rollout", "advantage", "update"} <= ppo.keys()
    assert ppo.keys() == p3o.keys() and all(seconds > 0 for seconds in p3o.values())
    assert list(tmp_path.iterdir()) == []


def test_gpu_breakout_plots_each_script_from_its_csv(tmp_path, monkeypatch, capsys):
    import gpu_breakout

    csv_file = tmp_path / "gpu_breakout_s1.csv"
    rows = ["script,step,episodic_return"] + [f"{script},{step},{value}" for script, value in (("p3o_atari", 2.0), ("ppo_baseline", 5.0))
                                               for step in range(10_000, 210_000, 10_000)]
    csv_file.write_text("\n".join(rows) + "\n")
    monkeypatch.setattr(gpu_breakout, "CSV", csv_file)
    monkeypatch.setattr(sys, "argv", ["gpu_breakout.py"])
    gpu_breakout.main()
    printed = capsys.readouterr().out
    assert "p3o_atari.py --horizon 128   100k 2.0  200k 2.0" in printed and "ppo_baseline.py              100k 5.0  200k 5.0" in printed
    assert csv_file.with_suffix(".png").stat().st_size > 10_000


def test_gpu_breakout_seed_runs_take_the_last_quarter_and_refuse_a_short_run(tmp_path, monkeypatch, capsys):
    import gpu_breakout
    from torch.utils.tensorboard import SummaryWriter

    def run(name, seed, last_step, late_value, last_game=None):
        with SummaryWriter(tmp_path / "runs" / f"Breakout-v5__{name}__{seed}__1795651710") as writer:
            for step in range(1024, last_step + 1, 1024):
                writer.add_scalar("charts/SPS", 500, step)
                if step <= (last_game or last_step):
                    writer.add_scalar("charts/episodic_return", late_value if step > 0.75 * 20_480 else 0.0, step)

    run("p3o_atari", 5, 20_480, 4.0)
    run("p3o_atari", 6, 20_480, 6.0, last_game=18_432)  # complete, though no game ended in its last two iterations
    run("ppo_baseline", 5, 20_480, 3.0)
    monkeypatch.setattr(gpu_breakout, "RESULTS", tmp_path)
    gpu_breakout.seed_runs(tmp_path / "runs", 20_480, "seeds.csv")
    printed = capsys.readouterr().out
    assert "p3o_atari       5.00 +- 1.41   per seed [5, 6]: 4.00, 6.00" in printed
    assert "ppo_baseline    3.00 +- n/a    per seed [5]: 3.00" in printed  # one seed: no std, and no NaN
    assert (tmp_path / "seeds.csv").read_text().count("\n") == 1 + 3 * 20 - 2
    run("p3o_value1", 5, 15_360, 4.0)  # stopped at 3/4 of its steps: no final return
    with pytest.raises(SystemExit, match="stops at step 15360, short of 20480"):
        gpu_breakout.seed_runs(tmp_path / "runs", 20_480, None)


def test_breakout_figure_reads_every_seed_and_refuses_a_missing_one(tmp_path, monkeypatch, capsys):
    import breakout_figure

    monkeypatch.setattr(breakout_figure, "FIGURE", tmp_path / "breakout.png")
    breakout_figure.main()  # the committed CSVs: the figures the README and research/ablations.md quote
    printed = capsys.readouterr().out
    assert "p3o_atari.py --horizon 128 (default)   4.64 +- 1.52 (std), 95% CI +- 1.09, 10 seeds" in printed
    assert "before the far targets                 4.48 +- 1.62 (std)" in printed
    assert "p3o_atari.py at eeb93b1 (the bar's)    4.61 +- 1.33 (std), 95% CI +- 0.62, 20 seeds" in printed
    assert "ppo_baseline.py                        4.42 +- 1.28 (std), 95% CI +- 0.92, 10 seeds" in printed
    assert "p3o_atari.py --horizon 128 (default)   against PPO: +0.22 +- 1.33" in printed
    assert (tmp_path / "breakout.png").stat().st_size > 20_000
    with pytest.raises(SystemExit, match=r"has no ppo_baseline.py '' rows of seeds \[11\]"):
        breakout_figure.curves([(breakout_figure.CSV_NAME.format("ppo_s9"), "ppo_baseline.py", "", [9, 11])])


def test_sigma_pairs_counts_the_known_zeros_that_the_value_nll_keeps(tmp_path, monkeypatch):
    """research/tools/sigma_pairs.py on a p3o_atari.py checkpoint of forage, whose episodes end inside the rollout:
    every real decision keeps offset 0, inside its episode; far offsets hold known zeros; the sigmas are finite."""
    import p3o_atari
    import sigma_pairs

    monkeypatch.chdir(tmp_path)
    args = p3o_atari.Args(env_id="ocean/forage", horizon=16, num_envs=8, num_steps=32, num_minibatches=2, update_epochs=1,
                          total_timesteps=8 * 32 * 2, progress=False)
    result = p3o_atari.train(args)
    out = sigma_pairs.sigma_pairs(tmp_path / "runs" / result["run"] / "checkpoint.pt", rollouts=2)
    assert 0 < out["pairs"][0] <= 2 * 32 * 8 and out["known_zero_share"][0] == 0 and out["inside_pairs"][0] == out["pairs"][0]
    share = out["known_zero_share"]  # a window past its terminal stays past it, and fewer pairs reach far: it can only grow
    assert (share[1:] >= share[:-1] - 1e-6).all() and share[15] > 0.2  # forage's episodes are a few steps long
    assert (out["pairs"] >= out["inside_pairs"]).all() and (out["pairs"][1:] <= out["pairs"][:-1]).all()
    assert all(torch.isfinite(out[key]).all() for key in ("sigma_learned", "sigma_kept", "sigma_inside"))


def test_flushing_runs_a_script_as_python_would_with_tensorboard_flushing_every_10_s(tmp_path):
    """benchmarks/flushing.py (gpu_breakout_seeds.sh's wrapper): the script runs as __main__ with its own arguments
    and its folder first on sys.path (a sibling module imports), and its SummaryWriter flushes every 10 s, not 120."""
    import subprocess

    (tmp_path / "sibling.py").write_text("VALUE = 7\n")
    (tmp_path / "script.py").write_text(
        "import sys\nfrom torch.utils.tensorboard import SummaryWriter\nimport sibling\n"
        "if __name__ == '__main__':\n"
        "    writer = SummaryWriter(sys.argv[2])\n"
        "    print(sys.argv[1], sibling.VALUE, writer.flush_secs)\n    writer.close()\n"
    )
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "flushing.py"), str(tmp_path / "script.py"), "hello", str(tmp_path / "runs")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["hello", "7", "10"]


def test_speed_ab_runs_each_checkout_and_reports_ratios_to_the_first(tmp_path):
    """benchmarks/speed_ab.py: one throughput run per configuration, env and repeat, in fresh processes; the first
    configuration is the ratios' base; a ROOT that is not a checkout is refused before anything runs."""
    import subprocess

    script = str(ROOT / "benchmarks" / "speed_ab.py")
    bad = subprocess.run([sys.executable, script, f"A={tmp_path}"], capture_output=True, text=True)
    assert bad.returncode == 2 and "expected LABEL=ROOT[:ALGO]" in bad.stderr
    done = subprocess.run([sys.executable, script, f"PPO={ROOT}:ppo", "--repeats", "1", "--envs", "squared"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = [line for line in done.stdout.splitlines() if line.startswith("squared")]
    assert len(summary) == 1 and "1.000x PPO" in summary[0], done.stdout


def test_minatar_export_takes_the_last_tenth_and_refuses_a_short_run(tmp_path, monkeypatch):
    """A finished run's final return is the mean of the returns logged past 90% of the steps; a run that stopped
    short is refused with the step it reached, not exported as if it were done."""
    import minatar_study
    from torch.utils.tensorboard import SummaryWriter

    monkeypatch.setattr(minatar_study, "RUNS_CSV", tmp_path / "runs.csv")
    monkeypatch.setattr(minatar_study, "CURVES_CSV", tmp_path / "curves.csv")
    for name, last_step in (("MinAtar_Breakout-v1__ppo_0.9__3__1", 100_000), ("MinAtar_Breakout-v1__ppo_0.9__4__1", 50_000)):
        with SummaryWriter(tmp_path / name) as writer:
            for step in range(10_000, last_step + 1, 10_000):
                writer.add_scalar("charts/SPS", 1000.0, step)
                writer.add_scalar("charts/episodic_return", step / 10_000, step)
    assert minatar_study.run_key(tmp_path / "MinAtar_Breakout-v1__ppo_0.9__3__1") == ("Breakout", "ppo_0.9", "3")
    row = minatar_study.export(tmp_path / "MinAtar_Breakout-v1__ppo_0.9__3__1", "Breakout", "ppo_0.9", "3", 100_000, "here")
    assert row["final_return"] == pytest.approx(10.0)  # only the step-100k return lies past 90k
    with pytest.raises(ValueError, match="ended at step 50,000"):
        minatar_study.export(tmp_path / "MinAtar_Breakout-v1__ppo_0.9__4__1", "Breakout", "ppo_0.9", "4", 100_000, "here")
    assert [r["seed"] for r in minatar_study.read_rows(tmp_path / "runs.csv")] == ["3"]


def test_minatar_run_reports_a_failed_run_and_goes_on(tmp_path, monkeypatch, capsys):
    """A training run that exits non-zero raises with its log's path; `run` reports it, trains and exports the runs
    queued behind it, and exits non-zero naming the failed run."""
    import types

    import minatar_study

    monkeypatch.setitem(minatar_study.ARMS, "broken", ("no_such_script.py", []))
    with pytest.raises(RuntimeError, match=r"Breakout broken seed 1 exited with status [1-9].*Breakout_broken_s1\.log"):
        minatar_study.train("Breakout", "broken", "1", 1000, tmp_path / "runs")
    assert "no_such_script.py" in (tmp_path / "runs" / "Breakout_broken_s1.log").read_text()

    def train(game, arm, seed, *rest):
        if seed == "1":
            raise RuntimeError(f"{game} {arm} seed {seed} exited with status 1")
        return tmp_path / seed
    monkeypatch.setattr(minatar_study, "train", train)
    monkeypatch.setattr(minatar_study, "export", lambda folder, *rest: {"final_return": 7.0, "sps": 100.0})
    monkeypatch.setattr(minatar_study, "RUNS_CSV", tmp_path / "runs.csv")
    opts = types.SimpleNamespace(games=["Breakout"], arms=["p3o_h128"], seeds=[1, 2, 3], steps=1000, runs=tmp_path,
                                 tag="", flags="", machine="here", workers=1, delay=0)
    with pytest.raises(SystemExit, match="1 of 3 runs failed or did not export: Breakout p3o_h128 1$"):
        minatar_study.command_run(opts)
    out = capsys.readouterr().out
    assert "Breakout p3o_h128 seed 1 exited with status 1" in out
    assert "Breakout p3o_h128 seed 2: 7.00" in out and "Breakout p3o_h128 seed 3: 7.00" in out


def test_minatar_report_compares_p3o_with_each_games_best_gamma(tmp_path, monkeypatch, capsys):
    """The report's "best PPO" is, game by game, the gamma with the highest mean final return, and P3O's score
    normalised by it is the mean over games of P3O's mean over that PPO's mean."""
    import minatar_study

    finals = {("Asterix", "ppo_0.9"): [20.0, 22.0, 24.0], ("Asterix", "ppo_0.99"): [10.0, 12.0, 14.0], ("Asterix", "p3o_h128"): [11.0, 11.0, 11.0],
              ("Freeway", "ppo_0.99"): [60.0, 62.0, 64.0], ("Freeway", "ppo_0.999"): [30.0, 31.0, 32.0], ("Freeway", "p3o_h128"): [31.0, 31.0, 31.0]}
    rows = [{"game": g, "arm": a, "seed": str(s), "steps": 5_000_000, "final_return": v, "sps": 1000.0, "explained_variance": "", "tied_offsets": "", "machine": "here"}
            for (g, a), values in finals.items() for s, v in enumerate(values, 1)]
    minatar_study.append_rows(tmp_path / "minatar_runs.csv", rows, minatar_study.FIELDS)
    out = report_output(tmp_path, monkeypatch, capsys)
    assert "Asterix: p3o_h128 - ppo_0.9 (best PPO) = -11.00" in out
    assert "Freeway: p3o_h128 - ppo_0.99 (best PPO) = -31.00" in out
    assert "p3o_h128: mean score normalised by each game's best PPO gamma (ppo_0.9, ppo_0.99) 0.500" in out  # (11/22 + 31/62) / 2
    assert "p3o_h128: mean PPO(0.99)-normalised score over 2 games 0.708" in out  # (11/12 + 31/62) / 2


def test_minatar_delay_study_names_its_runs_and_reports_against_ppos_best_arm(tmp_path, monkeypatch, capsys):
    """`--delay K`: the runs train on envs/delayed.py's id, their folders are told apart from the game as it ships and
    from other delays, and `report --delay K` normalises P3O game by game by PPO at 0.99 / 0.95 and by its best arm."""
    import minatar_study

    assert minatar_study.arm_command("Breakout", "ppo_0.99_lam08", 100, delay=32)[1:3] == ["--env-id", "envs.delayed:MinAtar/Breakout-Delay32-v1"]
    assert minatar_study.arm_command("Breakout", "ppo_0.99_lam08", 100)[-4:] == ["--gamma", "0.99", "--gae-lambda", "0.8"]
    late = tmp_path / "envs.delayed_MinAtar_SpaceInvaders-Delay32-v1__p3o_h128__2__1"
    assert minatar_study.run_key(late, 32) == ("SpaceInvaders", "p3o_h128", "2")
    assert minatar_study.run_key(late, 96) is None and minatar_study.run_key(late) is None
    assert minatar_study.run_key(tmp_path / "MinAtar_SpaceInvaders-v1__p3o_h128__2__1", 32) is None
    finals = {("Asterix", "ppo_0.99"): [10.0, 14.0], ("Asterix", "ppo_0.99_lam08"): [20.0, 24.0], ("Asterix", "p3o_h128"): [11.0, 11.0],
              ("Freeway", "ppo_0.99"): [60.0, 64.0], ("Freeway", "ppo_0.999"): [30.0, 32.0], ("Freeway", "p3o_h128"): [31.0, 31.0],
              ("Freeway", "p3o_h32"): [21.0, 23.0]}
    rows = [{"game": g, "arm": a, "seed": str(s), "steps": 1_998_848, "final_return": v, "sps": 1000.0, "explained_variance": "", "tied_offsets": "", "machine": "here"}
            for (g, a), values in finals.items() for s, v in enumerate(values, 1)]
    minatar_study.append_rows(tmp_path / "minatar_runs.csv", rows, minatar_study.FIELDS)
    monkeypatch.setattr(sys, "argv", ["minatar_study.py", "report", "--delay", "32", "--results", str(tmp_path)])
    for name in ("RESULTS", "RUNS_CSV", "CURVES_CSV", "WEIGHTS_CSV"):
        monkeypatch.setattr(minatar_study, name, getattr(minatar_study, name))
    minatar_study.main()
    out = capsys.readouterr().out
    assert "Every reward 32 steps late, 2M steps" in out
    assert "| PPO's best arm | 22.00 +- 25.41 (0.99 / 0.8; 2) | 62.00 +- 25.41 (0.99 / 0.95; 2) |" in out
    assert "P3O H = 128: 0.500 [" in out  # (11/22 + 31/62) / 2
    assert "Asterix: p3o_h128 - ppo_0.99_lam08 (best PPO) = -11.00" in out and "Freeway: H = 128 - H = 32 = +9.00" in out


def test_ocean_rekey_keys_a_commit_as_the_cache_does():
    """benchmarks/ocean_rekey.py computes an old commit's cache keys from its text: for the committed scripts they are
    the keys ocean_studies gives them."""
    import subprocess

    import ocean_rekey

    committed = {name: subprocess.run(["git", "show", f"HEAD:{name}"], cwd=ROOT, capture_output=True, check=True).stdout
                 for name in ("p3o_ocean.py", "ppo_baseline.py")}
    if any(committed[name] != (ROOT / name).read_bytes() for name in committed):
        pytest.skip("the scripts have uncommitted changes: HEAD's keys are not today's")  # a developer's tree, not CI's
    assert ocean_rekey.old_hashes("HEAD") == {algo: ocean_studies.script_hash(algo) for algo in ("p3o", "ppo")}


def test_minatar_report_prints_the_readmes_table_and_score_from_the_committed_runs(tmp_path, monkeypatch, capsys):
    """`minatar_study.py report` on the committed CSVs prints the README's table of today's default and P3O's score
    normalised by PPO's best arm (0.660 at H = 128) and by PPO at 0.99 / 0.95 (0.890); its figures go to tmp_path."""
    import shutil

    for name in ("minatar_runs.csv", "minatar_curves.csv", "minatar_weights.csv"):
        shutil.copy(ROOT / "benchmarks" / "results" / name, tmp_path / name)
    out = report_output(tmp_path, monkeypatch, capsys)
    assert "| P3O H = 128 | 23.70 +- 4.02 (5) | 8.20 +- 3.99 (4) | 60.20 +- 0.69 (4) | 9.17 +- 7.53 (5) | 78.11 +- 20.15 (3) |" in out
    assert "| PPO's best arm | 29.16 +- 6.01 (0.99 / 0.8; 3) |" in out
    scores = re.search(r"P3O H = 128: ([\d.]+) \[([\d.]+), ([\d.]+)\] by PPO's best arm, ([\d.]+) \[", out)
    assert scores, out
    point, low, high, by_099 = (float(scores.group(i)) for i in (1, 2, 3, 4))
    assert abs(point - 0.660) <= 0.0005 and low < point < high
    assert abs(by_099 - 0.8895) <= 0.001
    assert (tmp_path / "minatar_curves.png").exists()


def report_output(results, monkeypatch, capsys):
    """What `python benchmarks/minatar_study.py report --results RESULTS` prints. main() points the module's paths at
    --results: the monkeypatch puts them back after the test."""
    import minatar_study

    for name in ("RESULTS", "RUNS_CSV", "CURVES_CSV", "WEIGHTS_CSV"):
        monkeypatch.setattr(minatar_study, name, getattr(minatar_study, name))
    monkeypatch.setattr(sys, "argv", ["minatar_study.py", "report", "--results", str(results)])
    minatar_study.main()
    return capsys.readouterr().out
