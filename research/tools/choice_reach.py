"""Does the tie statistic see `choice`'s far reward? tie_z at the offsets around the payment, iteration by iteration.

    python research/tools/choice_reach.py --seed 1                       # the script's score: the centred log-prob
    python research/tools/choice_reach.py --seed 1 --score logit         # the score 1[a = far] - pi(far) instead

Trains p3o_ocean.py at its defaults on the `choice` probe (D = 96, H = 128, the probe's budget) and records the z
tie_z returns each iteration (p3o_ocean.tie_z wrapped; with --score logit the wrapper recomputes z from the rollout's
actions and log-probs before the gate reads it, so that run trains with the other score). Prints z at offset 0 and at
offsets 90 to 99 (the far reward lands at offset 96 of its choice) for a few iterations, and the final score.

Why it exists (issue 75): candidates 1 and 2 of the issue weigh or bootstrap each offset by its measured reach,
tie_z. They can only credit the far reward where tie_z sees it. The centred log-prob log pi(a) + H(pi) is the same
for both actions of a two-action policy at pi = 0.5, so it cannot tell them apart there; the logit score can.
"""
import argparse
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import p3o_ocean  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--score", choices=["script", "logit"], default="script")
    parser.add_argument("--near-reward", type=float, default=0.7)
    opts = parser.parse_args()
    torch.set_num_threads(1)
    zs, rollout = [], {"actions": [], "logprobs": []}
    tie_z, get_action_and_value = p3o_ocean.tie_z, p3o_ocean.Agent.get_action_and_value

    def recording_policy(agent, x, clock, action=None, *rest, **kwargs):
        out = get_action_and_value(agent, x, clock, action, *rest, **kwargs)
        if action is None:  # a rollout step, not the update
            rollout["actions"].append(out[0])
            rollout["logprobs"].append(out[1])
        return out

    def recording_tie_z(rewards, terminals, mu, tail_mu, score, valid):
        if opts.score == "logit":
            actions = torch.stack(rollout["actions"][-len(rewards):])
            taken = torch.stack(rollout["logprobs"][-len(rewards):]).exp()  # pi of the taken action
            score = (actions == 1).float() - torch.where(actions == 1, taken, 1 - taken)  # 1[a = far] - pi(far)
        rollout["actions"].clear()
        rollout["logprobs"].clear()
        z = tie_z(rewards, terminals, mu, tail_mu, score, valid)
        zs.append(z)
        return z

    p3o_ocean.tie_z, p3o_ocean.Agent.get_action_and_value = recording_tie_z, recording_policy
    args = replace(p3o_ocean.Args(), env_id="choice", choice_distance=96, choice_near_reward=opts.near_reward,
                   horizon=128, total_timesteps=1_572_864, seed=opts.seed, progress=False, save_interval=0)
    result = p3o_ocean.train(args)
    z = torch.stack(zs)
    print(f"choice, seed {opts.seed}, score {opts.score}: final score {result['score']:.3f}; tie_z by iteration")
    for iteration in sorted({0, 5, 10, 20, 30, len(z) - 1}):
        far = " ".join(f"{value:.1f}" for value in z[iteration, 90:100].tolist())
        print(f"  iteration {iteration:3d}: z[0] {z[iteration, 0]:6.1f}, z[90..99] {far} (above 3: "
              f"{int((z[iteration] > p3o_ocean.TIE_Z).sum())} offsets)")
    print(f"  iterations whose z[96] is above 3: {int((z[:, 96] > p3o_ocean.TIE_Z).sum())} of {len(z)}")


if __name__ == "__main__":
    main()
