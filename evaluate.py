# Evaluation, beside the training scripts (as CleanRL keeps cleanrl_utils/evals/ beside its own): plays a checkpoint
# that p3o_atari.py, p3o_ocean.py or ppo_baseline.py wrote, with the policy it holds, and prints the return.
# The checkpoint names its script and its args; the script, imported from beside this file, rebuilds the env and the
# agent as its train() built them. One episode per env, in parallel, each env's first whole episode (Atari: whole
# games, all lives). --capture-video: each episode as an animated GIF, one frame per decision, the observation the
# policy saw when it made it (EnvPool's and Gymnasium's reset steps, whose actions are ignored, are not decisions).
"""Usage:
    python evaluate.py runs/{run}/checkpoint.pt                           # 10 episodes, the sampled policy
    python evaluate.py runs/{run}/checkpoint.pt --episodes 20 --greedy
    python evaluate.py runs/{run}/checkpoint.pt --capture-video           # GIFs in runs/{run}/videos/
"""
import importlib
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated

import numpy as np
import torch
import tyro
from torch.distributions.categorical import Categorical

SCRIPTS = ("p3o_atari.py", "p3o_ocean.py", "ppo_baseline.py")
# The scripts' own evaluation flags before this file took their place: the checkpoints of that time record them.
FORMER_FLAGS = {"eval_checkpoint", "eval_episodes", "eval_greedy", "capture_video"}


@dataclass
class Args:
    checkpoint: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="CHECKPOINT")]
    """runs/{run_name}/checkpoint.pt, written by p3o_atari.py, p3o_ocean.py or ppo_baseline.py"""
    episodes: int = 10
    """the number of episodes, one per env, played in parallel (Atari: whole games)"""
    greedy: bool = False
    """if toggled, take the most probable action instead of sampling"""
    capture_video: bool = False
    """if toggled, write each episode as a GIF to runs/{run_name}/videos/"""
    seed: int = 1
    """seed of the envs and of the sampled actions"""
    cuda: bool = True
    """if toggled, cuda will be used where there is a GPU"""


def evaluate(args):
    """Play args.episodes episodes with the policy of args.checkpoint; print and return the mean and std of their
    return and score. --capture-video: each episode also as a GIF in the checkpoint's run folder,
    runs/{run_name}/videos/ (save_videos), its path printed and returned."""
    checkpoint, script, run_args = load(args.checkpoint)
    if args.episodes < 1:
        refuse(f"--episodes must be >= 1, got {args.episodes}")
    draw = drawing(checkpoint["script"], script, run_args.env_id) if args.capture_video else None  # or refuse
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    torch.manual_seed(args.seed)
    envs, agent, next_obs = build(script, run_args, args.episodes, args.seed, device)
    agent.load_state_dict(checkpoint["model"])
    returns = torch.full((args.episodes,), float("nan"), device=device)
    scores = returns.clone()
    frames = [[] for _ in range(args.episodes)] if draw else None  # each env's first episode
    with torch.no_grad():
        for _ in range(100_000):  # a cap, so a policy that never ends an episode cannot hang the evaluation
            if frames is not None:
                record_frames(frames, envs, next_obs, returns.isnan(), draw)
            logits = agent.get_logits(next_obs)
            action = logits.argmax(-1) if args.greedy else Categorical(logits=logits).sample()
            next_obs, _, _, _, infos = envs.step(action)
            first = (infos["episode_length"] > 0) & returns.isnan()  # each env's first whole episode
            returns = torch.where(first, infos["episode_return"].float(), returns)
            scores = torch.where(first, infos["score"].float(), scores)
            if not returns.isnan().any():
                break
    done = ~returns.isnan()
    result = {"env": run_args.env_id, "episodes": int(done.sum()), "return": float(returns[done].mean()),
              "return_std": float(returns[done].std(correction=0)),
              "score": float(scores[done].mean()), "score_std": float(scores[done].std(correction=0))}
    policy = "greedy" if args.greedy else "sampled"
    print(f"{run_args.env_id}: {result['episodes']} episodes, {policy} policy of {args.checkpoint} "
          f"(step {checkpoint['global_step']:,}): return {result['return']:.3f} +- {result['return_std']:.3f}, "
          f"score {result['score']:.3f} +- {result['score_std']:.3f}", flush=True)
    if frames is not None:
        episodes = {i: frames[i] for i in np.flatnonzero(done.cpu().numpy())}
        name = f"step{checkpoint['global_step']}-seed{args.seed}-{policy}"
        result["videos"] = save_videos(episodes, f"runs/{checkpoint['run_name']}/videos", name)
        for path in result["videos"]:
            print(f"video: {path}", flush=True)
    return result


