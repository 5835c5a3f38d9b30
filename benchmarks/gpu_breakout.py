"""The GPU Breakout runs of benchmarks/gpu_train.sh as a CSV and a figure (no training here).

    python benchmarks/gpu_breakout.py --runs gpu_runs/runs     # read the TensorBoard logs, write the CSV, plot
    python benchmarks/gpu_breakout.py                          # plot from the CSV in benchmarks/results
    python benchmarks/gpu_breakout.py --seed-runs RUNS --steps 200000 --out NAME.csv   # gpu_breakout_seeds.sh's runs

Writes benchmarks/results/gpu_breakout_s1.csv (script, step, episodic return: one row per finished game, as each
script logs it) and gpu_breakout_s1.png (each game's return, faint, and its mean over the 100k steps before each
point), and prints that mean every 100k steps. With --seed-runs: each run's final return as
benchmarks/atari_learning.py measures it (the mean over the games that ended in the last quarter of the steps), then
mean +- std over seeds for each variant (the run's --exp-name); --out writes every logged iteration's return in
atari_learning.py's CSV format.

Makes: research/gpu_log.md's GPU Breakout figure (gpu_breakout_s1.png) and, with --seed-runs, the CSVs of the README's and
research/gpu_log.md's 368k and 614k rows. Time: seconds (no training).
"""
import argparse
import csv
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CSV = RESULTS / "gpu_breakout_s1.csv"
WINDOW = 100_000
COLOURS = {"p3o_atari": "tab:red", "ppo_baseline": "tab:blue"}
LABELS = {"p3o_atari": "p3o_atari.py --horizon 128", "ppo_baseline": "ppo_baseline.py"}


def export(runs):
    sys.path.insert(0, str(HERE))
    from atari_runs import scalars

    rows = []
    for run in sorted(Path(runs).glob("Breakout-v5__*__1__*")):
        script = run.name.split("__")[1]
        rows += [(script, step, value) for _, step, value in scalars(run, "charts/episodic_return")]
    if not rows:
        raise SystemExit(f"gpu_breakout.py: no Breakout-v5 seed-1 runs with returns under {runs}")
    with open(CSV, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["script", "step", "episodic_return"])
        writer.writerows(rows)


def seed_runs(runs, steps, out):
    """Final returns of gpu_breakout_seeds.sh's runs (folders Breakout-v5__NAME__SEED__TIME), per variant and seed."""
    sys.path.insert(0, str(HERE))
    from atari_runs import last_quarter, scalars

    rows, final = [], {}
    for run in sorted(Path(runs).glob("Breakout-v5__*")):
        _, name, seed, _ = run.name.split("__")
        curve = [(step, value) for _, step, value in scalars(run, "charts/episodic_return")]
        # complete when its last iteration logged, whether or not a game ended in it (charts/SPS: every iteration)
        last_step = max((step for _, step, _ in scalars(run, "charts/SPS")), default=0)
        if not curve or last_step < steps - 1024:
            raise SystemExit(f"gpu_breakout.py: {run} stops at step {last_step}, short of {steps}")
        # a run stopped by the time limit may have gone past `steps`: its games after them are left out of the measure
        final.setdefault(name, {})[int(seed)] = np.mean(last_quarter([(s, v) for s, v in curve if s <= steps], steps))
        rows += [(name, "", int(seed), step, round(value, 3)) for step, value in curve]
    for name, by_seed in final.items():
        values = [by_seed[seed] for seed in sorted(by_seed)]
        spread = f"{np.std(values, ddof=1):.2f}" if len(values) > 1 else "n/a "  # one seed has no std
        print(f"{name:<14} {np.mean(values):5.2f} +- {spread}   per seed {sorted(by_seed)}: " + ", ".join(f"{v:.2f}" for v in values))
    if out:
        with open(RESULTS / out, "w", newline="") as file:
            writer = csv.writer(file)
            writer.writerow(["script", "flags", "seed", "step", "episodic_return"])
            writer.writerows(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", help="gpu_train.sh's runs folder: read it and rewrite the CSV first")
    parser.add_argument("--seed-runs", help="gpu_breakout_seeds.sh's runs folder: print each variant's final returns")
    parser.add_argument("--steps", type=int, default=200_000, help="with --seed-runs: the runs' --total-timesteps")
    parser.add_argument("--out", help="with --seed-runs: a CSV name to write under benchmarks/results")
    options = parser.parse_args()
    if options.seed_runs:
        return seed_runs(options.seed_runs, options.steps, options.out)
    if options.runs:
        export(options.runs)
    curves = {}
    with open(CSV) as file:
        for row in csv.DictReader(file):
            curves.setdefault(row["script"], []).append((int(row["step"]), float(row["episodic_return"])))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for script, points in curves.items():
        steps, returns = (np.array(x) for x in zip(*sorted(points)))

        def window_mean(end):  # the games that ended in the WINDOW steps up to `end`
            return returns[(steps > end - WINDOW) & (steps <= end)].mean()

        mean = np.array([window_mean(s) for s in steps])
        ax.plot(steps, returns, ".", color=COLOURS[script], alpha=0.12, markersize=2)
        ax.plot(steps, mean, color=COLOURS[script], label=f"{LABELS[script]} (mean over 100k steps)")
        marks = [s for s in range(WINDOW, int(steps[-1]) + 1, WINDOW)]
        print(f"{LABELS[script]:<28}", "  ".join(f"{s // 1000}k {window_mean(s):.1f}" for s in marks))
    every = np.array([value for points in curves.values() for _, value in points])
    ax.set_ylim(0, 1.1 * np.percentile(every, 99.5))  # a few long games would squash the curves
    ax.set(xlabel="environment steps", ylabel="episodic return (whole game)", title="Breakout-v5, seed 1, one H100 (2026-11-25)")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(CSV.with_suffix(".png"), dpi=110)


if __name__ == "__main__":
    main()
