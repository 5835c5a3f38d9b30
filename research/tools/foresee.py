"""Does a P3O critic trained on a delayed game foresee what is owed, and for how long? Read from a checkpoint.

On envs/delayed.py's games a reward earned at step t is paid at t + K. The critic's mu[t + k, K - k] predicts what is
paid at t + K, so where the screen at t + k still shows that step t earned a reward, mu[t + k, K - k] follows r[t].
This plays a P3O checkpoint on the game as it ships (the observations are the delayed game's; only the rewards'
timing differs), so r[t] is the reward earned at t, and prints, for k steps later in the same episode, the
correlation of r[t] with mu[t + k, K - k] (and, as a control, with mu[t + k, K - k + 8], where nothing of r[t] is
paid) and that prediction's mean after a reward and after none. A correlation that fades with k is a screen that
forgets what is owed.

    python research/tools/foresee.py runs/RUN/checkpoint.pt MinAtar/SpaceInvaders-v1 --delay 96

Seconds to a minute on the CPU (32 envs, 3000 steps, sampled actions, seed 1).
"""
import argparse
import sys
from dataclasses import replace
from pathlib import Path

import torch
from torch.distributions import Categorical

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import evaluate  # noqa: E402
from late_credit import corr  # noqa: E402  (corr(x, y, mask): Pearson's r over the masked entries)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a p3o_atari.py checkpoint of a delayed game")
    parser.add_argument("env_id", help="the game as it ships, e.g. MinAtar/SpaceInvaders-v1")
    parser.add_argument("--delay", type=int, required=True, help="K, the delay the checkpoint trained at")
    parser.add_argument("--steps", type=int, default=3000)
    opts = parser.parse_args()
    checkpoint, script, run_args = evaluate.load(opts.checkpoint)
    if not hasattr(script, "p3o_advantage"):
        parser.error(f"{opts.checkpoint} is not a P3O checkpoint: only P3O's critic predicts each reward ahead")
    torch.manual_seed(1)
    envs, agent, obs = evaluate.build(script, replace(run_args, env_id=opts.env_id), 32, 1, torch.device("cpu"))
    agent.load_state_dict(checkpoint["model"])
    clock = torch.zeros(32, dtype=torch.long)  # the decisions so far in each env's episode, as the script counts them
    rewards, mus, dones = [], [], []
    with torch.no_grad():
        for _ in range(opts.steps):
            hidden = agent.get_features(obs)
            mus.append(agent.mu(hidden, clock))
            obs, reward, _, _, infos = envs.step(Categorical(logits=agent.actor(hidden)).sample())
            done = infos["episode_length"] > 0
            rewards.append(reward.double())
            dones.append(done)
            clock = torch.where(done, 0, clock + 1)
    r, mu, done = torch.stack(rewards), torch.stack(mus).double(), torch.stack(dones)  # [T, N], [T, N, H], [T, N]
    T, K = r.shape[0], opts.delay
    ended = torch.cumsum(done.long(), 0)  # episodes ended at or before each step
    print(f"{opts.env_id}, {opts.checkpoint} (step {checkpoint['global_step']:,}), K = {K}: corr(r[t], mu[t + k, K - k])")
    for k in (1, 2, 4, 8, 16, 32, 64, 95):
        if k >= K or K - k >= mu.shape[-1]:
            continue
        same = (ended[k - 1 : T - 1] == ended[: T - k]) & ~done[: T - k]  # no episode ends at t .. t + k - 1
        earned, predicted = r[: T - k][same], mu[k:, :, K - k][same]
        control = f"{corr(r[: T - k], mu[k:, :, K - k + 8], same):+.3f}" if K - k + 8 < mu.shape[-1] else "-"
        print(f"  k = {k:2d}: {corr(r[: T - k], mu[k:, :, K - k], same):+.3f} (at offset K - k + 8, where nothing of "
              f"r[t] is paid: {control}); mu after a reward {predicted[earned != 0].mean():.3f}, after none "
              f"{predicted[earned == 0].mean():.3f} ({int(same.sum())} pairs)")


if __name__ == "__main__":
    main()
