"""Throughput of checkouts side by side: how a change is judged against PPO and against the code before it.

    python benchmarks/speed_ab.py PPO=.:ppo P3O=.                              # this checkout, P3O against PPO
    git worktree add /tmp/before HEAD~1
    python benchmarks/speed_ab.py --repeats 3 PPO=.:ppo before=/tmp/before after=.

Each LABEL=ROOT[:ALGO] (ALGO p3o by default, or ppo) trains the throughput study's run (ocean_studies.py's
THROUGHPUT_STEPS on `squared` and `delay`, seed 1, one thread) with the scripts of the checkout at ROOT, each run in
a fresh process. The configurations alternate within every repeat, so a busy spell of the machine hits them alike.
It prints each run's SPS and advantage share as it ends, then per env and configuration the median SPS and the
median of its per-repeat ratios to the first configuration. Set the MALLOC_* variables of the README first.

Makes: the README's speed ratio of P3O to PPO (results/speed_cheaper.log). Time on the 2-core CPU: a few seconds a
run, about 5 minutes for three configurations and five repeats.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, os, sys
root, algo, env = sys.argv[1:4]
sys.path[:0] = [os.path.join(root, "benchmarks"), root]
import torch
import ocean_studies
torch.set_num_threads(1)
row = ocean_studies.execute(dict(ocean_studies.spec(algo, env, 1, 1.0), total_timesteps=ocean_studies.THROUGHPUT_STEPS))
print("ROW " + json.dumps({"SPS": row["SPS"], "advantage_fraction": row["advantage_fraction"]}))
"""


def measure(root, algo, env):
    """SPS and advantage share of one throughput run of the checkout at `root`, in a fresh process."""
    done = subprocess.run([sys.executable, "-c", CHILD, str(Path(root).resolve()), algo, env], capture_output=True, text=True, cwd=tempfile.gettempdir())  # its runs/ folder lands outside the checkouts
    rows = [line for line in done.stdout.splitlines() if line.startswith("ROW ")]
    if done.returncode != 0 or not rows:
        sys.exit(f"speed_ab.py: error: the run of {root} ({algo}, {env}) failed:\n{done.stderr[-2000:]}")
    return json.loads(rows[-1][4:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+", metavar="LABEL=ROOT[:ALGO]")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--envs", nargs="+", default=["squared", "delay"])
    opts = parser.parse_args()
    configs = []
    for text in opts.configs:
        label, _, target = text.partition("=")
        root, _, algo = target.partition(":")
        if not label or not Path(root, "p3o_ocean.py").is_file() or algo not in ("", "p3o", "ppo"):
            parser.error(f"{text!r}: expected LABEL=ROOT[:ALGO], ROOT a checkout of this repository, ALGO p3o or ppo")
        configs.append((label, root, algo or "p3o"))
    rows = []
    for repeat in range(opts.repeats):
        for env in opts.envs:
            for label, root, algo in configs:
                rows.append(dict(measure(root, algo, env), env=env, label=label, repeat=repeat))
                print(rows[-1], flush=True)
    base = configs[0][0]
    for env in opts.envs:
        def sps(label, repeat):
            return next(row["SPS"] for row in rows if (row["env"], row["label"], row["repeat"]) == (env, label, repeat))

        for label, _, _ in configs:
            mine = [row for row in rows if row["env"] == env and row["label"] == label]
            ratio = statistics.median(sps(label, r) / sps(base, r) for r in range(opts.repeats))
            print(f"{env:8s} {label:16s} {statistics.median(row['SPS'] for row in mine):9,.0f} SPS  {ratio:.3f}x {base}"
                  f" (median of {opts.repeats} per-repeat ratios)  advantage {100 * statistics.median(row['advantage_fraction'] for row in mine):.1f}%")


if __name__ == "__main__":
    main()
