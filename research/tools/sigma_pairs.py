"""What a P3O run's learned sigma is fitted on, offset by offset: roll out a checkpoint's policy and count, for each
offset j, the (decision, offset) pairs the value NLL keeps, how many of them are known zeros past the episode's
terminal, and the sigma that the NLL's fit gives over all kept pairs (what training fits) and over the pairs inside
the episode only. No training here.

    python research/tools/sigma_pairs.py gpu_runs/runs/Breakout-v5__p3o_atari__1__1795630884/checkpoint.pt --rollouts 16

Works for any p3o_atari.py checkpoint (an Atari id or --env-id ocean/NAME). The rollouts use the checkpoint's
policy and value head, `--num-envs` envs (default: the run's) and a fresh seed, on the CPU.
"""
import argparse
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import p3o_atari  # noqa: E402

SHOWN = (0, 4, 16, 32, 64, 96, 112, 120, 127)


def sigma_pairs(checkpoint_path, rollouts, num_envs=None, seed=7):
    """Per offset: kept pairs, known zeros among them, and the fitted sigma over all kept pairs and over the pairs
    inside the episode; with the checkpoint's learned sigma beside them. Returns a dict of [H] tensors."""
    checkpoint = p3o_atari.load_checkpoint(str(checkpoint_path), "sigma_pairs.py")  # as --resume reads one
    run_args = p3o_atari.Args(**checkpoint["args"])
    args = replace(run_args, seed=seed, num_envs=num_envs or run_args.num_envs)
    envs = p3o_atari.make_envs(args, torch.device("cpu"))
    next_obs = envs.reset()
    agent = p3o_atari.Agent(tuple(next_obs.shape[1:]), envs.num_actions, args)
    agent.load_state_dict(checkpoint["model"])
    T, N, H = args.num_steps, args.num_envs, args.horizon
    offsets = torch.arange(H)
    totals = {key: torch.zeros(H) for key in ("kept", "known_zeros", "inside", "squares_kept", "squares_inside")}
    next_valid = torch.ones(N)
    for _ in range(rollouts):
        rewards, terminals, valid, mus = torch.zeros(T, N), torch.zeros(T, N), torch.zeros(T, N), torch.zeros(T, N, H)
        with torch.no_grad():
            for t in range(T):
                valid[t] = next_valid
                clock = torch.as_tensor(envs.episode_length)
                action, _, _, mus[t] = agent.get_action_and_value(next_obs, clock)
                next_obs, reward, terminations, truncations, _ = envs.step(action)
                rewards[t], terminals[t] = reward, (terminations | truncations).float()
                next_valid = 1.0 - terminals[t] * envs.autoreset_next_step  # as training: the step after a done is no decision
        targets, window = p3o_atari.episode_windows(rewards, terminals, H)
        real = valid.bool()[..., None]
        kept = (offsets < window[..., None]) & real  # as the value NLL keeps them
        inside = (offsets < p3o_atari.episode_inside(p3o_atari.episode_ends(terminals), H)[..., None]) & real
        squares = (targets - mus).square()
        totals["kept"] += kept.sum((0, 1))
        totals["known_zeros"] += (kept & ~inside).sum((0, 1))
        totals["inside"] += inside.sum((0, 1))
        totals["squares_kept"] += torch.where(kept, squares, 0.0).sum((0, 1))
        totals["squares_inside"] += torch.where(inside, squares, 0.0).sum((0, 1))
    return {
        "pairs": totals["kept"], "known_zero_share": totals["known_zeros"] / totals["kept"].clamp(min=1), "inside_pairs": totals["inside"],
        "sigma_learned": agent.log_sigma.detach().clamp(-10, 10).exp(),
        "sigma_kept": (totals["squares_kept"] / totals["kept"].clamp(min=1)).sqrt(),
        "sigma_inside": (totals["squares_inside"] / totals["inside"].clamp(min=1)).sqrt(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--rollouts", type=int, default=16)
    parser.add_argument("--num-envs", type=int, default=None)
    options = parser.parse_args()
    torch.set_num_threads(1)
    result = sigma_pairs(options.checkpoint, options.rollouts, options.num_envs)
    H = len(result["pairs"])
    print(f"{'offset':>6} {'pairs':>7} {'known zeros':>11} {'sigma learned':>13} {'sigma, kept pairs':>17} {'sigma, inside only':>18} {'inside pairs':>12}")
    for j in [j for j in SHOWN if j < H] + ([H - 1] if H - 1 not in SHOWN else []):
        print(f"{j:>6} {int(result['pairs'][j]):>7} {float(result['known_zero_share'][j]):>11.2f} {float(result['sigma_learned'][j]):>13.3f} "
              f"{float(result['sigma_kept'][j]):>17.3f} {float(result['sigma_inside'][j]):>18.3f} {int(result['inside_pairs'][j]):>12}")


if __name__ == "__main__":
    main()
