"""Experiment (not a study, not the default): P3O with sigma fitted in closed form each iteration in place of the
learned log_sigma. sigma[j] = the RMS residual (reward - mu) of offset j over the batch's kept (decision, offset)
pairs, the Gaussian NLL's optimum for a sigma shared by all states; offsets no window reaches keep the learned
value. p3o_ocean.py runs unchanged: its select_advantage is wrapped so the advantage gets the fitted sigma (the
value loss still trains log_sigma, which the advantage no longer reads). Budgets are ocean_studies.py's.

    python benchmarks/fitted_sigma_experiment.py mixed 128 1     # ENV H SEED [FLOOR: sigma >= FLOOR * sigma_r]

Prints one JSON line: the final score and the last iteration's fitted sigma and weight curve (first 40 offsets).
The README's table came from seeds 1-3 on mixed and delay at H = 128 (benchmarks/results/fitted_sigma.jsonl).
"""
import json
import os
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import p3o_ocean  # noqa: E402
from ocean_studies import BUDGETS  # noqa: E402


def fitting(select_advantage, floor, fitted):
    def select(kernel, device):
        advantage_fn, note = select_advantage(kernel, device)

        def advantage(rewards, terminals, mu, sigma, sigma_r, *args, **kwargs):
            targets, k = p3o_ocean.episode_windows(rewards, terminals, mu.shape[-1])
            kept = torch.arange(mu.shape[-1], device=mu.device) < k[..., None]
            residual = torch.where(kept, targets - mu, 0.0)
            counts = kept.sum((0, 1))
            rms = (residual.square().sum((0, 1)) / counts.clamp(min=1)).sqrt()
            fitted.append(torch.where(counts > 0, rms.clamp(min=floor * sigma_r), sigma))
            return advantage_fn(rewards, terminals, mu, fitted[-1], sigma_r, *args, **kwargs)

        return advantage, note + " [fitted sigma]"

    return select


if __name__ == "__main__":
    env, horizon, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    floor = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    torch.set_num_threads(1)
    fitted = []
    p3o_ocean.select_advantage = fitting(p3o_ocean.select_advantage, floor, fitted)
    os.chdir(tempfile.mkdtemp())
    result = p3o_ocean.train(p3o_ocean.Args(env_id=env, horizon=horizon, seed=seed, total_timesteps=BUDGETS[env], progress=False))
    sigma = fitted[-1]
    omega = p3o_ocean.precision(sigma, 1.0)  # puf 0: sigma_r does not enter
    weights = omega / omega.max()
    print(json.dumps({"env": env, "H": horizon, "seed": seed, "floor": floor, "score": result["score"], "sigma": [round(x, 4) for x in sigma[:40].tolist()], "w": [round(x, 3) for x in weights[:40].tolist()]}), flush=True)
