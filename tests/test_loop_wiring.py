"""The training loops' wiring, checked number by number: each P3O loop (p3o_ocean.train, and p3o_atari.train on an
ocean/ id) and PPO's (ppo_baseline.train) run two small iterations while tests/loop_capture.py records what the env
gave, what the networks output, the minibatch order and every loss; each quantity of the second iteration is then
recomputed the independent way (float64 loops from docs/algorithm.md, and from the PPO paper) and compared: the tie's
keep mask, the advantage (the lambda-returns, the kept offsets' rewards), the value NLL (its pairs, its
denominator, the log-sigma term), the window loss, the clock table's step, GAE, PPO's clipped value loss, the
clipped surrogate and the entropy bonus. Also: the Atari loop on an Ocean env ends with the Ocean loop's parameters,
and the learned sigma moves the way the likelihood pulls it."""
import math

import numpy as np
import pytest
import torch

import evaluate
import p3o_atari
import p3o_ocean
import ppo_baseline
from advantage_impls import reference_advantage
from loop_capture import Capture, gae, policy_terms, table_rows, tie_z, value_windows

T, N, H = 64, 16, 64
# lr 1e-2 and clip_coef 0.01: a share of the ratios leaves the clip range within two epochs, so the clipped surrogate differs from
# the plain one (at 0.1 none does, and a min for the max goes unseen)
SMALL = dict(num_envs=N, num_steps=T, num_minibatches=2, update_epochs=2, progress=False, save_interval=0, learning_rate=1e-2, seed=1, clip_coef=0.01)
P3O_SCRIPTS = {"p3o_ocean.py": (p3o_ocean, ""), "p3o_atari.py": (p3o_atari, "ocean/")}
# squared: episodes of 1 to 14 steps ending at random times, so windows end everywhere, the clock spans 0 .. 13 and
# the tail is read. delay: 66-step episodes that all envs share, the rollout's tail, and the default lambda.
P3O_CASES = [("squared", dict(td_lambda=0.5, ent_coef=0.05)), ("delay", dict(delay=2, window_loss_coef=1.0))]


def close(actual, expected, what, rtol=1e-4, atol=1e-5):
    actual, expected = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    assert np.allclose(actual, expected, rtol=rtol, atol=atol), f"{what}: largest difference {np.abs(actual - expected).max():.3g}"


