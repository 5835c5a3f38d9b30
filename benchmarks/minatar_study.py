"""MinAtar (Young & Tian 2019): P3O against PPO on the five games, the README's MinAtar table and figures.

    python benchmarks/minatar_study.py run --arms ppo_0.99 p3o_h128 --seeds 1 2 3 --workers 2      # train, then export
    python benchmarks/minatar_study.py run --games Breakout --arms p3o_h32 --seeds 4 --steps 200000
    python benchmarks/minatar_study.py export --runs runs                                           # runs trained elsewhere
    python benchmarks/minatar_study.py report                                                       # tables and figures, no training
    python benchmarks/minatar_study.py speed --repeats 3                                            # SPS, P3O against PPO, alternating

Every arm runs the same network (the MinAtar paper's, p3o_atari.py's `make_network`), envs, steps and update: the
PPO configuration of gymnax-blines for MinAtar (64 envs x 128 steps, 8 minibatches x 4 epochs, lr 5e-4, clip 0.2,
entropy 0.01, value 0.5, gradient norm 0.5), with CleanRL's linear learning-rate anneal. The arms differ only in
the advantage: PPO + GAE at gamma 0.9, 0.99 or 0.999 (lambda 0.95), or P3O at H = 32 or 128 with today's default.

`run` starts each (game, arm, seed) not yet in benchmarks/results/minatar_runs.csv as one process with one torch
thread (through benchmarks/flushing.py), `--workers` at once, in runs/; a run with a checkpoint there continues it.
Each finished run is exported: one row in minatar_runs.csv (final return = the mean of `charts/episodic_return` over
the iterations in the last 10% of the steps; SPS; P3O's explained variance and tied offsets at the end), its curve
in minatar_curves.csv and, for P3O, its last weight curve in minatar_weights.csv.

`report` prints first the README's table: today's default (P3O at H = 128 and 32 with the lambda-return, its runs in
--default-results, research/results/minatar_5m_lambda) against PPO at 0.99 / 0.95 and PPO's best arm on each game (of
gamma 0.9, 0.99 and 0.999 at lambda 0.95, and 0.99 / 0.8 from --default-results), mean +- 95% CI over seeds, and P3O's
normalised score: the mean over the games of P3O's mean over PPO's, with a bootstrap 95% interval (every arm's seeds
resampled within each game, PPO's best arm picked again in each draw). Then, for the runs in --results (the default
before the lambda-return and PPO's gammas), the table, the differences (Welch's 95% CI), the normalised scores (by
PPO at 0.99 and by each game's best gamma), and the SPS of each arm side by side (runs of one machine), and it draws
minatar_curves.png (five panels) and minatar_weights.png there.
Time: a 5M-step run takes 6 to 8 minutes on one core of the 2-core CPU with nothing else running (10k to 14k SPS,
`speed`), about 9 on a lent H100 machine's host cores sixteen at once; `speed` takes about 5 minutes.
"""
import argparse
import csv
import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
RUNS_CSV, CURVES_CSV, WEIGHTS_CSV = RESULTS / "minatar_runs.csv", RESULTS / "minatar_curves.csv", RESULTS / "minatar_weights.csv"
DEFAULT_RESULTS = ROOT / "research" / "results" / "minatar_5m_lambda"  # today's default's runs and PPO at lambda 0.8
sys.path.insert(0, str(HERE))
from atari_runs import MALLOC_ENV, scalars  # noqa: E402
from ocean_studies import ci95, difference_ci95  # noqa: E402

GAMES = ["Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"]
CONFIG = ["--num-envs", "64", "--num-steps", "128", "--num-minibatches", "8", "--update-epochs", "4", "--learning-rate", "5e-4",
          "--clip-coef", "0.2", "--ent-coef", "0.01", "--vf-coef", "0.5", "--max-grad-norm", "0.5", "--save-interval", "5"]
