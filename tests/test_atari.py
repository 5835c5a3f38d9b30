"""p3o_atari.py and ppo_baseline.py: P3O and nothing else between them, EnvPool's autoreset step masked out of
training, honest game statistics, smoke runs of both on Atari through EnvPool, and bad flags."""
import functools
import inspect
import re
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import envpool
import numpy as np
import pytest
import torch

import evaluate
import p3o_atari
import p3o_ocean
import ppo_baseline
from fake_envs import NextStepResetBandit
from in_process import run_script

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = {"ppo_baseline.py": ppo_baseline, "p3o_atari.py": p3o_atari}


# ---------------------------------------------------------------------------------------------------------
# The diff between the two scripts is P3O
# ---------------------------------------------------------------------------------------------------------
def cut_blocks(text, name):
    """The script from its Args on, with every `# {name}: ...` ... `# end {name}` block removed, and the blocks."""
    lines = text[text.index("@dataclass") :].splitlines()
    kept, blocks, inside = [], [], None
    for line in lines:
        if inside is None and line.strip().startswith(f"# {name}:"):
            inside = [line]
        elif inside is not None:
            inside.append(line)
            if line.strip() == f"# end {name}":
                blocks.append(inside)
                inside = None
        else:
            kept.append(line)
    assert inside is None, f"an unclosed # {name}: block"
    return kept, blocks


def imports(text):
    return {line for line in text.splitlines() if re.match(r"(import|from) \S+", line)}


def test_scripts_differ_only_in_the_marked_blocks():
    baseline, p3o = (ROOT / "ppo_baseline.py").read_text(), (ROOT / "p3o_atari.py").read_text()
    rest_ppo, blocks_ppo = cut_blocks(baseline, "PPO")
    rest_p3o, blocks_p3o = cut_blocks(p3o, "P3O")
    assert rest_ppo == rest_p3o  # everything outside the blocks, line for line
    # The blocks are P3O's three changes (value head, value loss, advantage) and their flags, not the file.
    p3o_text = "\n".join("\n".join(block) for block in blocks_p3o)
    ppo_text = "\n".join("\n".join(block) for block in blocks_ppo)
    for piece in ("self.log_sigma = nn.Parameter", "def p3o_advantage", "advantage_fn(", "log_sigma * counts", "horizon: int", 'if name != "log_sigma"]'):
        assert piece in p3o_text, piece
    for piece in ("def gae(", "gamma: float", "gae_lambda: float", "clip_vloss", "v_loss_clipped", "clip_grad_norm_(agent.parameters()"):
        assert piece in ppo_text, piece
    assert len(blocks_p3o) <= 15 and len(blocks_ppo) <= 14  # pairs of blocks: the clip (P3O leaves log_sigma out), the update's forward pass
    # The blocks must not swallow the shared PPO machinery: most of ppo_baseline.py is shared, and P3O's machinery
    # (the head, the loss, the advantage, the clock) is shorter than the shared part.
    assert sum(map(len, blocks_ppo)) < 0.25 * len(rest_ppo) and sum(map(len, blocks_p3o)) < len(rest_p3o)
    for piece in ("class AtariEnvs", "pg_loss = masked_mean", "next_valid = 1.0 - next_done", "grad_norms += [grad_norm]", 'writer.add_scalar("charts/SPS"'):
        assert piece in "\n".join(rest_p3o), piece
    # Above the Args: only the header comments, the usage lines and the imports P3O needs.
    assert imports(p3o) - imports(baseline) == {"import math", "from typing import Literal, Optional"}
    assert imports(baseline) - imports(p3o) == {"from typing import Optional"}


