#!/usr/bin/env bash
# p3o_atari.py on one Ocean env, once plain and once under torchrun with 2 gloo ranks sharing the one GPU: the SPS
# and the phase split of each, and what crosses between ranks (the all_sum calls and bytes per iteration and per
# optimizer step, counted in a short run of this machine's p3o_atari.py). About 1 to 2 minutes on an H100.
#
#   on the device, `.whl` carried (benchmarks/gpu_wheels.sh):   bash benchmarks/gpu_torchrun.sh
#   here, on the CPU, in about a minute:                        bash benchmarks/gpu_torchrun.sh --smoke
#
# Two ranks on one GPU is not a scale-out: they share its SMs and the 16 cores, and gloo moves each all-reduce
# through host memory. It measures the code's cost under torchrun (the gradient's all-reduce, the statistics' small
# ones, the gathers at a checkpoint), not what N GPUs give: README.md's "Past one GPU" has that on paper.
# ENVS, STEPS and ITERATIONS override the sizes (defaults 1024, 128, 8: 1,048,576 steps a run).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
if [ "${1:-}" = "--smoke" ]; then
  envs=${ENVS:-16} steps=${STEPS:-16} iterations=${ITERATIONS:-3} horizon=32
else
  envs=${ENVS:-1024} steps=${STEPS:-128} iterations=${ITERATIONS:-8} horizon=128
fi
if ! python3 -c "import tyro" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(--env-id ocean/squared --num-envs "$envs" --num-steps "$steps" --total-timesteps $((envs * steps * iterations))
       --horizon "$horizon" --learning-rate 3e-3 --save-interval 0 --no-progress)
python3 -c "import torch; print('torch', torch.__version__, '|', torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU: the CPU')"

summary() {  # the run's last SPS and its phase split, from its TensorBoard events
  python3 - "$1" "$2" <<'EOF'
import sys
from pathlib import Path
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

label, folder = sys.argv[1], Path(sys.argv[2])
(run,) = (folder / "runs").iterdir()
events = EventAccumulator(str(run))
events.Reload()
last = {tag: events.Scalars(tag)[-1].value for tag in events.Tags()["scalars"]}
phases = ", ".join(f"{tag[5:-9]} {value:.3f}" for tag, value in sorted(last.items()) if tag.startswith("perf/"))
sps = events.Scalars("charts/SPS")
after_first = (sps[-1].step - sps[0].step) / max(sps[-1].wall_time - sps[0].wall_time, 1e-9) if len(sps) > 1 else float("nan")
print(f"{label}: {int(last['charts/SPS']):,} SPS over {sps[-1].step:,} steps, {after_first:,.0f} after the first iteration | phases: {phases}")
EOF
}

mkdir -p "$work/plain" "$work/torchrun"
echo "$ python3 p3o_atari.py ${flags[*]}"
(cd "$work/plain" && PYTHONUNBUFFERED=1 python3 "$root/p3o_atari.py" "${flags[@]}")
summary "plain, 1 process" "$work/plain"
echo "$ P3O_DIST_BACKEND=gloo python3 -m torch.distributed.run --standalone --nproc_per_node 2 p3o_atari.py ${flags[*]}"
(cd "$work/torchrun" && PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-4} P3O_DIST_BACKEND=gloo \
  python3 -m torch.distributed.run --standalone --nproc_per_node 2 "$root/p3o_atari.py" "${flags[@]}")
summary "torchrun, 2 gloo ranks" "$work/torchrun"

# What crosses between ranks: every all_sum of a short single-process run, counted (in one process all_sum does
# nothing, but it is called with the same tensors); and the gradient's bytes at Breakout's Nature CNN.
cd "$work" && python3 - "$root" "$horizon" <<'EOF'
import sys

sys.path.insert(0, sys.argv[1])
import torch

import p3o_atari

horizon = int(sys.argv[2])
calls = []
all_sum = p3o_atari.all_sum


def counted(*tensors):
    calls.append(4 * sum(tensor.numel() for tensor in tensors))  # float32 on the wire
    return all_sum(*tensors)


p3o_atari.all_sum = counted
args = p3o_atari.Args(env_id="ocean/squared", num_envs=16, num_steps=128, total_timesteps=16 * 128 * 2, horizon=horizon, progress=False, save_interval=0, cuda=False)
p3o_atari.train(args)
iterations, steps = args.num_iterations, args.num_iterations * args.update_epochs * args.num_minibatches
agent = p3o_atari.Agent((6,), 5, args)
gradient = 4 * sum(p.numel() for p in agent.parameters())
print(f"all_sum at H = {horizon}: {len(calls) / iterations:.0f} calls and {sum(calls) / iterations / 1e6:.3f} MB an iteration ({args.update_epochs} x {args.num_minibatches} optimizer steps): "
      f"{len(calls) / steps:.1f} calls and {sum(calls) / steps / 1e3:.1f} kB an optimizer step, of which the gradient {gradient / 1e3:.1f} kB (the Ocean MLP)")
for name, shape, actions in (("Breakout's Nature CNN", (4, 84, 84), 4),):
    parameters = sum(p.numel() for p in p3o_atari.Agent(shape, actions, args).parameters())
    print(f"{name} at H = {horizon}: {parameters:,} parameters, {4 * parameters / 1e6:.2f} MB of gradient an optimizer step, "
          f"{4 * parameters * args.update_epochs * args.num_minibatches / 1e6:.1f} MB an iteration at the default 4 x 4")
EOF
