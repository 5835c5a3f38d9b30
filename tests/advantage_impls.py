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
extern "C" void launch(const float* rewards, const float* terminals, const float* mu, const float* sigma,
                       const float* tail_mu, const float* keep, int T, int N, int H, int K, float* near, float* far,
                       int threads) {
    const long long total = (long long)T * N;
    SHIM_LAUNCH(p3o_advantage, (unsigned)((total + threads - 1) / threads), (unsigned)threads, rewards, terminals,
                mu, sigma, tail_mu, keep, T, N, H, K, near, far);
}
"""


@lru_cache(maxsize=None)
def host_library(flags=("-O2",)):
    """kernels/advantage.cu compiled by g++ as plain C++ (the kernel body runs once per grid thread)."""
    build = Path(tempfile.mkdtemp(prefix="p3o_kernel_"))
    (build / "launch.cpp").write_text(LAUNCHER)
    library = build / "advantage_host.so"
    command = ["g++", *flags, "-std=c++17", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
               f"-I{KERNEL.parent}", str(build / "launch.cpp"), "-o", str(library)]
    subprocess.run(command, check=True, capture_output=True, text=True)
    lib = ctypes.CDLL(str(library))
    pointer, i32 = ctypes.c_void_p, ctypes.c_int
    lib.launch.argtypes = [pointer] * 6 + [i32, i32, i32, i32, pointer, pointer, i32]
    lib.launch.restype = None
    return lib


def host_advantage(rewards, terminals, mu, sigma, tail_mu, after=None, keep=None, threads=64, flags=("-O2",)):
    """The kernel's own code on the CPU, with p3o_advantage's signature."""
    T, N, H = mu.shape
    K = H if after is None else min(after, H)
    keep = torch.zeros(H) if keep is None else keep
    arrays = [np.ascontiguousarray(torch.as_tensor(x).cpu().numpy(), dtype=np.float32) for x in (rewards, terminals, mu, sigma, tail_mu, keep)]
    parts = np.full((2, T, N), np.nan, dtype=np.float32)
    host_library(tuple(flags)).launch(*[a.ctypes.data for a in arrays], T, N, H, K, parts[0].ctypes.data, parts[1].ctypes.data, threads)
    return torch.from_numpy(parts)


def reference_advantage(rewards, terminals, mu, sigma, tail_mu, after=None, keep=None):
    """The advantage of docs/algorithm.md as loops, in float64: slow, plain, and independent of both
    implementations. Every window runs H offsets: the rewards of its episode, 0 after its terminal, the bootstrap
    predictions past the rollout's end; from offset K = `after` on, where the episode runs at step t + K inside the
    rollout, mu[t + K, n, j - K] at the offsets not kept. Returns the parts before K and from K on, [2, T, N]."""
    rewards, terminals, mu, sigma, tail_mu = (torch.as_tensor(x, dtype=torch.float64) for x in (rewards, terminals, mu, sigma, tail_mu))
    T, N, H = mu.shape
    K = H if after is None else min(after, H)
    keep = [False] * H if keep is None else [bool(x) for x in keep]
    # The weights are rounded as the float32 implementations round them.
    f32 = np.float32
    s = [min(max(f32(x), f32(math.exp(-10))), f32(math.exp(10))) for x in sigma.tolist()]
    omega = [float(f32(1) / (x * x)) for x in s]
    norm = max(omega)
    parts = torch.zeros(2, T, N, dtype=torch.float64)
    for n in range(N):
        for t in range(T):
            last = next((j for j in range(T - t) if terminals[t + j, n] != 0), None)  # the offset of the episode's terminal
            targets = [0.0 if last is not None and j > last else float(rewards[t + j, n]) if t + j < T else float(tail_mu[n, t + j - T]) for j in range(H)]
            if t + K < T and (last is None or last >= K):  # the episode runs at step t + K
                targets = [float(mu[t + K, n, j - K]) if j >= K and not keep[j] else targets[j] for j in range(H)]
            parts[0, t, n] = sum(omega[j] / norm * (targets[j] - float(mu[t, n, j])) for j in range(K))
            parts[1, t, n] = sum(omega[j] / norm * (targets[j] - float(mu[t, n, j])) for j in range(K, H))
    return parts


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


GRID_LAUNCHER = """
#include "host_shim.h"
#include "advantage.cu"
extern "C" void launch_grid(const float* rewards, const float* terminals, const float* mu, const float* sigma,
                            const float* tail_mu, const float* keep, int T, int N, int H, int K, float* near, float* far,
                            unsigned grid, unsigned block) {
    SHIM_LAUNCH(p3o_advantage, grid, block, rewards, terminals, mu, sigma, tail_mu, keep, T, N, H, K, near, far);
}
"""


@lru_cache(maxsize=None)
def host_kernel_from_source(source):
    """A kernel source text (as kernels/advantage.py reads it) built by g++ for the CPU, launched with the grid and
    block the caller gives: a stand-in for CuPy's RawKernel behind the same wrapper."""
    build = Path(tempfile.mkdtemp(prefix="p3o_kernel_grid_"))
    (build / "advantage.cu").write_text(source)
    (build / "launch.cpp").write_text(GRID_LAUNCHER)
    library = build / "advantage_grid.so"
    command = ["g++", "-O1", "-std=c++17", "-shared", "-fPIC", f"-I{build}", f"-I{KERNEL.parent}", str(build / "launch.cpp"), "-o", str(library)]
    subprocess.run(command, check=True, capture_output=True, text=True)
    lib = ctypes.CDLL(str(library))
    pointer, i32, u32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
    lib.launch_grid.argtypes = [pointer] * 6 + [i32, i32, i32, i32, pointer, pointer, u32, u32]
    lib.launch_grid.restype = None
    return lib
