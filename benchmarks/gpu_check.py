"""The GPU run book: every GPU figure the project reports, measured by one command (under 10 minutes on an H100).

    python benchmarks/gpu_check.py OUT                  # on a CUDA machine: OUT/gpu_check.json and OUT/gpu_check.log
    python benchmarks/gpu_check.py OUT --smoke          # every step at tiny sizes (on the CPU where there is no CUDA)
    python benchmarks/gpu_check.py OUT --steps parity kernel

On a lent device the wheels of benchmarks/gpu_wheels.sh come first (research/gpu_log.md has the command).

Steps, in this order (each is written to the JSON as it ends, so a run stopped midway keeps what it measured; a
step that fails records its error and the others still run):
  versions   torch, CuPy, the CUDA runtime and driver, the GPU, Python, EnvPool
  parity     kernels/advantage.cu through CuPy (kernels/advantage.py: RawKernel, DLPack, PyTorch's current
             stream, the path the scripts take) against the PyTorch twin p3o_advantage, both on the GPU, on random
             cases and every edge case of the CPU parity tests: the largest difference of the advantages. Without CUDA the kernel's host build (g++, kernels/host_shim.h) stands in.
  kernel     the kernel at T = 128, N = 4096, H = 128 (it reads all of mu): seconds per call
             and GB/s against the bound of reading mu once, beside a device-to-device copy of mu in the same run
             (GB/s counting bytes read and written), and the twin's time on the same inputs
  ocean      p3o_ocean.py at H = 32 and 128 and ppo_baseline.py on one Ocean env (same network, batch and update), at
             the default sizes and at N = 4096: SPS and the phases' shares of an iteration, side by side
  atari      p3o_atari.py --horizon 128 and ppo_baseline.py on Breakout-v5 at their defaults: SPS, side by side
  sanitizer  compute-sanitizer memcheck over the parity step at smoke sizes (CUDA only)
  ncu        Nsight Compute's throughput sections for one launch of the kernel step's kernel (CUDA only)

Every training run is the script's own `train`, in this process, after a one-iteration warm-up run of the same
configuration (CUDA context, CuPy compile, cuDNN autotuning); its SPS is the steady rate between its first and
last logged iterations, read from its TensorBoard log, and its phase shares are the script's own PhaseTimer's. The
runs' folders go to a temporary directory. Exit status 1 if any step failed.

Makes: every GPU figure of the README, docs/gpu.md and research/gpu_log.md (the gpu_check_*.json and .log files in
results/). Time: under 10 minutes on an H100; --smoke on the 2-core CPU in about a minute.
"""
import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]
import ocean_studies  # noqa: E402
import p3o_ocean  # noqa: E402
import ppo_baseline  # noqa: E402
from advantage_impls import EDGE_SHAPES, done_at_every_position, edge_cases, host_advantage  # noqa: E402
from atari_runs import scalars  # noqa: E402

STEPS = ["versions", "parity", "kernel", "ocean", "atari", "sanitizer", "ncu"]
TOL = dict(atol=1e-5, rtol=1e-5)  # the CPU parity tests' tolerance, plus, at these larger sizes:
# float32 sums of up to 256 terms that cancel. Measured on the CPU: in one random case (H = 232, |A| up to 54), an
# advantage of 0.0898 came out 1.4e-5 off the float64 reference in the host build and 3e-6 off in the twin
CANCELLATION = 1e-6  # times the case's largest |advantage|
# The bars on an H100 (research/gpu_log.md); read only when the run had CUDA.
TARGETS = {"kernel_share_of_copy": 0.5, "kernel_share_of_copy_aim": 0.8, "ocean_p3o_sps_n4096": 1_000_000,
           "ocean_p3o_over_ppo": 0.9, "atari_sps": 1_000, "atari_sps_aim": 6_800}


class Skipped(Exception):
    """A step that cannot run here (no CUDA, no EnvPool, no tool): recorded as skipped, with the reason."""


