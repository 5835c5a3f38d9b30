"""The P3O advantage's CUDA kernel, advantage.cu, launched through CuPy: what p3o_ocean.py and p3o_atari.py run on a
GPU (`--kernel auto` or `cuda`). Elsewhere they run its PyTorch twin, `p3o_advantage`, which computes the same thing."""
from pathlib import Path

import numpy as np
import torch


MAX_H = 1024  # advantage.cu's P3O_MAX_H: the size of its shared arrays, and the most threads a block can have


def block_size(H):
    """Threads a block: one per offset, padded to the power of two at or above H (the width of the block's sums),
    and at least a warp."""
    if not 1 <= H <= MAX_H:
        raise ValueError(f"the CUDA kernel takes 1 <= H <= {MAX_H}, got H = {H}: run the PyTorch twin (--kernel torch)")
    return max(32, 1 << (H - 1).bit_length())


def load_cuda_advantage():
    """advantage.cu compiled through CuPy, wrapped with `p3o_advantage`'s signature. It runs on PyTorch's tensors in
    place (DLPack) and on PyTorch's current stream. Raises if CuPy cannot compile it."""
    import cupy

    kernel = cupy.RawKernel((Path(__file__).resolve().parent / "advantage.cu").read_text(), "p3o_advantage")
    kernel.compile()  # at start-up, so a broken kernel fails here and not mid-run

    def cuda_advantage(rewards, terminals, mu, sigma, tail_mu, lam, tied=None):
        T, N, H = mu.shape
        tied = torch.zeros(H, device=mu.device) if tied is None else tied
        inputs = (rewards, terminals, mu, sigma, tail_mu, tied)
        rewards, terminals, mu, sigma, tail_mu, tied = (x.detach().float().contiguous() for x in inputs)
        advantages = torch.empty(T, N, device=mu.device)
        with cupy.cuda.Stream.from_external(torch.cuda.current_stream(mu.device)):  # the CUDA stream protocol
            kernel(
                (N,), (block_size(H),),  # a block per env, a thread per offset
                (*[cupy.from_dlpack(x) for x in (rewards, terminals, mu, sigma, tail_mu, tied)], np.float32(lam),
                 np.int32(T), np.int32(N), np.int32(H), cupy.from_dlpack(advantages)),
            )
        return advantages

    return cuda_advantage
