#!/usr/bin/env bash
# Breakout-v5 with both algorithms, seed 1, side by side on one lent GPU, over as many device calls as the time
# allows: each call resumes the previous call's checkpoints, trains for SECONDS and sends the run folders back in
# pieces the device tool returns (at most 8 files of 16 MiB; a checkpoint is about 21 MB).
#
#   on the device, `.whl` and `gpu_runs` carried:   bash benchmarks/gpu_train.sh 540 [FLAGS for new runs]
#   here, after each call:                           bash benchmarks/gpu_train.sh --unpack FILES_AT
#
# The runs live in gpu_runs/runs/ (git-ignored); --unpack rebuilds them there from the returned pieces, so the next
# call carries `gpu_runs` and resumes. A run stopped by the time limit resumes from its last checkpoint
# (--save-interval, 25 iterations by default): its curve continues from there. The two runs share the GPU and the
# CPU cores, so their SPS is not the run book's (benchmarks/gpu_check.py measures each alone).
#
# Two checkpoints (2 x 21 MB), the wheels (5 MB) and this repository (27 MB) are more than the 64 MiB a call carries:
# from the second call on, resume one run a call, carrying only its folder, and alternate:
#   SCRIPTS=p3o_atari bash benchmarks/gpu_train.sh 540      (carry .whl and gpu_runs/runs/Breakout-v5__p3o_atari__1__...)
#
# Makes: research/gpu_log.md's GPU Breakout runs of seed 1 (gpu_breakout.py draws them); each call runs SECONDS.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
mkdir -p gpu_runs/runs

if [ "${1:-}" = "--unpack" ]; then
  from=${2:?usage: gpu_train.sh --unpack FILES_AT}
  for first in "$from"/*.tar.part-aa; do
    [ -e "$first" ] || { echo "gpu_train.sh: no *.tar.part-aa pieces in $from" >&2; exit 2; }
    name=$(basename "$first" .tar.part-aa)
    rm -rf "gpu_runs/runs/$name"
    cat "$from/$name".tar.part-* | tar -x -C gpu_runs/runs
    echo "gpu_runs/runs/$name: $(ls "gpu_runs/runs/$name" | tr '\n' ' ')"
  done
  exit 0
fi

seconds=${1:?usage: gpu_train.sh SECONDS [FLAGS for new runs] | --unpack FILES_AT}
shift
out=${OUT:?gpu_train.sh: OUT must name the folder whose files come back}
if ! python3 -c "import envpool, tyro" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

cd gpu_runs
for script in ${SCRIPTS:-p3o_atari ppo_baseline}; do
  checkpoint=$(ls runs/Breakout-v5__"$script"__1__*/checkpoint.pt 2>/dev/null | head -n 1 || true)
  if [ -n "$checkpoint" ]; then
    command=(python3 "$root/$script.py" --resume "$checkpoint")
  else
    extra=()
    [ "$script" = p3o_atari ] && extra=(--horizon 128)
    command=(python3 "$root/$script.py" --env-id Breakout-v5 --seed 1 "${extra[@]}" "$@")
  fi
  echo "$ ${command[*]}"
  # stopped at the limit, a run exits 124: expected, so it does not stop this script
  (status=0; PYTHONUNBUFFERED=1 timeout "$seconds" "${command[@]}" > "$out/$script.log" 2>&1 || status=$?
   echo "$script: exit $status (124: stopped at the time limit)" >> "$out/$script.log") &
done
wait

for run in runs/Breakout-v5__*; do
  [ -f "$run/checkpoint.pt" ] || { echo "$run: no checkpoint yet (too short a call for --save-interval)"; continue; }
  name=$(basename "$run")
  tar -c -C runs "$name" | split -b 15M - "$out/$name.tar.part-"
  echo "$name -> $(ls "$out/$name".tar.part-* | wc -l) pieces in $out"
done
tail -n 3 "$out"/*.log
