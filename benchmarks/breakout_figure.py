"""The README's Breakout figure: every seed run of the four Breakout-v5 variants measured on ten or more seeds at 200k
steps (no training here), from the curves that benchmarks/atari_learning.py (CPU) and gpu_breakout.py --seed-runs
(a lent H200) wrote:

- p3o_atari.py's default (the one default of both P3O scripts), seeds 1 to 10, the CPU;
- the default before the far targets landed (at 33aa435), seeds 1 to 4 on the CPU and 5 to 10 on the H200;
- p3o_atari.py at commit eeb93b1, the default that set the Breakout bar, seeds 1 to 20;
- ppo_baseline.py, seeds 1 to 10, the CPU.

    python benchmarks/breakout_figure.py

Prints each variant's final returns (per run, the mean over the iterations with games in the last quarter, as
atari_learning.py does), their mean +- std and 95% CI, and each P3O variant's difference from PPO (Welch), and writes
benchmarks/results/readme_breakout.png: the mean curve over seeds (left) and each seed's final return (right).

Makes: the README's Breakout figure and its 200k-step table. Time: seconds (no training).
"""
import csv
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from atari_runs import last_quarter  # noqa: E402
from ocean_studies import ci95, difference_ci95  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
FIGURE = RESULTS / "readme_breakout.png"
STEPS = 200_000
CSV_NAME = "atari_learning_Breakout-v5_200k_{}.csv"
# label, colour, and the runs: (CSV file, its script column, its flags column, seeds)
CASES = [
    ("p3o_atari.py --horizon 128 (default)", "tab:red", [
        (CSV_NAME.format(f"cheaper_s{seed}"), "p3o_atari.py", "", [seed]) for seed in range(1, 11)]),
    ("before the far targets", "tab:orange", [
        (CSV_NAME.format(f"value_half_s{seed}"), "p3o_atari.py", "", [seed]) for seed in (1, 2, 3, 4)] + [
        (CSV_NAME.format("gpu_h200_s5-8"), "p3o_atari", "", [5, 6, 7, 8]),
        (CSV_NAME.format("gpu_h200_noclock_s5-10"), "p3o_atari", "", [9, 10])]),
    ("p3o_atari.py at eeb93b1 (the bar's)", "tab:purple", [
        (CSV_NAME.format("screen_default_s1"), "p3o_atari.py", "", [1]),
        (CSV_NAME.format("screen_default_s2"), "p3o_atari.py", "", [2]),
        (CSV_NAME.format("screen_default_s34"), "p3o_atari.py", "", [3, 4])] + [
        (CSV_NAME.format(f"old_default_s{seed}"), "p3o_atari.py", "", [seed]) for seed in (5, 6, 7, 8)] + [
        (CSV_NAME.format("gpu_h200_old_default_s9-20"), "old_default", "", list(range(9, 21)))]),
    ("ppo_baseline.py", "tab:blue", [
        (CSV_NAME.format("window_loss"), "ppo_baseline.py", "", [1, 2, 3, 4])] + [
        (CSV_NAME.format(f"ppo_s{seed}"), "ppo_baseline.py", "", [seed]) for seed in range(5, 11)]),
]


def curves(runs):
    """{seed: (steps, returns)} of each (file, script, flags, seeds) in `runs`; every listed seed must be there."""
    found = {}
    for name, script, flags, seeds in runs:
        with open(RESULTS / name) as file:
            for row in csv.DictReader(file):
                if row["script"] == script and row["flags"] == flags and int(row["seed"]) in seeds:
                    found.setdefault(int(row["seed"]), []).append((int(row["step"]), float(row["episodic_return"])))
        missing = [seed for seed in seeds if seed not in found]
        if missing:
            raise SystemExit(f"breakout_figure.py: {name} has no {script} {flags!r} rows of seeds {missing}")
    return {seed: np.array(sorted(points)).T for seed, points in sorted(found.items())}


def main():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [3, 2]})
    grid = np.arange(5 * 1024, STEPS, 1024)
    finals = {}
    for position, (label, colour, runs) in enumerate(CASES):
        by_seed = curves(runs)
        finals[label] = [float(np.mean(last_quarter(zip(steps, values), STEPS))) for steps, values in by_seed.values()]
        mean, half = ci95(finals[label])
        print(f"{label:<38} {mean:.2f} +- {statistics.stdev(finals[label]):.2f} (std), 95% CI +- {half:.2f}, {len(finals[label])} seeds: "
              + ", ".join(f"{v:.2f}" for v in finals[label]))
        # each seed's 5-iteration running mean (ending at each point), on a common grid of steps, then the mean over seeds
        curve = np.mean([np.interp(grid, steps[4:], np.convolve(values, np.ones(5) / 5, mode="valid")) for steps, values in by_seed.values()], axis=0)
        left.plot(grid, curve, color=colour, label=f"{label}: {mean:.2f} +- {half:.2f}")
        jitter = np.linspace(-0.15, 0.15, len(finals[label]))
        right.scatter(position + jitter, finals[label], color=colour, s=14, alpha=0.8)
        right.errorbar(position + 0.3, mean, yerr=half, color=colour, fmt="o", capsize=3)
    ppo = finals[CASES[-1][0]]
    for label, _, _ in CASES[:-1]:
        difference, half = difference_ci95(finals[label], ppo)
        print(f"{label:<38} against PPO: {difference:+.2f} +- {half:.2f} (95% CI, Welch)")
    left.set(xlabel="environment steps", ylabel="raw game return (mean over seeds)")
    left.set_title("Breakout-v5, 200k steps: mean curve over seeds (legend: final return, mean +- 95% CI)", fontsize=8)
    left.legend(fontsize=7)
    right.set_xticks(range(len(CASES)), ["default", "before far targets", "eeb93b1", "PPO"], fontsize=8)
    right.set(ylabel="final return (last quarter's games)")
    right.set_title("each seed, and the mean +- 95% CI", fontsize=8)
    figure.tight_layout()
    figure.savefig(FIGURE, dpi=120)
    print(f"wrote {FIGURE}")


if __name__ == "__main__":
    main()
