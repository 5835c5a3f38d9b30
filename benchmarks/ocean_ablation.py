"""One P3O flag, several values, Ocean envs x seeds: final scores with mean and spread, and a CSV of raw runs.

    python benchmarks/ocean_ablation.py --flag tail --values bootstrap none --envs squared delay mixed --seeds 1 2 3
    python benchmarks/ocean_ablation.py --flag weight_norm --values max sum --envs delay --seeds 1 2 3 4 5

Each run is p3o_ocean.train with the script's defaults and that flag changed. Values are parsed with the type of
the flag's default. Writes benchmarks/results/ablation_{flag}.csv.
"""
import argparse
import csv
import os
import statistics
import sys
import tempfile
from dataclasses import fields, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import p3o_ocean  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flag", required=True, help="an Args field of p3o_ocean.py, e.g. tail, weight_norm, puf")
    parser.add_argument("--values", nargs="+", required=True)
    parser.add_argument("--envs", nargs="+", default=list(p3o_ocean.OCEAN_ENVS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--total-timesteps", type=int, default=0, help="0: each env's own budget")
    options = parser.parse_args()

    defaults = p3o_ocean.Args()
    kind = {f.name: type(getattr(defaults, f.name)) for f in fields(defaults)}
    if options.flag not in kind:
        parser.error(f"--flag {options.flag!r} is not a field of p3o_ocean.Args")
    values = [kind[options.flag](v) for v in options.values]
    out = ROOT / "benchmarks" / "results" / f"ablation_{options.flag}.csv"
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)  # the runs/ folders of a study are thrown away; the CSV keeps the results
        for env_id in options.envs:
            for seed in options.seeds:
                for value in values:  # the values interleaved, so a slow spell of the machine hits them alike
                    args = replace(defaults, env_id=env_id, seed=seed, progress=False, total_timesteps=options.total_timesteps, **{options.flag: value})
                    result = p3o_ocean.train(args)
                    rows.append({"env": env_id, options.flag: value, "seed": seed, "score": round(result["score"], 4), "solved": result["solved"], "steps": result["steps"], "SPS": result["SPS"]})
                    print(rows[-1], flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    print(f"\nfinal score, mean +- std over seeds {options.seeds} ({out}):")
    print(f"{'env':<12}" + "".join(f"{str(v):>22}" for v in values))
    for env_id in options.envs:
        cells = []
        for value in values:
            scores = [r["score"] for r in rows if r["env"] == env_id and r[options.flag] == value]
            spread = statistics.stdev(scores) if len(scores) > 1 else 0.0
            cells.append(f"{statistics.mean(scores):.3f} +- {spread:.3f}")
        print(f"{env_id:<12}" + "".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    main()
