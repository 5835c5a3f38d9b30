"""--capture-video, in all three scripts: --eval-checkpoint writes each episode it plays as an animated GIF to
runs/{run_name}/videos/, one frame per decision, the observation the policy saw when it made it (EnvPool's and
Gymnasium's reset steps, whose actions are ignored, are not decisions): EnvPool's Atari frames, MinAtar's grids and
the Ocean env squared. Any other env, and the flag without --eval-checkpoint, is refused with exit code 2 and one
line that says what to do, before any env or model is built."""
import inspect
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageSequence

import p3o_atari
import p3o_ocean
import ppo_baseline
from in_process import run_script

ROOT = Path(__file__).resolve().parents[1]
MODULES = {"p3o_ocean.py": p3o_ocean, "ppo_baseline.py": ppo_baseline, "p3o_atari.py": p3o_atari}
ATARI_SCRIPTS = ["ppo_baseline.py", "p3o_atari.py"]
OCEAN = {"p3o_ocean.py": "", "ppo_baseline.py": "ocean/", "p3o_atari.py": "ocean/"}  # how a script names Ocean envs
TINY = dict(num_envs=8, num_steps=16, num_minibatches=2, update_epochs=1, progress=False)


def train_tiny(script, tmp_path, monkeypatch, **args):
    """The checkpoint of a one-iteration run (P3O at H = 8), runs/{run_name}/checkpoint.pt under tmp_path, which
    becomes the working directory."""
    module = MODULES[script]
    monkeypatch.chdir(tmp_path)
    args = {**TINY, **({"horizon": 8} if "horizon" in module.Args.__dataclass_fields__ else {}), **args}
    result = module.train(module.Args(**args, total_timesteps=args["num_envs"] * args["num_steps"]))
    return str(Path("runs") / result["run"] / "checkpoint.pt")


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
        picture[np.asarray(grid[channel]) != 0] = p3o_ocean.VIDEO_PALETTE[channel % len(p3o_ocean.VIDEO_PALETTE)]
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


# ---------------------------------------------------------------------------------------------------------
# Each env family, in each script that plays it
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", MODULES)
def test_squared_videos_show_each_decision(script, tmp_path, monkeypatch, capsys):
    """The Ocean env squared (every step a decision): its 7x7 grid, the agent in the palette's first colour and the
    target in its second, scaled 23 times. Episodes of different lengths, so an env that finished first must stop
    adding frames while the others play on."""
    module = MODULES[script]
    path, run_name = squared_checkpoint(script, tmp_path, monkeypatch, "seeks")
    log = recording(monkeypatch, p3o_ocean.Squared)
    capsys.readouterr()
    result = module.evaluate(module.Args(eval_checkpoint=path, eval_episodes=6, eval_greedy=True, capture_video=True))
    episodes = first_episodes(log)
    assert result["return"] == 1.0 and len({length for _, length in episodes}) > 1, episodes  # each reached its target
    draw = lambda obs: drawn_grid(obs.view(2, 7, 7))  # noqa: E731 (the agent's plane, then the target's)
    check_videos(result, episodes, draw, capsys.readouterr().out, Path("runs") / run_name)
    first = gif_pictures(result["videos"][0], 7, 7)[0]
    assert (first[3, 3] == p3o_ocean.VIDEO_PALETTE[0]).all()  # the agent starts at the centre


@pytest.mark.parametrize("script", MODULES)
def test_identical_pictures_stay_one_frame_each(script, tmp_path, monkeypatch):
    """A policy that always stays on squared: 14 decisions (the truncation), 14 identical pictures, which Pillow's
    GIF encoder would merge into one frame (the control); each stays a frame. From the command line, as a user runs
    it."""
    stays, run_name = squared_checkpoint(script, tmp_path, monkeypatch, "stays")
    flags = ["--eval-checkpoint", stays, "--eval-episodes", "2", "--eval-greedy", "--capture-video"]
    run = run_script(ROOT / script, *flags, cwd=tmp_path)
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
    result = module.evaluate(module.Args(eval_checkpoint=path, eval_episodes=3, capture_video=True))
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
    result = module.evaluate(module.Args(eval_checkpoint=path, eval_episodes=1, capture_video=True))
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
    palette = p3o_ocean.VIDEO_PALETTE
    expected = np.array([[palette[4], palette[1], [0, 0, 0]], [[0, 0, 0], [0, 0, 0], palette[1]]], dtype=np.uint8)
    for module in MODULES.values():
        pictures = module.grid_pictures(grids)
        assert pictures.dtype == np.uint8 and np.array_equal(pictures[0], expected)


# ---------------------------------------------------------------------------------------------------------
# Refusals: exit code 2, one line that says what to do, nothing built
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", MODULES)
def test_capture_video_without_eval_checkpoint_is_refused(script, tmp_path):
    # a tiny run, should the refusal fail: then the test fails in a second, where the defaults would train for hours
    tiny = ["--env-id", f"{OCEAN[script]}bandit", "--num-envs", "2", "--num-steps", "4", "--num-minibatches", "1",
            "--total-timesteps", "8", "--no-progress"]
    run = run_script(ROOT / script, "--capture-video", *tiny, cwd=tmp_path)
    assert run.returncode == 2
    fix = "add --eval-checkpoint runs/{run}/checkpoint.pt"
    assert run.stderr == f"{script}: error: --capture-video records an evaluation: {fix}\n"
    assert not (tmp_path / "runs").exists()  # nothing was started
    module = MODULES[script]
    module.check_args(module.Args(eval_checkpoint="runs/x/checkpoint.pt", capture_video=True))  # with it: no refusal


