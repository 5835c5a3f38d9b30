"""The evidence studies on the Ocean suite: one command per study, each writing its raw runs to a CSV and its plots.

    python benchmarks/ocean_studies.py horizon      # p3o_ocean.py at H = 16, 32, 64, 128, 256 on every env
    python benchmarks/ocean_studies.py versus       # P3O (default H) against PPO at gamma 0.99 and at the best gamma of a sweep
    python benchmarks/ocean_studies.py delay        # the delay env at D = 1, 8, 32, 64, 100: each algorithm's score against D
    python benchmarks/ocean_studies.py ablations    # the clock and the window loss, each off
    python benchmarks/ocean_studies.py throughput   # SPS and the advantage's share of an iteration, P3O against GAE (alone)
    python benchmarks/ocean_studies.py probes       # P3O at H = 32 and 128 and PPO's gamma sweep on the horizon probes (PROBES), 95% CIs
    python benchmarks/ocean_studies.py probe-ablations  # each component of the default removed, and the smallest P3O, on the probes
    python benchmarks/ocean_studies.py all          # every study above, in that order

Every learning run is one (algorithm, env, options, seed) with a fixed budget per env (`BUDGETS`, scaled by
--budget-scale). P3O runs are p3o_ocean.train with the script's defaults; PPO runs are ppo_baseline.train on the
same env with the same network, batch, learning rate, epochs and clipping (only the advantage and the value head
differ). Runs go to `--workers` processes of one thread each. Each finished run is appended to
benchmarks/results/ocean_runs.jsonl.gz (gzip'd JSON lines) with its learning curve, keyed by its settings and a hash
of the script that ran it: a study interrupted at any point resumes where it stopped, and studies share runs (the
versus study's P3O runs are the horizon study's H = 128 runs). Delete that file, or pass --fresh, to run everything
again. The committed cache holds the runs of today's p3o_ocean.py and ppo_baseline.py (and of the screens in
research/patches/ that apply to them), so each study of the README and docs redraws at this commit without
training; an older commit's runs are in that commit's cache (git show COMMIT:benchmarks/results/ocean_runs.jsonl, before this file was gzip'd).

Scores are the envs' normalised `score` (1 = optimal). A run's final score is the mean of its per-iteration score
over the last 10% of its iterations; steps-to-solve is the first step at which the per-iteration score reached the
env's `solved_score` (blank if never).

Makes: the README's probe figure (`probes --seeds 1 ... 10 --tag _cheaper`), docs/results.md's sanity table (`versus
--seeds 1 ... 10 --tag _cheaper`), the seeds 21 to 30 check (`probes --seeds 21 ... 30 --tag _s21_30`) and the studies
of docs/probes.md and research/probes_log.md. Time on the 2-core CPU: seconds from the committed cache; from scratch about 13 s a run on one core on
average, so `probes` (200 runs) takes about 25 minutes and `versus` (280 runs) about half an hour on two workers.
"""
import argparse
import csv
import functools
import gzip
import hashlib
import inspect
import json
import math
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from dataclasses import fields, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import p3o_ocean  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
RUNS_FILE = RESULTS / "ocean_runs.jsonl.gz"
# The sanity suite and each env's steps per run: enough for P3O at the defaults to get most of the way on this
# 2-core CPU, small enough that the five studies fit one working session with two workers. spread and choice are
# probed at their own settings and budgets only (PROBES).
BUDGETS = {"bandit": 393_216, "password": 262_144, "stochastic": 262_144, "squared": 524_288, "delay": 786_432, "forage": 655_360, "mixed": 655_360}
ENVS = list(BUDGETS)
HORIZONS = [16, 32, 64, 128, 256]
GAMMAS = [0.9, 0.99, 0.999]  # the PPO sweep; 0.99 is the untuned baseline
DELAYS = [1, 8, 32, 64, 100]
DELAY_GAMMAS = [0.99, 0.999]  # the untuned baseline and the sweep's long-horizon end
# Each a choice that is not the default, with its label in the tables. The choices that left the scripts are in
# research/ablations.md with the commit that runs them.
ABLATIONS = [("no clock", {"clock": False}), ("no window loss", {"window_loss_coef": 0.0})]
ABLATION_ENVS = ["delay", "forage"]  # long-horizon probes, where the choices can matter (budgeted to one session)
ABLATION_DELAY = 32  # delay runs in the ablations use this D, where the horizon matters
THROUGHPUT_STEPS = 262_144  # 8 iterations: the first one's start-up costs are a small share
# Horizon probes with room left: the seven envs above score 0.998 to 0.9997 at the defaults, where no variant can be
# told apart from another. Each probe is an env with its difficulty flag set, and a fixed budget (steps per run).
# Settings from a three-seed screen (docs/probes.md); over ten seeds the best P3O variant known scores 0.55 to 0.87 on
# each, PPO at gamma 0.99 0.01 to 0.56. Both horizons see the reward on noisy_delay and spread; only H = 128 on
# far_delay and the two choices. choice_close asks the far credit to hold where the far reward is worth 10% more, not
# 43% (issue 75).
PROBES = {
    "noisy_delay": ("delay", {"delay": 16, "reward_noise": 3.0}, 786_432),  # reward noise of std 3 on a 0/1 reward
    "far_delay": ("delay", {"delay": 100}, 1_179_648),  # others' rewards in between; episodes of 164 steps
    "spread": ("spread", {"spread": 32, "reward_noise": 1.0}, 786_432),  # one decision's reward spread over 32 steps
    "choice": ("choice", {"choice_distance": 96}, 1_572_864),  # 0.7 now or 1.0 in 96 steps; episodes of 388
    "choice_close": ("choice", {"choice_distance": 96, "choice_near_reward": 0.9}, 1_572_864),  # 0.9 now: a 10% margin
}
PROBE_HORIZONS = [32, 128]
# The ablation on the probes, both ways: each component of the one default removed alone, and the smallest P3O (the
# windows past the terminal and the tail bootstrap, with the learned sigma) with nothing else. The rows of the
# components that left the scripts (the effect weights, with their memory and floor rule, among them) are in
# research/ablations.md with the commit that runs them.
REWARD_TARGETS = {"td_lambda": 1.0}  # lam = 1: the rewards as targets at every offset, nothing bootstrapped
SMALLEST = {"clock": False, "window_loss_coef": 0.0, **REWARD_TARGETS}
PROBE_ABLATIONS = [
    ("default", {}), ("lambda 1 (rewards as targets)", REWARD_TARGETS), ("no clock", {"clock": False}), ("no window loss", {"window_loss_coef": 0.0}),
    ("smallest: no clock, no window loss, lambda 1", SMALLEST),
]
TAG = ""  # --tag: appended to the CSV and PNG names, so a run with other seeds or horizons keeps the main files