ARMS = {
    "ppo_0.9": ("ppo_baseline.py", ["--gamma", "0.9"]),
    "ppo_0.99": ("ppo_baseline.py", ["--gamma", "0.99"]),
    "ppo_0.999": ("ppo_baseline.py", ["--gamma", "0.999"]),
    "ppo_0.99_lam08": ("ppo_baseline.py", ["--gamma", "0.99", "--gae-lambda", "0.8"]),
    "p3o_h32": ("p3o_atari.py", ["--horizon", "32"]),
    "p3o_h128": ("p3o_atari.py", ["--horizon", "128"]),
}
PPO_NAMES = {"ppo_0.9": "0.9 / 0.95", "ppo_0.99": "0.99 / 0.95", "ppo_0.999": "0.999 / 0.95", "ppo_0.99_lam08": "0.99 / 0.8"}
FIELDS = ["game", "arm", "seed", "steps", "final_return", "sps", "explained_variance", "tied_offsets", "machine"]


def env_id(game, delay=0):
    """The game as it ships, or with every reward `delay` steps late (envs/delayed.py)."""
    return f"envs.delayed:MinAtar/{game}-Delay{delay}-v1" if delay else f"MinAtar/{game}-v1"


def folder_prefix(game, delay=0):
    """A run folder's name up to its first `__`: the env id as the scripts write it in a path."""
    return env_id(game, delay).replace("/", "_").replace(":", "_")


def run_folder(runs, game, arm, seed, delay=0):
    """The newest run folder of (game, arm, seed) under `runs`, or None."""
    found = sorted(Path(runs).glob(f"{folder_prefix(game, delay)}__{arm}__{seed}__*"), key=lambda p: p.name.rsplit("__", 1)[1])
    return found[-1] if found else None


def run_key(folder, delay=0):
    """(game, arm, seed) of a run folder `<env id as a path>__<arm>__<seed>__<time>` of the delay, as strings, or None
    where the folder is another delay's or no MinAtar run's."""
    prefix, *key = folder.name.split("__")[:3]
    game = next((g for g in GAMES if folder_prefix(g, delay) == prefix), None)
    return (game, *key) if game and len(key) == 2 else None


def read_rows(path):
    if not path.exists():
        return []
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def append_rows(path, rows, fields):
    path.parent.mkdir(parents=True, exist_ok=True)  # a new --results folder
    new = not path.exists()
    with open(path, "a", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=fields)
        if new:
            writer.writeheader()
        writer.writerows(rows)


def arm_command(game, arm, steps, delay=0):
    """`python SCRIPT ...` of one arm on one game, less the interpreter: the table's configuration and the arm's flags."""
    script, flags = ARMS[arm]
    return [str(ROOT / script), "--env-id", env_id(game, delay), "--total-timesteps", str(steps), *CONFIG, *flags]


def one_thread():
    """The environment of a run: one torch thread (one run a core) and the allocator settings of atari_runs.py."""
    return dict(os.environ, OMP_NUM_THREADS="1", **MALLOC_ENV)


def train(game, arm, seed, steps, runs, tag="", extra=(), delay=0):
    """One run to `steps`, continuing its checkpoint where one is there; returns the run folder. Its --exp-name is
    the arm's name and `tag` (a screen's patched checkout names its runs so). A run that exits non-zero raises
    RuntimeError naming its log."""
    name = arm + tag
    folder = run_folder(runs, game, name, seed, delay)
    if folder is not None and (folder / "checkpoint.pt").exists():
        command = [str(ROOT / ARMS[arm][0]), "--resume", str(folder / "checkpoint.pt")]
    else:
        command = [*arm_command(game, arm, steps, delay), "--exp-name", name, "--seed", str(seed), *extra]
    log = Path(runs) / f"{game}{f'_delay{delay}' if delay else ''}_{name}_s{seed}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as out:
        code = subprocess.run([sys.executable, str(HERE / "flushing.py"), *command, "--no-progress"], cwd=Path(runs).parent, env=one_thread(), stdout=out, stderr=subprocess.STDOUT).returncode
    if code != 0:
        raise RuntimeError(f"minatar_study.py: {game} {name} seed {seed} exited with status {code}; its log: {log}")
    return run_folder(runs, game, name, seed, delay)


