"""The P3O advantage's CUDA kernels, advantage.cu, launched through CuPy: what p3o_ocean.py and p3o_atari.py run on a
GPU (`--kernel auto` or `cuda`). Elsewhere they run its PyTorch twin, `p3o_advantage`, which computes the same thing."""
from pathlib import Path

import numpy as np
import torch


def load_cuda_advantage():
    """advantage.cu compiled through CuPy, wrapped with `p3o_advantage`'s signature. It runs on PyTorch's tensors in
    place (DLPack) and on PyTorch's current stream. Raises if CuPy cannot compile it."""
    import cupy

    source = (Path(__file__).resolve().parent / "advantage.cu").read_text()
    lambda_targets, weighted_sum = cupy.RawKernel(source, "lambda_targets"), cupy.RawKernel(source, "p3o_advantage")
    for kernel in (lambda_targets, weighted_sum):
        kernel.compile()  # at start-up, so a broken kernel fails here and not mid-run

    def cuda_advantage(rewards, terminals, mu, sigma, tail_mu, lam, keep=None):
        T, N, H = mu.shape
        keep = torch.zeros(H, device=mu.device) if keep is None else keep
        inputs = (rewards, terminals, mu, sigma, tail_mu, keep)
        rewards, terminals, mu, sigma, tail_mu, keep = (x.detach().float().contiguous() for x in inputs)
        target = torch.empty_like(mu)  # each decision's H targets, the lambda-returns and the kept rewards
        advantages = torch.empty(T, N, device=mu.device)
        threads, diagonals = 256, N * (T + H - 1)
        with cupy.cuda.Stream.from_external(torch.cuda.current_stream(mu.device)):  # the CUDA stream protocol
            lambda_targets(
                ((diagonals + threads - 1) // threads,), (threads,),
                (*[cupy.from_dlpack(x) for x in (rewards, terminals, mu, tail_mu, keep)], np.float32(lam), np.int32(T),
                 np.int32(N), np.int32(H), cupy.from_dlpack(target)),
            )
            weighted_sum(
                ((T * N + threads - 1) // threads,), (threads,),
                (*[cupy.from_dlpack(x) for x in (target, mu, sigma)], np.int32(T), np.int32(N), np.int32(H),
                 cupy.from_dlpack(advantages)),
            )
        return advantages

    return cuda_advantage