# ---------------------------------------------------------------------------------------------------------
# Runs: one spec -> one row, in a worker process
# ---------------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def script_hash(algo):
    """The code a run depends on: p3o_ocean.py for P3O; for PPO, ppo_baseline.py and the Ocean envs' classes, which
    live in p3o_ocean.py (so a change to an env retrains PPO on it too). Once a process: reading the envs' source
    takes about a second, which every PPO spec of a study paid (3 minutes before the 280 runs of `versus`)."""
    if algo == "p3o":
        return hashlib.sha256((ROOT / "p3o_ocean.py").read_bytes()).hexdigest()[:12]
    envs = "".join(inspect.getsource(cls) for cls in (p3o_ocean.OceanEnv, *p3o_ocean.OCEAN_ENVS.values()))
    return hashlib.sha256((ROOT / "ppo_baseline.py").read_bytes() + envs.encode()).hexdigest()[:12]


def spec(algo, env, seed, scale, steps=None, **options):
    """One run: the algorithm, the Ocean env, its seed, its budget (`steps`, else the env's) and the Args fields that
    differ from the defaults."""
    steps = int((steps or budget(env, options)) * scale)
    if algo == "p3o":  # explicit, so the runs at the default H are shared between studies
        options.setdefault("horizon", p3o_ocean.Args.horizon)
    return {"algo": algo, "env": env, "seed": seed, "total_timesteps": steps, "options": dict(sorted(options.items())), "script": script_hash(algo)}


def budget(env, options):
    """Longer delays mean longer episodes (64 + D steps) and a harder credit assignment: 1.5x the steps past D = 32."""
    return BUDGETS[env] * 3 // 2 if env == "delay" and options.get("delay", 4) > 32 else BUDGETS[env]


def key(run):
    return json.dumps({k: run[k] for k in ("algo", "env", "seed", "total_timesteps", "options", "script")}, sort_keys=True)


def ppo_args(run):
    """PPO with GAE from ppo_baseline.py, on the same Ocean env, with every hyperparameter the two scripts share
    taken from p3o_ocean.py's defaults (network, batch, learning rate, epochs, clipping, coefficients)."""
    import ppo_baseline

    ocean = p3o_ocean.Args()
    shared = {f.name: getattr(ocean, f.name) for f in fields(ppo_baseline.Args) if hasattr(ocean, f.name) and f.name not in ("exp_name", "env_id", "total_timesteps")}
    args = ppo_baseline.Args(**shared)
    return replace(args, env_id=f"ocean/{run['env']}", seed=run["seed"], total_timesteps=run["total_timesteps"], progress=False, **run["options"]), ppo_baseline.train


