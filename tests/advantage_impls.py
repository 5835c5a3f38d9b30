"""The P3O advantage three ways, for the tests and benchmarks: the CUDA source built for the CPU (g++ with
kernels/host_shim.h, called through ctypes), and a plain-loop reference written straight from P3O.md.
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
                       const float* tail_mu, float sigma_r, float puf, int weight_norm, int min_horizon,
                       float cut, int zeros_after_terminal, int T, int N, int H, float* advantages, long long* window,
                       int threads) {
    const long long total = (long long)T * N;
    SHIM_LAUNCH(p3o_advantage, (unsigned)((total + threads - 1) / threads), (unsigned)threads, rewards, terminals,
                mu, sigma, tail_mu, sigma_r, puf, weight_norm, min_horizon, cut, zeros_after_terminal, T, N, H,
                advantages, window);
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
    pointer, i32, f32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
    lib.launch.argtypes = [pointer] * 5 + [f32, f32, i32, i32, f32, i32, i32, i32, i32, pointer, pointer, i32]
    lib.launch.restype = None
    return lib


def host_advantage(rewards, terminals, mu, sigma, sigma_r, puf=0.0, weight_norm="max", min_horizon=16, cut=0.95, tail_mu=None, zeros_after_terminal=False,
                   threads=64, flags=("-O2",)):
    """The kernel's own code on the CPU, with p3o_advantage's signature."""
    T, N, H = mu.shape
    arrays = [np.ascontiguousarray(torch.as_tensor(x).cpu().numpy(), dtype=np.float32) for x in (rewards, terminals, mu, sigma)]
    tail = None if tail_mu is None else np.ascontiguousarray(torch.as_tensor(tail_mu).cpu().numpy(), dtype=np.float32)
    advantages = np.full((T, N), np.nan, dtype=np.float32)
    window = np.full((T, N), -1, dtype=np.int64)
    host_library(tuple(flags)).launch(*[a.ctypes.data for a in arrays], None if tail is None else tail.ctypes.data,
                                      float(sigma_r), float(puf), int(weight_norm == "sum"), int(min_horizon), float(cut), int(zeros_after_terminal),
                                      T, N, H, advantages.ctypes.data, window.ctypes.data, threads)
    return torch.from_numpy(advantages), torch.from_numpy(window)


def reference_advantage(rewards, terminals, mu, sigma, sigma_r, puf=0.0, weight_norm="max", min_horizon=16, cut=0.95, tail_mu=None, zeros_after_terminal=False):
    """P3O.md's steps 1-6 as loops, in float64: slow, plain, and independent of both implementations. With
    zeros_after_terminal, a window whose episode ends runs on to H, every target after the terminal 0."""
    rewards, terminals, mu, sigma = (torch.as_tensor(x, dtype=torch.float64) for x in (rewards, terminals, mu, sigma))
    T, N, H = mu.shape
    # The weights and the cut threshold are rounded as the float32 implementations round them, so that a
    # tie (sigma[j] == cut * sigma_r) or an omega at zero cannot fall on different sides here.
    f32 = np.float32
    sigma_r = f32(sigma_r)
    s = [min(max(f32(x), f32(math.exp(-10))), f32(math.exp(10))) for x in sigma.tolist()]
    subtract = f32(puf) / (sigma_r * sigma_r) if puf > 0 and sigma_r > 0 else f32(0)
    omega = [float(max(f32(0), f32(1) / (x * x) - subtract)) for x in s]
    h = H
    if cut > 0:
        h = next((j for j in range(H) if j >= min_horizon and s[j] > f32(cut) * sigma_r), H)
    advantages = torch.zeros(T, N, dtype=torch.float64)
    window = torch.zeros(T, N, dtype=torch.int64)
    for n in range(N):
        for t in range(T):
            k = H if tail_mu is not None else min(H, T - t)
            last = None  # the offset of the episode's terminal, if it ends inside the rollout
            for j in range(min(H, T - t)):
                if terminals[t + j, n] != 0:
                    last = j
                    k = H if zeros_after_terminal else j + 1
                    break
            kept = range(min(k, h))
            kept_omega = [omega[j] for j in kept]
            norm = (max(kept_omega, default=0.0) if weight_norm == "max" else sum(kept_omega))
            if norm > 0:
                targets = [0.0 if last is not None and j > last else float(rewards[t + j, n]) if t + j < T else float(tail_mu[n, t + j - T]) for j in kept]
                advantages[t, n] = sum(omega[j] / norm * (targets[j] - float(mu[t, n, j])) for j in kept)
            window[t, n] = len(kept)
    return advantages, window


# (T, H, sigma, sigma_r): windows cut short by the rollout (T < H, T << H), a single offset, and sigma or sigma_r at 0
EDGE_SHAPES = {"T<H": (3, 8, 1.0, 1.0), "H=1": (5, 1, 1.0, 0.5), "sigma=0": (4, 4, 0.0, 1.0), "sigma_r=0": (4, 4, 1.0, 0.0),
               "both_zero": (4, 4, 0.0, 0.0), "T<<H_zero": (2, 128, 0.0, 0.0)}


def edge_cases(shape, puf, N=3, seed=1):
    """One edge shape of EDGE_SHAPES with every switch of the advantage: both norms, the tail on and off, zeros after
    the terminal on and off. Env 0 ends its episode at the rollout's last step. Yields (name, inputs, options)."""
    T, H, sigma_value, sigma_r = EDGE_SHAPES[shape]
    g = torch.Generator().manual_seed(seed)
    terminals = torch.zeros(T, N)
    terminals[-1, 0] = 1.0
    inputs = (torch.randn(T, N, generator=g), terminals, torch.randn(T, N, H, generator=g), torch.full((H,), sigma_value), sigma_r)
    for weight_norm in ("max", "sum"):
        for tail_mu in (None, torch.randn(N, H, generator=g)):
            for zeros_after_terminal in (False, True):
                name = f"{shape} puf={puf} {weight_norm} tail={tail_mu is not None} zeros={zeros_after_terminal}"
                yield name, inputs, dict(puf=puf, weight_norm=weight_norm, tail_mu=tail_mu, zeros_after_terminal=zeros_after_terminal)


def done_at_every_position(T=9, H=6, seed=0):
    """Inputs where env n has its only terminal at t = n (env T: none), so a done falls at every position of a window."""
    g = torch.Generator().manual_seed(seed)
    N = T + 1
    terminals = torch.zeros(T, N)
    for n in range(T):
        terminals[n, n] = 1.0
    return (torch.randn(T, N, generator=g), terminals, torch.randn(T, N, H, generator=g), torch.rand(H, generator=g) + 0.1, 0.7)
