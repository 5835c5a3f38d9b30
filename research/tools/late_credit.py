"""Does the advantage carry a reward that comes K steps late? Issue 80's part 3, on envs/delayed.py's MinAtar games.

Trains one arm of benchmarks/minatar_study.py (its CONFIG) on a game whose rewards are paid K steps late, and, at
every iteration, reads the rollout the advantage is computed from:
- P3O: the tie gate's offsets (how many tie, z at the offsets around K, the largest z at or past K), and the
  advantage's near part (offsets below K) and far part (from K on), as far_variance.py splits them;
- both algorithms: how much each advantage (and each P3O part) correlates with what the decision's own step earned,
  the rewards paid K to K + W - 1 steps later (inside the episode, before its last step, where the owed rest is paid).

A decision's earned reward comes to the advantage only through the offsets at or past K: a near part that correlates
with it learned to foresee it from the screen (the critic's mu), a far part that does carries it as paid.

    python research/tools/late_credit.py --game Breakout --delay 32 --arm p3o_h128 --seed 1
    python research/tools/late_credit.py --game Breakout --delay 32 --arm ppo_0.99 --seed 1
    python research/tools/late_credit.py --game Breakout --delay 0 --arm p3o_h128 --seed 1     # the game as it ships

Prints the means over the run's second half. Time: one 2M-step run (3 to 4 minutes alone on the 2-core CPU).
"""
import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]


def earned(rewards, terminals, delay, width):
    """E[t, n], the rewards paid `delay` to `delay` + width - 1 steps after decision t, and where it is known: every one
    of those steps inside the rollout and before the last step of t's episode (which pays the owed rest at once)."""
    import p3o_atari

    T = rewards.shape[0]
    ends = p3o_atari.episode_ends(terminals)  # the last step of t's episode (T where it does not end in the rollout)
    last = torch.arange(T)[:, None] + delay + width - 1
    padded = torch.cat([rewards, rewards.new_zeros(delay + width, rewards.shape[1])])
    total = sum(padded[delay + i : delay + i + T] for i in range(width))
    return total, (last < ends) & (last < T)


def corr(x, y, mask):
    x, y = x[mask].double(), y[mask].double()
    x, y = x - x.mean(), y - y.mean()
    return float((x * y).sum() / (x.square().sum() * y.square().sum()).sqrt().clamp(min=1e-30))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="Breakout")
    parser.add_argument("--delay", type=int, default=32, help="K (0: the game as it ships)")
    parser.add_argument("--arm", default="p3o_h128", help="an arm of minatar_study.py")
    parser.add_argument("--steps", type=int, default=2_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--width", type=int, default=16, help="W, how many earned steps count as the decision's")
    opts = parser.parse_args()
    torch.set_num_threads(1)
    import minatar_study

    script_name, arm_flags = minatar_study.ARMS[opts.arm]
    log = []
    K, W = opts.delay, opts.width
    if script_name == "p3o_atari.py":
        import p3o_atari as script

        tie_z, advantage = script.tie_z, script.p3o_advantage

        def recording_tie_z(*args):
            z = tie_z(*args)
            log.append({"z": z.clone()})
            return z

        def recording_advantage(rewards, terminals, mu, sigma, tail_mu, lam, tied=None):
            today = advantage(rewards, terminals, mu, sigma, tail_mu, lam, tied)
            omega = script.precision(sigma)
            near_only = sigma.clone()
            near_only[max(K, 1) :] = script.MAX_SIGMA  # weight 0 past the near offsets (below float32's resolution)
            near = advantage(rewards, terminals, mu, near_only, tail_mu, lam, tied) * (omega[: max(K, 1)].max() / omega.max())
            target, known = earned(rewards, terminals, K, W)
            log[-1].update(tied=int(tied.sum()), all=corr(today, target, known), near=corr(near, target, known),
                           far=corr(today - near, target, known), std_near=near.std().item(),
                           std_far=(today - near).std().item())
            return today

        script.tie_z, script.p3o_advantage = recording_tie_z, recording_advantage
    else:
        import ppo_baseline as script

        gae = script.gae

        def recording_gae(rewards, terminals, *rest):
            advantages = gae(rewards, terminals, *rest)
            target, known = earned(rewards, terminals, K, W)
            log.append({"all": corr(advantages, target, known)})
            return advantages

        script.gae = recording_gae
    argv = ["--env-id", minatar_study.env_id(opts.game, K), "--total-timesteps", str(opts.steps), *minatar_study.CONFIG,
            *arm_flags, "--seed", str(opts.seed), "--save-interval", "0", "--no-progress"]
    with tempfile.TemporaryDirectory() as folder:  # the run's folder is scratch
        os.chdir(folder)
        result = script.train(script.tyro.cli(script.Args, args=argv))
    late = log[len(log) // 2 :]
    mean = lambda key: statistics.mean(row[key] for row in late)  # noqa: E731
    print(f"{opts.game}, rewards {K} steps late, {opts.arm} seed {opts.seed}: return {result['return']:.2f}; "
          f"iterations {len(log) // 2 + 1} to {len(log)}, W = {W}")
    print(f"  corr(advantage, earned) {mean('all'):+.3f}")
    if "z" in late[0]:
        around = torch.stack([row["z"][max(0, K - 2) : K + 3] for row in late]).mean(0)
        past = statistics.mean(float(row["z"][K:].max()) for row in late)
        print(f"  tied offsets {mean('tied'):.1f} of {len(late[0]['z'])}; z at offsets {max(0, K - 2)}..{K + 2}: "
              + " ".join(f"{z:.2f}" for z in around.tolist()) + f"; the largest z at or past {K}: {past:.2f}")
        print(f"  near part (offsets < {max(K, 1)}): corr {mean('near'):+.3f}, std {mean('std_near'):.4f}; "
              f"far part: corr {mean('far'):+.3f}, std {mean('std_far'):.4f}")


if __name__ == "__main__":
    main()