class RunBook:
    """The results and the log of one run: every line goes to the terminal and OUT/gpu_check.log, and the JSON is
    rewritten after each step."""

    def __init__(self, out, options):
        self.out, self.options = out, options
        self.cuda = torch.cuda.is_available()
        self.device = torch.device("cuda" if self.cuda else "cpu")
        self.started = time.time()
        self.log_file = open(out / "gpu_check.log", "a")
        self.results = {"command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                        "smoke": options.smoke, "device": torch.cuda.get_device_name() if self.cuda else f"cpu ({platform.processor() or platform.machine()})",
                        "steps": {}, "skipped": []}

    def log(self, line=""):
        print(line, flush=True)
        self.log_file.write(line + "\n")
        self.log_file.flush()

    def skip(self, what, why):
        """Say that a part of a step did not run here, and why; the step goes on."""
        if f"{what}: {why}" not in self.results["skipped"]:
            self.results["skipped"].append(f"{what}: {why}")
        self.log(f"  skipped {what}: {why}")

    def save(self):
        path = self.out / "gpu_check.json"
        path.with_suffix(".tmp").write_text(json.dumps(self.results, indent=2, default=str) + "\n")
        os.replace(path.with_suffix(".tmp"), path)

    def run(self, name, step):
        self.log(f"\n== {name} ({time.time() - self.started:.0f} s in)")
        start = time.time()
        try:
            if start - self.started > self.options.budget_s:
                raise Skipped(f"out of time (--budget-s {self.options.budget_s})")
            record = {"status": "ok", **step(self)}
        except Skipped as why:
            self.skip(name, str(why))
            record = {"status": "skipped", "reason": str(why)}
        except Exception as error:  # one broken step must not lose the others' figures
            self.log(traceback.format_exc())
            record = {"status": "failed", "error": f"{type(error).__name__}: {error}"}
        record["seconds"] = round(time.time() - start, 1)
        self.results["steps"][name] = record
        self.log(f"  {name}: {record['status']} in {record['seconds']} s")
        self.save()


def synchronize(book):
    if book.cuda:
        torch.cuda.synchronize()


def seconds_per_call(book, call, calls, warmup=3):
    """Mean seconds of `call` over `calls` back-to-back calls after `warmup` (CUDA events on a GPU): the rate the
    device sustains, host work between launches included where it cannot hide behind the device's."""
    for _ in range(warmup):
        call()
    synchronize(book)
    if book.cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / calls
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls


# ---------------------------------------------------------------------------------------------------------
# versions
# ---------------------------------------------------------------------------------------------------------
def versions_step(book):
    record = {"python": platform.python_version(), "torch": torch.__version__, "torch_cuda": torch.version.cuda}
    if book.cuda:
        props = torch.cuda.get_device_properties(0)
        record.update(gpu=props.name, multiprocessors=props.multi_processor_count, memory_gib=round(props.total_memory / 2**30, 1))
    try:
        import cupy

        record["cupy"] = cupy.__version__
        if book.cuda:
            runtime, driver = cupy.cuda.runtime.runtimeGetVersion(), cupy.cuda.runtime.driverGetVersion()
            record.update(cuda_runtime=f"{runtime // 1000}.{runtime % 1000 // 10}", driver_cuda=f"{driver // 1000}.{driver % 1000 // 10}")
    except Exception as error:
        record["cupy"] = f"unavailable: {type(error).__name__}: {error}"
    if shutil.which("nvidia-smi"):
        query = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,name,clocks.max.sm,clocks.max.mem", "--format=csv,noheader"], capture_output=True, text=True)
        record["nvidia_smi"] = query.stdout.strip() or query.stderr.strip()
    try:
        import envpool

        record["envpool"] = envpool.__version__
    except Exception as error:
        record["envpool"] = f"unavailable: {type(error).__name__}: {error}"
    for key, value in record.items():
        book.log(f"  {key}: {value}")
    return record


# ---------------------------------------------------------------------------------------------------------
# parity
# ---------------------------------------------------------------------------------------------------------
def random_case(g, max_T, max_N, max_H):
    """Inputs drawn as the CPU property test draws them (tests/test_advantage.py), at larger sizes."""
    def pick(values):
        return values[int(torch.randint(len(values), (1,), generator=g))]

    T, N, H = (int(torch.randint(1, top + 1, (1,), generator=g)) for top in (max_T, max_N, max_H))
    rewards = torch.randn(T, N, generator=g) * pick([0.0, 0.1, 1.0, 5.0])
    terminals = (torch.rand(T, N, generator=g) < pick([0.0, 0.01, 0.1, 0.5, 1.0])).float()
    sigma = torch.rand(H, generator=g) * pick([0.5, 2.0, 10.0])
    sigma[torch.rand(H, generator=g) < pick([0.0, 0.2])] = 0.0
    return rewards, terminals, torch.randn(T, N, H, generator=g), sigma, torch.randn(N, H, generator=g)


