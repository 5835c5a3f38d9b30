"""What --clock's table does on an Atari game: how much of it the cross-validation keeps, how much of the updated
critic's residual it removes in the batch it was fitted on, and how much on the next batch, the one it is used on:
of the residual of the critic that acted there (the rollout's critic, the one the table was fitted to), per kept
reward ahead and per window sum; and the window sums' explained variance there, of the critic with the table
(what the run logs as losses/window_explained_variance) and of the critic alone. The clock is the game's
(decisions since the game began, p3o_atari.py's) or, with `life`, restarts at every lost life.

    python benchmarks/atari_clock_probe.py game 30720 1     # clock, steps, seed (Breakout-v5, or --env-id); minutes on a 2-core CPU
    python benchmarks/atari_clock_probe.py game 30720 1 --table-outside-loss   # the critic's loss without the table

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
parser.add_argument("--num-envs", type=int, default=A.Args.num_envs, help="p3o_atari.py's --num-envs")
parser.add_argument("--table-outside-loss", action="store_true", help="the update trains the critic alone on the targets, not critic "
                    "+ table; the table still corrects the rollout's mu and the tail")
options = parser.parse_args()
mode = options.clock
stats = []
fit, windows, act = A.fit_clock_table, A.episode_windows, A.Agent.get_action_and_value
seen = {"critic": [], "targets": None, "table": None}  # the rollout's critic predictions, value targets, table in use


def rollout_critic(self, x, action=None, hidden=None):
    out = act(self, x, action, hidden)
    if hidden is not None:  # a rollout step (the update's minibatches pass no features)
        seen["critic"].append(out[3].clone())
    return out


def value_targets(rewards, terminals, horizon, *rest, **options):
    out = windows(rewards, terminals, horizon, *rest, **options)
    if not rest:  # the value targets' call (the advantage's passes tail_mu)
        seen["targets"] = out[0].clone()
    return out


def gain(residual, prediction, kept):
    """1 - the squared error left after subtracting the prediction / the squared residual: per kept reward ahead
    and per window sum."""
    res, pred = torch.where(kept, residual, 0.0), torch.where(kept, prediction, 0.0)
    per_reward = 1 - (res - pred).square().sum().item() / max(res.square().sum().item(), 1e-12)
    per_window = 1 - (res - pred).sum(-1).square().sum().item() / max(res.sum(-1).square().sum().item(), 1e-12)
    return per_reward, per_window


def window_explained_variance(targets, prediction, kept):
    """As p3o_atari.py logs it (losses/window_explained_variance), over every env: of the window sums."""
    sums, residual = torch.where(kept, targets, 0.0).sum(-1), torch.where(kept, targets - prediction, 0.0).sum(-1)
    return float(A.explained_variance(sums, residual, kept.any(-1)))


def recorded(clocks, residual, window):
    table = fit(clocks, residual, window)
    decided = window > 0
    c = clocks[decided]
    kept = (torch.arange(residual.shape[-1]) < window[..., None]) & decided[..., None]
    rows = clocks.clamp(0, A.CLOCK_ROWS - 1).reshape(-1)
    in_sample = gain(residual, table.index_select(0, rows).view(*clocks.shape, -1), kept)
    row = dict(
        columns_kept=(table != 0).any(0).float().mean().item(),
        last_row_share=(c >= A.CLOCK_ROWS - 1).float().mean().item(),
        clock_median=c.float().median().item(), distinct_clocks=int(c.unique().numel()),
        table_abs_mean=table.abs().mean().item(),
        in_sample_gain=in_sample[0], in_sample_window_gain=in_sample[1],
    )
    critic = torch.stack(seen["critic"][-clocks.shape[0]:])  # [T, N, H]: the critic that acted in this rollout
    if seen["table"] is not None:  # the table that acted beside it, fitted on the previous batch to that same critic
        used = seen["table"].index_select(0, rows).view(*clocks.shape, -1)
        row["next_batch_gain"], row["next_batch_window_gain"] = gain(seen["targets"] - critic, used, kept)
        # and what the rollout's predictions explain of the window sums, with the table (as logged) and without it
        row["window_ev_critic_and_table"] = window_explained_variance(seen["targets"], critic + used, kept)
        row["window_ev_critic_alone"] = window_explained_variance(seen["targets"], critic, kept)
    seen["critic"].clear()
    seen["table"] = table.clone()
    stats.append(row)
    return table


A.fit_clock_table, A.episode_windows, A.Agent.get_action_and_value = recorded, value_targets, rollout_critic
if options.table_outside_loss:
    clock_mu = A.Agent.clock_mu

    def rollout_clock_mu(self, clock):  # the rollout's and the tail's calls pass one clock per env; the update's a minibatch
        return clock_mu(self, clock) if clock.shape == (options.num_envs,) else 0.0

    A.Agent.clock_mu = rollout_clock_mu
if mode == "life":
    step = A.AtariEnvs.step

    def life_step(self, action):
        out = step(self, action)
        self.episode_length[self.resetting] = 0  # the clock restarts at every terminal (a lost life), not only at game over
        return out

    A.AtariEnvs.step = life_step
args = A.Args(env_id=options.env_id, total_timesteps=options.steps, seed=options.seed, num_envs=options.num_envs, horizon=128, clock=True)
A.check_args(args)
result = A.train(args)
print(json.dumps({"mode": mode, "result": {k: v for k, v in result.items() if isinstance(v, (int, float, str))}}))
for i in range(0, len(stats), max(1, len(stats) // 8)):
    print(i, json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in stats[i].items()}))
print("last", json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in stats[-1].items()}))
keys = stats[-1].keys()
print("mean over batches", json.dumps({k: round(float(np.mean([s[k] for s in stats if k in s])), 4) for k in keys}))
print("mean over the last half", json.dumps({k: round(float(np.mean([s[k] for s in stats[len(stats) // 2:]])), 4) for k in keys}))
