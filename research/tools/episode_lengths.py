"""How long the episodes of MinAtar study runs are at the end: a delayed game's shortcut shows there.

envs/delayed.py pays what is still owed at an episode's last step, so a trajectory's return is the game's, but an
episode that ends sooner pays its owed rewards sooner. A learner that weighs a reward 32 steps ahead much less than
one 8 steps ahead (P3O's lam^j on a reward no state announces, PPO's (gamma lam)^j) can prefer to end the episode
right after a reward: on Breakout, to miss the ball after the first brick. The return then falls and the episode
length with it; this tool reads both from the run folders' TensorBoard logs, which minatar_study.py's CSVs do not keep.

    python research/tools/episode_lengths.py runs --delay 32 96 > research/results/minatar_delay_lengths.csv

Prints one CSV row a run: game, delay, arm, seed, the steps it reached, and the mean episodic length and return of
the episodes logged in its last 10% of steps (the study's final return).
"""
import argparse
import csv
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from minatar_study import last_tenth, run_key, scalars  # noqa: E402


def final_mean(curve, reached):
    values = last_tenth([(step, value) for _, step, value in curve], reached)
    return float(np.mean(values)) if values else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="folders of run folders (a study's --runs)")
    parser.add_argument("--delay", nargs="+", type=int, default=[0], help="the delays whose runs to read (0: as it ships)")
    opts = parser.parse_args()
    out = csv.writer(sys.stdout)
    out.writerow(["game", "delay", "arm", "seed", "steps", "final_length", "final_return"])
    for runs in opts.runs:
        for folder in sorted(Path(runs).glob("*__*__*__*")):
            for delay in opts.delay:
                key = run_key(folder, delay)
                if key is None:
                    continue
                lengths = scalars(folder, "charts/episodic_length")
                if not lengths:
                    continue
                reached = max(step for _, step, _ in lengths)
                game, arm, seed = key
                out.writerow([game, delay, arm, seed, reached, f"{final_mean(lengths, reached):.1f}",
                              f"{final_mean(scalars(folder, 'charts/episodic_return'), reached):.3f}"])


if __name__ == "__main__":
    main()