NO_PICTURE = [("p3o_ocean.py", "bandit"), ("p3o_ocean.py", "delay"), ("ppo_baseline.py", "ocean/delay"),
              ("ppo_baseline.py", "CartPole-v1"), ("p3o_atari.py", "ocean/bandit"), ("p3o_atari.py", "CartPole-v1")]


@pytest.mark.parametrize("script, env_id", NO_PICTURE)
def test_an_env_without_a_picture_is_refused_before_anything_is_built(script, env_id, tmp_path, monkeypatch, capsys):
    """The checkpoint names an env --capture-video cannot draw (an Ocean env without a picture, a Gymnasium env that is
    not MinAtar's): exit 2 with one line, before any env or model is built. The refusal reads the checkpoint's env
    alone, so a bandit checkpoint relabelled stands in for each."""
    module = MODULES[script]
    trained = torch.load(train_tiny(script, tmp_path, monkeypatch, env_id=f"{OCEAN[script]}bandit"), weights_only=True)
    path = tmp_path / "runs" / trained["run_name"] / "relabelled.pt"
    torch.save({**trained, "args": {**trained["args"], "env_id": env_id}}, path)
    drawn = "the Ocean env squared" if script == "p3o_ocean.py" else "EnvPool's Atari games"

    run = run_script(ROOT / script, "--eval-checkpoint", path, "--capture-video", cwd=tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    (line,) = run.stderr.splitlines()
    assert line.startswith(f"{script}: error: --capture-video draws {drawn}") and f"not {env_id}" in line, line
    assert line.endswith("evaluate it without --capture-video"), line
    assert not (tmp_path / "runs" / trained["run_name"] / "videos").exists()

    def built(*args, **kwargs):
        raise AssertionError("built before the refusal")

    for env_class in (p3o_ocean.Bandit, p3o_ocean.Delay, getattr(module, "GymnasiumEnvs", p3o_ocean.Bandit)):
        monkeypatch.setattr(env_class, "__init__", built)
    monkeypatch.setattr(module.Agent, "__init__", built)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        module.evaluate(module.Args(eval_checkpoint=str(path), capture_video=True))
    assert exit_info.value.code == 2 and capsys.readouterr().err == run.stderr


# ---------------------------------------------------------------------------------------------------------
# The flag joins the scripts without breaking them
# ---------------------------------------------------------------------------------------------------------
def test_a_checkpoint_from_before_capture_video_still_resumes(tmp_path, monkeypatch):
    """--capture-video plays no part in a run, so a checkpoint written before the flag existed resumes (the runs of
    the day keep going), where one missing a training flag is still refused. load_checkpoint is verbatim in the
    three scripts (test_atari.py)."""
    trained = torch.load(train_tiny("p3o_ocean.py", tmp_path, monkeypatch, env_id="bandit"), weights_only=True)
    older = tmp_path / "older.pt"

    def without(*names):
        return {**trained, "args": {name: value for name, value in trained["args"].items() if name not in names}}

    torch.save(without("capture_video"), older)
    args, checkpoint = p3o_ocean.resume_args(p3o_ocean.Args(resume=str(older), progress=False))
    assert not args.capture_video and checkpoint["iteration"] == 1
    assert p3o_ocean.train(replace(args, total_timesteps=256), checkpoint)["steps"] == 256
    torch.save(without("capture_video", "seed"), older)  # the control: a training flag missing
    with pytest.raises(SystemExit) as exit_info:
        p3o_ocean.resume_args(p3o_ocean.Args(resume=str(older)))
    assert exit_info.value.code == 2


def test_the_video_code_is_the_same_in_all_three_scripts():
    """Written once and repeated, single-file style: the shared pieces verbatim, and the video lines of evaluate's
    and check_args's code the same in each script."""
    for name in ("grid_pictures", "record_frames", "save_videos"):
        sources = {inspect.getsource(getattr(module, name)) for module in MODULES.values()}
        assert len(sources) == 1, name
    for name in ("VIDEO_SIZE", "VIDEO_CAPTION", "VIDEO_FRAME_MS"):
        assert getattr(p3o_atari, name) == getattr(p3o_ocean, name) == getattr(ppo_baseline, name), name
    for module in MODULES.values():
        assert np.array_equal(module.VIDEO_PALETTE, p3o_ocean.VIDEO_PALETTE)

    def video_lines(function):
        words = ("video", "frames", "refusal", "sys.exit(2)", "episodes = {", "step{checkpoint")
        code = inspect.getsource(function).split('"""', 2)[2]  # past the docstring
        return [line for line in code.splitlines() if any(word in line for word in words)]

    for name in ("evaluate", "check_args"):
        lines = video_lines(getattr(p3o_ocean, name))
        assert len(lines) >= (13 if name == "evaluate" else 2), lines
        assert video_lines(getattr(p3o_atari, name)) == lines == video_lines(getattr(ppo_baseline, name)), name
