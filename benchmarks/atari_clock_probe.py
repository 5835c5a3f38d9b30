"""What --clock's table does on an Atari game: how much of it the cross-validation keeps, how much of the updated
critic's residual it removes in the batch it was fitted on, and (in the run's TensorBoard log,
losses/window_explained_variance) how well the critic plus the table predicts the next rollout. The clock is the
game's (decisions since the game began, p3o_atari.py's) or, with `life`, restarts at every lost life.

    python benchmarks/atari_clock_probe.py game 30720 1     # clock, steps, seed (Breakout-v5, or --env-id); minutes on a 2-core CPU

Prints the refits' statistics: every few batches, then means over all of them and over the last half."""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np
import torch
import p3o_atari as A

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("clock", choices=["game", "life"])
parser.add_argument("steps", type=int)
parser.add_argument("seed", type=int)
parser.add_argument("--env-id", default="Breakout-v5")
options = parser.parse_args()
mode = options.clock
stats = []
fit = A.fit_clock_table


def recorded(clocks, residual, window, num_envs):
    table = fit(clocks, residual, window, num_envs)
    decided = window > 0
    c = clocks[decided]
    kept = torch.arange(residual.shape[-1]) < window[..., None]
    res = torch.where(kept, residual, 0.0)
    pred = table.index_select(0, clocks.clamp(0, A.CLOCK_ROWS - 1).reshape(-1)).view(*clocks.shape, -1)
    after = torch.where(kept, residual - pred, 0.0)
    stats.append(dict(
        columns_kept=(table != 0).any(0).float().mean().item(),
        last_row_share=(c >= A.CLOCK_ROWS - 1).float().mean().item(),
        clock_median=c.float().median().item(), distinct_clocks=int(c.unique().numel()),
        table_abs_mean=table.abs().mean().item(),
        in_sample_gain=1 - after.square().sum().item() / max(res.square().sum().item(), 1e-12),
    ))
    return table


A.fit_clock_table = recorded
if mode == "life":
    step = A.AtariEnvs.step

    def life_step(self, action):
        out = step(self, action)
        self.episode_length[self.resetting] = 0  # the clock restarts at every terminal (a lost life), not only at game over
        return out

    A.AtariEnvs.step = life_step
args = A.Args(env_id=options.env_id, total_timesteps=options.steps, seed=options.seed, horizon=128, clock=True)
A.check_args(args)
result = A.train(args)
print(json.dumps({"mode": mode, "result": {k: v for k, v in result.items() if isinstance(v, (int, float, str))}}))
for i in range(0, len(stats), max(1, len(stats) // 8)):
    print(i, json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in stats[i].items()}))
print("last", json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in stats[-1].items()}))
keys = stats[0].keys()
print("mean over batches", json.dumps({k: round(float(np.mean([s[k] for s in stats])), 4) for k in keys}))
print("mean over the last half", json.dumps({k: round(float(np.mean([s[k] for s in stats[len(stats) // 2:]])), 4) for k in keys}))