def test_the_scripts_read_in_cleanrls_order():
    """Args, the advantage's maths, the agent, train, then the plumbing under one banner; no line past 120 characters;
    the header's count of P3O blocks is the count of their markers, and the maths starts within 250 lines."""
    for path in ("ppo_baseline.py", "p3o_atari.py", "p3o_ocean.py", "kernels/advantage.py", "kernels/advantage.cu"):
        long = [number for number, line in enumerate((ROOT / path).read_text().splitlines(), 1) if len(line) > 120]
        assert long == [], (path, long)
    for name in ("ppo_baseline.py", "p3o_atari.py", "p3o_ocean.py"):
        text = (ROOT / name).read_text()
        pieces = ("\nclass Args", "\n# ALGO LOGIC", "\nclass Agent", "\ndef train(", "\n# Plumbing", '\nif __name__ == "__main__"')
        places = [text.index(piece) for piece in pieces]
        assert places == sorted(places), name
    atari = (ROOT / "p3o_atari.py").read_text()
    assert f"They sit in {atari.count('# P3O:')} blocks" in atari[: atari.index('"""Usage')].replace("\n# ", " ")
    assert atari[: atari.index("\n# P3O:")].count("\n") < 250


@pytest.mark.parametrize("name", ["MIN_SIGMA", "episode_ends", "episode_inside", "episode_windows", "p3o_advantage", "select_advantage", "precision", "log_weight_curve", "layer_init", "masked_mean", "explained_variance", "PhaseTimer", "show_progress", "save_checkpoint", "load_checkpoint", "resume_args", "first_nonfinite", "claim_run_folder", "window_sum_variance", "window_mu", "tie_z", "CHECKPOINT_KEYS", "CLOCK_ROWS", "step_clock_table", "train", "log_p3o_statistics", "close_writer", "checkpoint_state", "resume", "stop_nonfinite"])
def test_shared_pieces_are_verbatim_copies_of_p3o_ocean(name):
    """The single-file scripts repeat each other on purpose; the repeats must not drift apart. Both P3O scripts hold one
    `train`, text for text: what differs between env families is make_envs' and the env classes' business."""
    if name == "MIN_SIGMA":
        assert (p3o_atari.MIN_SIGMA, p3o_atari.MAX_SIGMA) == (p3o_ocean.MIN_SIGMA, p3o_ocean.MAX_SIGMA)
    elif name == "CLOCK_ROWS":
        assert (p3o_atari.CLOCK_ROWS, p3o_atari.CLOCK_RATE, p3o_atari.CLOCK_PRIOR, p3o_atari.TIE_Z) == (p3o_ocean.CLOCK_ROWS, p3o_ocean.CLOCK_RATE, p3o_ocean.CLOCK_PRIOR, p3o_ocean.TIE_Z)
        assert inspect.getsource(p3o_atari.Agent.clock_mu) == inspect.getsource(p3o_ocean.Agent.clock_mu)
        assert inspect.getsource(p3o_atari.Agent.mu) == inspect.getsource(p3o_ocean.Agent.mu)
    elif name == "CHECKPOINT_KEYS":
        assert p3o_atari.CHECKPOINT_KEYS == p3o_ocean.CHECKPOINT_KEYS == ppo_baseline.CHECKPOINT_KEYS
    else:
        assert inspect.getsource(getattr(p3o_atari, name)) == inspect.getsource(getattr(p3o_ocean, name))


def test_p3o_oceans_rank_helpers_are_p3o_ataris_in_a_single_process():
    """p3o_ocean.py never runs under torchrun, so its all_sum, all_gather and open_writer are p3o_atari.py's without
    a process group (the only way its verbatim train can call them): the same objects back, one in and one out,
    several in and a tuple out; rank 0's writer."""
    a, b = torch.randn(3, requires_grad=True), torch.arange(4)
    for module in (p3o_atari, p3o_ocean):
        assert module.all_sum(a) is a
        both = module.all_sum(a, b)
        assert type(both) is tuple and len(both) == 2 and both[0] is a and both[1] is b
        assert module.all_gather({"games": [1.0]}) == [{"games": [1.0]}]
    assert "dist." not in inspect.getsource(p3o_ocean.all_sum) + inspect.getsource(p3o_ocean.all_gather)
    rank_0 = inspect.getsource(p3o_atari.open_writer).replace("    if rank > 0:\n        return NoWriter()\n", "")
    assert rank_0 == inspect.getsource(p3o_ocean.open_writer) != inspect.getsource(p3o_atari.open_writer)


