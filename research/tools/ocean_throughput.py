"""Throughput of p3o_ocean.py and what P3O adds to an iteration, measured side by side in one run.

    python research/tools/ocean_throughput.py                       # default configuration, H = 128
    python research/tools/ocean_throughput.py --env-id squared --repeats 5

What it measures (each case repeated, the cases interleaved, medians reported; shared machines are noisy,
so read the ratios, which are taken within one run):
  1. SPS of the default configuration, and the share of each phase of an iteration (rollout, advantage, update).
  2. What P3O adds to PPO: the same iteration with --horizon 1 has PPO's cost (a one-wide value head, a
     one-offset loss, a one-offset advantage). overhead = 1 - time(H=1) / time(H=128).
  3. The PyTorch twin p3o_advantage on T=64, N=4096, H=128 against one training iteration of (1).
Writes research/results/ocean_throughput.csv.
"""
import argparse
import csv
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import p3o_ocean  # noqa: E402


def train_seconds_per_iteration(args):
    """SPS and the mean per-phase seconds of one iteration, over all the run's iterations (warm-up included)."""
    result = p3o_ocean.train(args)
    iterations = args.num_iterations
    return result["SPS"], {phase: seconds / iterations for phase, seconds in result["phases"].items()}


def time_twin(T, N, H, repeats):
    g = torch.Generator().manual_seed(0)
    rewards = torch.randn(T, N, generator=g)
    terminals = (torch.rand(T, N, generator=g) < 0.02).float()
    mu = torch.randn(T, N, H, generator=g)
    sigma = torch.rand(H, generator=g) + 0.5
    tail_mu = torch.randn(N, H, generator=g)
    lam = p3o_ocean.Args.td_lambda  # as the script calls it, with no offset kept
    p3o_ocean.p3o_advantage(rewards, terminals, mu, sigma, tail_mu, lam)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        p3o_ocean.p3o_advantage(rewards, terminals, mu, sigma, tail_mu, lam)
        times.append(time.perf_counter() - start)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-id", default="squared")
    parser.add_argument("--iterations", type=int, default=4, help="training iterations per measured run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "research" / "results" / "ocean_throughput.csv"))
    options = parser.parse_args()

    base = p3o_ocean.Args(env_id=options.env_id, progress=False)
    base.total_timesteps = options.iterations * base.num_envs * base.num_steps
    cases = {"p3o_H128": replace(base, horizon=128), "ppo_cost_H1": replace(base, horizon=1)}
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)  # the runs/ folders of these measurements are thrown away
        for repeat in range(options.repeats):
            for name, args in cases.items():
                sps, phases = train_seconds_per_iteration(replace(args))
                rows.append({"case": name, "repeat": repeat, "SPS": sps, **{f"{k}_s": round(v, 4) for k, v in phases.items()}})
                print(rows[-1], flush=True)
            twin = time_twin(64, 4096, 128, 3)
            rows.append({"case": "twin_T64_N4096_H128", "repeat": repeat, "advantage_s": round(statistics.median(twin), 4)})
            print(rows[-1], flush=True)

    def median(case, key):
        return statistics.median(row[key] for row in rows if row["case"] == case)

    iteration = {case: sum(median(case, f"{phase}_s") for phase in ("rollout", "advantage", "update")) for case in cases}
    p3o = iteration["p3o_H128"]
    print(f"\n{options.env_id}, default configuration ({base.num_envs} envs x {base.num_steps} steps, {base.num_minibatches} minibatches x {base.update_epochs} epochs), medians of {options.repeats}:")
    print(f"  SPS, P3O H=128: {median('p3o_H128', 'SPS'):,.0f}   (same iteration at H=1: {median('ppo_cost_H1', 'SPS'):,.0f})")
    for phase in ("rollout", "advantage", "update"):
        print(f"  {phase:<9} {median('p3o_H128', f'{phase}_s'):.3f} s  {median('p3o_H128', f'{phase}_s') / p3o:6.1%} of an iteration")
    print(f"  what P3O adds (1 - time(H=1) / time(H=128)): {1 - iteration['ppo_cost_H1'] / p3o:.1%} of an iteration")
    twin = median("twin_T64_N4096_H128", "advantage_s")
    print(f"  twin on T=64, N=4096, H=128: {twin:.3f} s = {twin / p3o:.2f} of one training iteration")

    Path(options.out).parent.mkdir(parents=True, exist_ok=True)
    keys = sorted({key for row in rows for key in row}, key=lambda k: (k != "case", k != "repeat", k))
    with open(options.out, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    print(f"  raw rows: {options.out}")


if __name__ == "__main__":
    main()