# ---------------------------------------------------------------------------------------------------------
# The checkpoint, and the script that wrote it
# ---------------------------------------------------------------------------------------------------------
def refuse(reason):
    print(f"{Path(__file__).name}: error: {reason}", file=sys.stderr)
    sys.exit(2)


def load(path):
    """The checkpoint at `path`, the script that wrote it (a module) and the run's Args; or exit 2 with what is wrong,
    nothing built yet."""
    if not os.path.isfile(path):
        refuse(f"{path}: no such file: give the checkpoint of a run, runs/{{run_name}}/checkpoint.pt")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated, not a torch file, or pickled objects we refuse to run
        refuse(f"{path}: not a readable checkpoint ({type(error).__name__}: {str(error).splitlines()[0][:200]}): "
               "give the checkpoint of a run, runs/{run_name}/checkpoint.pt")
    name = checkpoint.get("script") if isinstance(checkpoint, dict) else None
    if name not in SCRIPTS:
        refuse(f"{path}: written by {name or 'no script'}, not by {', '.join(SCRIPTS)}: evaluate.py plays their "
               "checkpoints alone; give one of theirs, runs/{run_name}/checkpoint.pt")
    script = import_script(name)
    if any(key not in checkpoint for key in script.CHECKPOINT_KEYS):
        refuse(f"{path}: not a checkpoint of {name} (keys missing): give the checkpoint of a run, "
               "runs/{run_name}/checkpoint.pt")
    run_args = {key: value for key, value in checkpoint["args"].items() if key not in FORMER_FLAGS}
    unknown = set(run_args) - set(script.Args.__dataclass_fields__)
    if unknown:
        refuse(f"{path}: its args {sorted(unknown)} are unknown to this version of {name}: evaluate it with the "
               "version that wrote it")
    return checkpoint, script, script.Args(**run_args)  # flags added since the run keep their defaults