def test_weight_curve_histogram_is_the_normalised_precision(tmp_path):
    """Bucket j of `charts/weight_curve` holds omega[j] / max(omega)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(tmp_path)
    sigma = torch.tensor([0.5, 1.0, 2.0, 0.25, 1.0])  # omega = 4, 1, 0.25, 16, 1
    p3o_atari.log_weight_curve(writer, sigma, global_step=7)
    p3o_atari.log_weight_curve(writer, sigma * 2, global_step=8)  # the same curve: only the ratios count
    writer.close()
    events = EventAccumulator(str(tmp_path), size_guidance={"histograms": 0})
    events.Reload()
    first, second = events.Histograms("charts/weight_curve")
    assert (first.step, second.step) == (7, 8)
    assert first.histogram_value.bucket_limit == [1, 2, 3, 4, 5]
    assert np.allclose(first.histogram_value.bucket, [0.25, 0.0625, 0.015625, 1.0, 0.0625])
    assert np.allclose(second.histogram_value.bucket, first.histogram_value.bucket)


# ---------------------------------------------------------------------------------------------------------
# GAE
# ---------------------------------------------------------------------------------------------------------
def test_gae_matches_a_hand_computation():
    """Two envs, three steps; env 0 ends its episode at step 1, so step 1 does not bootstrap from step 2."""
    rewards = torch.tensor([[1.0, 0.0], [2.0, 1.0], [0.5, 0.0]])
    terminals = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    values = torch.tensor([[0.5, 1.0], [1.0, 2.0], [2.0, 3.0]])
    next_value = torch.tensor([4.0, 5.0])
    gamma, lam = 0.9, 0.5
    # env 0: delta2 = 0.5 + 0.9*4 - 2 = 2.1; delta1 = 2 - 1 = 1 (terminal); delta0 = 1 + 0.9*1 - 0.5 = 1.4
    # A2 = 2.1; A1 = 1 (the episode ends); A0 = 1.4 + 0.45 * 1 = 1.85
    # env 1: delta2 = 0 + 4.5 - 3 = 1.5; delta1 = 1 + 2.7 - 2 = 1.7; delta0 = 0 + 1.8 - 1 = 0.8
    # A2 = 1.5; A1 = 1.7 + 0.45 * 1.5 = 2.375; A0 = 0.8 + 0.45 * 2.375 = 1.86875
    expected = torch.tensor([[1.85, 1.86875], [1.0, 2.375], [2.1, 1.5]])
    assert torch.allclose(ppo_baseline.gae(rewards, terminals, values, next_value, gamma, lam), expected)


def test_gae_with_lambda_one_is_the_discounted_return_minus_the_value():
    torch.manual_seed(0)
    T, N, gamma = 20, 3, 0.97
    rewards, values, next_value = torch.randn(T, N), torch.randn(T, N), torch.randn(N)
    terminals = (torch.rand(T, N) < 0.2).float()
    returns, running = torch.zeros(T, N), next_value
    for t in reversed(range(T)):
        running = rewards[t] + gamma * (1 - terminals[t]) * running
        returns[t] = running
    assert torch.allclose(ppo_baseline.gae(rewards, terminals, values, next_value, gamma, 1.0), returns - values, atol=1e-5)


# ---------------------------------------------------------------------------------------------------------
# EnvPool: the autoreset step and the game statistics
# ---------------------------------------------------------------------------------------------------------
def test_atari_envs_report_whole_games_in_raw_score(monkeypatch):
    """Against a raw EnvPool of the same seed fed the same actions: a game's return is the sum of the raw
    rewards from one game over (or truncation) to the next, its length counts decisions (the autoreset steps
    after each lost life excluded, as EnvPool's own elapsed_step does), and both restart after a truncation."""
    monkeypatch.setattr(envpool, "make", functools.partial(envpool.make, max_episode_steps=100))
    envs = ppo_baseline.AtariEnvs("Breakout-v5", 2, torch.device("cpu"), seed=3)
    raw = envpool.make("Breakout-v5", env_type="gymnasium", num_envs=2, episodic_life=True, reward_clip=True, seed=3)
    obs, raw_obs = envs.reset(), raw.reset()[0]
    assert np.array_equal(obs.numpy(), raw_obs)
    generator = np.random.default_rng(0)
    running, games, truncations, lives_lost = np.zeros(2), 0, 0, 0
    previous_done = np.zeros(2, dtype=bool)
    for _ in range(1000):
        action = generator.integers(0, 4, size=2)
        obs, reward, terminated, truncated, info = envs.step(torch.from_numpy(action))
        raw_obs, raw_reward, raw_terminated, raw_truncated, raw_info = raw.step(action)
        assert np.array_equal(obs.numpy(), raw_obs) and np.array_equal(reward.numpy(), raw_reward)
        assert np.array_equal(terminated.numpy(), raw_terminated) and np.array_equal(truncated.numpy(), raw_truncated)
        assert reward.dtype == torch.float32 and reward.abs().max() <= 1  # clipped for training
        # The autoreset step: it pays nothing and EnvPool does not count it.
        assert (raw_info["reward"][previous_done] == 0).all()
        running += raw_info["reward"]
        over = raw_info["terminated"].astype(bool) | raw_truncated
        assert np.array_equal(info["episode_length"].numpy() > 0, over)  # reported where a game ended, only
        for n in np.flatnonzero(over):
            assert info["episode_return"][n].item() == running[n]
            assert info["episode_length"][n].item() == raw_info["elapsed_step"][n]
            running[n] = 0
        games += int(over.sum())
        truncations += int(raw_truncated.sum())
        lives_lost += int((raw_terminated & ~raw_info["terminated"].astype(bool)).sum())
        previous_done = raw_terminated | raw_truncated
    assert games >= 4 and truncations >= 1 and lives_lost >= 4  # all three kinds of done were seen


@pytest.mark.parametrize("script", SCRIPTS)
def test_autoreset_steps_are_masked_out_of_every_loss(script, tmp_path, monkeypatch):
    """Garbage in the observations that only autoreset steps see must not change one trained parameter: no
    policy, entropy or value loss, no advantage normalisation, no statistic reads them. The control shows the
    test can fail: the same garbage in the observations of decisions does change the parameters."""
    module = SCRIPTS[script]
    monkeypatch.chdir(tmp_path)
    trained = {}
    for poison in (None, "terminal", "decision"):
        monkeypatch.setattr(NextStepResetBandit, "poison", poison)
        monkeypatch.setattr(module, "make_envs", lambda args, device: NextStepResetBandit(args.num_envs, device=device, seed=args.seed))
        args = module.Args(env_id="ocean/bandit", num_envs=8, num_steps=16, num_minibatches=2, update_epochs=2, total_timesteps=256, learning_rate=1e-2, progress=False)
        result = module.train(args)
        checkpoint = torch.load(tmp_path / "runs" / result["run"] / "checkpoint.pt", weights_only=True)  # written at the end
        trained[poison] = checkpoint["model"]
    for name, value in trained[None].items():
        assert torch.equal(value, trained["terminal"][name]), name
    assert any(not torch.equal(value, trained["decision"][name]) for name, value in trained[None].items())


@pytest.mark.parametrize("script", SCRIPTS)
def test_ocean_options_and_scores(script, tmp_path, monkeypatch):
    """--env-id ocean/NAME takes the Ocean env options, and the run reports the env's normalised score, which
    differs from the return there (delay pays 1 per correct decision, its score is 2 * accuracy - 1)."""
    module = SCRIPTS[script]
    options = dict(delay=7, forage_distance=5, password_length=3)
    for name, attribute, expected in (("delay", "delay", 7), ("forage", "distance", 5), ("password", "length", 3)):
        envs = module.make_envs(module.Args(env_id=f"ocean/{name}", num_envs=2, **options), torch.device("cpu"))
        assert getattr(envs, attribute) == expected
    monkeypatch.chdir(tmp_path)
    episodes = []  # (return, score) of every episode the env ended, in the order the loop reads them
    make_envs = module.make_envs

    def recording_envs(args, device):
        envs = make_envs(args, device)
        step = envs.step

        def recording_step(action):
            obs, reward, terminated, truncated, info = step(action)
            ended = info["episode_length"] > 0
            episodes.extend(zip(info["episode_return"][ended].tolist(), info["score"][ended].tolist()))
            return obs, reward, terminated, truncated, info

        envs.step = recording_step
        return envs

    monkeypatch.setattr(module, "make_envs", recording_envs)
    args = module.Args(env_id="ocean/delay", delay=2, num_envs=16, num_steps=66, num_minibatches=2, update_epochs=1, total_timesteps=16 * 66 * 2, progress=False)
    result = module.train(args)
    assert len(episodes) == 32 and result["episodes"] == 20
    # delay pays 1 a correct decision (64 scored), and scores max(0, 2 accuracy - 1): random play ~32 correct
    for episode_return, score in episodes:
        assert score == pytest.approx(max(0.0, 2 * episode_return / 64 - 1), abs=1e-6), (episode_return, score)
    assert any(score > 0 for _, score in episodes) and any(score == 0 for _, score in episodes)
    # the run reports the last 20 episodes' mean return, and the mean score of the episodes that ended in its last tenth
    # of iterations (at least its last: here the second, 16 episodes), each its own
    assert result["return"] == pytest.approx(np.mean([r for r, _ in episodes[-20:]])) and result["score"] == pytest.approx(np.mean([s for _, s in episodes[-16:]])), result


def test_both_p3o_scripts_share_one_default():
    """One P3O: beyond the envs' own budget, learning rate and batch, the two scripts' defaults are the same: the
    learned sigma, the lambda-return at lam 0.8, the running clock table and the window loss at 0.1."""
    atari, ocean = asdict(p3o_atari.Args()), asdict(p3o_ocean.Args())
    differ = {name for name in atari.keys() & ocean.keys() if atari[name] != ocean[name]}
    assert differ - {"exp_name", "env_id", "total_timesteps", "learning_rate", "num_envs", "update_epochs"} == set()
    assert (atari["clock"], atari["window_loss_coef"], atari["horizon"]) == (True, 0.1, 128)


# ---------------------------------------------------------------------------------------------------------
# Smoke runs, CleanRL style: the scripts as a user runs them, on Atari through EnvPool, on the CPU
# ---------------------------------------------------------------------------------------------------------
TAGS = {"charts/episodic_return", "charts/score", "charts/avg_episodic_return", "charts/episodic_length", "charts/SPS", "charts/learning_rate", "losses/value_loss", "losses/policy_loss", "losses/entropy", "losses/approx_kl", "losses/clipfrac", "losses/grad_norm", "losses/explained_variance", "perf/rollout_fraction", "perf/advantage_fraction", "perf/update_fraction"}
P3O_TAGS = {"losses/value_nll", "losses/window_loss", "losses/window_explained_variance", "charts/advantage_mean"}


@pytest.mark.parametrize("script", SCRIPTS)
def test_smoke_run_on_breakout(script, tmp_path):
    # 512 steps per env: a random game of Breakout lasts about 170 (4 x 128 ended one game, or none)
    flags = ["--env-id", "Breakout-v5", "--total-timesteps", "1024", "--num-envs", "2", "--num-steps", "128", "--num-minibatches", "2", "--update-epochs", "1"]
    if script == "p3o_atari.py":
        flags += ["--horizon", "32"]
    run = run_script(ROOT / script, *flags, cwd=tmp_path)  # in this process; a real start-up: test_bad_flag_exits_before_any_env_starts
    assert run.returncode == 0, run.stderr[-3000:]
    assert "return" in run.stdout and "SPS" in run.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith("Breakout-v5__" + script[:-3] + "__1__")

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir))
    events.Reload()
    expected = TAGS | (P3O_TAGS if script == "p3o_atari.py" else set())
    assert expected <= set(events.Tags()["scalars"]), expected - set(events.Tags()["scalars"])
    assert [e.step for e in events.Scalars("charts/SPS")] == [256, 512, 768, 1024]
    if script == "p3o_atari.py":
        assert {"charts/log_sigma", "charts/weight_curve"} <= set(events.Tags()["histograms"])

    # The checkpoint, written at the end, carries the args needed to rebuild the agent, and loads into it.
    checkpoint = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    module = SCRIPTS[script]
    args = replace(module.Args(), **{k: v for k, v in checkpoint["args"].items()})
    agent = module.Agent((4, 84, 84), 4, args)
    agent.load_state_dict(checkpoint["model"])
    assert checkpoint["global_step"] == 1024
    scores, returns = events.Scalars("charts/score"), events.Scalars("charts/episodic_return")
    assert [e.value for e in scores] == [e.value for e in returns]  # an Atari game's score is its raw return

    # It plays whole games through EnvPool: evaluate.py.
    assert checkpoint["iteration"] == 4 and checkpoint["envs"] is None  # EnvPool's emulators are not saved
    result = evaluate.evaluate(evaluate.Args(str(run_dir / "checkpoint.pt"), episodes=2, greedy=False))
    assert result["episodes"] == 2 and result["env"] == "Breakout-v5"
    # two whole games' raw scores (bricks are worth whole points), and a game's score is its return
    assert (2 * result["return"]).is_integer() and result["score"] == result["return"] and result["return_std"] == result["score_std"], result
    heads = 32 if script == "p3o_atari.py" else 1
    assert agent.critic.out_features == heads