def p3o_args(run):
    args = replace(p3o_ocean.Args(), env_id=run["env"], seed=run["seed"], total_timesteps=run["total_timesteps"], progress=False, **run["options"])
    return args, p3o_ocean.train


def start_worker():
    import torch

    torch.set_num_threads(1)  # one process per core beats two threads per process for these small networks


def execute(run):
    """Train one run in a scratch folder and return its row: final score, steps-to-solve, SPS and the curve."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        args, train = (p3o_args if run["algo"] == "p3o" else ppo_args)(run)
        began = time.time()
        result = train(args)
        seconds = time.time() - began
        events = EventAccumulator(f"runs/{result['run']}", size_guidance={"scalars": 0, "histograms": 0})
        events.Reload()
        tags = events.Tags()
        curve = [[e.step, round(e.value, 4)] for e in events.Scalars("charts/score")]
        row = dict(run, SPS=result["SPS"], seconds=round(seconds, 1), curve=curve)
        phases = result["phases"]
        row["advantage_fraction"] = round(phases.get("advantage", 0.0) / sum(phases.values()), 4)
        if "charts/weight_curve" in tags["histograms"]:  # P3O: what the weights learned, for the notes
            row["weights"] = [round(w, 4) for w in events.Histograms("charts/weight_curve")[-1].histogram_value.bucket]
    solved = p3o_ocean.OCEAN_ENVS[run["env"]].solved_score
    row["score"] = final_score(curve)
    row["steps_to_solve"] = next((step for step, score in curve if score >= solved), None)
    return row


def final_score(curve):
    last = curve[-max(1, len(curve) // 10) :]
    return round(sum(score for _, score in last) / len(last), 4) if last else float("nan")


def load_runs():
    """The cached rows by key. The cache is JSON lines, gzip'd: one gzip member per study that appended to it. A study
    killed mid-write leaves its last member unended; the whole rows before that are kept, and the file is rewritten
    from them so that the next study's rows follow a complete member."""
    runs, truncated = {}, False
    if RUNS_FILE.exists():
        with gzip.open(RUNS_FILE, "rt") as lines:
            try:
                for line in lines:
                    if line.strip():
                        row = json.loads(line)
                        runs[key(row)] = row
            except (EOFError, json.JSONDecodeError):
                truncated = True
    if truncated:
        with gzip.open(RUNS_FILE, "wt") as out:
            out.writelines(json.dumps(row) + "\n" for row in runs.values())
    return runs


