"""A screen of the advantage kernel's memory access on a GPU: which way of reading mu reaches the copy bandwidth.

    python benchmarks/kernel_screen.py OUT            # on a CUDA machine: OUT/kernel_screen.json
    python benchmarks/kernel_screen.py OUT --dump     # anywhere: writes each variant's .cu to OUT (for nvcc -ptx)
    python benchmarks/kernel_screen.py OUT --only row advantage.cu "float4, mu only"

kernels/advantage.cu gives each thread one decision and lets it walk its own row of mu: neighbouring threads read
addresses H * 4 bytes apart, so each load of a warp touches 32 sectors for 32 useful floats, and the run book's
first H100 run measured it at 15% of a device-to-device copy's bandwidth (ncu: L1 81%, L2 74%, DRAM 16% busy).
The variants, each against the PyTorch twin on the run book's parity cases and timed beside a copy of mu:
  row         the kernel before this screen (4-byte reads of its own row)
  float4      the same thread per decision, reading its row 16 bytes at a time (H % 4 == 0; else as row)
  tile B x J  a block of B decisions loads their rows' next J offsets into shared memory together (the B rows are
              contiguous in mu, so the loads are coalesced), then each thread walks its own row of the tile
  advantage.cu  kernels/advantage.cu as it is now (float4 won the screen of 2026-11-25 and went in)
and one diagnostic, timed only (it computes something else): "float4, mu only" drops the reads of rewards,
terminals and tail_mu, so its time against float4's says how much of the kernel those reads cost.
"""
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]
from gpu_check import against_twin, seconds_per_call  # noqa: E402

# The kernel's signature and its per-offset helper `accumulate` (offset j of decision (t, n), given mu[t, n, j]),
# taken from kernels/advantage.cu, so every variant computes the kernel's own sum and differs only in how it reads mu.
KERNEL = (ROOT / "kernels" / "advantage.cu").read_text()
ACCUMULATE = KERNEL[: KERNEL.index('extern "C"')]
SIGNATURE = KERNEL[KERNEL.index('extern "C"') : KERNEL.index("{", KERNEL.index('extern "C"'))].rstrip()

# The opening of a kernel that gives one thread one decision (t, n) and its row of mu.
ONE_DECISION = """
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)T * N) return;
    const int t = (int)(i / N);
    const int n = (int)(i - (long long)t * N);
    const float* mu_row = mu + i * H;
    float total = 0.0f, norm = 0.0f;
    bool ended = false;
"""

ROW = ACCUMULATE + SIGNATURE + ONE_DECISION + """    for (int j = 0; j < H; ++j) accumulate(j, mu_row[j], t, n, T, N, H, rewards, terminals, sigma, tail_mu, total, norm, ended);
    advantages[i] = total / norm;
}
"""

FLOAT4_BODY = ONE_DECISION + """    int j = 0;
    if ((H & 3) == 0) {
        const float4* row4 = reinterpret_cast<const float4*>(mu_row);
        for (; j < H; j += 4) {
            const float4 m = row4[j >> 2];
            accumulate(j, m.x, t, n, T, N, H, rewards, terminals, sigma, tail_mu, total, norm, ended);
            accumulate(j + 1, m.y, t, n, T, N, H, rewards, terminals, sigma, tail_mu, total, norm, ended);
            accumulate(j + 2, m.z, t, n, T, N, H, rewards, terminals, sigma, tail_mu, total, norm, ended);
            accumulate(j + 3, m.w, t, n, T, N, H, rewards, terminals, sigma, tail_mu, total, norm, ended);
        }
    }
    for (; j < H; ++j) accumulate(j, mu_row[j], t, n, T, N, H, rewards, terminals, sigma, tail_mu, total, norm, ended);
    advantages[i] = total / norm;
}
"""
FLOAT4 = ACCUMULATE + SIGNATURE + FLOAT4_BODY

TILE = ACCUMULATE + SIGNATURE + """
{
    __shared__ float tile[BLOCK][TILE + 1];  // + 1: row r, column c in bank (r + c) % 32, so neither phase conflicts
    const long long first = (long long)blockIdx.x * BLOCK;
    const int count = (int)min((long long)BLOCK, (long long)T * N - first);
    const bool active = threadIdx.x < count;
    const long long i = first + threadIdx.x;
    const int t = active ? (int)(i / N) : 0;
    const int n = active ? (int)(i - (long long)t * N) : 0;
    float total = 0.0f, norm = 0.0f;
    bool ended = false;
    for (int j0 = 0; j0 < H; j0 += TILE) {
        const int width = min(TILE, H - j0);
        for (int e = threadIdx.x; e < count * width; e += BLOCK) {  // the block's rows are contiguous in mu
            const int r = e / width;
            const int c = e - r * width;
            tile[r][c] = mu[(first + r) * H + j0 + c];
        }
        __syncthreads();
        if (active)
            for (int c = 0; c < width; ++c)
                accumulate(j0 + c, tile[threadIdx.x][c], t, n, T, N, H, rewards, terminals, sigma, tail_mu, total, norm, ended);
        __syncthreads();
    }
    if (active) advantages[i] = total / norm;
}
"""


