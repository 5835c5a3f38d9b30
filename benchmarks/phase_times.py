"""Where an iteration's time goes: milliseconds per iteration in each phase (rollout, advantage, update, log,
checkpoint), P3O against PPO on one Ocean env at the studies' sizes, side by side.

    python benchmarks/phase_times.py                       # squared, P3O at H = 32 and 128, 3 alternating repeats
    python benchmarks/phase_times.py --env delay --repeats 5
    python benchmarks/phase_times.py --threads 2           # the scripts' own thread count on a 2-core machine

Each run is a spec of ocean_studies.py's throughput study (its env, budget and shared hyperparameters), trained in
this process with `--threads` torch threads (1 by default), one after the other, alternating between the
configurations; the figures are medians over the repeats of each phase's seconds divided by the run's iterations.
The phases are the scripts' own (their PhaseTimer). Set the MALLOC_* variables of the README first, as for every CPU
benchmark here.

Makes: the README's per-phase times and thread-count ratios (results/phase_times_threads.log). Time on the 2-core
CPU: a few seconds a run, about a minute at three repeats.
"""
import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ocean_studies  # noqa: E402

CONFIGS = [("PPO (GAE)", "ppo", {}), ("P3O H=32", "p3o", {"horizon": 32}), ("P3O H=128", "p3o", {"horizon": 128})]


def phase_times(run):
    """Seconds per iteration in each phase of one run, trained in a scratch folder."""
    args, train = (ocean_studies.p3o_args if run["algo"] == "p3o" else ocean_studies.ppo_args)(run)
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        try:
            result = train(args)
        finally:
            os.chdir(here)
    iterations = run["total_timesteps"] // (args.num_envs * args.num_steps)
    return {phase: seconds / iterations for phase, seconds in result["phases"].items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="squared", choices=ocean_studies.ENVS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    opts = parser.parse_args()
    torch.set_num_threads(opts.threads)
    times = {label: [] for label, _, _ in CONFIGS}
    for _ in range(opts.repeats):
        for label, algo, options in CONFIGS:
            times[label].append(phase_times(ocean_studies.spec(algo, opts.env, 1, 1.0, ocean_studies.THROUGHPUT_STEPS, **options)))
    phases = ["rollout", "advantage", "update", "log", "checkpoint"]
    print(f"\n{opts.env}, {ocean_studies.THROUGHPUT_STEPS:,} steps a run, {opts.threads} thread(s), ms per iteration, medians of {opts.repeats}")
    print(f"{'config':<12}" + "".join(f"{phase:>11}" for phase in phases) + f"{'total':>11}")
    for label, runs in times.items():
        medians = [1000 * statistics.median(run.get(phase, 0.0) for run in runs) for phase in phases]
        total = 1000 * statistics.median(sum(run.values()) for run in runs)
        print(f"{label:<12}" + "".join(f"{ms:>11.1f}" for ms in medians) + f"{total:>11.1f}")


if __name__ == "__main__":
    main()
