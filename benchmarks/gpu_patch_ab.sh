#!/usr/bin/env bash
# A change's speed on a lent GPU, in one call: the run book's Ocean step (benchmarks/gpu_check.py --steps ocean:
# P3O at H = 32 and 128 against PPO, at 256 and 4,096 envs) for this checkout and for a copy with PATCH applied,
# alternating, REPEATS times, so a busy spell of the machine hits both alike. Each run's JSON and log land in
# $OUT/before_R and $OUT/after_R; the last lines print each case's median SPS and median ratio to PPO.
#
#     bash benchmarks/gpu_patch_ab.sh PATCH [REPEATS [GPU_CHECK_FLAGS...]]
#     bash benchmarks/gpu_patch_ab.sh research/patches/tie_one_block_cuda.patch 3
#     OUT=/tmp/ab bash benchmarks/gpu_patch_ab.sh PATCH 1 --smoke      # a dry run of the script on the CPU
#
# About 30 s a run book on an H200 (2026-11-27), so three repeats take about 3.5 minutes with the start. Needs .whl
# carried (benchmarks/gpu_wheels.sh), as gpu_check.py does.
#
# Makes: research/gpu_log.md's speed of a patch against the code without it (on a lent GPU; about 3.5 minutes).
set -eu
: "${OUT:?run on the device machine, where \$OUT is set}"
patch=$(realpath "$1") repeats=${2:-3}
shift $(($# < 2 ? $# : 2))
python3 -c "import tyro" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
rm -rf /tmp/patched && mkdir /tmp/patched
tar --exclude=./.whl --exclude=./runs --exclude=./.git -cf - . | tar -xf - -C /tmp/patched
(cd /tmp/patched && { git apply "$patch" || patch -p1 < "$patch"; })
for r in $(seq "$repeats"); do
  python3 benchmarks/gpu_check.py "$OUT/before_$r" --steps ocean "$@" > /dev/null
  (cd /tmp/patched && python3 benchmarks/gpu_check.py "$OUT/after_$r" --steps ocean "$@" > /dev/null)
  echo "repeat $r done"
done
python3 - "$OUT" "$repeats" <<'EOF'
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
for tree in ("before", "after"):
    rows = {}
    for r in range(1, repeats + 1):
        for row in json.load(open(f"{out}/{tree}_{r}/gpu_check.json"))["steps"]["ocean"]["runs"]:
            rows.setdefault((row["case"], row["num_envs"]), []).append(row)
    for (case, envs), runs in rows.items():
        ratio = [run["over_ppo"] for run in runs if "over_ppo" in run]
        print(f"{tree:<7} {case:<20} {envs:>5} envs  SPS {statistics.median(run['SPS'] for run in runs):>11,.0f}"
              + (f"  over PPO {statistics.median(ratio):.3f} ({', '.join(f'{x:.3f}' for x in ratio)})" if ratio else ""))
EOF