# ---------------------------------------------------------------------------------------------------------
# Bad flags
# ---------------------------------------------------------------------------------------------------------
SHARED_BAD_FLAGS = [
    (dict(env_id="Breakot-v5"), "did you mean Breakout-v5"),
    (dict(env_id="ocean/bandt"), "did you mean ocean/bandit"),
    (dict(env_id="CartPol-v1"), "did you mean CartPole-v1"),
    (dict(env_id="MinAtar/Breakot-v1"), "did you mean MinAtar/Breakout-v1"),
    (dict(env_id="Pendulum-v1"), "action space: these scripts need a discrete one"),
    (dict(env_id="Blackjack-v1"), "no network here fits observations of shape ()"),
    (dict(num_envs=8, num_steps=100, num_minibatches=3), "--num-minibatches 3 must divide the batch"),
    (dict(num_envs=0), "--num-envs must be >= 1"),
    (dict(total_timesteps=0), "--total-timesteps must be >= 1"),
    (dict(learning_rate=-1.0), "--learning-rate must be > 0"),
    (dict(env_id="ocean/delay", delay=0), "--delay must be >= 1"),
]
OWN_BAD_FLAGS = [
    ("p3o_atari.py", dict(horizon=0), "--horizon must be >= 1"),
    ("p3o_atari.py", dict(window_loss_coef=-0.5), "--window-loss-coef must be >= 0"),
    ("ppo_baseline.py", dict(gamma=1.5), "--gamma must be in [0, 1]"),
    ("ppo_baseline.py", dict(gae_lambda=-0.1), "--gae-lambda must be in [0, 1]"),
]


@pytest.mark.parametrize("script, flags, message", [(script, *case) for script in SCRIPTS for case in SHARED_BAD_FLAGS] + OWN_BAD_FLAGS)
def test_bad_flags_are_rejected(script, flags, message, capsys):
    module = SCRIPTS[script]
    with pytest.raises(SystemExit) as exit_info:
        module.check_args(module.Args(**flags))
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_good_flags_pass():
    for module in SCRIPTS.values():
        module.check_args(module.Args())
        module.check_args(module.Args(env_id="ocean/delay", num_envs=3, num_steps=5, num_minibatches=5))
        module.check_args(module.Args(env_id="MinAtar/Breakout-v1"))
        module.check_args(module.Args(env_id="CartPole-v1"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_bad_flag_exits_before_any_env_starts(script, tmp_path):
    """A real process, as the user sees it: the one start-up of each script that the suite pays for."""
    run = subprocess.run([sys.executable, str(ROOT / script), "--env-id", "Breakot-v5", "--num-minibatches", "3"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 2
    assert f"{script}: error: --env-id 'Breakot-v5'" in run.stderr and "--num-minibatches 3 must divide" in run.stderr
    assert not (tmp_path / "runs").exists()
