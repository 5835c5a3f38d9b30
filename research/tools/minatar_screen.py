"""A MinAtar screen's arms against the default's and PPO's at the same budget: each arm's seeds and mean +- 95% CI
(t), and its difference from each reference arm (Welch's 95% CI), game by game, from results folders of
benchmarks/minatar_study.py (their minatar_runs.csv).

    python research/tools/minatar_screen.py research/results/minatar_lambda --against p3o_h128_2m ppo_0.99_2m \
        --pool lam08_all=p3o_h128_2m_lam08,p3o_h128_2m_landed

--pool NAME=A,B adds an arm NAME holding the runs of arms A and B (the same algorithm run twice, say).
The arms of a second folder and beyond are named ARM@FOLDER (the folder's own name). --normalise ARM ... adds, for
each arm, the mean over the games of its mean return over the best of those arms' means on the game, with a
bootstrap 95% interval (seeds resampled within each arm and game, 10,000 draws):

    python research/tools/minatar_screen.py benchmarks/results research/results/minatar_5m_lambda \
        --against ppo_0.99 --normalise ppo_0.9 ppo_0.99 ppo_0.999
"""
import argparse
import csv
import sys

import numpy as np
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from ocean_studies import ci95, difference_ci95  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="folders with minatar_runs.csv")
    parser.add_argument("--against", nargs="+", default=["p3o_h128_2m", "ppo_0.99_2m"], help="the reference arms")
    parser.add_argument("--pool", nargs="*", default=[], metavar="NAME=A,B", help="an arm holding the runs of other arms")
    parser.add_argument("--normalise", nargs="*", default=[], metavar="ARM", help="the arms whose best mean is 1 on a game")
    opts = parser.parse_args()
    finals = defaultdict(list)
    for index, folder in enumerate(opts.results):
        with open(Path(folder) / "minatar_runs.csv", newline="") as file:
            for row in csv.DictReader(file):
                arm = row["arm"] if index == 0 else f"{row['arm']}@{Path(folder).name}"
                finals[(row["game"], arm)].append((int(row["seed"]), float(row["final_return"])))
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
    if opts.normalise:
        normalised_scores(finals, games, arms, opts.normalise)


def normalised_scores(finals, games, arms, references):
    """Each arm's mean over the games of its mean return / the best reference arm's mean there, and a bootstrap 95%
    interval (every arm's seeds resampled within each game, the best reference recomputed each draw)."""
    rng = np.random.default_rng(0)
    runs = {key: np.array([value for _, value in values]) for key, values in finals.items()}

    def best(game, draw):
        return max(draw(runs[(game, ref)]) for ref in references if (game, ref) in runs)

    print(f"\nNormalised by the best of {', '.join(references)} on each game (games where the arm ran):")
    for arm in arms:
        played = [game for game in games if (game, arm) in runs]
        if not played:
            continue
        point = np.mean([runs[(game, arm)].mean() / best(game, np.mean) for game in played])
        draws = [np.mean([rng.choice(runs[(game, arm)], len(runs[(game, arm)])).mean()
                          / best(game, lambda values: rng.choice(values, len(values)).mean()) for game in played])
                 for _ in range(10_000)]
        low, high = np.percentile(draws, [2.5, 97.5])
        per_game = ", ".join(f"{game} {runs[(game, arm)].mean() / best(game, np.mean):.2f}" for game in played)
        print(f"  {arm}: {point:.3f} [{low:.3f}, {high:.3f}] ({per_game})")


if __name__ == "__main__":
    main()
