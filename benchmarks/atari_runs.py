"""Helpers for the Atari benchmarks: run a top-level script as a subprocess and read its TensorBoard scalars.

Makes no figure: the helpers atari_learning.py, gpu_breakout.py and gpu_check.py share. Instant.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# glibc returns every freed block of 32 MB and more to the kernel and maps it afresh on the next use; in this
# VM each fresh page costs a fault of ~16 us, and a CNN update on the CPU allocates ~130 MB per minibatch that way
# (measured: 34k faults per minibatch, none with these settings). Applied to every script alike.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(2 << 30), "MALLOC_TOP_PAD_": str(256 << 20)}


def start(script, flags, threads=None):
    """Start `python script flags...` in the repository root; returns the Popen (stdout piped)."""
    env = dict(os.environ, **MALLOC_ENV)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    command = [sys.executable, str(ROOT / script), "--no-progress", *map(str, flags)]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(process):
    """Wait for a run; returns its run folder. Raises with the run's output if it failed."""
    output, _ = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"{process.args} exited with {process.returncode}:\n{output}")
    return ROOT / re.search(r"(runs/\S+)", output).group(1)


def scalars(run_dir, tag):
    """[(wall_time, step, value)] of one TensorBoard tag."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return [(e.wall_time, e.step, e.value) for e in events.Scalars(tag)] if tag in events.Tags()["scalars"] else []


def last_quarter(curve, total_steps):
    """The returns of a [(step, episodic_return)] curve logged in the last quarter of a run of `total_steps`: a run's
    final return is their mean (the same measure for every Breakout figure here)."""
    return [value for step, value in curve if step > 0.75 * total_steps]