def import_script(name):
    """The script `name`, a file beside this one, as a module: the one already imported where it is, so that
    p3o_atari.py's Ocean envs are p3o_ocean.py's own."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    return importlib.import_module(name[: -len(".py")])


def build(script, run_args, num_envs, seed, device):
    """The envs, the agent and the first observations, as the script's train() builds them, with num_envs envs
    seeded from seed."""
    envs = script.make_envs(replace(run_args, num_envs=num_envs, seed=seed), device)
    next_obs = envs.reset()
    return envs, script.Agent(tuple(next_obs.shape[1:]), envs.num_actions, run_args).to(device), next_obs


# ---------------------------------------------------------------------------------------------------------
# --capture-video: pictures of the observations, and GIFs of them
# ---------------------------------------------------------------------------------------------------------
# A grid's cell takes the colour of its last set channel, c's being VIDEO_PALETTE[c % 10] (matplotlib's tab10), or
# black where none is set. Pictures are scaled up by a whole factor to at least VIDEO_SIZE pixels, above a caption
# strip; 70 ms a frame is about real time on Atari (60 frames a second, 4 a decision).
VIDEO_PALETTE = np.array([[31, 119, 180], [255, 127, 14], [44, 160, 44], [214, 39, 40], [148, 103, 189], [140, 86, 75],
                          [227, 119, 194], [127, 127, 127], [188, 189, 34], [23, 190, 207]], dtype=np.uint8)
VIDEO_SIZE, VIDEO_CAPTION, VIDEO_FRAME_MS = 160, 16, 70


def drawing(name, script, env_id):
    """How --capture-video draws the observations [N, ...] of the run's envs, draw(envs, obs) -> [N, H, W, 3] uint8:
    EnvPool's Atari frames, MinAtar's grids and the Ocean envs that have a grid (p3o_ocean.py's `grid`). Any other
    env is refused (exit 2) before anything is built."""
    ocean = import_script("p3o_ocean.py").OCEAN_ENVS
    if name == "p3o_ocean.py" or env_id.startswith("ocean/"):
        if hasattr(ocean.get(env_id.removeprefix("ocean/")), "grid"):
            return lambda envs, obs: grid_pictures(envs.grid(obs).cpu().numpy())
    elif env_id.startswith("MinAtar/"):  # the grid of channels the network sees
        return lambda envs, obs: grid_pictures(obs.cpu().numpy())
    elif env_id in script.atari_ids():
        return atari_pictures
    drawn = " and ".join(env for env, env_class in ocean.items() if hasattr(env_class, "grid"))
    refuse(f"--capture-video draws EnvPool's Atari games, MinAtar's and the Ocean env {drawn}, not {env_id} (it has no "
           "picture, or is Gymnasium's, whose rgb_array rendering is not wired in): evaluate it without "
           "--capture-video")


def atari_pictures(envs, obs):
    """The newest of the four stacked 84x84 frames the agent sees, grey. Returns [N, 84, 84, 3] uint8, a view of the
    grey frames: a long game's pictures stay at a byte a pixel."""
    grey = obs[:, -1].cpu().numpy()
    return np.broadcast_to(grey[..., None], (*grey.shape, 3))


def grid_pictures(grids):
    """Grids of channels (MinAtar's, squared's) as pictures, a colour a channel. Shapes: grids [N, C, H, W] (numpy,
    any dtype, set where non-zero). Returns [N, H, W, 3] uint8."""
    channels, lit = grids.shape[1], grids != 0
    top = np.where(lit.any(1), channels - lit[:, ::-1].argmax(1), 0)  # 1 + the last set channel, 0 where none
    colours = np.concatenate([np.zeros((1, 3), np.uint8), VIDEO_PALETTE[np.arange(channels) % len(VIDEO_PALETTE)]])
    return colours[top]


def record_frames(frames, envs, obs, recording, draw):
    """Append the picture of obs[i] to frames[i] for each env i that is recording (bool tensor [N]: its first episode
    still runs) and decides this step, which it does unless it spends the step on a reset (EnvPool, Gymnasium)."""
    deciding = recording.cpu().numpy()
    if envs.autoreset_next_step:
        deciding = deciding & ~np.asarray(envs.resetting)
    pictures = draw(envs, obs[torch.from_numpy(deciding).to(obs.device)])
    for i, picture in zip(np.flatnonzero(deciding), pictures):
        frames[i].append(picture)


def save_videos(episodes, folder, name):
    """Write each episode's pictures ({index: a list of [H, W, 3] uint8}) to {folder}/{name}-{index}.gif, a frame a
    picture, captioned with its decision's number ("7/120"). The caption keeps consecutive frames distinct: Pillow's
    encoder merges identical ones into one longer frame, and a frame must stay a decision. Returns the paths."""
    from PIL import Image, ImageDraw, ImageFont

    os.makedirs(folder, exist_ok=True)
    font, paths = ImageFont.load_default(), []
    for index, pictures in episodes.items():
        height, width = pictures[0].shape[:2]
        scale = -(-VIDEO_SIZE // max(height, width))

        def frame(t):
            picture = Image.fromarray(np.ascontiguousarray(pictures[t]))
            image = Image.new("RGB", (width * scale, height * scale + VIDEO_CAPTION), (40, 40, 40))
            image.paste(picture.resize((width * scale, height * scale), Image.Resampling.NEAREST))
            caption = f"{t + 1}/{len(pictures)}"
            ImageDraw.Draw(image).text((4, height * scale + 2), caption, fill=(255, 255, 255), font=font)
            return image

        paths.append(f"{folder}/{name}-{index}.gif")
        # a generator: Pillow keeps its own palette copy of each frame, a long game need not be held twice
        rest = (frame(t) for t in range(1, len(pictures)))
        frame(0).save(paths[-1], save_all=True, append_images=rest, duration=VIDEO_FRAME_MS, loop=0)
    return paths


if __name__ == "__main__":
    evaluate(tyro.cli(Args))
