"""One rank of a torchrun launch of p3o_atari.py or ppo_baseline.py, run as the user runs it, with a record kept for
tests/test_torchrun.py:

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/torchrun_worker.py OUT SCRIPT FLAGS...

The script is imported and its own `__main__` block runs in its namespace, so what it calls can be watched: every
call of a function that takes a statistic over the batch (its inputs, this rank's, and its result, the global one),
and the agent's parameters at the end. Each rank writes OUT/rank{R}.pt; rank 0's checkpoints are also kept as
OUT/iteration{N}.pt."""
import importlib.util
import os
import shutil
import sys
import textwrap

import torch

STATISTICS = ("masked_mean", "explained_variance", "window_sum_variance", "tie_z", "step_clock_table")


def detached(value):
    return value.detach().clone() if torch.is_tensor(value) else value


def main():
    out, script, *flags = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    spec = importlib.util.spec_from_file_location(os.path.basename(script)[:-3], script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    calls, agents = [], []

    def watched(name, function):
        def call(*args):
            inputs = [detached(arg) for arg in args]  # step_clock_table changes its first argument in place
            result = function(*args)
            calls.append((name, inputs, detached(args[0] if name == "step_clock_table" else result)))
            return result

        return call

    for name in STATISTICS:
        if hasattr(module, name):
            setattr(module, name, watched(name, getattr(module, name)))
    agent_init = module.Agent.__init__

    def tracked_init(self, *args, **kwargs):
        agent_init(self, *args, **kwargs)
        agents.append(self)

    module.Agent.__init__ = tracked_init
    save = module.save_checkpoint

    def keep_every_checkpoint(path, state):
        save(path, state)
        shutil.copy(path, os.path.join(out, f"iteration{state['iteration']}.pt"))

    module.save_checkpoint = keep_every_checkpoint
    text = open(script).read()
    main_block = textwrap.dedent(text[text.index('if __name__ == "__main__":\n') :].split("\n", 1)[1])
    sys.argv = [script, *flags]
    try:
        exec(compile(main_block, script, "exec"), module.__dict__)
    finally:
        rank = int(os.environ.get("RANK", 0))
        model = {name: value.detach().clone() for name, value in agents[-1].state_dict().items()} if agents else None
        torch.save({"calls": calls, "model": model, "world_size": int(os.environ.get("WORLD_SIZE", 1))}, os.path.join(out, f"rank{rank}.pt"))


if __name__ == "__main__":
    main()
