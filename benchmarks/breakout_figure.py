"""The README's Breakout figure: p3o_atari.py's default (today's, with the centred clock table, and the same without the
clock) against ppo_baseline.py, 200k steps, seeds 1 to 4, one line a seed, from the curves that
benchmarks/atari_learning.py wrote (no training here).

    python benchmarks/breakout_figure.py

Prints each run's final return (the mean over the iterations with games in the last quarter, as atari_learning.py
does) and writes benchmarks/results/readme_breakout.png.
"""
import csv
import statistics
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
STEPS = 200_000
# (label, colour, CSV files, the script and flags whose rows to take)
CASES = [
    ("p3o_atari.py --horizon 128", "tab:red", [f"atari_learning_Breakout-v5_200k_clock_centred_s{seed}.csv" for seed in (1, 2, 3, 4)], ("p3o_atari.py", "--clock")),
    ("the same without the clock", "tab:orange", [f"atari_learning_Breakout-v5_200k_window_var_s{seed}.csv" for seed in (1, 2, 3, 4)], ("p3o_atari.py", "")),
    ("ppo_baseline.py", "tab:blue", ["atari_learning_Breakout-v5_200k_window_loss.csv"], ("ppo_baseline.py", "")),
]


def curves(files, script, flags):
    """{seed: (steps, returns)} for the rows of `script` run with `flags`."""
    runs = {}
    for name in files:
        with open(RESULTS / name) as file:
            for row in csv.DictReader(file):
                if row["script"] == script and row["flags"] == flags:
                    runs.setdefault(int(row["seed"]), []).append((int(row["step"]), float(row["episodic_return"])))
    return {seed: np.array(sorted(points)).T for seed, points in sorted(runs.items())}


def main():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    for label, colour, files, (script, flags) in CASES:
        runs = curves(files, script, flags)
        finals = [float(values[steps > 0.75 * STEPS].mean()) for steps, values in runs.values()]
        print(f"{label:<28} {statistics.mean(finals):.2f} +- {statistics.stdev(finals):.2f} (std)   per seed {list(runs)}: " + ", ".join(f"{v:.2f}" for v in finals))
        for i, (steps, values) in enumerate(runs.values()):
            smooth = np.convolve(values, np.ones(5) / 5, mode="valid")
            axis.plot(steps[len(steps) - len(smooth):], smooth, color=colour, alpha=0.8, label=f"{label}: {statistics.mean(finals):.2f} +- {statistics.stdev(finals):.2f}" if i == 0 else None)
    axis.set(xlabel="environment steps", ylabel="raw game return (5-iteration mean)")
    axis.set_title("Breakout-v5, 200k steps on a 2-core CPU, seeds 1 to 4 (one line a seed; final return mean +- std)", fontsize=8)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(RESULTS / "readme_breakout.png", dpi=120)
    print(f"wrote {RESULTS / 'readme_breakout.png'}")


if __name__ == "__main__":
    main()
