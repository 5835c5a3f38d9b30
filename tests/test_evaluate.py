"""evaluate.py plays a checkpoint of any of the three scripts: one episode per env, each env's first whole episode,
the checkpoint's own policy, greedy or sampled. --capture-video writes each episode as an animated GIF to
runs/{run_name}/videos/, one frame per decision, the observation the policy saw when it made it (EnvPool's and
Gymnasium's reset steps, whose actions are ignored, are not decisions): EnvPool's Atari frames, MinAtar's grids and
the Ocean env squared. Bad input (a checkpoint that is missing, unreadable or of another script, an env it cannot
draw) is refused with exit code 2 and one line that says what to do, before any env or model is built."""
import math
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageSequence

import evaluate
import p3o_atari
import p3o_ocean
import ppo_baseline
from in_process import run_script

ROOT = Path(__file__).resolve().parents[1]
EVALUATE = ROOT / "evaluate.py"
MODULES = {"p3o_ocean.py": p3o_ocean, "ppo_baseline.py": ppo_baseline, "p3o_atari.py": p3o_atari}
ATARI_SCRIPTS = ["ppo_baseline.py", "p3o_atari.py"]
OCEAN = {"p3o_ocean.py": "", "ppo_baseline.py": "ocean/", "p3o_atari.py": "ocean/"}  # how a script names Ocean envs
TINY = dict(num_envs=8, num_steps=16, num_minibatches=2, update_epochs=1, progress=False)
FORMER_FLAGS = dict(eval_checkpoint=None, eval_episodes=10, eval_greedy=False, capture_video=False)  # before evaluate.py


def train_tiny(script, tmp_path, monkeypatch, **args):
    """The checkpoint of a one-iteration run (P3O at H = 8), runs/{run_name}/checkpoint.pt under tmp_path, which
    becomes the working directory."""
    module = MODULES[script]
    monkeypatch.chdir(tmp_path)
    args = {**TINY, **({"horizon": 8} if "horizon" in module.Args.__dataclass_fields__ else {}), **args}
    result = module.train(module.Args(**args, total_timesteps=args["num_envs"] * args["num_steps"]))
    return str(Path("runs") / result["run"] / "checkpoint.pt")


# ---------------------------------------------------------------------------------------------------------
# It plays the checkpoint's policy
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", MODULES)
def test_evaluate_plays_a_checkpoint_of_each_script(script, tmp_path, monkeypatch, capsys):
    module = MODULES[script]
    clock = {"clock": True} if "clock" in module.Args.__dataclass_fields__ else {}
    path = train_tiny(script, tmp_path, monkeypatch, env_id=f"{OCEAN[script]}bandit", update_epochs=2, **clock)
    for greedy in (False, True):
        result = evaluate.evaluate(evaluate.Args(path, episodes=6, greedy=greedy))
        assert result["episodes"] == 6 and result["env"] == f"{OCEAN[script]}bandit"
        assert 0.0 <= result["score"] <= 1.0 and math.isfinite(result["return_std"])
    assert f"6 episodes, greedy policy of {path} (step 128)" in capsys.readouterr().out
    # Written before a training flag existed (its default stands in), or when the scripts still had evaluation flags
    state = torch.load(path, weights_only=True)
    args = {name: value for name, value in state["args"].items() if name != "learning_rate"}
    for older in ({**state, "args": args}, {**state, "args": {**state["args"], **FORMER_FLAGS}}):
        torch.save(older, tmp_path / "older.pt")
        assert evaluate.evaluate(evaluate.Args(str(tmp_path / "older.pt"), episodes=6))["episodes"] == 6