def last_tenth(curve, steps):
    """The values of a [(step, value)] curve logged in the last 10% of a run of `steps`: a run's final return is
    their mean."""
    return [value for step, value in curve if step > 0.9 * steps]


def export(folder, game, arm, seed, steps, machine):
    """Append one finished run to the three CSVs; returns its row."""
    reached = max([step for _, step, _ in scalars(folder, "charts/SPS")], default=0)
    if reached < steps - 64 * 128:
        raise ValueError(f"minatar_study.py: {folder} ended at step {reached:,}, not {steps:,}: resume it first")
    curve = [(step, value) for _, step, value in scalars(folder, "charts/episodic_return")]
    final = last_tenth(curve, steps)
    if not final:
        raise ValueError(f"minatar_study.py: {folder} finished no episode in the last 10% of its steps")
    last = lambda tag: (scalars(folder, tag) or [(0, 0, float("nan"))])[-1][2]  # noqa: E731
    row = {"game": game, "arm": arm, "seed": seed, "steps": reached, "final_return": float(np.mean(final)), "sps": last("charts/SPS"),
           "explained_variance": last("losses/explained_variance"), "tied_offsets": last("charts/tied_offsets"), "machine": machine}
    append_rows(RUNS_CSV, [row], FIELDS)
    every = max(1, len(curve) // 100)
    append_rows(CURVES_CSV, [{"game": game, "arm": arm, "seed": seed, "step": s, "return": v} for s, v in curve[::every]], ["game", "arm", "seed", "step", "return"])
    if arm.startswith("p3o"):
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        events = EventAccumulator(str(folder), size_guidance={"histograms": 0})
        events.Reload()
        weights = events.Histograms("charts/weight_curve")[-1].histogram_value.bucket
        append_rows(WEIGHTS_CSV, [{"game": game, "arm": arm, "seed": seed, "offset": j, "weight": w} for j, w in enumerate(weights)], ["game", "arm", "seed", "offset", "weight"])
    return row


def command_run(opts):
    done = {(r["game"], r["arm"], r["seed"]) for r in read_rows(RUNS_CSV)}
    todo = [(g, a, str(s)) for g in opts.games for a in opts.arms for s in opts.seeds if (g, a + opts.tag, str(s)) not in done]
    print(f"minatar_study.py: {len(todo)} runs to {opts.steps:,} steps, {opts.workers} at once", flush=True)

    def one(job):
        """Train and export one run; returns the job if it failed (reported here), so the queue goes on without it."""
        game, arm, seed = job
        try:
            folder = train(game, arm, seed, opts.steps, opts.runs, opts.tag, opts.flags.split(), opts.delay)
            row = export(folder, game, arm + opts.tag, seed, opts.steps, opts.machine)
        except (RuntimeError, ValueError) as error:
            print(error, flush=True)
            return job
        print(f"{game} {arm} seed {seed}: {row['final_return']:.2f} at {row['sps']:.0f} SPS", flush=True)

    with ThreadPoolExecutor(opts.workers) as pool:
        failed = [job for job in pool.map(one, todo) if job is not None]
    if failed:
        sys.exit(f"minatar_study.py: {len(failed)} of {len(todo)} runs failed or did not export: "
                 + ", ".join(" ".join(job) for job in failed))


def command_export(opts):
    done = {(r["game"], r["arm"], r["seed"]) for r in read_rows(RUNS_CSV)}
    for folder in sorted(Path(opts.runs).glob("*__*__*")):
        key = run_key(folder, opts.delay)
        if key and key not in done:
            game, arm, seed = key
            try:
                row = export(folder, game, arm, seed, opts.steps, opts.machine)
                print(f"{game} {arm} seed {seed}: {row['final_return']:.2f}")
            except ValueError as error:
                print(error)


def bootstrap_ci(values_by_game, reference_by_game, rng, samples=10_000):
    """The mean over games of mean(values) / mean(reference), and its 95% bootstrap interval (seeds resampled per game)."""
    def score(pick):
        return np.mean([np.mean(pick(v)) / np.mean(pick(r)) for v, r in zip(values_by_game, reference_by_game)])

    point = score(lambda x: x)
    draws = [score(lambda x: rng.choice(x, len(x))) for _ in range(samples)]
    return point, np.percentile(draws, 2.5), np.percentile(draws, 97.5)


def normalised_score(values_by_game, references_by_game, rng, samples=10_000):
    """The mean over games of mean(values) / the best mean(reference) of the game, and its 95% bootstrap interval:
    every arm's seeds resampled within each game, the best reference picked again in each draw."""
    def score(mean):
        return np.mean([mean(v) / max(mean(r) for r in refs) for v, refs in zip(values_by_game, references_by_game)])

    draws = [score(lambda x: rng.choice(x, len(x)).mean()) for _ in range(samples)]
    return score(np.mean), np.percentile(draws, 2.5), np.percentile(draws, 97.5)


def finals_of(path):
    """{(game, arm): [final return of each seed]} of a minatar_runs.csv."""
    finals = {}
    for row in read_rows(path):
        finals.setdefault((row["game"], row["arm"]), []).append(float(row["final_return"]))
    return finals


def default_table(finals, default, title="Today's default", steps="5M steps"):
    """The README's table: P3O at today's default (`default`'s p3o_h128 and p3o_h32) against PPO at 0.99 / 0.95 and
    PPO's best arm on each game (PPO's arms of `finals` and `default`), and P3O's normalised scores. Returns the games
    of the table and each one's best PPO arm ([] and {} where no game has both P3O and PPO 0.99)."""
    ppo = {**{k: v for k, v in finals.items() if k[1] in PPO_NAMES}, **{k: v for k, v in default.items() if k[1] in PPO_NAMES}}
    games = [g for g in GAMES if (g, "p3o_h128") in default and (g, "ppo_0.99") in ppo]
    if not games:
        return [], {}
    best = {g: max((a for a in PPO_NAMES if (g, a) in ppo), key=lambda a: np.mean(ppo[(g, a)])) for g in games}
    cell = lambda values: "{:.2f} +- {:.2f}".format(*ci95(values))  # noqa: E731
    print(f"{title}, {steps}: final return, mean +- 95% CI (seeds)\n")
    print(f"| {steps} | " + " | ".join(games) + " |\n|" + " --- |" * (len(games) + 1))
    print("| PPO 0.99 / 0.95 | " + " | ".join(f"{cell(ppo[(g, 'ppo_0.99')])} ({len(ppo[(g, 'ppo_0.99')])})" for g in games) + " |")
    print("| PPO's best arm | " + " | ".join(f"{cell(ppo[(g, best[g])])} ({PPO_NAMES[best[g]]}; {len(ppo[(g, best[g])])})" for g in games) + " |")
    for arm, name in (("p3o_h128", "P3O H = 128"), ("p3o_h32", "P3O H = 32")):
        if not any((g, arm) in default for g in games):
            continue
        print(f"| {name} | " + " | ".join(f"{cell(default[(g, arm)])} ({len(default[(g, arm)])})" if (g, arm) in default else "" for g in games) + " |")
    what = f"its mean / PPO's on {games[0]}" if len(games) == 1 else f"the mean over {len(games)} games of its mean / PPO's"
    print(f"\nP3O normalised, {what}, with a 95% bootstrap interval:")
    for arm, name in (("p3o_h128", "P3O H = 128"), ("p3o_h32", "P3O H = 32")):
        if all((g, arm) in default for g in games):
            values = [np.array(default[(g, arm)]) for g in games]
            by_best = normalised_score(values, [[np.array(ppo[(g, a)]) for a in PPO_NAMES if (g, a) in ppo] for g in games], np.random.default_rng(0))
            by_099 = normalised_score(values, [[np.array(ppo[(g, "ppo_0.99")])] for g in games], np.random.default_rng(0))
            print("{}: {:.3f} [{:.3f}, {:.3f}] by PPO's best arm, {:.3f} [{:.3f}, {:.3f}] by PPO 0.99 / 0.95".format(name, *by_best, *by_099))
    print()
    return games, best


def command_speed(opts):
    """P3O at H = 128 against PPO at gamma 0.99 on each game, one process at a time, alternating, one torch thread,
    --steps each; the median SPS of each and their ratio (the table's runs are too far apart in time to compare)."""
    import re
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        for game in opts.games:
            sps = {arm: [] for arm in ("ppo_0.99", "p3o_h128")}
            for _ in range(opts.repeats):
                for arm in sps:
                    command = [sys.executable, *arm_command(game, arm, opts.steps), "--save-interval", "0", "--no-progress"]
                    output = subprocess.run(command, cwd=folder, env=one_thread(), capture_output=True, text=True, check=True).stdout
                    sps[arm].append(int(re.findall(r"([\d,]+) SPS", output)[-1].replace(",", "")))
            ppo, p3o = (float(np.median(sps[arm])) for arm in ("ppo_0.99", "p3o_h128"))
            print(f"{game}: PPO 0.99 {ppo:,.0f} SPS {sps['ppo_0.99']}, P3O H = 128 {p3o:,.0f} SPS {sps['p3o_h128']}: {p3o / ppo:.2f}x", flush=True)


def print_differences(finals, games, arms, best):
    """Each game's differences, Welch's 95% CI: P3O at H = 128 and 32 against PPO at 0.99 / 0.95 and the game's best
    PPO arm (`best`), each screen (an arm's name and a tag) against its arm, and H = 128 against H = 32."""
    for game in games:
        for p3o in ("p3o_h128", "p3o_h32"):
            if (game, p3o) not in finals:
                continue
            for ref in dict.fromkeys(["ppo_0.99", best[game]]):
                if ref and (game, ref) in finals:
                    d, half = difference_ci95(finals[(game, p3o)], finals[(game, ref)])
                    print(f"{game}: {p3o} - {ref}{' (best PPO)' if ref == best[game] else ''} = {d:+.2f} +- {half:.2f}")
        for screen in [arm for arm in arms if arm not in ARMS and (game, arm) in finals]:
            base = max((arm for arm in ARMS if screen.startswith(arm)), key=len)
            if (game, base) in finals:
                d, half = difference_ci95(finals[(game, screen)], finals[(game, base)])
                print(f"{game}: {screen} - {base} = {d:+.2f} +- {half:.2f}")
        if (game, "p3o_h128") in finals and (game, "p3o_h32") in finals and (game, "ppo_0.99") in finals:
            d, half = difference_ci95(finals[(game, "p3o_h128")], finals[(game, "p3o_h32")])
            bar = 0.05 * abs(np.mean(finals[(game, "ppo_0.99")]))
            inside = abs(d) + half <= bar
            print(f"{game}: H = 128 - H = 32 = {d:+.2f} +- {half:.2f} ({'inside' if inside else 'not inside'} +-{bar:.2f}, 5% of PPO 0.99's return)")


def delay_report(finals, delay, steps):
    """The late-reward study (`run --delay K`): its table, every arm against PPO at 0.99 / 0.95 and PPO's best arm
    game by game, P3O's normalised scores, and the differences."""
    games, best = default_table(finals, finals, f"Every reward {delay} steps late", f"{steps / 1e6:.0f}M steps")
    print_differences(finals, games, [arm for arm in ARMS if any(key[1] == arm for key in finals)], best)


def command_report(opts):
    rows = read_rows(RUNS_CSV)
    if not rows:
        raise SystemExit(f"minatar_study.py: no runs in {RUNS_CSV}")
    if opts.delay:
        return delay_report(finals_of(RUNS_CSV), opts.delay, max(int(row["steps"]) for row in rows))
    default_table(finals_of(RUNS_CSV), finals_of(Path(opts.default_results) / "minatar_runs.csv"))
    print(f"The runs of {RUNS_CSV} (the default before the lambda-return, and PPO's gammas):\n")
    finals, sps = {}, {}
    for row in rows:
        finals.setdefault((row["game"], row["arm"]), []).append(float(row["final_return"]))
        sps.setdefault((row["game"], row["arm"]), []).append(float(row["sps"]))
    arms = [arm for arm in ARMS if any(key[1] == arm for key in finals)]
    arms += sorted({key[1] for key in finals} - set(ARMS))  # screens: an arm's name and a tag
    games = [game for game in GAMES if any(key[0] == game for key in finals)]
    best = {}  # each game's best PPO gamma by mean final return: "PPO's best gamma" of the table
    for game in games:
        ppo = [arm for arm in arms if arm in ARMS and arm.startswith("ppo") and (game, arm) in finals]
        best[game] = max(ppo, key=lambda arm: np.mean(finals[(game, arm)]), default=None)
    print("| game | " + " | ".join(arms) + " |\n|" + " --- |" * (len(arms) + 1))
    for game in games:
        cells = []
        for arm in arms:
            values = finals.get((game, arm), [])
            mean, half = ci95(values) if values else (float("nan"), float("nan"))
            cells.append(f"{mean:.2f} +- {half:.2f} ({len(values)})" if values else "")
        print(f"| {game} | " + " | ".join(cells) + " |")
    print()
    print_differences(finals, games, arms, best)
    rng = np.random.default_rng(0)
    print()
    for arm in arms:
        both = [g for g in games if (g, arm) in finals and (g, "ppo_0.99") in finals]
        if both:
            point, low, high = bootstrap_ci([np.array(finals[(g, arm)]) for g in both], [np.array(finals[(g, "ppo_0.99")]) for g in both], rng)
            print(f"{arm}: mean PPO(0.99)-normalised score over {len(both)} games {point:.3f} [{low:.3f}, {high:.3f}]")
    for arm in [arm for arm in arms if arm.startswith("p3o")]:
        both = [g for g in games if (g, arm) in finals and best[g]]
        if both:
            point, low, high = bootstrap_ci([np.array(finals[(g, arm)]) for g in both], [np.array(finals[(g, best[g])]) for g in both], rng)
            print(f"{arm}: mean score normalised by each game's best PPO gamma ({', '.join(best[g] for g in both)}) {point:.3f} [{low:.3f}, {high:.3f}]")
    print()
    # SPS by machine: they compare only where the arms trained at the same time (one `run` call); `speed` is the clean ratio
    for machine in sorted({row["machine"] for row in rows if "+" not in row["machine"]}):  # not a run finished elsewhere
        for game in games:
            of = lambda arm: [float(r["sps"]) for r in rows if (r["machine"], r["game"], r["arm"]) == (machine, game, arm)]  # noqa: E731
            if of("p3o_h128") and of("ppo_0.99"):
                print(f"{machine}, {game}: SPS P3O H = 128 {np.mean(of('p3o_h128')):,.0f}, PPO 0.99 {np.mean(of('ppo_0.99')):,.0f}: {np.mean(of('p3o_h128')) / np.mean(of('ppo_0.99')):.2f}x")
    plot(games, arms)


def plot(games, arms):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {arm: f"C{i}" for i, arm in enumerate(arms)}
    colours |= {"ppo_0.9": "tab:cyan", "ppo_0.99": "tab:blue", "ppo_0.999": "tab:purple", "p3o_h32": "tab:orange", "p3o_h128": "tab:red"}
    curves = {}
    for row in read_rows(CURVES_CSV):
        curves.setdefault((row["game"], row["arm"], row["seed"]), []).append((int(row["step"]), float(row["return"])))
    figure, axes = plt.subplots(1, len(games), figsize=(3.2 * len(games), 3.0), squeeze=False)
    for ax, game in zip(axes[0], games):
        for arm in arms:
            runs = [np.array(c) for (g, a, _), c in curves.items() if g == game and a == arm]
            if not runs:
                continue
            grid = np.linspace(0, min(r[-1, 0] for r in runs), 60)
            ys = np.array([np.interp(grid, r[:, 0], r[:, 1]) for r in runs])
            ax.plot(grid, ys.mean(0), color=colours[arm], label=f"{arm} ({len(runs)})")
            ax.fill_between(grid, ys.mean(0) - ys.std(0), ys.mean(0) + ys.std(0), color=colours[arm], alpha=0.15)
        ax.set_title(f"MinAtar {game}")
        ax.set_xlabel("steps")
    axes[0][0].set_ylabel("episodic return")
    legend = {label: handle for ax in axes[0] for handle, label in zip(*ax.get_legend_handles_labels())}  # every arm, once
    axes[0][-1].legend(legend.values(), legend.keys(), fontsize=7)
    figure.tight_layout()
    figure.savefig(RESULTS / "minatar_curves.png", dpi=110)
    weights = {}
    for row in read_rows(WEIGHTS_CSV):
        weights.setdefault((row["game"], row["arm"], row["seed"]), []).append(float(row["weight"]))
    if weights:
        figure, axes = plt.subplots(1, len(games), figsize=(3.2 * len(games), 2.6), squeeze=False)
        for ax, game in zip(axes[0], games):
            labelled = set()
            for (g, arm, seed), w in weights.items():
                if g == game:
                    ax.plot(w, color=colours[arm], alpha=0.6, lw=1, label=None if arm in labelled else arm)
                    labelled.add(arm)
            ax.set_title(f"{game}: w[j] at the end")
            ax.set_xlabel("offset j")
            ax.set_ylim(0, 1.05)
        axes[0][-1].legend(fontsize=7)
        figure.tight_layout()
        figure.savefig(RESULTS / "minatar_weights.png", dpi=110)


def main():
    global RESULTS, RUNS_CSV, CURVES_CSV, WEIGHTS_CSV
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "export", "report"):
        p = sub.add_parser(name)
        p.add_argument("--delay", type=int, default=0, help="every reward this many steps late (envs/delayed.py); its "
                       "runs' CSVs go to benchmarks/results/minatar_delay<K> unless --results says otherwise")
    for name in ("run", "export"):
        p = sub.choices[name]
        p.add_argument("--steps", type=int, default=5_000_000)
        p.add_argument("--runs", default=str(ROOT / "runs"), help="the folder of the run folders")
        p.add_argument("--machine", default="cpu-2core", help="where the runs trained, for the CSV")
    run = sub.choices["run"]
    run.add_argument("--games", nargs="+", default=GAMES, choices=GAMES)
    run.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    run.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    run.add_argument("--workers", type=int, default=2)
    run.add_argument("--tag", default="", help="appended to each arm's name: a screen's runs (research/README.md)")
    run.add_argument("--flags", default="", help="more flags for every run, a screen's (with --tag): --flags='--td-lambda 0.6'")
    report = sub.choices["report"]
    report.add_argument("--default-results", default=str(DEFAULT_RESULTS), help="the folder of today's default's minatar_runs.csv")
    speed = sub.add_parser("speed")
    speed.add_argument("--games", nargs="+", default=GAMES, choices=GAMES)
    speed.add_argument("--steps", type=int, default=8192 * 12)
    speed.add_argument("--repeats", type=int, default=2)
    for p in sub.choices.values():
        p.add_argument("--results", help="the folder of the CSVs and figures (default: benchmarks/results, or "
                       "benchmarks/results/minatar_delay<K> with --delay)")
    opts = parser.parse_args()
    RESULTS = Path(opts.results or (RESULTS / f"minatar_delay{opts.delay}" if getattr(opts, "delay", 0) else RESULTS))
    RUNS_CSV, CURVES_CSV, WEIGHTS_CSV = RESULTS / "minatar_runs.csv", RESULTS / "minatar_curves.csv", RESULTS / "minatar_weights.csv"
    {"run": command_run, "export": command_export, "report": command_report, "speed": command_speed}[opts.command](opts)


if __name__ == "__main__":
    main()