def parity_cases(smoke):
    """(name, inputs): every edge case of the CPU tests, dones at every position and at every step, random cases, and
    full-size batches whose last block of threads is partial."""
    for shape in EDGE_SHAPES:
        yield from edge_cases(shape)
    yield "done at every position", done_at_every_position()
    g = torch.Generator().manual_seed(1)
    T, N, H = 6, 5, 9
    yield "dones at every step", (torch.randn(T, N, generator=g), torch.ones(T, N), torch.randn(T, N, H, generator=g), torch.rand(H, generator=g) + 0.1, torch.randn(N, H, generator=g))
    for i in range(30 if smoke else 200):
        yield f"random {i}", random_case(g, 24, 40, 140) if smoke else random_case(g, 128, 600, 256)
    T, N, H = (16, 300, 40) if smoke else (128, 4097, 128)
    yield f"T={T} N={N} H={H}", (torch.randn(T, N, generator=g), (torch.rand(T, N, generator=g) < 0.01).float(), torch.randn(T, N, H, generator=g),
                                 torch.rand(H, generator=g) + 0.2, torch.randn(N, H, generator=g))


def kernel_under_test(book):
    """The kernel as the scripts load it on a GPU; without CUDA, its host build, and a line saying so."""
    if book.cuda:
        from kernels.advantage import load_cuda_advantage

        return load_cuda_advantage(), "CuPy RawKernel (kernels/advantage.py, as the scripts load it)"
    book.skip("the CuPy kernel", "no CUDA; the kernel's host build (g++ with kernels/host_shim.h) stands in")
    return host_advantage, "host build (g++)"


def against_twin(kernel, device, smoke):
    """`kernel` against the twin p3o_advantage, both on `device`, over parity_cases, each at lam = 1 (the rewards) and
    at the default lam (every third offset kept): the number of cases, the largest |difference| and its case, and the
    names of the cases outside the tolerance (or not finite)."""
    worst, worst_case, outside = 0.0, None, []
    count, default = 0, p3o_ocean.Args.td_lambda
    for case, inputs in parity_cases(smoke):
        H = inputs[2].shape[-1]
        for name, lam, tied in ((f"{case}, lam=1", 1.0, None), (f"{case}, lam={default}", default, torch.arange(H) % 3 == 0)):
            on = [x.to(device) for x in inputs] + [lam, tied.to(device) if tied is not None else None]
            kernel_a, twin_a = kernel(*on).cpu(), p3o_ocean.p3o_advantage(*on).cpu()
            count += 1
            difference = (kernel_a - twin_a).abs()
            allowed = TOL["atol"] + TOL["rtol"] * twin_a.abs() + CANCELLATION * twin_a.abs().max()
            if not (torch.isfinite(kernel_a).all() and (difference <= allowed).all()):
                outside.append(name)
            if difference.numel() and float(difference.max()) >= worst:
                worst, worst_case = float(difference.max()), name
    return count, worst, worst_case, outside


def parity_step(book):
    kernel, kernel_name = kernel_under_test(book)
    device = book.device
    count, worst, worst_case, outside = against_twin(kernel, device, book.options.smoke)
    book.log(f"  {kernel_name} against the twin on {device.type}, {count} cases: largest |difference| {worst:.3g} ({worst_case}); "
             f"{len(outside)} cases outside the tolerance (atol = rtol = 1e-5, plus 1e-6 of the case's largest |advantage|)")
    return {"status": "failed" if outside else "ok", "kernel": kernel_name, "twin_device": device.type, "cases": count, "max_abs_difference": worst,
            "worst_case": worst_case, "outside_tolerance": outside[:20]}


