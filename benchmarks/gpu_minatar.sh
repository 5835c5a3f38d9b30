#!/usr/bin/env bash
# MinAtar runs of benchmarks/minatar_study.py on a lent GPU machine's 16 host cores: one process a run, one torch thread,
# on the CPU (CUDA hidden: the MinAtar network is too small for a shared GPU to help). Runs still going after
# LIMIT_S seconds are stopped; their checkpoints (every 5 iterations) come back in $OUT/checkpoints_{0,1}.tgz and their
# TensorBoard events in $OUT/events.tgz; the finished runs' rows are in $OUT/results/. Needs .whl carried (benchmarks/gpu_wheels.sh).
#
#     bash benchmarks/gpu_minatar.sh LIMIT_S STEPS WORKERS "GAMES" "ARMS" "SEEDS"
#     bash benchmarks/gpu_minatar.sh 20 16384 4 "Breakout" "ppo_0.99 p3o_h128" "1 2" --smoke   # here, to try it
#
# Here afterwards: tar xzf each of FILES_AT/*.tgz; python benchmarks/minatar_study.py run ... resumes the stopped runs from
# their checkpoints and exports them (the finished ones: python benchmarks/minatar_study.py export --machine h100-host).
set -u
: "${OUT:?run on the device machine, where \$OUT is set}"
limit=$1 steps=$2 workers=$3 games=$4 arms=$5 seeds=$6
if [ "${7:-}" != --smoke ]; then
  [ -d /tmp/site/gymnasium ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=
nproc
python3 -c "import torch, gymnasium, minatar, tyro; print('torch', torch.__version__, 'gymnasium', gymnasium.__version__)"
mkdir -p runs "$OUT/results"
# The runs in a process group of their own, so the time limit stops them all and nothing else on the machine.
# shellcheck disable=SC2086
setsid python3 benchmarks/minatar_study.py run --steps "$steps" --workers "$workers" --games $games --arms $arms --seeds $seeds \
  --machine "$(hostname)-cpu" --results "$OUT/results" &
group=$!
(sleep "$limit"; kill -- -"$group" 2>/dev/null) &
timer=$!
wait "$group"
kill "$timer" 2>/dev/null
sleep 3
tail -qn 2 runs/*.log
# At most 8 files come back from a call (16 MiB each): the events in one archive, the checkpoints (1.3 MB each
# compressed) in two, the results' three CSVs, and two left for the rest of the call.
tar czf "$OUT/events.tgz" runs/*.log runs/MinAtar_*/events*
folders=(runs/MinAtar_*/)
for part in 0 1; do
  files=$(for i in "${!folders[@]}"; do [ $((i % 2)) = $part ] && echo "${folders[$i]}checkpoint.pt"; done)
  [ -z "$files" ] || tar czf "$OUT/checkpoints_$part.tgz" $files
done
