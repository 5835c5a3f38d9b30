"""How much of the advantage the far offsets carry, under today's targets and under far_bootstrap_once.patch's.

Trains today's default (p3o_atari.py on MinAtar with minatar_study.py's CONFIG, or p3o_ocean.py on a probe) and, at
every iteration, computes the advantage's two parts on the same rollout: near, the offsets below K, and far, the
offsets from K on, once with today's lambda-return targets and once with the far targets of
research/patches/far_bootstrap_once.patch (the critic's prediction K steps later where the episode runs there, the
rewards and then the tail where it does not; the tied offsets keep their rewards under both). Training follows
today's advantage; the other is only measured. Prints, over the iterations of the run's second half, the mean std of
each part (over the rollout's decisions) and the far part's std over the near part's.

    python research/tools/far_variance.py --game Asterix --steps 2000000 --seed 1
    python research/tools/far_variance.py --probe choice --seed 1
"""
import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]


def far_once_targets(script, rewards, terminals, mu, tail_mu, tied, K):
    """The far targets of far_bootstrap_once.patch at the offsets from K on: [T, N, H - K]."""
    T, N, H = mu.shape
    raw = script.episode_windows(rewards, terminals, H, tail_mu)[0][..., K:]
    targets = raw.clone()
    if K < T:
        runs = script.episode_ends(terminals)[: T - K] >= torch.arange(K, T, device=mu.device)[:, None]
        targets[: T - K] = torch.where(runs[..., None], mu[K:, :, : H - K], raw[: T - K])
    return torch.where(tied[K:], raw, targets)


def measured(script, K, log):
    """script.p3o_advantage, which also records the parts of both advantages on each call into `log`."""
    advantage = script.p3o_advantage

    def wrapper(rewards, terminals, mu, sigma, tail_mu, lam, tied=None):
        H = mu.shape[-1]
        tied = torch.zeros(H, dtype=torch.bool) if tied is None else tied
        omega = script.precision(sigma)
        w = omega / omega.max()
        near_only = sigma.clone()
        near_only[K:] = script.MAX_SIGMA  # weight 0 at the far offsets (below float32's resolution against 1)
        # today's near part alone, and today's advantage; its far part is the difference
        today = advantage(rewards, terminals, mu, sigma, tail_mu, lam, tied)
        near = (advantage(rewards, terminals, mu, near_only, tail_mu, lam, tied) * (omega[:K].max() / omega.max()))
        far_today = today - near
        far_once = (far_once_targets(script, rewards, terminals, mu, tail_mu, tied, K) - mu[..., K:]) @ w[K:]
        log.append({"near": near.std().item(), "far_today": far_today.std().item(), "far_once": far_once.std().item()})
        return today

    return wrapper


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", help="a MinAtar game (p3o_atari.py)")
    parser.add_argument("--probe", help="a probe of benchmarks/ocean_studies.py (p3o_ocean.py)")
    parser.add_argument("--steps", type=int, default=None, help="MinAtar: the run's steps (a probe: its budget)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--after", type=int, default=32, help="K, the first far offset")
    opts = parser.parse_args()
    torch.set_num_threads(1)
    log = []
    if opts.game:
        import minatar_study
        import p3o_atari as script

        script.p3o_advantage = measured(script, opts.after, log)
        argv = ["--env-id", f"MinAtar/{opts.game}-v1", "--total-timesteps", str(opts.steps or 2_000_000),
                *minatar_study.CONFIG, "--seed", str(opts.seed), "--save-interval", "0", "--no-progress"]
        args, train = script.tyro.cli(script.Args, args=argv), script.train
    else:
        import ocean_studies
        import p3o_ocean as script

        script.p3o_advantage = measured(script, opts.after, log)
        env, options, budget = ocean_studies.PROBES[opts.probe]
        args, train = ocean_studies.p3o_args(ocean_studies.spec("p3o", env, opts.seed, 1.0, opts.steps or budget,
                                                                **options))
    with tempfile.TemporaryDirectory() as folder:  # the run's folder is scratch
        os.chdir(folder)
        result = train(args)
    late = log[len(log) // 2 :]
    mean = {part: statistics.mean(row[part] for row in late) for part in ("near", "far_today", "far_once")}
    print(f"{opts.game or opts.probe} seed {opts.seed}, K = {opts.after}, iterations {len(log) // 2 + 1} to {len(log)}"
          f" (score {result['score']:.3f}):")
    print(f"  std of the near part {mean['near']:.4f}; far part: today's {mean['far_today']:.4f} "
          f"({mean['far_today'] / mean['near']:.2f}x near), bootstrapped once {mean['far_once']:.4f} "
          f"({mean['far_once'] / mean['near']:.2f}x near)")


if __name__ == "__main__":
    main()
