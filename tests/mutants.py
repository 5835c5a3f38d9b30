"""Named bugs the suite must catch (issue 59): each is applied alone to a copy of the checkout (the files `git
ls-files` lists, as they are in the working tree), the tests it names are run there (pytest -x), and it is caught
when they fail. A mutant whose old snippet does not occur exactly once in its file stops the run before anything
starts, so the list cannot rot silently (tests/test_mutants_list.py checks that in CI too).

    python tests/mutants.py                   # the unmutated copy first (its tests must pass), then every mutant
    python tests/mutants.py --only NAME ...   # some of them
    python tests/mutants.py --only NAME --tests tests/test_x.py   # which other tests catch it
    python tests/mutants.py --jobs 2 --no-baseline --list

Exit status 0 when every mutant is caught, 1 when one survives (or the baseline fails). Not collected by pytest and
not run in CI: a full run takes a few minutes (its last timing is in the report of issue 59)."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIRING = "tests/test_loop_wiring.py"
P3O_WIRING = f"{WIRING}::test_p3o_loop_computes_each_quantity_as_the_algorithm_says"
PPO_WIRING = f"{WIRING}::test_ppo_loop_computes_gae_and_its_losses_as_the_paper_says"
PARITY = f"{WIRING}::test_the_atari_loop_on_an_ocean_env_ends_where_the_ocean_loop_does"
EVALUATE = "tests/test_evaluate.py"
EVAL = f"{EVALUATE}::test_evaluate_plays_the_checkpoints_policy"
GYMNASIUM = "tests/test_gymnasium.py"
EVAL_CLI = f"{EVALUATE}::test_evaluate_plays_the_checkpoints_policy_from_the_command_line"
OCEAN_POISON = "tests/test_training.py::test_autoreset_steps_are_masked_out_of_every_loss"
OCEAN_MASKED = "tests/test_training.py::test_autoreset_steps_are_masked"
KERNEL_WRAPPER = "tests/test_kernel_wrapper.py"

# (name, file, old snippet, new snippet, the tests to run: files or node ids)
MUTANTS = [
    # the four bugs of issue 59
    ("ocean_tie_gate_inverted", "p3o_ocean.py", "logprobs + entropies, real) > TIE_Z", "logprobs + entropies, real) < TIE_Z", [P3O_WIRING]),
    ("ocean_value_window_off_by_one", "p3o_ocean.py", "in_window = offsets < window[:, None]", "in_window = offsets <= window[:, None]", [OCEAN_POISON, P3O_WIRING]),
    ("atari_nll_log_sigma_sign", "p3o_atari.py", "+ log_sigma * counts", "- log_sigma * counts", [P3O_WIRING]),
    # the P3O loops: the tie, the advantage, the losses, the clock
    ("ocean_tie_score_without_entropy", "p3o_ocean.py", "logprobs + entropies, real) > TIE_Z", "logprobs, real) > TIE_Z", [P3O_WIRING]),
    ("atari_lambda_return_lam_swapped", "p3o_atari.py", "(1.0 - lam) * next_mu[:, :-1] + lam * next_y[:, :-1]", "lam * next_mu[:, :-1] + (1.0 - lam) * next_y[:, :-1]", [P3O_WIRING]),
    ("ocean_lambda_return_crosses_terminals", "p3o_ocean.py", "(1.0 - terminals[t, :, None]) * (", "(", [P3O_WIRING]),
    ("atari_lambda_return_bootstraps_from_the_same_step", "p3o_atari.py", "next_mu, next_y = mu[t], y[t]", "next_mu, next_y = mu[min(t + 1, T - 1)], y[t]", [P3O_WIRING]),
    ("ocean_autoreset_advantage_not_masked", "p3o_ocean.py", "args.td_lambda, tied) * valid", "args.td_lambda, tied)", [OCEAN_MASKED, OCEAN_POISON]),
    ("ocean_window_loss_sign", "p3o_ocean.py", "value_nll + args.window_loss_coef * window_loss", "value_nll - args.window_loss_coef * window_loss", [P3O_WIRING]),
    ("atari_window_var_floor", "p3o_atari.py", "window_var.clamp(min=1.0)", "window_var.clamp(min=0.1)", [P3O_WIRING]),
    ("ocean_nll_precision_exponent", "p3o_ocean.py", "torch.exp(-2 * log_sigma)", "torch.exp(-log_sigma)", [P3O_WIRING]),
    ("atari_nll_denominator_window", "p3o_atari.py", "b_inside[v_inds]", "b_windows[v_inds]", [P3O_WIRING]),
    ("atari_mu_without_clock", "p3o_atari.py", "return self.critic(hidden) + self.clock_mu(clock)", "return self.critic(hidden)", [P3O_WIRING]),
    ("ocean_clock_step_sign", "p3o_ocean.py", "table += CLOCK_RATE", "table -= CLOCK_RATE", [P3O_WIRING]),
    ("atari_clock_step_prior", "p3o_atari.py", "counts + CLOCK_PRIOR", "counts + 1.0", [P3O_WIRING]),
    ("ocean_advantage_norm_not_centred", "p3o_ocean.py", "(mb_advantages - adv_mean) / (adv_std + 1e-8)", "mb_advantages / (adv_std + 1e-8)", [P3O_WIRING]),
    ("ocean_entropy_bonus_sign", "p3o_ocean.py", "pg_loss - args.ent_coef * entropy_loss", "pg_loss + args.ent_coef * entropy_loss", [P3O_WIRING]),
    ("atari_policy_clip_min", "p3o_atari.py", "torch.max(pg_loss1, pg_loss2)", "torch.min(pg_loss1, pg_loss2)", [P3O_WIRING]),
    ("ocean_lr_anneal_off_by_one", "p3o_ocean.py", "frac = 1.0 - (iteration - 1.0) / args.num_iterations", "frac = 1.0 - iteration / (args.num_iterations + 1)", [P3O_WIRING]),
    ("atari_clock_table_never_steps", "p3o_atari.py", "if agent.clock_table is not None:\n", "if agent.clock_table is None:\n", [PARITY]),
    # PPO
    ("ppo_gae_gamma_lambda_swapped", "ppo_baseline.py", "args.gamma, args.gae_lambda)", "args.gae_lambda, args.gamma)", [PPO_WIRING]),
    ("ppo_gae_done_mask_dropped", "ppo_baseline.py", "delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]", "delta = rewards[t] + gamma * nextvalues - values[t]", [PPO_WIRING]),
    ("ppo_value_target_without_value", "ppo_baseline.py", "returns = advantages + values", "returns = advantages", [PPO_WIRING]),
    ("ppo_value_clip_min", "ppo_baseline.py", "torch.max(v_loss_unclipped, v_loss_clipped)", "torch.min(v_loss_unclipped, v_loss_clipped)", [PPO_WIRING]),
    ("ppo_policy_clip_min", "ppo_baseline.py", "torch.max(pg_loss1, pg_loss2)", "torch.min(pg_loss1, pg_loss2)", [PPO_WIRING]),
    ("ppo_entropy_bonus_sign", "ppo_baseline.py", "pg_loss - args.ent_coef * entropy_loss", "pg_loss + args.ent_coef * entropy_loss", [PPO_WIRING]),
    ("ppo_policy_gradient_sign", "ppo_baseline.py", "pg_loss1 = -mb_advantages * ratio", "pg_loss1 = mb_advantages * ratio", [PPO_WIRING]),
    # the CuPy wrapper
    ("kernel_wrapper_block_below_the_horizon", "kernels/advantage.py", "1 << (H - 1).bit_length()", "1 << (H - 1).bit_length() - 1", [KERNEL_WRAPPER]),
    ("kernel_wrapper_one_block_short", "kernels/advantage.py", "(N,), (block_size(H),)", "(N - 1,), (block_size(H),)", [KERNEL_WRAPPER]),
    # the kernel's source, through its host build
    ("kernel_lambda_return_crosses_terminals", "kernels/advantage.cu", "j == 0 ? reward : ended ? 0.0f : (1.0f - lam)", "j == 0 ? reward : (1.0f - lam)", ["tests/test_advantage.py"]),
    ("kernel_tied_reward_not_cut_at_terminals", "kernels/advantage.cu", "j == 0 ? reward : ended ? 0.0f : raws[later][j - 1]", "j == 0 ? reward : raws[later][j - 1]", ["tests/test_advantage.py"]),
    ("kernel_sum_misses_its_last_level", "kernels/advantage.cu", "for (int half = blockDim.x / 2; half > 0; half /= 2) {\n            if (j < half) sums[j] +=", "for (int half = blockDim.x / 2; half > 1; half /= 2) {\n            if (j < half) sums[j] +=", ["tests/test_advantage.py"]),
    ("kernel_no_barrier_before_the_sum", "kernels/advantage.cu", "sums[j] = residual;\n        __syncthreads();", "sums[j] = residual;", ["tests/test_advantage.py"]),
    # the Gymnasium path of the Atari pair
    ("reset_step_counted_as_a_decision", "ppo_baseline.py", "self.episode_length += ~self.resetting", "self.episode_length += 1", [GYMNASIUM, "tests/test_atari.py::test_atari_envs_report_whole_games_in_raw_score"]),
    ("gymnasium_grid_not_channels_first", "p3o_atari.py", "obs = np.moveaxis(obs, -1, 1) if obs.ndim == 4 else obs", "obs = obs", [GYMNASIUM]),
    ("gymnasium_minatar_network_width", "p3o_atari.py", "(obs_shape[2] - 2), 128)),\n            nn.ReLU(),\n        ), 128, 1.0", "(obs_shape[2] - 2), 64)),\n            nn.ReLU(),\n        ), 64, 1.0", [GYMNASIUM]),
    ("kernel_wrapper_default_tie_all", "kernels/advantage.py", "torch.zeros(H, device=mu.device) if tied is None", "torch.ones(H, device=mu.device) if tied is None", [KERNEL_WRAPPER]),
    # evaluate.py (issue 76; --capture-video, issue 66): the checkpoint's own policy, a frame per decision, the
    # decision's own observation, the refusals, and the checkpoints written when the scripts had evaluation flags
    ("evaluate_ignores_the_weights", "evaluate.py", '    agent.load_state_dict(checkpoint["model"])\n', '', [EVAL, EVAL_CLI]),
    ("evaluate_former_flags_kept", "evaluate.py", "if key not in FORMER_FLAGS}", "if key not in ()}",
     [f"{EVALUATE}::test_evaluate_plays_a_checkpoint_of_each_script"]),
    ("resume_former_flags_kept", "ppo_baseline.py", "if name not in evaluation}", "if name not in ()}",
     [f"{EVALUATE}::test_a_checkpoint_with_the_former_evaluation_flags_still_resumes"]),
    ("video_reset_step_recorded", "evaluate.py", "deciding = deciding & ~np.asarray(envs.resetting)",
     "deciding = deciding",
     [f"{EVALUATE}::test_atari_videos_skip_the_reset_steps"]),
    ("video_frame_after_the_step", "evaluate.py",
     "record_frames(frames, envs, next_obs, returns.isnan(), draw)\n            logits = agent.get_logits(next_obs)\n"
     "            action = logits.argmax(-1) if args.greedy else Categorical(logits=logits).sample()\n"
     "            next_obs, _, _, _, infos = envs.step(action)\n",
     "pass\n            logits = agent.get_logits(next_obs)\n"
     "            action = logits.argmax(-1) if args.greedy else Categorical(logits=logits).sample()\n"
     "            next_obs, _, _, _, infos = envs.step(action)\n"
     "            record_frames(frames, envs, next_obs, returns.isnan(), draw)\n",
     [f"{EVALUATE}::test_squared_videos_show_each_decision"]),
    ("video_recorded_past_the_episode", "evaluate.py", "record_frames(frames, envs, next_obs, returns.isnan(), draw)",
     "record_frames(frames, envs, next_obs, torch.ones_like(returns, dtype=torch.bool), draw)",
     [f"{EVALUATE}::test_squared_videos_show_each_decision", f"{EVALUATE}::test_minatar_videos_show_each_decision"]),
    ("video_identical_frames_merged", "evaluate.py", "ImageDraw.Draw(image).text(",
     "0 and ImageDraw.Draw(image).text(",
     [f"{EVALUATE}::test_identical_pictures_stay_one_frame_each"]),
    ("video_refusal_skipped", "evaluate.py", '    refuse(f"--capture-video draws', '    return None and refuse(f"--capture-video draws',
     [f"{EVALUATE}::test_an_env_without_a_picture_is_refused_before_anything_is_built"]),
]


def snippet_problems(root=ROOT, mutants=MUTANTS):
    """What is wrong with the list against the checkout at `root`: each old snippet must occur exactly once in its
    file, differ from its new one, and every named test file must exist. [] when all is well."""
    problems, names = [], set()
    for name, file, old, new, tests in mutants:
        if name in names:
            problems.append(f"{name}: a second mutant of that name")
        names.add(name)
        path = Path(root) / file
        count = path.read_text().count(old) if path.is_file() else -1
        if count != 1:
            problems.append(f"{name}: its old snippet occurs {count} times in {file} (must be once): {old!r}")
        if old == new:
            problems.append(f"{name}: old and new snippets are the same")
        for test in tests:
            test_file, _, function = test.partition("::")
            if not (Path(root) / test_file).is_file() or (function and f"def {function}(" not in (Path(root) / test_file).read_text()):
                problems.append(f"{name}: no test {test}")
    return problems


def copy_checkout(destination):
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.split("\0")
    for file in filter(None, files):
        source = ROOT / file
        if source.is_file():  # a file deleted in the working tree is not copied
            target = Path(destination) / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def run_tests(copy, tests, timeout):
    """pytest -x on `tests` in `copy`: (passed, the first failing test or the tail of the output, seconds)."""
    start = time.time()
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        run = subprocess.run(command, cwd=copy, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout} s", time.time() - start
    failed = [line.split(" ")[1] for line in run.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    lines = (run.stdout + run.stderr).strip().splitlines()
    detail = failed[0] if failed else lines[-1] if lines else f"exit {run.returncode}"
    return run.returncode == 0, detail, time.time() - start


def run_mutant(mutant, timeout):
    name, file, old, new, tests = mutant
    with tempfile.TemporaryDirectory(prefix=f"p3o_mutant_{name}_") as copy:
        copy_checkout(copy)
        path = Path(copy) / file
        text = path.read_text()
        assert text.count(old) == 1, f"{name}: its old snippet is not in {file} exactly once"
        path.write_text(text.replace(old, new))
        passed, detail, seconds = run_tests(copy, tests, timeout)
    return name, not passed, detail, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", default=None, help="run these mutants only")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once (each runs its own pytest)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds for one mutant's tests")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run of the tests")
    parser.add_argument("--tests", nargs="+", default=None, help="run these tests (files or node ids) for every mutant instead of its own")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    options = parser.parse_args()

    problems = snippet_problems()
    if problems:
        sys.exit("mutants.py: the list does not match the checkout:\n  " + "\n  ".join(problems))
    mutants = MUTANTS if options.only is None else [m for m in MUTANTS if m[0] in options.only]
    if options.tests:
        mutants = [(name, file, old, new, options.tests) for name, file, old, new, _ in mutants]
    unknown = set(options.only or ()) - {m[0] for m in MUTANTS}
    if unknown:
        sys.exit(f"mutants.py: no mutant named {', '.join(sorted(unknown))}")
    if options.list:
        for name, file, old, new, tests in mutants:
            print(f"{name:<40} {file:<22} {old!r} -> {new!r}")
        return 0

    start = time.time()
    if not options.no_baseline:
        tests = sorted({test for mutant in mutants for test in mutant[4]})
        with tempfile.TemporaryDirectory(prefix="p3o_mutant_baseline_") as copy:
            copy_checkout(copy)
            passed, detail, seconds = run_tests(copy, tests, options.timeout * 2)
        print(f"{'(no mutant: the tests pass)':<40} {'yes' if passed else 'NO':<8} {seconds:6.0f} s  {'' if passed else detail}", flush=True)
        if not passed:
            print("mutants.py: the unmutated checkout fails these tests; a mutant's failure would prove nothing", file=sys.stderr)
            return 1
    print(f"{'mutant':<40} {'caught':<8} {'time':>8}  by", flush=True)
    survivors = []
    with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        for name, caught, detail, seconds in pool.map(lambda m: run_mutant(m, options.timeout), mutants):
            print(f"{name:<40} {'yes' if caught else 'NO':<8} {seconds:6.0f} s  {detail if caught else ''}", flush=True)
            if not caught:
                survivors.append(name)
    print(f"\n{len(mutants) - len(survivors)} of {len(mutants)} mutants caught in {time.time() - start:.0f} s" + (f"; survived: {', '.join(survivors)}" if survivors else ""))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
