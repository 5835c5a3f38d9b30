"""Carry the Ocean run cache over a change to the scripts' text that leaves their training bit for bit the same.

    python benchmarks/ocean_rekey.py OLD_COMMIT --check 4      # retrain 4 cached runs, compare, then copy the rows
    python benchmarks/ocean_rekey.py OLD_COMMIT --dry-run      # only say how many rows would be copied

The cache (benchmarks/results/ocean_runs.jsonl.gz) keys each run by a hash of the code it depends on
(ocean_studies.script_hash: p3o_ocean.py for P3O; ppo_baseline.py and the Ocean envs' source for PPO). A change to
that text, a comment or a reordering, retrains every study. When the change leaves training the same, this copies
the rows of OLD_COMMIT's hashes under today's, each marked `rehashed_from`, after retraining `--check` of them (the
smallest budgets, P3O and PPO alike) with today's scripts and comparing their curves and scores to the cached ones.
Any difference stops it before anything is written. tests/test_loop_wiring.py and tests/test_torchrun.py are the
other half of the proof: the loops train bit for bit alike.

Makes no figure; the README's tables redraw from the copied rows. Time: the checked runs (seconds to minutes each).
"""
import argparse
import gzip
import hashlib
import importlib.util
import inspect
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
import ocean_studies  # noqa: E402


def old_hashes(commit):
    """script_hash of both algorithms as OLD_COMMIT's p3o_ocean.py and ppo_baseline.py would give it."""
    with tempfile.TemporaryDirectory() as folder:
        files = {}
        for name in ("p3o_ocean.py", "ppo_baseline.py"):
            files[name] = subprocess.run(["git", "show", f"{commit}:{name}"], cwd=ROOT, check=True, capture_output=True).stdout
            (Path(folder) / name).write_bytes(files[name])
        loader = importlib.util.spec_from_file_location("old_p3o_ocean", Path(folder) / "p3o_ocean.py")
        old = sys.modules["old_p3o_ocean"] = importlib.util.module_from_spec(loader)  # inspect finds it there
        loader.loader.exec_module(old)
        envs = "".join(inspect.getsource(cls) for cls in (old.OceanEnv, *old.OCEAN_ENVS.values()))
    return {"p3o": hashlib.sha256(files["p3o_ocean.py"]).hexdigest()[:12],
            "ppo": hashlib.sha256(files["ppo_baseline.py"] + envs.encode()).hexdigest()[:12]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commit", help="the commit whose scripts wrote the cached rows")
    parser.add_argument("--check", type=int, default=4, help="runs to retrain and compare (at least one per algorithm)")
    parser.add_argument("--dry-run", action="store_true")
    opts = parser.parse_args()
    old = old_hashes(opts.commit)
    new = {algo: ocean_studies.script_hash(algo) for algo in ("p3o", "ppo")}
    runs = ocean_studies.load_runs()
    have = {ocean_studies.key(row) for row in runs.values()}
    copies = []
    for row in runs.values():
        if row["script"] == old[row["algo"]] and old[row["algo"]] != new[row["algo"]]:
            copy = dict(row, script=new[row["algo"]], rehashed_from=row["script"])
            if ocean_studies.key(copy) not in have:
                copies.append((row, copy))
    print(f"old hashes {old}, today's {new}: {len(copies)} rows to copy", flush=True)
    if not copies or opts.dry_run:
        return
    ocean_studies.start_worker()
    for algo in ("p3o", "ppo"):
        rows = sorted((pair for pair in copies if pair[0]["algo"] == algo), key=lambda pair: pair[0]["total_timesteps"])
        for cached, copy in rows[: max(1, opts.check // 2)]:
            fresh = ocean_studies.execute({k: copy[k] for k in ("algo", "env", "seed", "total_timesteps", "options", "script")})
            same = fresh["curve"] == cached["curve"] and fresh["score"] == cached["score"]
            print(f"  {algo} {cached['env']} seed {cached['seed']} {cached['options']}: {'same' if same else 'DIFFERENT'} "
                  f"(score {fresh['score']} against {cached['score']})", flush=True)
            if not same:
                sys.exit("ocean_rekey.py: today's scripts train differently: nothing copied")
    with gzip.open(ocean_studies.RUNS_FILE, "at") as out:
        out.writelines(json.dumps(copy) + "\n" for _, copy in copies)
    print(f"{len(copies)} rows copied to {ocean_studies.RUNS_FILE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