MU_ONLY = ACCUMULATE + """
__device__ __forceinline__ void mu_only(const int j, const float m, const float* __restrict__ sigma, float& total, float& norm)
{
    const float s = fminf(fmaxf(sigma[j], 4.539993e-05f), 2.202646e+04f);
    const float omega = 1.0f / (s * s);
    total -= omega * m;
    norm = fmaxf(norm, omega);
}
""" + SIGNATURE + FLOAT4_BODY.replace("t, n, T, N, H, rewards, terminals, sigma, tail_mu, total, norm, ended", "sigma, total, norm").replace("accumulate(", "mu_only(")
DIAGNOSTIC = {"float4, mu only"}  # timed only: not the advantage


def variants():
    """name -> (source, threads per block)."""
    found = {"row": (ROW, 256), "float4": (FLOAT4, 256)}
    for block, tile in ((256, 32), (128, 32), (128, 64), (64, 64), (256, 16)):
        found[f"tile {block}x{tile}"] = (f"#define BLOCK {block}\n#define TILE {tile}\n" + TILE, block)
    found["advantage.cu"] = (KERNEL, 256)
    found["float4, mu only"] = (MU_ONLY, 256)
    return found


def loader(source, threads):
    import cupy

    kernel = cupy.RawKernel(source, "p3o_advantage")
    kernel.compile()

    def run(rewards, terminals, mu, sigma, tail_mu):
        T, N, H = mu.shape
        tensors = [x.detach().float().contiguous() for x in (rewards, terminals, mu, sigma, tail_mu)]
        advantages = torch.empty(T, N, device=mu.device)
        with cupy.cuda.Stream.from_external(torch.cuda.current_stream(mu.device)):
            kernel(((T * N + threads - 1) // threads,), (threads,),
                   (*[cupy.from_dlpack(x) for x in tensors], np.int32(T), np.int32(N), np.int32(H), cupy.from_dlpack(advantages)))
        return advantages

    return run


def milliseconds(call):
    return seconds_per_call(SimpleNamespace(cuda=True), call, calls=50, warmup=5) * 1e3


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    if "--dump" in sys.argv:
        for name, (source, _) in variants().items():
            (out / (name.replace(" ", "_") + ".cu")).write_text(source)
        return
    device = torch.device("cuda")
    results = {"device": torch.cuda.get_device_name(), "variants": {}}
    g = torch.Generator().manual_seed(0)
    timing_inputs = {}
    for H in (32, 128, 256):
        T, N = 128, 4096
        timing_inputs[H] = tuple(x.to(device) for x in (torch.randn(T, N, generator=g), (torch.rand(T, N, generator=g) < 0.01).float(),
                                                          torch.randn(T, N, H, generator=g), torch.rand(H, generator=g) + 0.5, torch.randn(N, H, generator=g)))
    copy_ms = {}
    for H, inputs in timing_inputs.items():
        mu = inputs[2]
        copy = torch.empty_like(mu)
        copy_ms[H] = milliseconds(lambda: copy.copy_(mu))
    results["copy_ms"] = copy_ms
    chosen = variants()
    if "--only" in sys.argv:
        chosen = {name: chosen[name] for name in sys.argv[sys.argv.index("--only") + 1 :]}
    for name, (source, threads) in chosen.items():
        row = {}
        try:
            kernel = loader(source, threads)
            if name not in DIAGNOSTIC:
                count, worst, _, outside = against_twin(kernel, device, smoke=False)
                row.update(cases=count, outside_tolerance=len(outside), max_abs_difference=worst)
            for H, inputs in timing_inputs.items():
                ms = milliseconds(lambda: kernel(*inputs))
                mu_bytes = inputs[2].numel() * 4
                row[f"H={H}"] = {"ms": round(ms, 4), "GBps": round(mu_bytes / ms / 1e6, 1),
                                 "share_of_copy": round((mu_bytes / ms) / (2 * mu_bytes / copy_ms[H]), 3)}
        except Exception as error:
            row["error"] = f"{type(error).__name__}: {error}"
        results["variants"][name] = row
        print(name, json.dumps(row), flush=True)
    (out / "kernel_screen.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
