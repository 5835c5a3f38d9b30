"""What the MinAtar runs' TensorBoard logs say beside their returns: for each game and arm, the mean over seeds of each
diagnostic averaged over the iterations in the last 10% of a run's steps, and the same at 1M steps (where the P3O gap
has opened on Asterix). No training here.

    python research/tools/minatar_diagnostics.py runs            # the run folders of benchmarks/minatar_study.py run

Read: `explained_variance` is PPO's value function against its GAE returns, but P3O's per-offset predictions against
each reward ahead (not comparable with PPO's); `window_explained_variance` is P3O's predicted window sums against the
rewards summed over each decision's window, the nearest P3O has to PPO's figure. `tied_offsets` counts the offsets past
K whose rewards the action measurably moves; the entropy is the policy's.
"""
import logging
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from minatar_study import run_key  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

TAGS = ["charts/episodic_return", "charts/episodic_length", "losses/explained_variance", "losses/window_explained_variance",
        "losses/entropy", "charts/tied_offsets"]
STEPS = 5_000_000
logging.getLogger("tensorboard").setLevel(logging.ERROR)  # a resumed run's overlap is purged, as TensorBoard does


def window_mean(events, tag, low, high):
    values = [e.value for e in events.Scalars(tag) if low <= e.step < high] if tag in events.Tags()["scalars"] else []
    return float(np.mean(values)) if values else float("nan")


def main(runs):
    table = {}
    for folder in sorted(Path(runs).glob("MinAtar_*")):
        game, arm, _ = run_key(folder)
        events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
        events.Reload()  # once a run: every tag below reads it
        if max((e.step for e in events.Scalars("charts/SPS")), default=0) < STEPS - 64 * 128:
            continue  # unfinished
        for label, low, high in (("1M", 0.9e6, 1.1e6), ("end", 0.9 * STEPS, STEPS + 1)):
            cells = [window_mean(events, tag, low, high) for tag in TAGS]
            table.setdefault((game, arm, label), []).append(cells)
    names = [tag.split("/")[1] for tag in TAGS]
    print("| game | arm | at | seeds | " + " | ".join(names) + " |\n|" + " --- |" * (len(names) + 4))
    for (game, arm, label), cells in sorted(table.items()):
        columns = [[value for value in column if not np.isnan(value)] for column in zip(*cells)]  # PPO has no P3O tags
        print(f"| {game} | {arm} | {label} | {len(cells)} | " + " | ".join(f"{np.mean(c):.3g}" if c else "" for c in columns) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs")
