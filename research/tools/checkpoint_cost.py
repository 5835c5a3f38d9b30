"""What checkpointing costs: the share of a run's time spent writing checkpoints at the default --save-interval.

    python research/tools/checkpoint_cost.py                 # Ocean (all three scripts) and Breakout (both Atari scripts)
    python research/tools/checkpoint_cost.py --skip-atari

Two measurements, each run in this process one after the other:
- the cost of one save, against the time of one iteration, from runs with --save-interval 1 (the scripts' own
  phase timer has a `checkpoint` phase); the cost at interval k is save / (k x iteration);
- side by side on Ocean: SPS with the default interval against --save-interval 0, alternating, medians of
  --repeats runs (noisy on a shared machine; the first measurement is the precise one).
"""
import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import p3o_atari  # noqa: E402
import p3o_ocean  # noqa: E402
import ppo_baseline  # noqa: E402

SCRIPTS = {"p3o_ocean.py": (p3o_ocean, "squared"), "ppo_baseline.py": (ppo_baseline, "ocean/squared"), "p3o_atari.py": (p3o_atari, "ocean/squared")}
OCEAN = dict(num_envs=256, num_steps=128, num_minibatches=4, update_epochs=2, learning_rate=3e-3, progress=False)


def run(module, **overrides):
    with tempfile.TemporaryDirectory() as folder:
        here = os.getcwd()
        os.chdir(folder)
        try:
            return module.train(module.Args(**overrides))
        finally:
            os.chdir(here)


def save_share(module, iterations, **overrides):
    """Seconds per save, seconds per iteration without saving, from a run that saves at every iteration."""
    result = run(module, save_interval=1, **overrides)
    phases = result["phases"]
    per_save = phases["checkpoint"] / iterations
    per_iteration = (sum(phases.values()) - phases["checkpoint"]) / iterations
    return per_save, per_iteration


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ocean-iterations", type=int, default=12)
    parser.add_argument("--atari-iterations", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-atari", action="store_true")
    opts = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    interval = p3o_ocean.Args().save_interval
    print(f"default --save-interval {interval}; torch threads {torch.get_num_threads()}\n")
    print(f"{'script':<16}{'env':<16}{'save (s)':>10}{'iteration (s)':>15}{f'cost at {interval}':>14}")
    rows = []
    for name, (module, env_id) in SCRIPTS.items():
        batch = OCEAN["num_envs"] * OCEAN["num_steps"]
        per_save, per_iteration = save_share(module, opts.ocean_iterations, env_id=env_id, total_timesteps=batch * opts.ocean_iterations, **OCEAN)
        rows.append((name, env_id, per_save, per_iteration))
    if not opts.skip_atari:
        for name, module in (("ppo_baseline.py", ppo_baseline), ("p3o_atari.py", p3o_atari)):
            args = module.Args()
            per_save, per_iteration = save_share(module, opts.atari_iterations, env_id="Breakout-v5", total_timesteps=args.num_envs * args.num_steps * opts.atari_iterations, progress=False)
            rows.append((name, "Breakout-v5", per_save, per_iteration))
    for name, env_id, per_save, per_iteration in rows:
        print(f"{name:<16}{env_id:<16}{per_save:>10.4f}{per_iteration:>15.3f}{100 * per_save / (interval * per_iteration):>13.2f}%", flush=True)

    print(f"\nside by side, p3o_ocean.py on squared, {opts.ocean_iterations} iterations, alternating, {opts.repeats} repeats (SPS):")
    sps = {interval: [], 0: []}
    for _ in range(opts.repeats):
        for k in (interval, 0):
            batch = OCEAN["num_envs"] * OCEAN["num_steps"]
            sps[k].append(run(p3o_ocean, env_id="squared", total_timesteps=batch * opts.ocean_iterations, save_interval=k, **OCEAN)["SPS"])
    print(f"  --save-interval {interval}: {sps[interval]}  median {statistics.median(sps[interval]):,.0f}")
    print(f"  --save-interval 0:  {sps[0]}  median {statistics.median(sps[0]):,.0f}")
    print(f"  ratio {statistics.median(sps[interval]) / statistics.median(sps[0]):.3f}")


if __name__ == "__main__":
    main()