@pytest.mark.parametrize("env_name, extra", P3O_CASES, ids=[case[0] for case in P3O_CASES])
@pytest.mark.parametrize("script", P3O_SCRIPTS)
def test_p3o_loop_computes_each_quantity_as_the_algorithm_says(script, env_name, extra, tmp_path, monkeypatch):
    module, prefix = P3O_SCRIPTS[script]
    monkeypatch.chdir(tmp_path)
    capture = Capture(module, env_name, monkeypatch)
    args = module.Args(env_id=prefix + env_name, horizon=H, kernel="torch", total_timesteps=2 * N * T, **SMALL, **extra)
    module.train(args)
    M, epochs = args.minibatch_size, args.update_epochs
    value_rows = round(M * args.value_fraction)
    assert len(capture.steps) == 2 * T and len(capture.advantages) == 2 and len(capture.losses) == 2 * epochs * 2

    # The second iteration: the head, sigma and the clock table have moved from their start.
    r = capture.rollout(2, T)
    rewards, dones, clocks, valid = r["rewards"], r["dones"], r["clocks"], r["valid"]
    assert dones.any() and rewards.any() and r["table"].abs().sum() > 0 and (r["log_sigma"] != 0).any()
    mus = r["outs"] + table_rows(r["table"], clocks)
    tail = r["tail"] + table_rows(r["table"], r["next_clock"])
    sigma = r["log_sigma"].clamp(-10, 10).exp()

    # What the loop fed the advantage is what the env and the critic gave
    advantage_call = capture.calls["advantage"][-1]["args"]
    close(advantage_call[0], rewards, "rewards", rtol=0, atol=0)
    close(advantage_call[1], dones, "terminals", rtol=0, atol=0)
    close(advantage_call[2], mus, "mu (the head plus the clock table)", rtol=1e-6, atol=1e-6)
    close(advantage_call[3], sigma, "sigma", rtol=1e-6, atol=0)
    close(advantage_call[4], tail, "tail_mu", rtol=1e-6, atol=1e-6)
    assert advantage_call[5] == args.td_lambda

    # The tie: z from the residuals' correlation with the centred log-prob, and keep = z > 3
    z = tie_z(rewards, dones, mus, tail, r["logprobs"] + r["entropies"], valid)
    close(capture.calls["tie_z"][-1]["result"], z, "tie z", rtol=1e-3, atol=1e-3)
    tied = advantage_call[6].numpy()
    clear = np.abs(z - p3o_ocean.TIE_Z) > 1e-3  # away from the threshold, float32 and float64 agree on the side
    assert np.array_equal(tied[clear], (z > p3o_ocean.TIE_Z)[clear]), (tied, z)
    assert clear.any()

    # The advantage: the lambda-returns' weighted residuals, the kept offsets' rewards; autoreset steps get none
    expected_advantages = reference_advantage(rewards, dones, mus, sigma.double(), tail, args.td_lambda, tied).numpy() * valid
    close(capture.advantages[-1], expected_advantages, "advantages", rtol=1e-4, atol=1e-4)
    assert capture.scalars["charts/tied_offsets"][-1][1] == tied.sum()

    # The update: every minibatch's loss, from the forward passes it made
    targets, window, inside = value_windows(rewards, dones, H)
    window, inside = window * valid.astype(np.int64), inside * valid.astype(np.int64)
    sums = np.array([[targets[t, n, : window[t, n]].sum() for n in range(N)] for t in range(T)])
    count = valid.sum()
    window_var = (sums**2 * valid).sum() / count - ((sums * valid).sum() / count) ** 2
    perms = [p for p in capture.perms if len(p) == N * T][-epochs:]
    updates = capture.update_calls(2, epochs * 2)
    clock_steps = capture.calls["clock_step"][-epochs * 2 :]
    flat = lambda x: x.reshape(N * T, *x.shape[2:])
    offsets = np.arange(H)
    logged, clipped = {}, []
    for index, ((actor, critic), loss, clock_step) in enumerate(zip(updates, capture.losses[-epochs * 2 :], clock_steps)):
        epoch, minibatch = divmod(index, 2)
        inds = perms[epoch][minibatch * M : (minibatch + 1) * M].numpy()
        v = inds[:value_rows]
        pg, entropy, clipfrac = policy_terms(actor["logits"], flat(r["actions"])[inds], flat(r["logprobs"])[inds], flat(expected_advantages)[inds], flat(valid)[inds], args.clip_coef)
        clipped.append(clipfrac)
        # The Gaussian NLL of each kept (decision, offset) pair, over the pairs inside the episodes
        mu_now = critic["out"].double().numpy() + table_rows(critic["table"], flat(clocks)[v])
        in_window = offsets[None, :] < flat(window)[v][:, None]
        residual = np.where(in_window, flat(targets)[v] - mu_now, 0.0)
        log_sigma = critic["log_sigma"].clamp(-10, 10).double().numpy()
        nll = 0.0
        for j in range(H):
            nll += 0.5 * math.exp(-2 * log_sigma[j]) * (residual[:, j] ** 2).sum() + log_sigma[j] * in_window[:, j].sum()
        nll /= max(flat(inside)[v].sum(), 1)
        # The window loss: 0.5 (sum of target - mu over the window)^2, over the batch's window-sum variance where above 1
        window_residual = residual.sum(1)
        v_valid = flat(valid)[v]
        window_loss = 0.5 * (window_residual**2 * v_valid).sum() / max(v_valid.sum(), 1) / max(window_var, 1.0)
        expected = pg - args.ent_coef * entropy + args.vf_coef * (nll + args.window_loss_coef * window_loss)
        close(loss, expected, f"loss of epoch {epoch}, minibatch {minibatch}", rtol=2e-4, atol=2e-5)
        logged = dict(value_nll=nll, window_loss=window_loss, policy_loss=pg, entropy=entropy)

        # The clock table's step on this minibatch's value rows: c[s, j] += 0.1 * sum / (count + 64) of the residuals
        table, step_clocks, step_residual, step_kept = clock_step["args"]
        close(step_clocks, flat(clocks)[v], "the clock step's clocks", rtol=0, atol=0)
        assert np.array_equal(step_kept.numpy(), in_window), "the clock step's pairs"
        close(step_residual, residual, "the clock step's residuals", rtol=1e-4, atol=1e-5)
        expected_table = table.double().numpy().copy()
        table_sums, table_counts = np.zeros_like(expected_table), np.zeros_like(expected_table)
        for row, s in enumerate(flat(clocks)[v]):
            table_sums[min(s, 255)] += residual[row]
            table_counts[min(s, 255)] += in_window[row]
        expected_table += 0.1 * table_sums / (table_counts + 64.0)
        close(clock_step["after"][0], expected_table, "the clock table after its step", rtol=1e-5, atol=1e-7)
        assert torch.equal(table, critic["table"])  # the step acts on the agent's own table, which mu reads next
    assert max(clipped) > 0.05, clipped  # the clip bites: the clipped surrogate is not the plain one
    for tag, value in logged.items():  # the last minibatch's terms, as the run logged them
        close(capture.scalars[f"losses/{tag}"][-1][1], value, tag, rtol=2e-4, atol=2e-5)
    close(capture.scalars["losses/window_var"][-1][1], window_var, "window_var", rtol=1e-4, atol=1e-6)
    close([value for _, value in capture.scalars["charts/learning_rate"]], [args.learning_rate, args.learning_rate / 2], "the annealed learning rate", rtol=1e-6)


