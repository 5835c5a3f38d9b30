"""A MinAtar screen's arms against the default's and PPO's at the same budget: each arm's seeds and mean +- 95% CI
(t), and its difference from each reference arm (Welch's 95% CI), game by game, from a results folder of
benchmarks/minatar_study.py (its minatar_runs.csv).

    python research/tools/minatar_screen.py research/results/minatar_lambda --against p3o_h128_2m ppo_0.99_2m \
        --pool lam08_all=p3o_h128_2m_lam08,p3o_h128_2m_landed

--pool NAME=A,B adds an arm NAME holding the runs of arms A and B (the same algorithm run twice, say).
"""
import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from ocean_studies import ci95, difference_ci95  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="a folder with minatar_runs.csv")
    parser.add_argument("--against", nargs="+", default=["p3o_h128_2m", "ppo_0.99_2m"], help="the reference arms")
    parser.add_argument("--pool", nargs="*", default=[], metavar="NAME=A,B", help="an arm holding the runs of other arms")
    opts = parser.parse_args()
    finals = defaultdict(list)
    with open(Path(opts.results) / "minatar_runs.csv", newline="") as file:
        for row in csv.DictReader(file):
            finals[(row["game"], row["arm"])].append((int(row["seed"]), float(row["final_return"])))
    for pool in opts.pool:
        name, members = pool.split("=")
        for (game, arm), runs in list(finals.items()):
            if arm in members.split(","):
                finals[(game, name)] += runs
    games = sorted({game for game, _ in finals})
    arms = sorted({arm for _, arm in finals})
    print("| game | arm | seeds | mean +- 95% CI | " + " | ".join(f"- {ref}" for ref in opts.against) + " |")
    print("| --- | --- | --- | --- | " + " | ".join("---" for _ in opts.against) + " |")
    for game in games:
        for arm in arms:
            if (game, arm) not in finals:
                continue
            runs = sorted(finals[(game, arm)])
            values = [value for _, value in runs]
            mean, half = ci95(values)
            cells = []
            for ref in opts.against:
                other = [value for _, value in finals.get((game, ref), [])]
                if ref == arm or not other:
                    cells.append("")
                    continue
                difference, width = difference_ci95(values, other)
                beyond = width == width and abs(difference) > width
                cells.append(f"{'**' if beyond else ''}{difference:+.2f} +- {width:.2f}{'**' if beyond else ''}")
            seeds = ", ".join(f"{value:.2f}" for _, value in runs)
            print(f"| {game} | {arm} | {seeds} | {mean:.2f} +- {half:.2f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