# ---------------------------------------------------------------------------------------------------------
# kernel
# ---------------------------------------------------------------------------------------------------------
def kernel_step(book):
    kernel, kernel_name = kernel_under_test(book)
    T, N, H = (16, 64, 32) if book.options.smoke else (128, 4096, 128)
    g = torch.Generator().manual_seed(0)
    rewards, mu, tail_mu = torch.randn(T, N, generator=g), torch.randn(T, N, H, generator=g), torch.randn(N, H, generator=g)
    terminals, sigma = (torch.rand(T, N, generator=g) < 0.01).float(), torch.rand(H, generator=g) + 0.5
    rewards, terminals, mu, sigma, tail_mu = (x.to(book.device) for x in (rewards, terminals, mu, sigma, tail_mu))
    # As the scripts call it: the default lam, every tenth offset kept. The kernel reads mu once and writes only the
    # advantages.
    tied = (torch.arange(H) % 10 == 0).to(book.device)
    inputs = (rewards, terminals, mu, sigma, tail_mu, p3o_ocean.Args.td_lambda, tied)
    copy = torch.empty_like(mu)
    calls = 3 if book.options.smoke else 20
    seconds = {
        "kernel": seconds_per_call(book, lambda: kernel(*inputs), calls),
        "copy": seconds_per_call(book, lambda: copy.copy_(mu), calls),
        "twin": seconds_per_call(book, lambda: p3o_ocean.p3o_advantage(*inputs), max(1, calls // 4), warmup=1),
    }
    mu_bytes = mu.numel() * mu.element_size()
    kernel_gbps = mu_bytes / seconds["kernel"] / 1e9  # mu's size over the time: what the kernel moves
    copy_gbps = 2 * mu_bytes / seconds["copy"] / 1e9  # a copy reads and writes
    record = {"kernel": kernel_name, "device": book.device.type, "T": T, "N": N, "H": H, "mu_bytes": mu_bytes,
              "kernel_ms": round(seconds["kernel"] * 1e3, 4), "copy_ms": round(seconds["copy"] * 1e3, 4), "twin_ms": round(seconds["twin"] * 1e3, 4),
              "kernel_GBps": round(kernel_gbps, 4), "copy_GBps": round(copy_gbps, 4), "kernel_share_of_copy": round(kernel_gbps / copy_gbps, 4),
              "twin_over_kernel": round(seconds["twin"] / seconds["kernel"], 2)}
    book.log(f"  T={T} N={N} H={H} on {book.device.type}: {kernel_name} {record['kernel_ms']} ms = {record['kernel_GBps']} GB/s reading mu once; "
             f"copy of mu {record['copy_ms']} ms = {record['copy_GBps']} GB/s (read + write); kernel at {record['kernel_share_of_copy']:.1%} of the copy; "
             f"twin {record['twin_ms']} ms ({record['twin_over_kernel']}x the kernel)")
    return record


# ---------------------------------------------------------------------------------------------------------
# training throughput: ocean and atari
# ---------------------------------------------------------------------------------------------------------
def measured_train(book, train, args):
    """One warm-up iteration of the configuration, then the measured run: its steady SPS and phase shares."""
    train(replace(args, total_timesteps=args.num_envs * args.num_steps, seed=args.seed + 1000))
    synchronize(book)
    result = train(args)
    sps = scalars(Path("runs") / result["run"], "charts/SPS")
    (wall0, step0, _), (wall1, step1, _) = sps[0], sps[-1]
    phases = result["phases"]
    total = sum(phases.values())
    if book.cuda:
        torch.cuda.empty_cache()
    return {"SPS": round((step1 - step0) / (wall1 - wall0)) if step1 > step0 else result["SPS"], "SPS_whole_run": result["SPS"], "steps": result["steps"],
            "iteration_s": round(total / max(1, result["steps"] // (args.num_envs * args.num_steps)), 4),
            "phase_share": {phase: round(seconds / total, 4) for phase, seconds in phases.items()}}


def describe(name, row):
    shares = ", ".join(f"{phase} {share:.0%}" for phase, share in row["phase_share"].items())
    return f"  {name:<28} {row['SPS']:>11,} SPS   {row['iteration_s']:.3f} s an iteration ({shares})"


def ocean_step(book):
    env, iterations = book.options.ocean_env, book.options.iterations
    defaults = p3o_ocean.Args()
    sizes = [(8, 16), (16, 16)] if book.options.smoke else [(defaults.num_envs, defaults.num_steps), (4096, defaults.num_steps)]
    ppo_args, _ = ocean_studies.ppo_args(ocean_studies.spec("ppo", env, 1, 1.0))  # PPO with P3O's shared hyperparameters
    rows = []
    for num_envs, num_steps in sizes:
        common = dict(num_envs=num_envs, num_steps=num_steps, total_timesteps=iterations * num_envs * num_steps, seed=1, progress=False, save_interval=0)
        cases = [(f"p3o_ocean.py H={h}", p3o_ocean.train, replace(p3o_ocean.Args(), env_id=env, horizon=h, **common)) for h in (32, 128)]
        cases.append(("ppo_baseline.py", ppo_baseline.train, replace(ppo_args, **common)))
        book.log(f"  {env}, {num_envs} envs x {num_steps} steps, {iterations} iterations each:")
        size_rows = {}
        for name, train, args in cases:
            size_rows[name] = {"case": name, "env": env, "num_envs": num_envs, "num_steps": num_steps, **measured_train(book, train, args)}
            book.log(describe(name, size_rows[name]))
        rows += size_rows.values()
        ppo = size_rows.pop("ppo_baseline.py")["SPS"]
        for row in size_rows.values():
            row["over_ppo"] = round(row["SPS"] / ppo, 3)
            book.log(f"  {row['case']} / PPO SPS: {row['over_ppo']:.3f}")
    return {"env": env, "iterations": iterations, "runs": rows}


def atari_step(book):
    try:
        import envpool  # noqa: F401
    except ImportError as error:
        raise Skipped(f"EnvPool does not import ({error}); on a lent GPU, install benchmarks/gpu_wheels.sh's wheels first")
    import p3o_atari

    iterations = book.options.iterations
    sizes = dict(num_envs=2, num_steps=16) if book.options.smoke else {}
    rows = []
    for repeat in range(book.options.repeats):
        for name, module, extra in (("ppo_baseline.py", ppo_baseline, {}), ("p3o_atari.py --horizon 128", p3o_atari, {"horizon": 128})):
            args = replace(module.Args(), env_id="Breakout-v5", seed=1, progress=False, save_interval=0, **sizes, **extra)
            args = replace(args, total_timesteps=iterations * args.num_envs * args.num_steps)
            module.check_args(args)
            row = {"case": name, "repeat": repeat, "num_envs": args.num_envs, "num_steps": args.num_steps, **measured_train(book, module.train, args)}
            rows.append(row)
            book.log(describe(f"{name} (repeat {repeat})", row))
    median = {name: statistics.median(r["SPS"] for r in rows if r["case"] == name) for name in dict.fromkeys(r["case"] for r in rows)}
    ratio = median["p3o_atari.py --horizon 128"] / median["ppo_baseline.py"]
    book.log(f"  medians: " + ", ".join(f"{name} {sps:,.0f} SPS" for name, sps in median.items()) + f"; P3O / PPO {ratio:.3f}")
    return {"env": "Breakout-v5", "iterations": iterations, "median_SPS": median, "p3o_over_ppo": round(ratio, 3), "runs": rows}


# ---------------------------------------------------------------------------------------------------------
# sanitizer and ncu: this script's own steps, run again under the tool
# ---------------------------------------------------------------------------------------------------------
def under_tool(book, tool, flags, steps, extra=()):
    """Run this script's `steps` again under `tool`; returns the tool's CompletedProcess and the inner run's JSON."""
    if not book.cuda:
        raise Skipped("no CUDA")
    path = shutil.which(tool)
    if path is None:
        raise Skipped(f"{tool} is not on the PATH")
    with tempfile.TemporaryDirectory() as folder:
        command = [path, *flags, sys.executable, str(Path(__file__).resolve()), folder, "--steps", *steps, *extra]
        book.log("  $ " + " ".join(command))
        result = subprocess.run(command, capture_output=True, text=True, timeout=book.options.tool_timeout_s)
        inner = Path(folder) / "gpu_check.json"
        inner = json.loads(inner.read_text()) if inner.exists() else {}
    book.log_file.write(result.stdout[-20000:] + result.stderr[-5000:] + "\n")
    return result, inner


def sanitizer_step(book):
    result, inner = under_tool(book, "compute-sanitizer", ["--tool", "memcheck", "--error-exitcode", "3"], ["parity"], ["--smoke"])
    summary = [line for line in (result.stdout + result.stderr).splitlines() if "ERROR SUMMARY" in line]
    parity = inner.get("steps", {}).get("parity", {}).get("status")
    book.log(f"  exit {result.returncode}; {summary[-1] if summary else 'no ERROR SUMMARY line'}; parity under memcheck: {parity}")
    return {"status": "ok" if result.returncode == 0 and parity == "ok" else "failed", "returncode": result.returncode,
            "summary": summary[-1] if summary else None, "parity": parity}


def ncu_step(book):
    flags = ["--kernel-name", "p3o_advantage", "--launch-skip", "3", "--launch-count", "1", "--clock-control", "none",
             "--section", "SpeedOfLight", "--section", "MemoryWorkloadAnalysis"]
    result, _ = under_tool(book, "ncu", flags, ["kernel"])
    # ncu's table rows: "    DRAM Throughput      %      83.21"
    metrics = {f"{m.group(1)} ({m.group(2)})": float(m.group(3).replace(",", "")) for m in re.finditer(r"^\s{4}(\S.*?\S)\s{2,}(\S+)\s+([\d.,]+)\s*$", result.stdout, re.M)}
    for key, value in metrics.items():
        book.log(f"  {key}: {value}")
    return {"status": "ok" if result.returncode == 0 and metrics else "failed", "returncode": result.returncode, "metrics": metrics}


# ---------------------------------------------------------------------------------------------------------
def targets(results):
    """Each bar of the GPU issue against this run's figures (only where the run had CUDA and the step ran)."""
    steps, verdict = results["steps"], {}
    kernel = steps.get("kernel", {})
    if "kernel_share_of_copy" in kernel:
        verdict["kernel >= 50% of the copy's bandwidth"] = kernel["kernel_share_of_copy"] >= TARGETS["kernel_share_of_copy"]
        verdict["kernel >= 80% (aim)"] = kernel["kernel_share_of_copy"] >= TARGETS["kernel_share_of_copy_aim"]
    for row in steps.get("ocean", {}).get("runs", []):
        if row["num_envs"] == 4096 and "over_ppo" in row:
            verdict[f"{row['case']} >= 1M SPS at N = 4096"] = row["SPS"] >= TARGETS["ocean_p3o_sps_n4096"]
            verdict[f"{row['case']} >= 0.9x PPO at N = 4096"] = row["over_ppo"] >= TARGETS["ocean_p3o_over_ppo"]
    for name, sps in steps.get("atari", {}).get("median_SPS", {}).items():
        verdict[f"{name} > 1k SPS"] = sps > TARGETS["atari_sps"]
        verdict[f"{name} >= 6.8k SPS (aim)"] = sps >= TARGETS["atari_sps_aim"]
    return verdict


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="folder for gpu_check.json and gpu_check.log (created)")
    parser.add_argument("--smoke", action="store_true", help="every step at tiny sizes; CUDA-only parts are skipped and said so where there is no CUDA")
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=STEPS, help="the steps to run, in the run book's order")
    parser.add_argument("--ocean-env", default="squared", choices=list(p3o_ocean.OCEAN_ENVS))
    parser.add_argument("--iterations", type=int, default=None, help="measured iterations per training run (default 8; smoke 2)")
    parser.add_argument("--repeats", type=int, default=None, help="alternating repeats of the Atari pair (default 2; smoke 1)")
    parser.add_argument("--budget-s", type=float, default=540, help="steps that would start after this many seconds are skipped, so the run ends inside a 10-minute call")
    parser.add_argument("--tool-timeout-s", type=float, default=240, help="limit for each run under compute-sanitizer or ncu")
    options = parser.parse_args()
    if options.iterations is None:
        options.iterations = 2 if options.smoke else 8
    if options.repeats is None:
        options.repeats = 1 if options.smoke else 2
    if options.iterations < 2 or options.repeats < 1:
        parser.error("--iterations must be >= 2 (the steady rate is taken between the first and last) and --repeats >= 1")
    out = Path(options.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    book = RunBook(out, options)
    book.log(f"gpu_check: {book.results['command']} on {book.results['device']}, {book.results['date']}")
    step_functions = {"versions": versions_step, "parity": parity_step, "kernel": kernel_step, "ocean": ocean_step, "atari": atari_step,
                      "sanitizer": sanitizer_step, "ncu": ncu_step}
    start_folder = os.getcwd()
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)  # the training runs' runs/ folders are thrown away
        try:
            for name in STEPS:
                if name in options.steps:
                    book.run(name, step_functions[name])
        finally:
            os.chdir(start_folder)
    if book.cuda:
        book.results["targets"] = targets(book.results)
        book.log("\n== targets")
        for bar, met in book.results["targets"].items():
            book.log(f"  {'met    ' if met else 'MISSED '} {bar}")
    book.save()
    failed = [name for name, step in book.results["steps"].items() if step["status"] == "failed"]
    book.log(f"\n{out / 'gpu_check.json'}: " + (f"FAILED steps: {', '.join(failed)}" if failed else "every step ok or skipped") +
             (f"; skipped: {'; '.join(book.results['skipped'])}" if book.results["skipped"] else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