@pytest.mark.parametrize("clip_vloss", [True, False])
def test_ppo_loop_computes_gae_and_its_losses_as_the_paper_says(clip_vloss, tmp_path, monkeypatch):
    """ppo_baseline.train: the advantage is GAE(gamma, lambda) of the rollout's rewards, dones and values, the value
    target is advantage + value, the value loss is 0.5 max((v - R)^2, (v_old + clip(v - v_old, -c, c) - R)^2) with
    --clip-vloss (else 0.5 (v - R)^2), beside the clipped surrogate and the entropy bonus. squared's episodes end at
    random steps, so the done mask matters; lambda and gamma are set apart so that swapping them shows."""
    monkeypatch.chdir(tmp_path)
    capture = Capture(ppo_baseline, "squared", monkeypatch)
    args = ppo_baseline.Args(env_id="ocean/squared", total_timesteps=2 * N * T, gamma=0.9, gae_lambda=0.6, clip_vloss=clip_vloss, ent_coef=0.05, **SMALL)
    ppo_baseline.train(args)
    M, epochs = args.minibatch_size, args.update_epochs
    r = capture.rollout(2, T)
    values, next_value = r["outs"][..., 0], r["tail"][:, 0]
    advantages = gae(r["rewards"], r["dones"], values, next_value, args.gamma, args.gae_lambda) * r["valid"]
    close(capture.advantages[-1], advantages, "GAE advantages", rtol=1e-4, atol=1e-5)
    returns = advantages + values
    perms = [p for p in capture.perms if len(p) == N * T][-epochs:]
    flat = lambda x: x.reshape(N * T, *x.shape[2:])
    clipped, value_clipped = [], []
    for index, ((actor, critic), loss) in enumerate(zip(capture.update_calls(2, epochs * 2), capture.losses[-epochs * 2 :])):
        epoch, minibatch = divmod(index, 2)
        inds = perms[epoch][minibatch * M : (minibatch + 1) * M].numpy()
        valid = flat(r["valid"])[inds]
        pg, entropy, clipfrac = policy_terms(actor["logits"], flat(r["actions"])[inds], flat(r["logprobs"])[inds], flat(advantages)[inds], valid, args.clip_coef)
        clipped.append(clipfrac)
        new, old, target = critic["out"].double().numpy()[:, 0], flat(values)[inds], flat(returns)[inds]
        squared = (new - target) ** 2
        value_clipped.append((np.abs(new - old) > args.clip_coef).mean())
        if clip_vloss:
            squared = np.maximum(squared, (old + np.clip(new - old, -args.clip_coef, args.clip_coef) - target) ** 2)
        v_loss = 0.5 * (squared * valid).sum() / valid.sum()
        close(loss, pg - args.ent_coef * entropy + args.vf_coef * v_loss, f"loss of epoch {epoch}, minibatch {minibatch}", rtol=2e-4, atol=2e-5)
    assert max(clipped) > 0.05 and max(value_clipped) > 0.05, (clipped, value_clipped)  # both clips bite
    close(capture.scalars["losses/value_loss"][-1][1], v_loss, "the logged value loss", rtol=2e-4, atol=2e-5)
    close(capture.scalars["losses/policy_loss"][-1][1], pg, "the logged policy loss", rtol=2e-4, atol=2e-5)


