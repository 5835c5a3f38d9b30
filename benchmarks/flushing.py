"""Run a training script with its TensorBoard writer flushing every 10 s instead of every 120 s, so a run stopped
by a time limit (benchmarks/gpu_breakout_seeds.sh) keeps its curve up to its last 10 s. The script is unchanged.

    python benchmarks/flushing.py p3o_atari.py --horizon 128 ...

Makes no figure: the wrapper behind the Breakout runs of the README and research/gpu_log.md (gpu_breakout_seeds.sh and the
368k/614k CPU runs). Adds no time to the run it wraps.
"""
import functools
import os
import runpy
import sys

from torch.utils.tensorboard import SummaryWriter

SummaryWriter.__init__ = functools.partialmethod(SummaryWriter.__init__, flush_secs=10)
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))  # as `python SCRIPT` would have it
runpy.run_path(sys.argv[0], run_name="__main__")
