"""The P3O advantage's CUDA kernel, advantage.cu, launched through CuPy: what p3o_ocean.py and p3o_atari.py run on a
GPU (`--kernel auto` or `cuda`). Elsewhere they run its PyTorch twin, `p3o_advantage`, which computes the same thing."""
from pathlib import Path

import numpy as np
import torch


def load_cuda_advantage():
    """advantage.cu compiled through CuPy, wrapped with `p3o_advantage`'s signature. It runs on
    PyTorch's tensors in place (DLPack) and on PyTorch's current stream. Raises if CuPy cannot compile it."""
    import cupy

    source = (Path(__file__).resolve().parent / "advantage.cu").read_text()
    kernel = cupy.RawKernel(source, "p3o_advantage")
    kernel.compile()  # at start-up, so a broken kernel fails here and not mid-run

    def cuda_advantage(rewards, terminals, mu, sigma, tail_mu, after=None, keep=None):
        T, N, H = mu.shape
        K = H if after is None else min(after, H)
        keep = torch.zeros(H, device=mu.device) if keep is None else keep
        tensors = [x.detach().float().contiguous() for x in (rewards, terminals, mu, sigma, tail_mu, keep)]
        parts = torch.empty(2, T, N, device=mu.device)  # near, far
        threads = 256
        with cupy.cuda.Stream.from_external(torch.cuda.current_stream(mu.device)):  # the CUDA stream protocol
            kernel(
                ((T * N + threads - 1) // threads,), (threads,),
                (*[cupy.from_dlpack(x) for x in tensors], np.int32(T), np.int32(N), np.int32(H), np.int32(K),
                 cupy.from_dlpack(parts[0]), cupy.from_dlpack(parts[1])),
            )
        return parts

    return cuda_advantage
