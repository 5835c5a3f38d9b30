"""Does a policy end its episodes right after a reward? The shortcut of a delayed game, read from a checkpoint.

envs/delayed.py pays what is still owed at an episode's last step: a policy trained on a delayed game that ends the
episode just after earning a reward is paid it at once instead of K steps later. This plays a checkpoint of any of the
three scripts on the game as it ships (the observations are the delayed game's; only the rewards' timing differs), so
each reward shows at the step it was earned, and prints when the first reward of an episode comes and how many steps
after it the episode ends.

    python research/tools/cash_in.py runs/RUN/checkpoint.pt MinAtar/Breakout-v1

Seconds on the CPU (64 episodes, sampled actions, seed 1).
"""
import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import torch
from torch.distributions import Categorical

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import evaluate  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("env_id", help="the game as it ships, e.g. MinAtar/Breakout-v1")
    parser.add_argument("--episodes", type=int, default=64)
    opts = parser.parse_args()
    checkpoint, script, run_args = evaluate.load(opts.checkpoint)
    torch.manual_seed(1)
    envs, agent, obs = evaluate.build(script, replace(run_args, env_id=opts.env_id), 32, 1, torch.device("cpu"))
    agent.load_state_dict(checkpoint["model"])
    step = torch.zeros(32, dtype=torch.long)
    first = torch.full((32,), -1)  # the step of each env's first reward in its episode, -1 before it
    episodes = []  # (first reward's step or -1, length, return)
    with torch.no_grad():
        while len(episodes) < opts.episodes:
            obs, reward, _, _, infos = envs.step(Categorical(logits=agent.get_logits(obs)).sample())
            step += 1
            first = torch.where((reward != 0) & (first < 0), step, first)
            for i in torch.nonzero(infos["episode_length"] > 0).flatten().tolist():
                episodes.append((int(first[i]), int(infos["episode_length"][i]), float(infos["episode_return"][i])))
                step[i], first[i] = 0, -1
    gaps = sorted(length - at for at, length, _ in episodes if at > 0)
    print(f"{opts.env_id}, {len(episodes)} episodes of {opts.checkpoint} (step {checkpoint['global_step']:,}): return "
          f"{statistics.mean(r for *_, r in episodes):.2f}, length {statistics.median(n for _, n, _ in episodes):.0f} "
          f"(median); the first reward at step {statistics.median(a for a, *_ in episodes):.0f} (median), the episode's "
          f"end {statistics.median(gaps) if gaps else float('nan'):.0f} steps after it (median; "
          f"deciles {gaps[:: max(1, len(gaps) // 10)]})")


if __name__ == "__main__":
    main()
