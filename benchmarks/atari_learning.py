"""Short learning runs of p3o_atari.py and ppo_baseline.py on one Atari game, against a uniform random policy.

    python benchmarks/atari_learning.py --env-id Breakout-v5 --total-timesteps 60000 --seeds 1 2

For each seed the two scripts run side by side (one torch thread each, so they share the machine alike), with
their defaults otherwise, or with `--p3o-flags` / `--ppo-flags` added (one quoted string each, e.g.
`--ppo-flags "--gamma 1 --gae-lambda 1"`); `--scripts` runs one of them alone. The random policy plays `--random-games` games through the same wrapper (raw score of
whole games). Writes benchmarks/results/atari_learning_{env}.csv (every logged iteration: the mean raw return of
the games that ended in it) and .png (curves, smoothed), and prints each run's final return: the mean over the
games that ended in the last quarter of the run, then mean +- std over seeds.

Makes: the README's Breakout rows at 200k steps and research/ablations.md's Breakout screens (one CSV per seed, read
by breakout_figure.py). Time on the 2-core CPU: a 200k-step run of each script side by side takes about an hour
(roughly 60 to 70 SPS each with the README's MALLOC_* settings).
"""
import argparse
import csv
import shlex
import statistics
import sys

import numpy as np
import torch

from atari_runs import ROOT, finish, last_quarter, scalars, start

SCRIPTS = ("ppo_baseline.py", "p3o_atari.py")


def random_returns(env_id, games, seed):
    """Raw returns of `games` whole games of a uniform random policy, through ppo_baseline.AtariEnvs."""
    sys.path.insert(0, str(ROOT))
    from ppo_baseline import AtariEnvs

    envs = AtariEnvs(env_id, 8, torch.device("cpu"), seed)
    envs.reset()
    generator = torch.Generator().manual_seed(seed)
    returns = []
    while len(returns) < games:
        _, _, _, _, info = envs.step(torch.randint(envs.num_actions, (8,), generator=generator))
        returns += info["episode_return"][info["episode_length"] > 0].tolist()
    return returns[:games]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-id", default="Breakout-v5")
    parser.add_argument("--total-timesteps", type=int, default=60000)
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--random-games", type=int, default=100)
    parser.add_argument("--scripts", nargs="+", choices=SCRIPTS, default=list(SCRIPTS))
    parser.add_argument("--p3o-flags", default="", help="extra flags for p3o_atari.py, one quoted string (--p3o-flags=--FLAG for a lone flag)")
    parser.add_argument("--ppo-flags", default="", help="extra flags for ppo_baseline.py, one quoted string (--ppo-flags=--FLAG for a lone flag)")
    parser.add_argument("--tag", default="", help="suffix for the CSV and PNG names (e.g. _200k), so another protocol keeps the main files")
    options = parser.parse_args()
    extra = {"p3o_atari.py": shlex.split(options.p3o_flags), "ppo_baseline.py": shlex.split(options.ppo_flags)}

    rows, final = [], {}
    for seed in options.seeds:
        flags = ["--env-id", options.env_id, "--total-timesteps", options.total_timesteps, "--seed", seed]
        processes = {script: start(script, flags + extra[script], threads=1) for script in options.scripts}
        for script, process in processes.items():
            run_dir = finish(process)
            curve = [(step, value) for _, step, value in scalars(run_dir, "charts/episodic_return")]
            lengths = [value for _, _, value in scalars(run_dir, "charts/episodic_length")]
            rows += [{"script": script, "flags": " ".join(extra[script]), "seed": seed, "step": step, "episodic_return": round(value, 3)} for step, value in curve]
            last = last_quarter(curve, options.total_timesteps)
            final[script, seed] = float(np.mean(last)) if last else float("nan")
            entropy = [value for _, _, value in scalars(run_dir, "losses/entropy")]
            # explained variance over the last 5 iterations: PPO's of its returns; P3O's of its per-offset rewards
            # and of their sums over each decision's window (what its advantage subtracts)
            explained = {tag: [value for _, _, value in scalars(run_dir, f"losses/{tag}")][-5:] for tag in ("explained_variance", "window_explained_variance")}
            print(f"{script} seed {seed}: final return {final[script, seed]:.2f} over {len(last)} iterations with games; "
                  f"mean game length {np.mean(lengths[-len(last):]) if last else float('nan'):.0f}; entropy {entropy[0]:.3f} -> {entropy[-1]:.3f}; "
                  + ", ".join(f"{tag} {np.mean(values):.2f}" for tag, values in explained.items() if values) + f"; {run_dir.name}", flush=True)
    random = random_returns(options.env_id, options.random_games, seed=options.seeds[0])

    name = options.env_id.replace("/", "_")
    out = ROOT / "benchmarks" / "results" / f"atari_learning_{name}{options.tag}.csv"
    with open(out, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    print(f"\n{options.env_id}, {options.total_timesteps:,} steps, final return (last quarter), mean +- std over seeds {options.seeds}:")
    for script in options.scripts:
        values = [final[script, seed] for seed in options.seeds]
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        print(f"  {script:<18} {statistics.mean(values):6.2f} +- {spread:.2f}   per seed: " + ", ".join(f"{v:.2f}" for v in values) + (f"   ({' '.join(extra[script])})" if extra[script] else ""))
    print(f"  {'random policy':<18} {statistics.mean(random):6.2f} +- {statistics.stdev(random):.2f}   ({len(random)} games)")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    for color, script in zip(("tab:blue", "tab:red"), SCRIPTS):
        if script not in options.scripts:
            continue
        for seed in options.seeds:
            points = [(r["step"], r["episodic_return"]) for r in rows if r["script"] == script and r["seed"] == seed]
            steps, values = np.array(points).T
            smooth = np.convolve(values, np.ones(5) / 5, mode="valid") if len(values) >= 5 else values
            axis.plot(steps[len(steps) - len(smooth):], smooth, color=color, alpha=0.8, label=f"{script} seed {seed}")
    axis.axhline(statistics.mean(random), color="gray", linestyle="--", label="random policy")
    axis.set(xlabel="environment steps", ylabel="raw game return (5-iteration mean)")
    axis.set_title(f"{options.env_id}: " + " and ".join(f"{script} {' '.join(extra[script])}".strip() for script in options.scripts), fontsize=8)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out.with_suffix(".png"), dpi=120)
    print(f"wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