def test_evaluate_from_the_command_line_starts_no_run(tmp_path, monkeypatch):
    path = train_tiny("p3o_ocean.py", tmp_path, monkeypatch, env_id="delay", delay=2)
    run = run_script(EVALUATE, path, "--episodes", "3", "--seed", "2", "--no-cuda", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"delay: 3 episodes, sampled policy of {path} (step 128): return" in run.stdout, run.stdout
    assert len(list((tmp_path / "runs").iterdir())) == 1 and not list(tmp_path.glob("runs/*/videos"))


def cue_following_checkpoints(script, tmp_path, *sharpnesses):
    """Delay checkpoints (D = 2) whose policy is set by hand: the trunk passes the cue's sign through two tanh units
    (x0 - x1 -> +-0.995), and the actor's logits are +-sharpness times it, so the policy plays the cue with
    probability sigmoid(2 * 0.995 * sharpness) (sharpness < 0: against the cue). Returns their paths, one a sharpness."""
    module = MODULES[script]
    run = tmp_path / f"train_{script}"
    run.mkdir()
    cwd = os.getcwd()
    os.chdir(run)
    try:
        result = module.train(module.Args(env_id=f"{OCEAN[script]}delay", delay=2, **TINY, total_timesteps=128))
    finally:
        os.chdir(cwd)
    state = torch.load(run / "runs" / result["run"] / "checkpoint.pt", weights_only=True)
    paths = []
    for sharpness in sharpnesses:
        model = {name: torch.zeros_like(value) for name, value in state["model"].items()}  # every weight, bias (and clock table) 0
        model["network.0.weight"][0] = torch.tensor([3.0, -3.0])
        model["network.2.weight"][0, 0] = 3.0
        model["actor.weight"][:, 0] = torch.tensor([sharpness, -sharpness])
        paths.append(str(tmp_path / f"{script}_{sharpness}.pt"))
        torch.save({**state, "model": model}, paths[-1])
    return paths


@pytest.mark.parametrize("script", MODULES)
def test_evaluate_plays_the_checkpoints_policy(script, tmp_path):
    """evaluate.py plays the checkpoint's own policy: on delay (64 scored decisions, 1 per correct one, score =
    max(0, 2 accuracy - 1)), one that follows the cue scores 1 (return 64) when greedy, one that plays against it 0
    (return 0), and one that follows it 9 times in 10 returns ~57.6, every episode above 32, so the mean score is
    exactly 2 * return / 64 - 1. A freshly initialised policy would play near chance (return ~32)."""
    follows, against, mostly = cue_following_checkpoints(script, tmp_path, 20.0, -20.0, math.log(9) / (2 * math.tanh(3 * math.tanh(3))))
    result = evaluate.evaluate(evaluate.Args(follows, episodes=8, greedy=True))
    assert (result["return"], result["score"], result["return_std"]) == (64.0, 1.0, 0.0), result
    result = evaluate.evaluate(evaluate.Args(against, episodes=8, greedy=True))
    assert (result["return"], result["score"]) == (0.0, 0.0), result
    result = evaluate.evaluate(evaluate.Args(mostly, episodes=32))
    assert 55.0 < result["return"] < 60.5 and result["return_std"] > 0, result  # Binomial(64, 0.9): 57.6 +- 2.4 an episode
    assert result["score"] == pytest.approx(2 * result["return"] / 64 - 1, abs=1e-5)
    assert result["score_std"] == pytest.approx(2 * result["return_std"] / 64, abs=1e-5)


@pytest.mark.parametrize("script", MODULES)
def test_evaluate_plays_the_checkpoints_policy_from_the_command_line(script, tmp_path):
    (follows,) = cue_following_checkpoints(script, tmp_path, 20.0)
    run = run_script(EVALUATE, follows, "--episodes", "4", "--greedy", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "4 episodes, greedy policy" in run.stdout and "return 64.000 +- 0.000, score 1.000 +- 0.000" in run.stdout, run.stdout


# ---------------------------------------------------------------------------------------------------------
# --capture-video: each env family, in each script that plays it
# ---------------------------------------------------------------------------------------------------------
def squared_checkpoint(script, tmp_path, monkeypatch, policy):
    """A squared checkpoint of `script` whose policy is set by hand, every other weight 0, and its run's name. "stays"
    always stays. "seeks", greedy, steps toward the target, so an episode lasts the target's distance from the centre
    (1 to 6 decisions): its trunk reads the target's row and column less the agent's (linear in the one-hot planes)
    through two tanh units, and the actor moves along either that is not 0."""
    trained = torch.load(train_tiny(script, tmp_path, monkeypatch, env_id=f"{OCEAN[script]}squared"), weights_only=True)
    model = {name: torch.zeros_like(value) for name, value in trained["model"].items()}
    if policy == "stays":
        model["actor.bias"][0] = 20.0  # action 0: stay
    else:
        rows, cols = (torch.arange(49) // 7).float(), (torch.arange(49) % 7).float()
        model["network.0.weight"][:2] = 3.0 * torch.stack([torch.cat([-rows, rows]), torch.cat([-cols, cols])])
        model["network.2.weight"][0, 0] = model["network.2.weight"][1, 1] = 3.0
        moves = [[-1.0, 0.0], [1.0, 0.0], [0.0, -1.0], [0.0, 1.0]]  # up, down, left, right: their rows and columns
        model["actor.weight"][1:, :2] = 10.0 * torch.tensor(moves)
    path = tmp_path / "runs" / trained["run_name"] / f"{policy}.pt"
    torch.save({**trained, "model": model}, path)
    return str(path), trained["run_name"]


def recording(monkeypatch, env_class):
    """Every observation the evaluation's envs hand out (the reset's, then each step's), with whether the step that
    handed it out ended an episode (a lost life included) and the episode lengths that step reported."""
    log = {"obs": [], "done": [], "lengths": []}
    reset, step = env_class.reset, env_class.step

    def recording_reset(self):
        obs = reset(self)
        log["obs"].append(obs.cpu().clone())
        log["done"].append(torch.zeros(len(obs), dtype=torch.bool))
        log["lengths"].append(torch.zeros(len(obs), dtype=torch.int64))
        return obs

    def recording_step(self, action):
        obs, reward, terminated, truncated, info = step(self, action)
        log["obs"].append(obs.cpu().clone())
        log["done"].append((terminated | truncated).cpu())
        log["lengths"].append(info["episode_length"].cpu().long())
        return obs, reward, terminated, truncated, info

    monkeypatch.setattr(env_class, "reset", recording_reset)
    monkeypatch.setattr(env_class, "step", recording_step)
    return log


def first_episodes(log):
    """Each env's first episode: the observations its decisions were made on, in order, and the length the env
    reported for it. An observation that a done step handed out goes to the reset step (EnvPool, Gymnasium: the
    action is ignored), so it is no decision; an Ocean env has no reset step, and no done inside an episode."""
    obs, done, lengths = torch.stack(log["obs"]), torch.stack(log["done"]), torch.stack(log["lengths"])
    episodes = []
    for i in range(obs.shape[1]):
        end = int(torch.nonzero(lengths[:, i] > 0)[0])  # the step that ended env i's first episode
        episodes.append(([obs[j, i] for j in range(end) if not done[j, i]], int(lengths[end, i])))
    return episodes


def drawn_grid(grid):
    """What a grid of channels [C, H, W] should look like: each cell in the colour of its last set channel (the
    palette cycled), black where none is set."""
    picture = np.zeros((*grid.shape[1:], 3), dtype=np.uint8)
    for channel in range(grid.shape[0]):  # each channel painted over the ones before it
        picture[np.asarray(grid[channel]) != 0] = evaluate.VIDEO_PALETTE[channel % len(evaluate.VIDEO_PALETTE)]
    return picture


def gif_pictures(path, height, width):
    """The pictures of a GIF's frames, one [height, width, 3] array a frame, read at the centre of each cell (the
    picture is scaled up by a whole factor to at least 160 pixels; the caption strip under it is not read)."""
    gif = Image.open(path)
    scale = math.ceil(160 / max(height, width))
    assert gif.size[0] == width * scale and gif.size[1] > height * scale, gif.size
    cells = (slice(scale // 2, height * scale, scale), slice(scale // 2, width * scale, scale))
    pictures = [np.asarray(frame.convert("RGB"))[cells] for frame in ImageSequence.Iterator(gif)]
    assert len(pictures) == gif.n_frames
    return pictures


def check_videos(result, episodes, draw, stdout, run_folder):
    """One GIF an episode, in the checkpoint's run folder, that PIL decodes; as many frames as the episode had
    decisions (the env's own count, and the test's); frame t the picture of decision t's observation; the pictures
    change over some episode; and each path printed."""
    assert len(result["videos"]) == len(episodes) == result["episodes"]
    changes = []
    for i, (path, (decisions, length)) in enumerate(zip(result["videos"], episodes)):
        assert Path(path).parent == Path(run_folder) / "videos" and path.endswith(f"-{i}.gif"), path
        assert f"video: {path}\n" in stdout
        assert len(decisions) == length  # the test's count of decisions is the env's
        expected = [draw(obs) for obs in decisions]
        pictures = gif_pictures(path, *expected[0].shape[:2])
        assert len(pictures) == length, (path, len(pictures), length)
        for t, (picture, wanted) in enumerate(zip(pictures, expected)):
            assert np.array_equal(picture, wanted), f"{path}: frame {t} is not decision {t}'s observation"
        changes.append(len({picture.tobytes() for picture in pictures}))
    assert max(changes) > 1, changes  # the frames change over the episode


@pytest.mark.parametrize("script", MODULES)
def test_squared_videos_show_each_decision(script, tmp_path, monkeypatch, capsys):
    """The Ocean env squared (every step a decision): its 7x7 grid, the agent in the palette's first colour and the
    target in its second, scaled 23 times. Episodes of different lengths, so an env that finished first must stop
    adding frames while the others play on. A GIF for a checkpoint of each script."""
    path, run_name = squared_checkpoint(script, tmp_path, monkeypatch, "seeks")
    log = recording(monkeypatch, p3o_ocean.Squared)
    capsys.readouterr()
    result = evaluate.evaluate(evaluate.Args(path, episodes=6, greedy=True, capture_video=True))
    episodes = first_episodes(log)
    assert result["return"] == 1.0 and len({length for _, length in episodes}) > 1, episodes  # each reached its target
    draw = lambda obs: drawn_grid(obs.view(2, 7, 7))  # noqa: E731 (the agent's plane, then the target's)
    check_videos(result, episodes, draw, capsys.readouterr().out, Path("runs") / run_name)
    first = gif_pictures(result["videos"][0], 7, 7)[0]
    assert (first[3, 3] == evaluate.VIDEO_PALETTE[0]).all()  # the agent starts at the centre


@pytest.mark.parametrize("script", MODULES)
def test_identical_pictures_stay_one_frame_each(script, tmp_path, monkeypatch):
    """A policy that always stays on squared: 14 decisions (the truncation), 14 identical pictures, which Pillow's
    GIF encoder would merge into one frame (the control); each stays a frame. From the command line, as a user runs
    it."""
    stays, run_name = squared_checkpoint(script, tmp_path, monkeypatch, "stays")
    run = run_script(EVALUATE, stays, "--episodes", "2", "--greedy", "--capture-video", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    paths = [line[len("video: ") :] for line in run.stdout.splitlines() if line.startswith("video: ")]
    step = TINY["num_envs"] * TINY["num_steps"]  # the checkpoint's
    assert paths == [f"runs/{run_name}/videos/step{step}-seed1-greedy-{i}.gif" for i in range(2)]
    for path in paths:
        pictures = gif_pictures(tmp_path / path, 7, 7)
        assert len(pictures) == 14
        assert all(np.array_equal(picture, pictures[0]) for picture in pictures)
    same = [Image.fromarray(np.zeros((7, 7, 3), dtype=np.uint8))] * 3
    same[0].save(tmp_path / "merged.gif", save_all=True, append_images=same[1:], duration=70)
    assert Image.open(tmp_path / "merged.gif").n_frames == 1  # the control: Pillow merges identical frames


@pytest.mark.parametrize("script", ATARI_SCRIPTS)
def test_minatar_videos_show_each_decision(script, tmp_path, monkeypatch, capsys):
    """MinAtar Breakout through Gymnasium (its reset steps are not decisions): the 10x10 grid of 4 channels, a
    colour each, scaled 16 times."""
    module = MODULES[script]
    path = train_tiny(script, tmp_path, monkeypatch, env_id="MinAtar/Breakout-v1", num_envs=2)
    log = recording(monkeypatch, module.GymnasiumEnvs)
    capsys.readouterr()
    result = evaluate.evaluate(evaluate.Args(path, episodes=3, capture_video=True))
    check_videos(result, first_episodes(log), drawn_grid, capsys.readouterr().out, Path(path).parent)


@pytest.mark.parametrize("script", ATARI_SCRIPTS)
def test_atari_videos_skip_the_reset_steps(script, tmp_path, monkeypatch, capsys):
    """A whole game of Breakout through EnvPool: the newest 84x84 frame the agent sees, grey, scaled twice. The
    game's five lives end in five dones, and the four after which it goes on are each followed by a reset step, so
    the GIF has the game's steps less four frames."""
    module = MODULES[script]
    path = train_tiny(script, tmp_path, monkeypatch, env_id="Breakout-v5", num_envs=1, num_minibatches=1)
    log = recording(monkeypatch, module.AtariEnvs)
    capsys.readouterr()
    result = evaluate.evaluate(evaluate.Args(path, episodes=1, capture_video=True))
    ((decisions, length),) = episodes = first_episodes(log)
    steps = len(log["obs"]) - 1
    assert int(torch.stack(log["done"])[:, 0].sum()) == 5 and length == steps - 4, (steps, length)
    draw = lambda obs: np.repeat(obs[-1].numpy()[..., None], 3, -1)  # noqa: E731 (the newest frame, grey)
    check_videos(result, episodes, draw, capsys.readouterr().out, Path(path).parent)


def test_grid_pictures_colour_each_cell_by_its_last_set_channel():
    grids = np.zeros((1, 12, 2, 3), dtype=bool)
    grids[0, [0, 4], 0, 0] = True  # channels 0 and 4 set: 4 is drawn
    grids[0, 1, 0, 1] = True
    grids[0, 11, 1, 2] = True  # the palette's 10 colours cycle: channel 11 takes colour 1
    palette = evaluate.VIDEO_PALETTE
    expected = np.array([[palette[4], palette[1], [0, 0, 0]], [[0, 0, 0], [0, 0, 0], palette[1]]], dtype=np.uint8)
    pictures = evaluate.grid_pictures(grids)
    assert pictures.dtype == np.uint8 and np.array_equal(pictures[0], expected)


# ---------------------------------------------------------------------------------------------------------
# Refusals: exit code 2, one line that says what to do, nothing built
# ---------------------------------------------------------------------------------------------------------
def nothing_built(monkeypatch):
    def built(*args, **kwargs):
        raise AssertionError("built before the refusal")

    for env_class in (*p3o_ocean.OCEAN_ENVS.values(), p3o_atari.GymnasiumEnvs, ppo_baseline.GymnasiumEnvs,
                      p3o_atari.AtariEnvs, ppo_baseline.AtariEnvs):
        monkeypatch.setattr(env_class, "__init__", built)
    for module in MODULES.values():
        monkeypatch.setattr(module.Agent, "__init__", built)


def refusal(tmp_path, *argv):
    """evaluate.py's one line on stderr, after checking that it exited 2 and printed nothing else."""
    run = run_script(EVALUATE, *argv, cwd=tmp_path)
    assert run.returncode == 2 and run.stdout == "", (run.returncode, run.stdout, run.stderr)
    (line,) = run.stderr.splitlines()
    assert line.startswith("evaluate.py: error: "), line
    return line


def test_bad_checkpoints_are_refused(tmp_path, monkeypatch):
    good = Path(train_tiny("p3o_atari.py", tmp_path, monkeypatch, env_id="ocean/bandit"))
    state = torch.load(good, weights_only=True)
    (tmp_path / "truncated.pt").write_bytes(good.read_bytes()[:1000])
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    torch.save({"model": {}}, tmp_path / "weights.pt")
    torch.save({**state, "script": "my_p3o.py"}, tmp_path / "forked.pt")
    torch.save({key: value for key, value in state.items() if key != "optimizer"}, tmp_path / "partial.pt")
    torch.save({**state, "args": {**state["args"], "warp": 9}}, tmp_path / "newer.pt")
    nothing_built(monkeypatch)
    for path, message in [
        ("missing.pt", "missing.pt: no such file: give the checkpoint of a run, runs/{run_name}/checkpoint.pt"),
        ("truncated.pt", "truncated.pt: not a readable checkpoint ("),
        ("notes.txt", "notes.txt: not a readable checkpoint ("),
        ("weights.pt", "weights.pt: written by no script, not by p3o_atari.py, p3o_ocean.py, ppo_baseline.py: "),
        ("forked.pt", "forked.pt: written by my_p3o.py, not by p3o_atari.py, p3o_ocean.py, ppo_baseline.py: "),
        ("partial.pt", "partial.pt: not a checkpoint of p3o_atari.py (keys missing): give the checkpoint of a run"),
        ("newer.pt", "newer.pt: its args ['warp'] are unknown to this version of p3o_atari.py: evaluate it with the "),
    ]:
        line = refusal(tmp_path, path)
        assert line.startswith(f"evaluate.py: error: {message}"), line
        assert line.endswith(("runs/{run_name}/checkpoint.pt", "version that wrote it")), line
    assert refusal(tmp_path, good, "--episodes", "0") == "evaluate.py: error: --episodes must be >= 1, got 0"


NO_PICTURE = [("p3o_ocean.py", "bandit"), ("p3o_ocean.py", "delay"), ("ppo_baseline.py", "ocean/delay"),
              ("ppo_baseline.py", "CartPole-v1"), ("p3o_atari.py", "ocean/bandit"), ("p3o_atari.py", "CartPole-v1")]


@pytest.mark.parametrize("script, env_id", NO_PICTURE)
def test_an_env_without_a_picture_is_refused_before_anything_is_built(script, env_id, tmp_path, monkeypatch, capsys):
    """The checkpoint names an env --capture-video cannot draw (an Ocean env without a picture, a Gymnasium env that is
    not MinAtar's): exit 2 with one line, before any env or model is built. The refusal reads the checkpoint's env
    alone, so a bandit checkpoint relabelled stands in for each."""
    trained = torch.load(train_tiny(script, tmp_path, monkeypatch, env_id=f"{OCEAN[script]}bandit"), weights_only=True)
    path = tmp_path / "runs" / trained["run_name"] / "relabelled.pt"
    torch.save({**trained, "args": {**trained["args"], "env_id": env_id}}, path)
    nothing_built(monkeypatch)
    line = refusal(tmp_path, path, "--capture-video")
    drawn = "EnvPool's Atari games, MinAtar's and the Ocean env squared"
    assert line.startswith(f"evaluate.py: error: --capture-video draws {drawn}, not {env_id} (") and line.endswith(
        "evaluate it without --capture-video"), line
    assert not (tmp_path / "runs" / trained["run_name"] / "videos").exists()


# ---------------------------------------------------------------------------------------------------------
# The scripts train; evaluation left them
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", MODULES)
def test_a_checkpoint_with_the_former_evaluation_flags_still_resumes(script, tmp_path, monkeypatch):
    """The scripts once had --eval-checkpoint, --eval-episodes, --eval-greedy and --capture-video, and their
    checkpoints recorded them. No part of a run, they are dropped: such a checkpoint resumes, where one missing a
    training flag is still refused. The scripts no longer take them. Those checkpoints also kept the last 20 games'
    scores where today's keep each iteration's (score sum, games): each old score resumes as an iteration of one game."""
    module = MODULES[script]
    assert not set(FORMER_FLAGS) & set(module.Args.__dataclass_fields__) and not hasattr(module, "evaluate")
    trained = torch.load(train_tiny(script, tmp_path, monkeypatch, env_id=f"{OCEAN[script]}bandit"), weights_only=True)
    older = tmp_path / "older.pt"
    former_history = [trained["history"][0], [0.25, 0.5]]  # the last 20 games' scores, as the scripts kept them then
    torch.save({**trained, "args": {**trained["args"], **FORMER_FLAGS}, "history": former_history}, older)
    args, checkpoint = module.resume_args(module.Args(resume=str(older), progress=False))
    assert checkpoint["iteration"] == 1 and not set(FORMER_FLAGS) & set(checkpoint["args"])
    steps = 2 * TINY["num_envs"] * TINY["num_steps"]
    assert module.train(replace(args, total_timesteps=steps), checkpoint)["steps"] == steps  # one more iteration
    without_seed = {name: value for name, value in trained["args"].items() if name != "seed"}
    torch.save({**trained, "args": {**without_seed, **FORMER_FLAGS}}, older)  # the control: a training flag missing
    with pytest.raises(SystemExit) as exit_info:
        module.resume_args(module.Args(resume=str(older)))
    assert exit_info.value.code == 2
