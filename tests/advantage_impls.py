"""The P3O advantage three ways, for the tests and benchmarks: the CUDA source built for the CPU (g++ with
kernels/host_shim.h, called through ctypes), and a plain-loop reference written straight from docs/algorithm.md.
The PyTorch twin under test is p3o_ocean.p3o_advantage. Also the edge cases every implementation must agree on,
shared by the CPU parity tests and the GPU run book (benchmarks/gpu_check.py)."""
import ctypes
import math
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "kernels" / "advantage.cu"
LAUNCHER = """
#include "host_shim.h"
#include "advantage.cu"
extern "C" void launch_p3o_advantage(const float* rewards, const float* terminals, const float* mu, const float* sigma,
                                     const float* tail_mu, const float* tied, float lam, int T, int N, int H,
                                     float* advantages, unsigned grid, unsigned block) {
    SHIM_LAUNCH(p3o_advantage, grid, block, rewards, terminals, mu, sigma, tail_mu, tied, lam, T, N, H, advantages);
}
"""


@lru_cache(maxsize=None)
def host_kernel_from_source(source, flags=("-O1",)):
    """A kernel source text built by g++ as plain C++ (host_shim.h: a block's threads run as coroutines that meet at
    each __syncthreads), launched with the grid and block the caller gives: the host build of the tests, and a
    stand-in for CuPy's RawKernel behind the same wrapper (tests/test_kernel_wrapper.py)."""
    build = Path(tempfile.mkdtemp(prefix="p3o_kernel_"))
    (build / "advantage.cu").write_text(source)
    (build / "launch.cpp").write_text(LAUNCHER)
    library = build / "advantage_host.so"
    command = ["g++", *flags, "-std=c++17", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
               f"-I{build}", f"-I{KERNEL.parent}", str(build / "launch.cpp"), "-o", str(library)]
    subprocess.run(command, check=True, capture_output=True, text=True)
    lib = ctypes.CDLL(str(library))
    pointer, i32, u32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
    lib.launch_p3o_advantage.argtypes = [pointer] * 6 + [ctypes.c_float, i32, i32, i32, pointer, u32, u32]
    lib.launch_p3o_advantage.restype = None
    return lib


def host_advantage(rewards, terminals, mu, sigma, tail_mu, lam, tied=None, threads=None, flags=("-O2",)):
    """The kernel's own code on the CPU, with p3o_advantage's signature: one block per env, of `threads` threads (by
    default the wrapper's, kernels.advantage.block_size(H))."""
    from kernels.advantage import block_size

    T, N, H = mu.shape
    tied = torch.zeros(H) if tied is None else tied
    arrays = [np.ascontiguousarray(torch.as_tensor(x).cpu().numpy(), dtype=np.float32) for x in (rewards, terminals, mu, sigma, tail_mu, tied)]
    advantages = np.full((T, N), np.nan, dtype=np.float32)
    threads = block_size(H) if threads is None else threads
    library = host_kernel_from_source(KERNEL.read_text(), tuple(flags))
    library.launch_p3o_advantage(*[a.ctypes.data for a in arrays], lam, T, N, H, advantages.ctypes.data, N, threads)
    return torch.from_numpy(advantages)


def reference_advantage(rewards, terminals, mu, sigma, tail_mu, lam, tied=None):
    """The advantage of docs/algorithm.md as loops, in float64: slow, plain, and independent of both
    implementations. Each target is its recursion's definition, evaluated for itself: y(t, 0) is the reward; for
    j >= 1, 0 where step t ended the episode, else (1 - lam) * mu[t + 1, j - 1] + lam * y(t + 1, j - 1), with
    y(T, j) and mu[T, j] the bootstrap predictions tail_mu[j]. A kept offset's target is the reward j steps ahead
    (0 after the episode's terminal, the tail past the rollout's end). Returns [T, N]."""
    rewards, terminals, mu, sigma, tail_mu = (torch.as_tensor(x, dtype=torch.float64) for x in (rewards, terminals, mu, sigma, tail_mu))
    T, N, H = mu.shape
    tied = [False] * H if tied is None else [bool(x) for x in tied]
    # The weights and lam are rounded as the float32 implementations round them.
    f32 = np.float32
    lam = float(f32(lam))
    s = [min(max(f32(x), f32(math.exp(-10))), f32(math.exp(10))) for x in sigma.tolist()]
    omega = [float(f32(1) / (x * x)) for x in s]
    norm = max(omega)

    def prediction(t, n, j):  # mu[t, n, j], and past the rollout the bootstrap predictions
        return float(mu[t, n, j]) if t < T else float(tail_mu[n, j])

    @lru_cache(maxsize=None)
    def y(t, n, j):
        if t == T:
            return float(tail_mu[n, j])
        if j == 0:
            return float(rewards[t, n])
        if terminals[t, n] != 0:
            return 0.0
        return (1 - lam) * prediction(t + 1, n, j - 1) + lam * y(t + 1, n, j - 1)

    advantages = torch.zeros(T, N, dtype=torch.float64)
    for n in range(N):
        for t in range(T):
            last = next((j for j in range(T - t) if terminals[t + j, n] != 0), None)  # the offset of the episode's terminal
            rewards_ahead = [0.0 if last is not None and j > last else float(rewards[t + j, n]) if t + j < T else float(tail_mu[n, t + j - T]) for j in range(H)]
            targets = [rewards_ahead[j] if tied[j] else y(t, n, j) for j in range(H)]
            advantages[t, n] = sum(omega[j] / norm * (targets[j] - float(mu[t, n, j])) for j in range(H))
    return advantages


# (T, H, sigma): windows that run past the rollout (T < H, T << H), a single offset, sigma at 0 (the clamp) and large
EDGE_SHAPES = {"T<H": (3, 8, 1.0), "H=1": (5, 1, 1.0), "sigma=0": (4, 4, 0.0), "T<<H_zero": (2, 128, 0.0), "sigma=1e6": (4, 4, 1e6)}


def edge_cases(shape, N=3, seed=1):
    """One edge shape of EDGE_SHAPES, with and without a terminal in the rollout: env 0 ends its episode at the
    rollout's last step, or no env does. Yields (name, inputs)."""
    T, H, sigma_value = EDGE_SHAPES[shape]
    g = torch.Generator().manual_seed(seed)
    rewards, mu, tail_mu = torch.randn(T, N, generator=g), torch.randn(T, N, H, generator=g), torch.randn(N, H, generator=g)
    for ends in (False, True):
        terminals = torch.zeros(T, N)
        terminals[-1, 0] = float(ends)
        yield f"{shape} terminal={ends}", (rewards, terminals, mu, torch.full((H,), sigma_value), tail_mu)


def done_at_every_position(T=9, H=6, seed=0):
    """Inputs where env n has its only terminal at t = n (env T: none), so a done falls at every position of a window."""
    g = torch.Generator().manual_seed(seed)
    N = T + 1
    terminals = torch.zeros(T, N)
    for n in range(T):
        terminals[n, n] = 1.0
    return (torch.randn(T, N, generator=g), terminals, torch.randn(T, N, H, generator=g), torch.rand(H, generator=g) + 0.1, torch.randn(N, H, generator=g))
