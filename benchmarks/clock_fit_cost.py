"""What the clock's refit costs an iteration, on all of the envs and on every second and fourth (CLOCK_FIT_ENVS).

    python benchmarks/clock_fit_cost.py                  # T = 128, N = 256, H = 128, the Ocean studies' sizes
    python benchmarks/clock_fit_cost.py --envs 1024 --horizon 32

The refit as `p3o_ocean.train` runs it after each update: the critic read again on the kept features, the residuals,
and fit_clock_table, on random inputs of the studies' shapes, in this process with one torch thread. The three
strides alternate, so a drift of the machine hits each alike; prints the median and the fastest of the repeats.
Set the MALLOC_* variables of the README first, as for every CPU benchmark here.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import p3o_ocean  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=128)
    parser.add_argument("--envs", type=int, default=256)
    parser.add_argument("--horizon", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=15)
    options = parser.parse_args()
    torch.set_num_threads(1)
    T, N, H, features = options.steps, options.envs, options.horizon, 64
    generator = torch.Generator().manual_seed(0)
    rewards, terminals = torch.randn(T, N, generator=generator), (torch.rand(T, N, generator=generator) < 0.02).float()
    targets, window = p3o_ocean.episode_windows(rewards, terminals, H)
    hiddens, clocks = torch.randn(T, N, features, generator=generator), torch.randint(0, 300, (T, N), generator=generator)
    critic = torch.nn.Linear(features, H)

    def refit(stride):
        envs = slice(None, None, stride)
        with torch.no_grad():
            critic_mu = critic(hiddens[:, envs])
            return p3o_ocean.fit_clock_table(clocks[:, envs], targets[:, envs] - critic_mu, window[:, envs])

    seconds = {stride: [] for stride in (1, 2, 4)}
    for _ in range(options.repeats):
        for stride, times in seconds.items():
            start = time.perf_counter()
            refit(stride)
            times.append(time.perf_counter() - start)
    print(f"the clock's refit, T = {T}, H = {H}, ms (median / fastest of {options.repeats}):")
    for stride, times in seconds.items():
        print(f"  on {len(range(0, N, stride)):>5} of {N} envs: {1000 * statistics.median(times):6.1f} / {1000 * min(times):6.1f}")


if __name__ == "__main__":
    main()
