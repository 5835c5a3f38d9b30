#!/usr/bin/env bash
# MinAtar runs of benchmarks/minatar_study.py on a lent GPU machine's 16 host cores: one process a run, one torch thread,
# on the CPU (CUDA hidden: the MinAtar network is too small for a shared GPU to help). Runs still going after
# LIMIT_S seconds are stopped; their checkpoints (every 5 iterations) come back with their TensorBoard events in
# $OUT/runs.tgz, and the finished runs' rows in $OUT/results/. Needs .whl carried (benchmarks/gpu_wheels.sh).
#
#     bash benchmarks/gpu_minatar.sh LIMIT_S STEPS WORKERS "GAMES" "ARMS" "SEEDS"
#     bash benchmarks/gpu_minatar.sh 20 16384 4 "Breakout" "ppo_0.99 p3o_h128" "1 2" --smoke   # here, to try it
#
# Here afterwards: tar xzf FILES_AT/runs.tgz; python benchmarks/minatar_study.py run ... resumes the stopped runs from
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
# shellcheck disable=SC2086
timeout "$limit" python3 benchmarks/minatar_study.py run --steps "$steps" --workers "$workers" --games $games --arms $arms --seeds $seeds \
  --machine "$(hostname)-cpu" --results "$OUT/results"
pkill -f benchmarks/flushing.py
sleep 3
tail -qn 2 runs/*.log
tar czf "$OUT/runs.tgz" runs/*.log runs/MinAtar_*/
