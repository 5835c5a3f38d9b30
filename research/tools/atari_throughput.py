"""SPS of p3o_atari.py against ppo_baseline.py, side by side in one run (the bar: P3O at 0.95x or more).

    python research/tools/atari_throughput.py --horizon 128 --iterations 4 --repeats 3

The two scripts run one after the other, alternating, `--repeats` times each, with the same env, seed and
hyperparameters. A run's SPS is the steady-state rate between its first and its last logged iteration (start-up
and the first iteration excluded), read from the wall times of its TensorBoard scalars. Reports the medians, their
ratio and the per-phase seconds; writes research/results/atari_throughput.csv.
"""
import argparse
import csv
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from atari_runs import ROOT, finish, scalars, start  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-id", default="Breakout-v5")
    parser.add_argument("--horizon", type=int, default=128)
    parser.add_argument("--iterations", type=int, default=4, help="iterations per run (8 envs x 128 steps each)")
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    scripts = {"ppo_baseline.py": [], "p3o_atari.py": ["--horizon", options.horizon]}
    rows = []
    for repeat in range(options.repeats):
        for script, extra in scripts.items():
            flags = ["--env-id", options.env_id, "--total-timesteps", options.iterations * 1024, "--seed", 1, *extra]
            run_dir = finish(start(script, flags))
            sps = scalars(run_dir, "charts/SPS")
            (wall0, step0, _), (wall1, step1, _) = sps[0], sps[-1]
            fractions = {tag.split("/")[1][: -len("_fraction")]: scalars(run_dir, tag)[-1][2] for tag in ("perf/rollout_fraction", "perf/advantage_fraction", "perf/update_fraction")}
            rows.append({"script": script, "repeat": repeat, "SPS": round((step1 - step0) / (wall1 - wall0), 1), **{k: round(v, 4) for k, v in fractions.items()}, "run": run_dir.name})
            print(rows[-1], flush=True)
    out = ROOT / "research" / "results" / "atari_throughput.csv"
    with open(out, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    median = {script: statistics.median(r["SPS"] for r in rows if r["script"] == script) for script in scripts}
    print(f"\n{options.env_id}, medians of {options.repeats} alternating runs of {options.iterations} iterations ({out}):")
    for script in scripts:
        phases = {k: statistics.median(r[k] for r in rows if r["script"] == script) for k in ("rollout", "advantage", "update")}
        print(f"  {script:<18} {median[script]:>8.1f} SPS   fractions: " + ", ".join(f"{k} {v:.3f}" for k, v in phases.items()))
    ratio = median["p3o_atari.py"] / median["ppo_baseline.py"]
    print(f"  P3O / PPO SPS ratio: {ratio:.3f} (bar: >= 0.95, {'met' if ratio >= 0.95 else 'NOT MET'})")


if __name__ == "__main__":
    main()
