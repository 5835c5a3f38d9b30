#!/usr/bin/env bash
# Breakout-v5 runs of several seeds and variants at once on a lent GPU machine (16 CPU cores, one GPU), for seeds
# that the 2-core CPU cannot afford. Each run is one process (one torch thread; the model and the advantage on the
# GPU). Every run's TensorBoard events and logs come back in one file, $OUT/events.tgz (checkpoints stay behind).
#
#     bash benchmarks/gpu_breakout_seeds.sh LIMIT_S STEPS "SEEDS" NAME="FLAGS" [NAME="FLAGS" ...]
#     bash benchmarks/gpu_breakout_seeds.sh --resume LIMIT_S      # the next call, while the machine is still warm
#
# NAME is the run's --exp-name: ppo_baseline runs ppo_baseline.py, any other name p3o_atari.py, each with FLAGS.
# A run still going after LIMIT_S seconds is stopped; --resume continues every run from its last checkpoint
# (written each 25 iterations). Each run goes through benchmarks/flushing.py, so a stopped run keeps its curve.
# Measured on one H200, 2026-11-26: twelve runs at once go at about 365-405 SPS each, so 200k steps take about
# 9 minutes, two calls (450 s, then --resume 270 s). Needs .whl carried
# (benchmarks/gpu_wheels.sh). Here: tar xzf FILES_AT/events.tgz, then
# python benchmarks/gpu_breakout.py --seed-runs runs --out NAME.csv.
#
# Makes: the README's and research/ablations.md's Breakout seeds run on a lent H200 (the *_gpu_h200_*.csv in results/).
set -u
: "${OUT:?run on the device machine, where \$OUT is set}"
[ -d /tmp/site/envpool ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=2147483648 MALLOC_TOP_PAD_=268435456
script_of() { if [ "$1" = ppo_baseline ]; then echo ppo_baseline.py; else echo p3o_atari.py; fi; }
if [ "$1" = --resume ]; then
  for run in runs/Breakout-v5__*/; do
    name=$(basename "$run" | sed -E 's/^Breakout-v5__(.*)__[0-9]+__[0-9]+$/\1/')
    timeout "$2" python3 benchmarks/flushing.py "$(script_of "$name")" --resume "${run}checkpoint.pt" --no-progress > "${run}resume.log" 2>&1 &
  done
else
  limit=$1 steps=$2 seeds=$3
  shift 3
  nvidia-smi -L
  python3 -c "import torch, cupy, envpool; print('torch', torch.__version__, 'cupy', cupy.__version__, 'envpool', envpool.__version__)"
  mkdir -p runs
  for variant in "$@"; do
    name=${variant%%=*} flags=${variant#*=}
    for seed in $seeds; do
      # shellcheck disable=SC2086
      timeout "$limit" python3 benchmarks/flushing.py "$(script_of "$name")" --no-progress --exp-name "$name" --env-id Breakout-v5 \
        --total-timesteps "$steps" --seed "$seed" $flags > "runs/${name}_s$seed.log" 2>&1 &
    done
  done
fi
wait
tail -qn 1 runs/*.log runs/*/resume.log 2>/dev/null
tar czf "$OUT/events.tgz" runs/*.log runs/*/events* $(ls runs/*/resume.log 2>/dev/null)