def run_all(specs, workers, fresh=False, keep=True):
    """The rows of these specs: cached ones from ocean_runs.jsonl.gz, the others trained now and appended there one by
    one as they finish (a crash loses only the runs in flight)."""
    done = {} if fresh else load_runs()
    todo = [s for s in dict.fromkeys(key(s) for s in specs) if s not in done]
    todo = [json.loads(k) for k in todo]
    print(f"{len(specs)} runs: {len(specs) - len(todo)} cached, {len(todo)} to train on {workers} workers", flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    if todo:
        began = time.time()
        context = multiprocessing.get_context("spawn")
        with context.Pool(workers, initializer=start_worker) as pool, (gzip.open(RUNS_FILE, "at") if keep else open(os.devnull, "a")) as out:
            for i, row in enumerate(pool.imap_unordered(execute, todo), 1):
                out.write(json.dumps(row) + "\n")
                out.flush()
                done[key(row)] = row
                eta = (time.time() - began) / i * (len(todo) - i)
                label = " ".join(f"{k}={v}" for k, v in row["options"].items())
                print(f"[{i}/{len(todo)}] {row['algo']} {row['env']} {label} seed {row['seed']}: score {row['score']:.3f} ({row['seconds']:.0f}s, ETA {eta / 60:.0f} min)", flush=True)
    return [done[key(s)] for s in specs]


# ---------------------------------------------------------------------------------------------------------
# Tables and plots
# ---------------------------------------------------------------------------------------------------------
# Two-sided 95% quantiles of Student's t for 1 to 30 degrees of freedom (beyond: 30's, slightly conservative).
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
       2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def ci95(values):
    """Mean and the half-width of its 95% confidence interval (t over the seeds)."""
    mean, std = mean_std(values)
    n = len([v for v in values if v == v])
    return mean, (T95[min(n - 1, 30) - 1] * std / math.sqrt(n) if n > 1 else float("nan"))


def difference_ci95(a, b):
    """mean(a) - mean(b) and the half-width of its 95% confidence interval (Welch, its degrees of freedom rounded down)."""
    (ma, sa), (mb, sb) = mean_std(a), mean_std(b)
    va, vb = sa**2 / len(a), sb**2 / len(b)
    if len(a) < 2 or len(b) < 2:
        return ma - mb, float("nan")
    if va + vb == 0:
        return ma - mb, 0.0
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return ma - mb, T95[min(max(int(df), 1), 30) - 1] * math.sqrt(va + vb)


def mean_std(values):
    values = [v for v in values if v == v]
    if not values:
        return float("nan"), float("nan")
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def write_csv(name, rows, columns):
    path = RESULTS / f"ocean_{name}{TAG}.csv"
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({**row["options"], **row})
    return path


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def band(ax, rows, label):
    """Mean learning curve over seeds with a +-1 std band (the seeds share their logging steps)."""
    import numpy as np

    length = min(len(r["curve"]) for r in rows)
    steps = np.array([s for s, _ in rows[0]["curve"][:length]])
    scores = np.array([[v for _, v in r["curve"][:length]] for r in rows])
    mean, std = scores.mean(0), scores.std(0, ddof=1) if len(rows) > 1 else np.zeros(length)
    line = ax.plot(steps, mean, label=label)[0]
    ax.xaxis.set_major_formatter(lambda x, _: f"{x / 1e6:g}M")
    ax.fill_between(steps, mean - std, mean + std, alpha=0.2, color=line.get_color())


def grid(plt, count):
    cols = min(4, count)
    rows = (count + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False)
    for ax in axes.flat[count:]:
        ax.axis("off")
    return fig, list(axes.flat)


def score_panel(ax, title, fontsize=None):
    """Title, axis labels, the score's range and the legend of one panel of learning curves."""
    ax.set_title(title, fontsize=fontsize)
    ax.set_xlabel("steps")
    ax.set_ylabel("score")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(fontsize=7)


def seeds_of(rows, **match):
    """The rows whose settings match: run options first (a P3O row's top-level `horizon` is the learned h)."""
    return [r for r in rows if all((r["options"][k] if k in r["options"] else r.get(k)) == v for k, v in match.items())]


# ---------------------------------------------------------------------------------------------------------
# The studies
# ---------------------------------------------------------------------------------------------------------
def horizon_study(opts):
    specs = [spec("p3o", env, seed, opts.budget_scale, horizon=H, **opts.set) for env in opts.envs for seed in opts.seeds for H in opts.horizons]
    rows = run_all(specs, opts.workers, opts.fresh)
    plt = pyplot()
    fig, axes = grid(plt, len(opts.envs))
    print(f"\nhorizon invariance, final score mean +- std over seeds {opts.seeds}")
    print(f"{'env':<12}" + "".join(f"{'H=' + str(H):>16}" for H in opts.horizons) + f"{'|32 vs 128| <= max std':>26}")
    table = []
    for ax, env in zip(axes, opts.envs):
        cells, stats = [], {}
        for H in opts.horizons:
            group = seeds_of(rows, env=env, horizon=H)
            stats[H] = mean_std([r["score"] for r in group])
            solve = [r["steps_to_solve"] for r in group]
            cells.append((H, *stats[H], sum(s is not None for s in solve), mean_std([s for s in solve if s is not None])[0]))
        holds = 32 in stats and 128 in stats and abs(stats[32][0] - stats[128][0]) <= max(stats[32][1], stats[128][1])
        table.append((env, cells, holds))
        print(f"{env:<12}" + "".join(f"{m:>9.3f} +-{s:.3f}" for _, m, s, _, _ in cells) + f"{'yes' if holds else 'NO':>26}")
        ax.errorbar(opts.horizons, [c[1] for c in cells], yerr=[c[2] for c in cells], marker="o", capsize=3, label="default")
        ax.set_xscale("log", base=2)
        ax.set_xticks(opts.horizons, [str(H) for H in opts.horizons])
        ax.set_ylim(-0.05, 1.05)
        ax.set_title(env)
        ax.set_xlabel("horizon cap H")
        ax.set_ylabel("final score")
    path = write_csv("horizon", rows, ["env", "horizon", "clock", "window_loss_coef", "seed", "score", "steps_to_solve", "total_timesteps", "SPS", "seconds"])
    settings = "".join(f", {name}={value}" for name, value in opts.set.items())
    fig.suptitle(f"P3O horizon invariance{settings}: final score vs H ({len(opts.seeds)} seeds, mean +- std)")
    fig.tight_layout()
    fig.savefig(RESULTS / f"ocean_horizon{TAG}.png", dpi=110)
    print("\nsteps to solve (seeds that solved / mean steps):")
    for env, cells, _ in table:
        print(f"{env:<12}" + "".join(f"{f'{n}/{len(opts.seeds)} ' + (f'{steps / 1e3:.0f}k' if n else '-'):>16}" for _, _, _, n, steps in cells))


def versus_specs(opts, env):
    p3o = [spec("p3o", env, seed, opts.budget_scale) for seed in opts.seeds]
    ppo = {gamma: [spec("ppo", env, seed, opts.budget_scale, gamma=gamma) for seed in opts.seeds] for gamma in GAMMAS}
    return p3o, ppo


def versus_study(opts):
    plans = {env: versus_specs(opts, env) for env in ENVS}
    flat = [s for p3o, ppo in plans.values() for s in p3o + [s for group in ppo.values() for s in group]]
    done = {key(r): r for r in run_all(flat, opts.workers, opts.fresh)}
    rows, summary = [], []
    plt = pyplot()
    fig, axes = grid(plt, len(ENVS))
    print(f"\nP3O (H={p3o_ocean.Args.horizon}) against PPO, final score mean +- std over seeds {opts.seeds}; the differences with their 95% CI (Welch)")
    print(f"{'env':<12}{'P3O':>16}{'PPO 0.99':>16}{'PPO best':>22}{'P3O - PPO 0.99':>20}{'P3O - PPO best':>20}")
    for ax, env in zip(axes, ENVS):
        p3o_specs, ppo_specs = plans[env]
        p3o = [done[key(s)] for s in p3o_specs]
        ppo = {gamma: [done[key(s)] for s in group] for gamma, group in ppo_specs.items()}
        best = max(GAMMAS, key=lambda g: mean_std([r["score"] for r in ppo[g]])[0])
        p3o_m, p3o_s = mean_std([r["score"] for r in p3o])
        base_m, base_s = mean_std([r["score"] for r in ppo[0.99]])
        best_m, best_s = mean_std([r["score"] for r in ppo[best]])
        versus_base = difference_ci95([r["score"] for r in p3o], [r["score"] for r in ppo[0.99]])
        versus_best = difference_ci95([r["score"] for r in p3o], [r["score"] for r in ppo[best]])
        matches = versus_base[0] + versus_base[1] >= 0  # the interval reaches 0 or above: P3O ties or beats PPO at 0.99
        summary.append(dict(env=env, p3o=(p3o_m, p3o_s), ppo=(base_m, base_s), best_gamma=best, best=(best_m, best_s), matches=matches))
        print(f"{env:<12}{p3o_m:>9.3f} +-{p3o_s:.3f}{base_m:>9.3f} +-{base_s:.3f}{best_m:>9.3f} +-{best_s:.3f} (g={best})"
              f"{versus_base[0]:>+12.3f} +-{versus_base[1]:.3f}{versus_best[0]:>+12.3f} +-{versus_best[1]:.3f}")
        rows += p3o + [r for g in GAMMAS for r in ppo[g]]
        band(ax, p3o, f"P3O H={p3o_ocean.Args.horizon}")
        band(ax, ppo[0.99], "PPO gamma 0.99")
        if best != 0.99:
            band(ax, ppo[best], f"PPO gamma {best} (best)")
        score_panel(ax, env)
    fig.suptitle(f"P3O vs PPO on the Ocean suite ({len(opts.seeds)} seeds, mean +- std)")
    fig.tight_layout()
    fig.savefig(RESULTS / f"ocean_versus{TAG}.png", dpi=110)
    path = write_csv("versus", rows, ["env", "algo", "gamma", "seed", "score", "steps_to_solve", "total_timesteps", "SPS", "seconds"])
    print(f"({path}) P3O ties or beats PPO gamma 0.99 (the difference's interval reaches 0) on {sum(s['matches'] for s in summary)} of {len(ENVS)} envs")
    return summary


def probe_plan(name, seeds, scale, overrides):
    """The runs of one probe, by label: P3O at each of PROBE_HORIZONS and PPO at each of GAMMAS. `overrides` (--set)
    replace the probe's own options; PPO takes those its Args has (env options and the shared hyperparameters)."""
    import ppo_baseline

    env, options, steps = PROBES[name]
    ppo_overrides = {field: value for field, value in overrides.items() if field in ppo_baseline.Args.__dataclass_fields__}
    plan = {f"P3O H={H}": [spec("p3o", env, seed, scale, steps, **{**options, **overrides, "horizon": H}) for seed in seeds] for H in PROBE_HORIZONS}
    plan.update({f"PPO {gamma}": [spec("ppo", env, seed, scale, steps, **{**options, **ppo_overrides, "gamma": gamma}) for seed in seeds] for gamma in GAMMAS})
    return plan


def probe_study(opts):
    """P3O at H = 32 and 128 and PPO at each gamma of GAMMAS on each probe of PROBES: every cell's mean with its 95% CI,
    H = 128 - H = 32 with the CI of the difference, and PPO at 0.99 and at its best gamma. --set's fields override the
    probe's own options (`--set reward_noise=0.0`: the probes without noise); PPO takes those its Args has too."""
    plans = {name: probe_plan(name, opts.seeds, opts.budget_scale, opts.set) for name in opts.probes}
    flat = [s for plan in plans.values() for group in plan.values() for s in group]
    done = {key(r): r for r in run_all(flat, opts.workers, opts.fresh)}
    plt = pyplot()
    fig, axes = grid(plt, len(plans))
    labels = [f"P3O H={H}" for H in PROBE_HORIZONS] + ["PPO 0.99", "PPO best gamma"]
    print(f"\nprobes, final score mean +- 95% CI over seeds {opts.seeds}")
    print(f"{'probe':<13}" + "".join(f"{label:>19}" for label in labels) + f"{'H=128 - H=32':>19}")
    rows = []
    for ax, (name, plan) in zip(axes, plans.items()):
        results = {label: [done[key(s)] for s in group] for label, group in plan.items()}
        best = max(GAMMAS, key=lambda gamma: mean_std([r["score"] for r in results[f"PPO {gamma}"]])[0])
        results["PPO best gamma"] = results[f"PPO {best}"]
        cells = [ci95([r["score"] for r in results[label]]) for label in labels]
        gap = difference_ci95([r["score"] for r in results["P3O H=128"]], [r["score"] for r in results["P3O H=32"]])
        print(f"{name:<13}" + "".join(f"{m:>11.3f} +-{h:.3f}" for m, h in cells) + f"{gap[0]:>+11.3f} +-{gap[1]:.3f}   (PPO's best gamma {best})")
        for label in labels:
            if label != "PPO best gamma":
                band(ax, results[label], label)
        if best != 0.99:
            band(ax, results["PPO best gamma"], f"PPO {best} (best)")
        rows += [dict(r, probe=name, case=label) for label, group in plan.items() for r in results[label]]
        score_panel(ax, f"{name}: {PROBES[name][0]} " + " ".join(f"{k}={v}" for k, v in PROBES[name][1].items()), fontsize=8)
    fig.suptitle(f"Horizon probes ({len(opts.seeds)} seeds, mean +- std)")
    fig.tight_layout()
    fig.savefig(RESULTS / f"ocean_probes{TAG}.png", dpi=110)
    path = write_csv("probes", rows, ["probe", "case", "env", "algo", "horizon", "seed", "score", "steps_to_solve", "total_timesteps", "SPS", "seconds"])
    print(f"({path})")


def probe_ablation_study(opts):
    """Each configuration of PROBE_ABLATIONS at H = 32 and 128 on every probe: the mean score over the probes, per
    seed, against the default's, with the 95% CI of the difference (Welch), and each probe's cell."""
    configs = [(label, extra) for label, extra in PROBE_ABLATIONS if label == "default" or not opts.configs or label in opts.configs]
    specs = {(label, name, H): [spec("p3o", PROBES[name][0], seed, opts.budget_scale, PROBES[name][2], **PROBES[name][1], horizon=H, **extra) for seed in opts.seeds]
             for label, extra in configs for name in opts.probes for H in PROBE_HORIZONS}
    done = {key(r): r for r in run_all([s for group in specs.values() for s in group], opts.workers, opts.fresh)}
    scores = {cell: [done[key(s)]["score"] for s in group] for cell, group in specs.items()}

    def probe_mean(label, H):  # per seed, the mean over the probes
        return [statistics.mean(scores[label, name, H][i] for name in opts.probes) for i in range(len(opts.seeds))]

    print(f"\nablations on the probes, final score over seeds {opts.seeds}: each probe's mean, then the mean over the probes "
          f"+- 95% CI and its difference from the default's (Welch)")
    header = "".join(f"{name[:10] + ' ' + str(H):>15}" for H in PROBE_HORIZONS for name in opts.probes)
    print(f"{'configuration':<31}{header}" + "".join(f"{'mean H=' + str(H):>16}{'vs default':>17}" for H in PROBE_HORIZONS) + f"{'H=128 - H=32':>17}")
    rows = []
    for label, _ in configs:
        cells = "".join(f"{statistics.mean(scores[label, name, H]):>15.3f}" for H in PROBE_HORIZONS for name in opts.probes)
        summary = ""
        for H in PROBE_HORIZONS:
            mean, half = ci95(probe_mean(label, H))
            gap, gap_half = difference_ci95(probe_mean(label, H), probe_mean("default", H))
            summary += f"{mean:>9.3f} +-{half:.3f}{gap:>+10.3f} +-{gap_half:.3f}"
        horizon_gap, horizon_half = difference_ci95(probe_mean(label, 128), probe_mean(label, 32))
        print(f"{label:<31}{cells}{summary}{horizon_gap:>+10.3f} +-{horizon_half:.3f}")
        rows += [dict(done[key(s)], config=label, probe=name) for (config, name, H), group in specs.items() if config == label for s in group]
    path = write_csv("probe_ablations", rows, ["config", "probe", "env", "horizon", "seed", "score", "total_timesteps", "SPS", "advantage_fraction", "seconds"])
    print(f"({path})")


def delay_study(opts):
    algos = [("P3O", "p3o", {})] + [(f"PPO gamma {g}", "ppo", {"gamma": g}) for g in DELAY_GAMMAS]
    specs = [spec(algo, "delay", seed, opts.budget_scale, delay=D, **extra) for D in DELAYS for _, algo, extra in algos for seed in opts.seeds]
    rows = run_all(specs, opts.workers, opts.fresh)
    path = write_csv("delay", rows, ["env", "delay", "algo", "gamma", "seed", "score", "steps_to_solve", "total_timesteps", "SPS", "seconds"])
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    print(f"\ndelay sweep, final score mean +- std over seeds {opts.seeds} ({path})")
    print(f"{'algorithm':<18}" + "".join(f"{'D=' + str(D):>16}" for D in DELAYS))
    for label, algo, extra in algos:
        stats = [mean_std([r["score"] for r in seeds_of(rows, algo=algo, delay=D, **extra)]) for D in DELAYS]
        print(f"{label:<18}" + "".join(f"{m:>9.3f} +-{s:.3f}" for m, s in stats))
        ax.errorbar(DELAYS, [m for m, _ in stats], yerr=[s for _, s in stats], marker="o", capsize=3, label=label)
    ax.set_xlabel("delay D (steps between a decision and its reward)")
    ax.set_ylabel("final score")
    ax.set_ylim(-0.05, 1.05)
    ax.legend()
    ax.set_title(f"delay: score against D ({len(opts.seeds)} seeds, mean +- std)")
    fig.tight_layout()
    fig.savefig(RESULTS / f"ocean_delay{TAG}.png", dpi=110)


def ablation_study(opts):
    def options(env, **extra):
        return dict(extra, delay=ABLATION_DELAY) if env == "delay" else extra

    configs = [("default", {})] + ABLATIONS
    specs = [spec("p3o", env, seed, opts.budget_scale, **options(env, **extra)) for env in ABLATION_ENVS for seed in opts.seeds for _, extra in configs]
    rows = run_all(specs, opts.workers, opts.fresh)
    for row, (label, _) in zip(rows, [c for _ in ABLATION_ENVS for _ in opts.seeds for c in configs]):
        row["config"] = label
    path = write_csv("ablations", rows, ["env", "config", "seed", "score", "steps_to_solve", "total_timesteps", "SPS", "seconds"])
    plt = pyplot()
    fig, axes = grid(plt, len(ABLATION_ENVS))
    print(f"\nablations (delay at D={ABLATION_DELAY}), final score mean +- std over seeds {opts.seeds} ({path})")
    widths = [max(22, len(label) + 2) for label, _ in configs]
    print(f"{'env':<12}" + "".join(f"{label:>{width}}" for (label, _), width in zip(configs, widths)))
    for ax, env in zip(axes, ABLATION_ENVS):
        stats = [mean_std([r["score"] for r in rows if r["env"] == env and r["config"] == label]) for label, _ in configs]
        print(f"{env:<12}" + "".join(f"{m:>{width - 7}.3f} +-{s:.3f}" for (m, s), width in zip(stats, widths)))
        ax.bar(range(len(configs)), [m for m, _ in stats], yerr=[s for _, s in stats], capsize=3)
        ax.set_xticks(range(len(configs)), [label for label, _ in configs], rotation=30, ha="right", fontsize=7)
        ax.set_ylim(0, 1.05)
        ax.set_title(env if env != "delay" else f"delay D={ABLATION_DELAY}")
        ax.set_ylabel("final score")
    fig.suptitle(f"P3O ablations: one design choice changed from the defaults ({len(opts.seeds)} seeds)")
    fig.tight_layout()
    fig.savefig(RESULTS / f"ocean_ablations{TAG}.png", dpi=110)


def throughput_study(opts):
    """SPS and the advantage's share of an iteration: PPO with GAE, P3O at H = 32 and at H = 128, and at H = 128 without
    the clock, with the value loss on whole minibatches and at lambda 1 (the rewards as targets), on squared and delay, one process
    at a time and alternating, so the ratios are taken side by side (run it alone)."""
    configs = [("PPO (GAE)", "ppo", {}), ("P3O H=32", "p3o", {"horizon": 32}), ("P3O H=128", "p3o", {"horizon": 128}),
               ("H=128 no clock", "p3o", {"horizon": 128, "clock": False}), ("H=128 value 1.0", "p3o", {"horizon": 128, "value_fraction": 1.0}),
               ("H=128 lambda 1", "p3o", {"horizon": 128, **REWARD_TARGETS})]
    rows = []
    for repeat in range(opts.repeats):
        for env in ("squared", "delay"):
            for label, algo, options in configs:
                run = dict(spec(algo, env, 1, opts.budget_scale, **options), total_timesteps=THROUGHPUT_STEPS)
                rows.append(dict(run_all([run], 1, fresh=True, keep=False)[0], config=label, repeat=repeat))
    path = write_csv("throughput_vs_ppo", rows, ["env", "config", "repeat", "SPS", "advantage_fraction", "seconds", "total_timesteps"])
    print(f"\nthroughput, {THROUGHPUT_STEPS:,} steps per run, medians of {opts.repeats} alternating repeats ({path})")
    for env in ("squared", "delay"):
        base = statistics.median(r["SPS"] for r in rows if r["env"] == env and r["config"] == configs[0][0])
        for label, _, _ in configs:
            group = [r for r in rows if r["env"] == env and r["config"] == label]
            sps = statistics.median(r["SPS"] for r in group)
            share = statistics.median(r["advantage_fraction"] for r in group)
            print(f"{env:<10}{label:<16}{sps:>10,.0f} SPS  {sps / base:.2f}x PPO   advantage {100 * share:.1f}% of an iteration")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", choices=["horizon", "versus", "delay", "ablations", "throughput", "probes", "probe-ablations", "all"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    parser.add_argument("--envs", nargs="+", default=ENVS, choices=ENVS, help="horizon: the envs")
    parser.add_argument("--probes", nargs="+", default=list(PROBES), choices=list(PROBES), help="probes: the probes")
    parser.add_argument("--configs", nargs="+", default=[], choices=[label for label, _ in PROBE_ABLATIONS], metavar="LABEL",
                        help="probe-ablations: these configurations of PROBE_ABLATIONS (quoted labels) beside the default; all if not given")
    parser.add_argument("--horizons", nargs="+", type=int, default=HORIZONS, help="horizon: the caps H to compare")
    parser.add_argument("--workers", type=int, default=2, help="processes of one thread each (one per core)")
    parser.add_argument("--budget-scale", type=float, default=1.0, help="multiplies every run's budget (BUDGETS)")
    parser.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE", help="horizon, probes: p3o_ocean.Args fields for every run, e.g. clock=False (probes: PPO too, where its Args has them)")
    parser.add_argument("--repeats", type=int, default=3, help="throughput: alternating repeats")
    parser.add_argument("--tag", default="", help="suffix for the CSV and PNG names (e.g. _5seeds)")
    parser.add_argument("--fresh", action="store_true", help="train every run again instead of reusing ocean_runs.jsonl.gz")
    opts = parser.parse_args()
    global TAG
    TAG = opts.tag
    defaults = p3o_ocean.Args()
    pairs = [item.split("=", 1) for item in opts.set]
    if any(len(pair) != 2 or not hasattr(defaults, pair[0]) for pair in pairs):
        parser.error(f"--set takes FIELD=VALUE with FIELD a field of p3o_ocean.Args, got {opts.set}")
    opts.set = {name: (value == "True") if isinstance(getattr(defaults, name), bool) else type(getattr(defaults, name))(value) for name, value in pairs}
    studies = {"horizon": horizon_study, "versus": versus_study, "delay": delay_study, "ablations": ablation_study, "throughput": throughput_study, "probes": probe_study, "probe-ablations": probe_ablation_study}
    for name in studies if opts.study == "all" else [opts.study]:
        studies[name](opts)


if __name__ == "__main__":
    main()