def test_ppo_solves_an_easy_ocean_env(tmp_path, monkeypatch):
    """PPO learns: every P3O-against-PPO figure leans on the baseline being right. ocean/delay with D = 1 (each
    decision's reward one step later, among the other decisions' rewards, so GAE's credit matters; random play
    scores ~0) is solved in 65k steps, a second or two: 0.97 to 1.00 over seeds 1-4, in training and in evaluation."""
    monkeypatch.chdir(tmp_path)
    result = ppo_baseline.train(ppo_baseline.Args(env_id="ocean/delay", delay=1, num_envs=32, num_steps=32, num_minibatches=2, update_epochs=4, learning_rate=1e-2, total_timesteps=65_536, progress=False))
    assert result["score"] >= 0.9, result
    played = evaluate.evaluate(evaluate.Args(str(tmp_path / "runs" / result["run"] / "checkpoint.pt"), episodes=64))
    assert played["score"] >= 0.9, played


@pytest.mark.parametrize("env_name, extra", [("squared", dict(td_lambda=0.5)), ("delay", dict(delay=2))])
def test_the_atari_loop_on_an_ocean_env_ends_where_the_ocean_loop_does(env_name, extra, tmp_path, monkeypatch):
    """p3o_atari.train on ocean/NAME and p3o_ocean.train on NAME, same arguments, four iterations on the CPU: the same
    parameters, bit for bit (the verbatim test covers the shared functions; this covers the loops around them)."""
    monkeypatch.chdir(tmp_path)
    common = dict(SMALL, num_minibatches=4, horizon=H, total_timesteps=4 * N * T, save_interval=4, **extra)
    runs = {}
    for name, module, env_id in (("ocean", p3o_ocean, env_name), ("atari", p3o_atari, "ocean/" + env_name)):
        result = module.train(module.Args(env_id=env_id, **common))
        runs[name] = torch.load(tmp_path / "runs" / result["run"] / "checkpoint.pt", weights_only=True)["model"]
    assert runs["ocean"].keys() == runs["atari"].keys()
    for key, value in runs["ocean"].items():
        assert torch.equal(value, runs["atari"][key]), key
    assert runs["ocean"]["clock_table"].abs().sum() > 0 and runs["ocean"]["critic.weight"].abs().sum() > 0


@pytest.mark.parametrize("script", P3O_SCRIPTS)
def test_the_learned_sigma_moves_toward_the_residuals(script, tmp_path, monkeypatch):
    """sigma starts at 1; delay's rewards are 0 or 1 and mu starts at 0, so every offset's mean squared residual is
    under 1 and the likelihood pulls every sigma down: after one update each one is smaller (the NLL's log-sigma term
    with its sign flipped pushes them all up instead), by at most Adam's step, about lr per minibatch."""
    module, prefix = P3O_SCRIPTS[script]
    monkeypatch.chdir(tmp_path)
    args = module.Args(env_id=prefix + "delay", delay=2, horizon=8, kernel="torch", num_envs=8, num_steps=32, num_minibatches=2, update_epochs=2, total_timesteps=8 * 32, progress=False, save_interval=1, learning_rate=3e-3)
    result = module.train(args)
    sigma = torch.load(tmp_path / "runs" / result["run"] / "checkpoint.pt", weights_only=True)["model"]["log_sigma"].exp()
    assert (sigma < 1).all() and (1 - sigma).max() <= 4 * args.learning_rate * 1.05, sigma
