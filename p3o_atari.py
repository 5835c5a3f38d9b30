# P3O on Atari through EnvPool (docs/algorithm.md; kernels/advantage.cu on a GPU): ppo_baseline.py with GAE replaced by
# a multi-horizon Gaussian critic, its loss and a precision-weighted advantage: mu and sigma per offset and the clock's
# table; the NLL and the window loss on a share of each minibatch, log_sigma outside the clip; the lambda-return
# targets, the tie gate and the weights. They sit in 14 blocks opened by `P3O:` comments and closed by `# end P3O`
# (`PPO:` in ppo_baseline.py): the flags, the maths, the head, ten in train, the refusals.
# Read top to bottom: Args, the advantage, the agent, train; the plumbing (envs, torchrun, checkpoints) is below.
"""Usage:
    python p3o_atari.py --horizon 128                                    # Breakout-v5, 10M steps
    python p3o_atari.py --env-id Pong-v5 --seed 2 --total-timesteps 200000 --horizon 32
    python p3o_atari.py --env-id ocean/delay --num-envs 256 --learning-rate 3e-3 --total-timesteps 1000000
    python evaluate.py runs/{run}/checkpoint.pt --capture-video          # plays the run: GIFs in runs/{run}/videos/
    tensorboard --logdir runs
"""
import difflib
import importlib
import math
import os
import random
import sys
import time
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, Optional

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
import tyro
from torch.distributions.categorical import Categorical
from torch.utils.tensorboard import SummaryWriter


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True`"""
    cuda: bool = True
    """if toggled, cuda will be enabled by default"""
    track: bool = False
    """if toggled, this experiment will be tracked with Weights and Biases"""
    wandb_project_name: str = "p3o"
    """the wandb's project name"""
    wandb_entity: Optional[str] = None
    """the entity (team) of wandb's project"""
    progress: bool = True
    """if toggled, a one-line progress display (steps, SPS, return, ETA) is printed during training"""
    save_interval: int = 25
    """write runs/{run_name}/checkpoint.pt every this many iterations and at the end (0: never)"""
    resume: Optional[str] = None
    """continue the run of this checkpoint: its args, run folder and curve (Atari, Gymnasium: new episodes)"""

    # Algorithm specific arguments
    env_id: str = "Breakout-v5"
    """an EnvPool Atari id, a discrete-action Gymnasium id (MinAtar/Breakout-v1, CartPole-v1; your own env as
    module.path:EnvName-v0, the module registering it) or ocean/NAME"""
    total_timesteps: int = 10000000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 8
    """the number of parallel game environments"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """Toggle learning rate annealing for policy and value networks"""
    num_minibatches: int = 4
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """Toggles advantages normalization"""
    clip_coef: float = 0.1
    """the surrogate clipping coefficient"""
    ent_coef: float = 0.01
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: Optional[float] = None
    """the target KL divergence threshold"""

    # P3O: the multi-horizon value head and the precision-weighted advantage, in place of GAE (docs/algorithm.md)
    horizon: int = 128
    """H, the horizon cap: the value head predicts the reward at each of the next H steps"""
    td_lambda: float = 0.8
    """lambda of the per-offset lambda-return, the advantage's targets (1: the rewards themselves)"""
    window_loss_coef: float = 0.1
    """coefficient of the window loss, the squared error of each decision's window sum (the trunk only)"""
    value_fraction: float = 0.5
    """the share of each minibatch's decisions the value loss reads"""
    clock: bool = True
    """if toggled, mu adds a table over the episode's clock and the offset"""
    kernel: Literal["auto", "cuda", "torch"] = "auto"
    """the advantage: the CUDA kernel where a GPU is there (auto), forced, or the PyTorch twin"""
    # end P3O

    # Ocean env options, for --env-id ocean/NAME (each env reads the ones it needs)
    delay: int = 4
    """ocean/delay: steps between a decision and its reward"""
    forage_distance: int = 16
    """ocean/forage: distance to the large reward"""
    password_length: int = 5
    """ocean/password: number of bits to guess"""
    reward_noise: float = 0.0
    """ocean/delay, ocean/spread: the std of Gaussian noise added to every reward (mean 0)"""
    spread: int = 8
    """ocean/spread: steps over which each decision's reward is paid, in equal parts"""
    choice_distance: int = 16
    """ocean/choice: steps between choosing the far reward and its payment"""
    choice_near_reward: float = 0.7
    """ocean/choice: the near reward, paid at once (the far one is 1.0): 0.9 leaves a margin of 10%"""

    # to be filled in runtime
    batch_size: int = 0
    """the batch size (computed in runtime)"""
    minibatch_size: int = 0
    """the mini-batch size (computed in runtime)"""
    num_iterations: int = 0
    """the number of iterations (computed in runtime)"""


# ---------------------------------------------------------------------------------------------------------
# ALGO LOGIC
# ---------------------------------------------------------------------------------------------------------
# P3O: the value head's targets and the advantage (docs/algorithm.md): p3o_advantage, twin of kernels/advantage.cu
MIN_SIGMA, MAX_SIGMA = math.exp(-10), math.exp(10)  # log_sigma's clamp: finite weights (w is scale-free), no tuning
# --clock: a table c[s, j] added to mu, so the critic can tell where an episode whose end is set by time ends. Rows:
# episode steps 0 .. 254, then one for every later step. Each minibatch moves a cell CLOCK_RATE * n / (n + CLOCK_PRIOR)
# of the way to the mean residual of its n decisions there: 0.01 to 0.04 on the Ocean probes (tens a cell), 0.0015 on
# Breakout (one or none), so a rare cell averages many batches (CLOCK_PRIOR = 4 stalled Breakout; ablations.md): fixed.
CLOCK_ROWS = 256
CLOCK_RATE, CLOCK_PRIOR = 0.1, 64.0
# Offsets with tie_z above this keep their rewards as targets: three standard errors (z ~ |N(0, 1)| where nothing ties).
TIE_Z = 3.0


def episode_ends(terminals):
    """end[t, n]: the step of the first terminal at or after t, the last step of t's episode (T if it does not end
    inside the rollout): a running minimum from the end. Shapes: terminals [T, N]. Returns [T, N] int64."""
    T = terminals.shape[0]
    steps = torch.arange(T, device=terminals.device)
    return torch.where(terminals != 0, steps[:, None], T).flip(0).cummin(0).values.flip(0)


def episode_inside(end, horizon):
    """How many of the H offsets ahead of each decision lie inside its episode and the rollout: up to and including
    its terminal, or up to the rollout's last step where the episode does not end inside it. Shapes: end [T, N], from
    episode_ends. Returns [T, N] int64, at most H."""
    steps = torch.arange(end.shape[0], device=end.device)
    return (end.clamp(max=end.shape[0] - 1) - steps[:, None] + 1).clamp(max=horizon)


def episode_windows(rewards, terminals, horizon, tail_mu=None):
    """The rewards ahead of every decision, and how far ahead they are known (its window). ahead[t, n, j] is the reward
    j steps after decision t: rewards[t + j, n] inside the rollout, then the bootstrap predictions tail_mu[n, t + j - T]
    (zeros without tail_mu), and 0 after the terminal of t's episode, inside the rollout and beyond it (a copy). k[t, n]
    counts the offsets whose reward is known: H where the episode ends inside the rollout or tail_mu continues it, else
    up to the rollout's last step (T - t, at most H). Windows never cross envs.
    Shapes: rewards, terminals [T, N]; tail_mu [N, H] or None. Returns ahead [T, N, H] and k [T, N] int64."""
    T, N = rewards.shape
    beyond = tail_mu[:, : horizon - 1] if tail_mu is not None else rewards.new_zeros(N, horizon - 1)
    # Unfolded along time within each env, so the offsets j of one decision are adjacent in memory.
    ahead = torch.cat([rewards.T, beyond], dim=1).unfold(1, horizon, 1).transpose(0, 1)  # [T, N, H], a view
    end = episode_ends(terminals)
    k = torch.where((end < T) | (tail_mu is not None), horizon, episode_inside(end, horizon))
    steps = torch.arange(T, device=rewards.device)
    last = torch.where(end < T, end - steps[:, None], horizon)  # the offset of t's terminal (H: none in the rollout)
    return torch.where(torch.arange(horizon, device=rewards.device) > last[..., None], 0.0, ahead), k


def window_sum_variance(ahead, valid):
    """The variance of the window sums (a decision's known rewards ahead, summed) over the batch's decisions (valid,
    bool): the window loss's unit where it is above 1. `ahead` is episode_windows' without a tail, 0 past each window.
    Shapes: ahead [T, N, H]; valid [T, N]. Returns a 0-d tensor."""
    sums = ahead.sum(-1)
    return masked_mean(sums.square(), valid) - masked_mean(sums, valid).square()  # torchrun: every rank's decisions


def window_mu(hidden, head, window):
    """mu summed over each decision's first `window` offsets, through the head's weights held fixed, so the window
    loss shapes the trunk's features only: the features times the sum of the head's first w rows, plus the sum of its
    first w biases. Shapes: hidden [B, F]; window [B] int64, at most H. Returns [B]."""
    rows = nn.functional.pad(head.weight.detach().cumsum(0), (0, 0, 1, 0))  # row w: the sum of the head's first w rows
    biases = nn.functional.pad(head.bias.detach().cumsum(0), (1, 0))
    return (hidden * rows.index_select(0, window)).sum(1) + biases.index_select(0, window)


def step_clock_table(table, clocks, residual, in_window):
    """--clock, one minibatch's step: each cell c[s, j] moves by CLOCK_RATE * sum / (count + CLOCK_PRIOR), the sum and
    count of the residuals in the window (reward less mu, the table's part included) j steps after the minibatch's
    decisions made s steps into their episode: toward the cell's mean residual, less far where few decisions reach it.
    Shapes: table [CLOCK_ROWS, H]; clocks [B]; residual, in_window [B, H]. Changes table in place."""
    rows = clocks.clamp(0, CLOCK_ROWS - 1)
    sums = torch.zeros_like(table).index_add_(0, rows, residual)
    counts = torch.zeros_like(table).index_add_(0, rows, in_window.float())
    sums, counts = all_sum(sums, counts)  # torchrun: every rank's minibatch i is a part of the global minibatch i
    table += CLOCK_RATE * sums / (counts + CLOCK_PRIOR)


def precision(sigma):
    """omega[j] = 1 / sigma[j]^2, sigma clamped to [e^-10, e^10]."""
    sigma = sigma.clamp(MIN_SIGMA, MAX_SIGMA)
    return 1.0 / (sigma * sigma)


def log_weight_curve(writer, sigma, global_step):
    """The learned discount curve as a TensorBoard histogram: bucket j holds w[j], the weight of the reward j steps
    ahead (omega over its max), so the histogram view shows the curve change over training."""
    weights = precision(sigma.detach().double().cpu())
    weights = weights / weights.max()
    offsets = torch.arange(len(weights), dtype=torch.float64)
    writer.add_histogram_raw("charts/weight_curve", min=0.0, max=float(len(weights)), num=float(weights.sum()),
                             sum=float((offsets * weights).sum()), sum_squares=float((offsets**2 * weights).sum()),
                             bucket_limits=(offsets + 1).tolist(), bucket_counts=weights.tolist(),
                             global_step=global_step)


def log_p3o_statistics(writer, global_step, window_explained_var, value_nll, window_loss, window_var, advantages, real,
                       tied, agent, sigma):
    """P3O's tags beside PPO's: how well mu's window sums are predicted, the value NLL and the window loss, the
    advantage's size over the real decisions, the tied offsets, the learned spreads and the weight curve."""
    writer.add_scalar("losses/window_explained_variance", window_explained_var, global_step)
    writer.add_scalar("losses/value_nll", value_nll.item(), global_step)
    writer.add_scalar("losses/window_loss", window_loss.item(), global_step)
    writer.add_scalar("losses/window_var", window_var.item(), global_step)
    writer.add_scalar("charts/advantage_mean", advantages[real].mean().item(), global_step)
    writer.add_scalar("charts/advantage_std", advantages[real].std().item(), global_step)
    writer.add_scalar("charts/tied_offsets", tied.sum().item(), global_step)
    writer.add_histogram("charts/log_sigma", agent.log_sigma.detach(), global_step)
    log_weight_curve(writer, sigma, global_step)


def p3o_advantage(rewards, terminals, mu, sigma, tail_mu, lam, tied=None):
    """The P3O advantage: A[t, n] = sum_j w[j] * (y[t, n, j] - mu[t, n, j]), w = omega / max(omega), with
    omega[j] = 1 / sigma[j]^2 the precision of the prediction j steps ahead (sigma clamped to [e^-10, e^10], the range
    training keeps it in, so sigma = 0 gives finite results).

    y is the per-offset lambda-return (fixed-horizon TD(lambda), De Asis et al. 2020): each reward ahead as seen one
    step later, bootstrapped there by the critic's own prediction of it, as GAE bootstraps at every step:
        y[t, 0] = rewards[t]
        y[t, j] = (1 - lam) * mu[t + 1, j - 1] + lam * y[t + 1, j - 1]   for j >= 1, while t's episode runs at t + 1
        y[t, j] = 0                                                      for j >= 1 where step t ended the episode
        y[T] = tail_mu, the predictions at the bootstrap state.
    lam = 1 gives the rewards ahead themselves (episode_windows'). So do the offsets where tied[j] is set: the action
    measurably moves that reward (tie_z), and what it alone moves no state shows, so no bootstrap can carry it.
    Shapes: rewards, terminals [T, N]; mu [T, N, H]; sigma, tied [H]; tail_mu [N, H]. Returns [T, N] float32."""
    T, N, H = mu.shape
    omega = precision(sigma)
    y = torch.empty_like(mu)
    next_mu, next_y = tail_mu, tail_mu
    for t in reversed(range(T)):  # one backward pass, like GAE's, carrying an H-vector per env
        y[t, :, 0] = rewards[t]
        y[t, :, 1:] = (1.0 - terminals[t, :, None]) * ((1.0 - lam) * next_mu[:, :-1] + lam * next_y[:, :-1])
        next_mu, next_y = mu[t], y[t]
    if tied is not None and tied.any():
        y = torch.where(tied, episode_windows(rewards, terminals, H, tail_mu)[0], y)
    return (y - mu) @ omega / omega.max()


def tie_z(rewards, terminals, mu, tail_mu, score, valid):
    """z[j] = |corr(e[j], score)| * sqrt(n) over the batch's n decisions (valid), an uncentred corr, sum(e score) /
    sqrt(sum(e^2) sum(score^2)): how surely the action moves the reward j steps ahead. e is the rewards ahead (with the
    tail, a block of envs at a time: on the CPU every fresh page costs a fault) less mu, score the centred log-prob.
    Shapes: rewards, terminals, score, valid [T, N]; mu [T, N, H]; tail_mu [N, H]. Returns z [H]."""
    T, N, H = mu.shape
    score = torch.where(valid, score, 0.0)
    products, squares = mu.new_zeros(H), mu.new_zeros(H)
    block = max(1, min(N, 2**21 // (T * H)))
    for n in range(0, N, block):
        envs = slice(n, n + block)
        ahead = episode_windows(rewards[:, envs], terminals[:, envs], H, tail_mu[envs])[0]
        residual = ahead.sub_(mu[:, envs]).reshape(-1, H)
        products += residual.T @ score[:, envs].reshape(-1)
        squares += residual.square_().T @ valid[:, envs].reshape(-1).float()
    # torchrun: every rank's
    products, squares, score_squares, count = all_sum(products, squares, score.square().sum(), valid.sum())
    corr = products / (squares * score_squares).sqrt().clamp(min=1e-30)
    return corr.abs() * count.sqrt()


def select_advantage(kernel, device):
    """The advantage function for this run, and one line that says which one it is."""
    if kernel == "torch" or (kernel == "auto" and device.type != "cuda"):
        return p3o_advantage, f"advantage: PyTorch twin p3o_advantage on {device.type} (kernel={kernel})"
    try:
        from kernels.advantage import load_cuda_advantage  # advantage.cu through CuPy, beside the kernel

        return load_cuda_advantage(), "advantage: CUDA kernel kernels/advantage.cu through CuPy"
    except Exception as error:  # CuPy missing, no driver, compile error: the twin computes the same thing
        if kernel == "cuda":
            raise SystemExit(f"{Path(__file__).name}: error: --kernel cuda, but the CUDA kernel is unavailable: "
                             f"{error}")
        unavailable = f"CUDA kernel unavailable: {type(error).__name__}: {error}"
        return p3o_advantage, f"advantage: PyTorch twin p3o_advantage ({unavailable})"
# end P3O


# ---------------------------------------------------------------------------------------------------------
# The agent
# ---------------------------------------------------------------------------------------------------------
def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def make_network(obs_shape):
    """The trunk for observations of this shape (channels first), its width and the scale of its inputs; ValueError
    where none fits."""
    if len(obs_shape) == 3 and obs_shape[1:] == (84, 84):  # EnvPool's stacked frames: the Nature CNN (Mnih et al. 2015)
        return nn.Sequential(
            layer_init(nn.Conv2d(obs_shape[0], 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        ), 512, 255.0
    if len(obs_shape) == 3 and 3 <= min(obs_shape[1:]) and max(obs_shape[1:]) <= 32:
        # a small grid of channels (MinAtar's 10 x 10): the MinAtar paper's network (Young & Tian 2019), one 16-filter
        # 3x3 convolution and 128 units
        return nn.Sequential(
            layer_init(nn.Conv2d(obs_shape[0], 16, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(16 * (obs_shape[1] - 2) * (obs_shape[2] - 2), 128)),
            nn.ReLU(),
        ), 128, 1.0
    if len(obs_shape) == 1:  # a vector: the Ocean envs' MLP
        return nn.Sequential(
            layer_init(nn.Linear(obs_shape[0], 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
        ), 64, 1.0
    raise ValueError(f"no network here fits observations of shape {obs_shape}: these scripts take 84x84 frames, "
                     "grids of channels up to 32x32 or vectors (wrap the env in gymnasium.wrappers.FlattenObservation)")


class Agent(nn.Module):
    def __init__(self, obs_shape, num_actions, args):
        super().__init__()
        self.network, width, self.obs_scale = make_network(obs_shape)
        self.actor = layer_init(nn.Linear(width, num_actions), std=0.01)
        # P3O: mu[j] predicts the reward j steps ahead; one learned spread per offset, shared by all states.
        # Zero weights, so every offset starts at mu = 0 whatever H (an orthogonal init's rows shrink as H grows).
        self.critic = layer_init(nn.Linear(width, args.horizon), std=0)
        self.log_sigma = nn.Parameter(torch.zeros(args.horizon))
        # --clock: c[s, j] added to mu[j] for a decision s steps into its episode (step_clock_table steps it)
        self.register_buffer("clock_table", torch.zeros(CLOCK_ROWS, args.horizon) if args.clock else None)

    def get_features(self, x):
        """The trunk's features [B, F]: the update's window loss reads them beside mu."""
        return self.network(x.float() / self.obs_scale)

    def clock_mu(self, clock):
        """--clock: the table's part of mu at decisions `clock` steps into their episodes, [*clock.shape, H] (or 0)."""
        if self.clock_table is None:
            return 0.0
        return self.clock_table.index_select(0, clock.clamp(0, CLOCK_ROWS - 1).reshape(-1)).view(*clock.shape, -1)

    def mu(self, hidden, clock):
        """mu [B, H], the rewards ahead as predicted: the head's, plus --clock's table at the decisions' `clock`."""
        return self.critic(hidden) + self.clock_mu(clock)

    def get_action_and_value(self, x, clock, action=None, hidden=None, value_rows=None):
        hidden = self.network(x.float() / self.obs_scale) if hidden is None else hidden  # the update passes its own
        logits = self.actor(hidden)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        # mu of the first value_rows (all by default), whose clocks are `clock`
        return action, probs.log_prob(action), probs.entropy(), self.mu(hidden[:value_rows], clock)
    # end P3O

    def get_logits(self, x):
        return self.actor(self.network(x.float() / self.obs_scale))


def masked_mean(x, mask):
    """The mean of x where mask is set (torchrun: over every rank's entries; the gradient is this rank's share)."""
    total, count = all_sum((x * mask).sum(), mask.sum())
    return total / count.clamp(min=1)


def explained_variance(y, residual, mask):
    """1 - Var(residual) / Var(y) over the entries where mask (bool) is set (torchrun: every rank's); nan where y does
    not vary there."""
    count = all_sum(mask.sum()).clamp(min=1)

    def variance(x):
        x = torch.where(mask, x, 0.0).reshape(-1)
        squares, total = all_sum(torch.dot(x, x), x.sum())
        return squares / count - (total / count) ** 2

    var_y = variance(y)
    return float("nan") if not var_y > 0 else float(1 - variance(residual) / var_y)


def train(args, checkpoint=None):
    """Train on one env, or continue a checkpoint's run; returns its score (of the games that ended in its last tenth
    of iterations), the mean return of its last 20 games and the SPS."""
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = max(1, args.total_timesteps // args.batch_size)
    # torchrun (data parallel, as nanoGPT's train.py): rank r steps num_envs / world_size of the envs, seeded from seed
    # + r x that share (EnvPool and Gymnasium seed env i with seed + i, so no two ranks' envs share a seed), and its
    # minibatch i is its share of the global minibatch i: every statistic and the gradient are summed over the ranks
    # (all_sum). Rank 0 alone logs, prints and saves. A plain run is rank 0 of 1.
    rank, world_size = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    num_envs, batch_size = args.num_envs // world_size, args.batch_size // world_size  # this rank's
    minibatch_size = args.minibatch_size // world_size
    # a new run never writes into another run's folder; a resumed one continues its own
    run_name = f"{args.env_id.replace('/', '_').replace(':', '_')}__{args.exp_name}__{args.seed}__{int(time.time())}"
    run_name = checkpoint["run_name"] if checkpoint else claim_run_folder(run_name) if rank == 0 else None
    writer = open_writer(args, run_name, checkpoint, rank)

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic

    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup
    envs = make_envs(replace(args, num_envs=num_envs, seed=args.seed + rank * num_envs), device)
    next_obs = envs.reset()
    obs_shape = tuple(next_obs.shape[1:])
    if rank == 0:
        ranks = f" x {world_size} ranks" if world_size > 1 else ""
        print(f"{args.env_id}: {Path(__file__).name} on {device.type}{ranks}; runs/{run_name}", flush=True)

    agent = Agent(obs_shape, envs.num_actions, args).to(device)
    if rank > 0:  # every rank built the same parameters from args.seed; from here on each draws its own random numbers
        torch.manual_seed(args.seed + rank)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # ALGO Logic: Storage setup
    obs = torch.zeros((args.num_steps, num_envs) + obs_shape, dtype=next_obs.dtype, device=device)
    actions = torch.zeros((args.num_steps, num_envs), dtype=torch.long, device=device)
    logprobs = torch.zeros((args.num_steps, num_envs), device=device)
    rewards = torch.zeros((args.num_steps, num_envs), device=device)
    terminals = torch.zeros((args.num_steps, num_envs), device=device)
    valid = torch.zeros((args.num_steps, num_envs), device=device)
    episode_returns = torch.zeros((args.num_steps, num_envs), device=device)
    episode_lengths = torch.zeros((args.num_steps, num_envs), dtype=torch.int64, device=device)
    episode_scores = torch.zeros((args.num_steps, num_envs), device=device)
    # P3O: H predicted rewards per decision, and the advantage: the CUDA kernel, or the twin where there is no GPU
    mus = torch.zeros((args.num_steps, num_envs, args.horizon), device=device)
    clocks = torch.zeros((args.num_steps, num_envs), dtype=torch.long, device=device)  # each decision's episode step
    entropies = torch.zeros((args.num_steps, num_envs), device=device)  # with the log-probs, the tie's score
    offsets = torch.arange(args.horizon, device=device)
    advantage_fn, advantage_note = select_advantage(args.kernel, device)
    if rank == 0:
        print(advantage_note, flush=True)
    # end P3O

    # TRY NOT TO MODIFY: start the game
    global_step, start_iteration = 0, 1
    next_valid = torch.ones(num_envs, device=device)
    # the last 20 games' returns (CleanRL's average), and each iteration's sum and count of its games' scores
    avg_returns, iteration_scores = deque(maxlen=20), []
    if checkpoint:  # continue where it left: same parameters and random numbers (and envs, but Atari's, Gymnasium's)
        global_step, start_iteration, next_obs, next_valid = resume(checkpoint, rank, agent, optimizer, envs, next_obs,
                                                                    next_valid, avg_returns, iteration_scores)
    start_time, start_step = time.time(), global_step
    timer = PhaseTimer(device)

    def snapshot(iteration, global_step):  # what --resume needs to continue the run after `iteration` (every rank)
        return checkpoint_state(args, run_name, iteration, global_step, agent, optimizer, envs, next_obs, next_valid,
                                [list(avg_returns), iteration_scores])

    for iteration in range(start_iteration, args.num_iterations + 1):
        # Annealing the rate if instructed to do so.
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            lrnow = frac * args.learning_rate
            optimizer.param_groups[0]["lr"] = lrnow

        for step in range(0, args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs
            valid[step] = next_valid

            # ALGO LOGIC: action logic
            with torch.no_grad():
                # P3O: store the predicted rewards and each decision's clock, the env's count of the episode's decisions
                clocks[step] = torch.as_tensor(envs.episode_length, device=device)
                action, logprob, entropy, mus[step] = agent.get_action_and_value(next_obs, clocks[step])
                entropies[step] = entropy
                # end P3O
            actions[step] = action
            logprobs[step] = logprob

            # TRY NOT TO MODIFY: execute the game and log data.
            next_obs, reward, terminations, truncations, infos = envs.step(action)
            next_done = (terminations | truncations).float()
            rewards[step] = reward
            terminals[step] = next_done
            # The step after a done is a decision only for envs that reset within the done step.
            next_valid = 1.0 - next_done * envs.autoreset_next_step
            episode_returns[step] = infos["episode_return"]
            episode_lengths[step] = infos["episode_length"]
            episode_scores[step] = infos["score"]
        timer.lap("rollout")

        # P3O: the advantage, with no gamma: a weight per offset, learned
        with torch.no_grad():
            real = valid.bool()
            # The rewards ahead, what the critic is fitted to: inside the rollout (never the tail), 0 past the terminal.
            rewards_ahead, windows = episode_windows(rewards, terminals, args.horizon)
            windows = windows * real
            window_var = window_sum_variance(rewards_ahead, real)  # the window loss's unit, where above 1
            # Of those, the pairs inside the episode: up to its terminal, or up to the rollout's end where it has none.
            ends = episode_ends(terminals)
            inside = episode_inside(ends, args.horizon) * real
            sigma = agent.log_sigma.clamp(-10, 10).exp()
            tail_mu = agent.mu(agent.get_features(next_obs), torch.as_tensor(envs.episode_length, device=device))
            # The targets are the lambda-returns, bootstrapped at every step, except at the offsets whose residual
            # the action measurably moves (z > TIE_Z): those keep their rewards. Autoreset steps are not decisions.
            tied = tie_z(rewards, terminals, mus, tail_mu, logprobs + entropies, real) > TIE_Z
            advantages = advantage_fn(rewards, terminals, mus, sigma, tail_mu, args.td_lambda, tied) * valid
        # end P3O
        if bad := first_nonfinite(rewards=rewards, advantages=advantages):
            stop_nonfinite(f"{bad} in the advantage", snapshot(iteration - 1, global_step - args.batch_size), writer,
                           rank)
        timer.lap("advantage")

        # flatten the batch
        b_obs = obs.reshape((-1,) + obs_shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_valid = valid.reshape(-1)
        # P3O: the rewards ahead and how many of them each decision knows
        b_rewards_ahead = rewards_ahead.reshape(-1, args.horizon)  # a view: a decision's H rewards ahead are one row
        b_windows = windows.reshape(-1)
        b_clocks = clocks.reshape(-1)
        b_inside = inside.reshape(-1)
        value_rows = max(1, round(minibatch_size * args.value_fraction))  # the value loss's share of a minibatch
        # end P3O

        # Optimizing the policy and value network
        clipfracs, grad_norms = [], []  # grad_norms: before the clip, to see how often it bites
        for epoch in range(args.update_epochs):
            b_inds = torch.randperm(batch_size, device=device)
            for start in range(0, batch_size, minibatch_size):
                end = start + minibatch_size
                mb_inds = b_inds[start:end]
                mb_valid = b_valid[mb_inds]
                # index_select: on the CPU, tensor[indices] is over ten times slower for the large rows
                # P3O: the trunk's features (the window loss reads them too) and mu of the value loss's decisions
                v_inds = mb_inds[:value_rows]  # the first value_rows of the minibatch's random order
                hidden = agent.get_features(b_obs.index_select(0, mb_inds))
                _, newlogprob, entropy, newmu = agent.get_action_and_value(
                    None, b_clocks[v_inds], b_actions[mb_inds], hidden=hidden, value_rows=value_rows)
                # end P3O
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    # calculate approx_kl http://joschu.net/blog/kl-approx.html
                    old_approx_kl = masked_mean(-logratio, mb_valid)
                    approx_kl = masked_mean((ratio - 1) - logratio, mb_valid)
                    clipfracs += [masked_mean(((ratio - 1.0).abs() > args.clip_coef).float(), mb_valid)]

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    adv_mean = masked_mean(mb_advantages, mb_valid)
                    adv_std = masked_mean((mb_advantages - adv_mean) ** 2, mb_valid).sqrt()
                    mb_advantages = (mb_advantages - adv_mean) / (adv_std + 1e-8)

                # Policy loss
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = masked_mean(torch.max(pg_loss1, pg_loss2), mb_valid)

                # P3O: value loss, the Gaussian NLL of the window's rewards under N(mu[j], sigma[j]^2), summed and
                # divided by the pairs inside the episodes: zeros past a terminal must not dilute it as H grows
                log_sigma = agent.log_sigma.clamp(-10, 10)
                mb_rewards_ahead = b_rewards_ahead.index_select(0, v_inds)
                window = b_windows[v_inds]
                in_window = offsets < window[:, None]
                residual = torch.where(in_window, mb_rewards_ahead - newmu, 0.0)
                counts = in_window.sum(0)
                nll = (0.5 * torch.exp(-2 * log_sigma) * residual.square().sum(0) + log_sigma * counts).sum()
                nll, inside_pairs = all_sum(nll, b_inside[v_inds].sum())
                value_nll = nll / inside_pairs.clamp(min=1)  # torchrun: over every rank's pairs
                # plus the squared error of the window's sum (--window-loss-coef), through the head's weights held
                # fixed: it shapes the trunk's features and leaves each offset's fit to the NLL
                clock_mu = agent.clock_mu(b_clocks[v_inds])  # the window's rewards less the table's part: the head's
                window_sum = torch.where(in_window, mb_rewards_ahead - clock_mu, 0.0).sum(1)
                window_residual = window_sum - window_mu(hidden[:value_rows], agent.critic, window)
                window_loss = 0.5 * masked_mean(window_residual.square(), b_valid[v_inds]) / window_var.clamp(min=1.0)
                v_loss = value_nll + args.window_loss_coef * window_loss
                # end P3O

                entropy_loss = masked_mean(entropy, mb_valid)
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                optimizer.zero_grad()
                loss.backward()
                # torchrun: each rank's loss is its share of the global minibatch's (masked_mean divides by the global
                # counts), so the sum of the ranks' gradients is the global minibatch's gradient
                grads = all_sum(*[parameter.grad for parameter in agent.parameters()])
                for parameter, grad in zip(agent.parameters(), grads):
                    parameter.grad = grad
                # P3O: the clip leaves log_sigma out: H per-offset scales (Adam bounds their steps anyway), whose
                # gradient's norm would grow with H and make the clip's bite on the policy's step depend on H
                clipped = [p for name, p in agent.named_parameters() if name != "log_sigma"]
                grad_norm = nn.utils.clip_grad_norm_(clipped, args.max_grad_norm)
                # end P3O
                grad_norms += [grad_norm]
                if bad := first_nonfinite(loss=loss, grad_norm=grad_norm):
                    stop_nonfinite(f"{bad} in the update (epoch {epoch}, minibatch {start // minibatch_size})",
                                   snapshot(iteration - 1, global_step - args.batch_size), writer, rank)
                optimizer.step()
                # P3O: the clock's table follows what mu still misses on these decisions
                if agent.clock_table is not None:
                    step_clock_table(agent.clock_table, b_clocks[v_inds], residual.detach(), in_window)
                # end P3O

            if args.target_kl is not None and approx_kl > args.target_kl:
                break
        if bad := first_nonfinite(**dict(agent.named_parameters())):
            # finite loss and gradients, yet the step overflowed: the last checkpoint is the last good state
            writer.close()
            sys.exit(f"{Path(__file__).name}: error: non-finite parameter {bad} after the update of iteration "
                     f"{iteration}; last good state: runs/{run_name}/checkpoint.pt")
        timer.lap("update")

        with torch.no_grad():
            # P3O: explained variance of the rollout's predictions (made before this update, as PPO's) of each known
            # reward ahead, and of their window sums; over 32 of the envs at most
            envs_read = slice(None, None, max(1, args.num_envs // 32))
            ahead_read, window_read = rewards_ahead[:, envs_read], windows[:, envs_read]
            residuals_read = ahead_read - mus[:, envs_read]  # the head's errors, made before this update
            in_window = offsets < window_read[..., None]
            explained_var = explained_variance(ahead_read, residuals_read, in_window)
            window_sums = [torch.where(in_window, x, 0.0).sum(-1) for x in (ahead_read, residuals_read)]
            window_explained_var = explained_variance(*window_sums, window_read > 0)
            # end P3O
            ended = episode_lengths > 0
            finished = list(zip(*[x[ended].tolist() for x in (episode_returns, episode_lengths, episode_scores)]))
            finished = sum(all_gather(finished), [])  # torchrun: every rank's games
        avg_returns.extend(episode_return for episode_return, _, _ in finished)
        iteration_scores.append((sum(score for _, _, score in finished), len(finished)))

        # TRY NOT TO MODIFY: record rewards for plotting purposes
        sps = int((global_step - start_step) / (time.time() - start_time))
        if finished:
            writer.add_scalar("charts/episodic_return", np.mean([ret for ret, _, _ in finished]), global_step)
            writer.add_scalar("charts/avg_episodic_return", np.mean(avg_returns), global_step)
            writer.add_scalar("charts/episodic_length", np.mean([length for _, length, _ in finished]), global_step)
            writer.add_scalar("charts/score", np.mean([score for _, _, score in finished]), global_step)
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", torch.stack(clipfracs).mean().item(), global_step)
        writer.add_scalar("losses/grad_norm", torch.stack(grad_norms).mean().item(), global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("charts/SPS", sps, global_step)
        # P3O: how well mu's window sums are predicted, the value NLL, the advantage's size, and the weight curve
        log_p3o_statistics(writer, global_step, window_explained_var, value_nll, window_loss, window_var, advantages,
                           real, tied, agent, sigma)
        # end P3O
        for phase, seconds in timer.totals.items():
            writer.add_scalar(f"perf/{phase}_fraction", seconds / max(timer.total, 1e-9), global_step)
        if args.progress and rank == 0:
            show_progress(args, global_step, sps, avg_returns, iteration, start_iteration, start_time)
        timer.lap("log")
        if args.save_interval and (iteration % args.save_interval == 0 or iteration == args.num_iterations):
            state = snapshot(iteration, global_step)  # every rank: it gathers the ranks' envs
            if rank == 0:
                save_checkpoint(f"runs/{run_name}/checkpoint.pt", state)
            timer.lap("checkpoint")

    close_writer(writer, args, rank)
    # the run's score: of the games that ended in its last tenth of iterations (at least its last one)
    last = iteration_scores[-max(1, len(iteration_scores) // 10) :]
    games = sum(count for _, count in last)
    score = sum(total for total, _ in last) / games if games else float("nan")
    solved = None if envs.solved_score is None else score >= envs.solved_score  # the Ocean envs' bar
    mean_return = float(np.mean(avg_returns)) if avg_returns else float("nan")
    sps = int((global_step - start_step) / (time.time() - start_time))
    return {"env": args.env_id, "score": score, "solved": solved, "return": mean_return, "episodes": len(avg_returns),
            "steps": global_step, "SPS": sps, "phases": dict(timer.totals), "run": run_name}


# ---------------------------------------------------------------------------------------------------------
# Plumbing. Everything below serves train() and the command line, none of it the algorithm (evaluate.py plays runs)
# ---------------------------------------------------------------------------------------------------------
# Env families: EnvPool Atari, Gymnasium (MinAtar, ...), and the Ocean envs of p3o_ocean.py
# ---------------------------------------------------------------------------------------------------------
class VectorEnvs:
    """EnvPool's and Gymnasium's vector envs in the Ocean envs' interface: torch tensors on the model's device in and
    out, and `info` with the return and length (in decisions) of each episode where it ended, zeros elsewhere. Both
    spend the step after a done on the reset: that step ignores its action, pays 0 and is no decision."""

    autoreset_next_step = True
    solved_score = None  # no score marks a game solved

    def __init__(self, envs, num_envs, device, num_actions):
        self.envs, self.num_envs, self.device, self.num_actions = envs, num_envs, device, num_actions
        self.episode_return = np.zeros(num_envs, dtype=np.float32)
        self.episode_length = np.zeros(num_envs, dtype=np.int64)
        self.resetting = np.zeros(num_envs, dtype=bool)

    def observation(self, obs):
        return torch.from_numpy(obs).to(self.device)

    def started(self, obs):
        """reset's end: every env's episode starts afresh."""
        self.episode_return[:] = 0
        self.episode_length[:] = 0
        self.resetting[:] = False
        return self.observation(obs)

    def state_dict(self):
        return None  # neither EnvPool nor Gymnasium can save its envs: a resumed run starts new episodes

    def stepped(self, obs, reward, terminated, truncated, raw_reward, ended):
        """step's end: count the step into each env's running episode (its raw reward, and a decision unless it is a
        reset step), report the episodes that `ended` there, which then start afresh, and hand the step on."""
        self.episode_return += raw_reward
        self.episode_length += ~self.resetting  # reset steps are not decisions
        episode_return = np.where(ended, self.episode_return, 0.0).astype(np.float32)
        episode_length = np.where(ended, self.episode_length, 0)
        self.episode_return[ended] = 0
        self.episode_length[ended] = 0
        self.resetting = terminated | truncated
        reward, terminated, truncated, episode_return, episode_length = (
            torch.from_numpy(x).to(self.device)
            for x in (reward.astype(np.float32), terminated, truncated, episode_return, episode_length)
        )
        # the score is the raw return (an Atari game's score)
        info = {"episode_return": episode_return, "episode_length": episode_length, "score": episode_return}
        return self.observation(obs), reward, terminated, truncated, info


class AtariEnvs(VectorEnvs):
    """EnvPool's Atari. Training episodes end at each lost life (`episodic_life`) and see clipped rewards; `info`
    reports a game's raw score and its length in decisions where the game ended, counted afresh after a game over
    and after a truncation alike."""

    def __init__(self, env_id, num_envs, device, seed):
        import envpool

        envs = envpool.make(env_id, env_type="gymnasium", num_envs=num_envs, episodic_life=True, reward_clip=True,
                            seed=seed)
        super().__init__(envs, num_envs, device, envs.action_space.n)

    def reset(self):
        return self.started(self.envs.reset()[0])

    def step(self, action):
        obs, reward, terminated, truncated, info = self.envs.step(action.cpu().numpy())
        # the raw score, not the clipped reward; a game ends at a game over or a truncation, not at each lost life
        game_over = info["terminated"].astype(bool) | truncated
        return self.stepped(obs, reward, terminated, truncated, info["reward"], game_over)


class GymnasiumEnvs(VectorEnvs):
    """Any Gymnasium env with a discrete action space (MinAtar's games, CartPole, ...), through Gymnasium's
    synchronous vector env (env i seeded with --seed + i) and its next-step autoreset. Rewards are the env's own,
    unclipped, and an episode is the env's episode. Grids and images come height x width x channels and are handed
    on channels first, as EnvPool's frames are."""

    def __init__(self, env_id, num_envs, device, seed):
        gym = import_gymnasium(env_id)
        autoreset = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}
        envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync", vector_kwargs=autoreset)
        super().__init__(envs, num_envs, device, int(envs.single_action_space.n))
        self.seed = seed

    @staticmethod
    def observation_shape(space):
        """The shape the network sees: channels first where the env gives height x width x channels."""
        shape = tuple(space.shape or ())
        return shape[-1:] + shape[:-1] if len(shape) == 3 else shape

    def observation(self, obs):
        obs = np.moveaxis(obs, -1, 1) if obs.ndim == 4 else obs
        return torch.from_numpy(np.ascontiguousarray(obs)).to(self.device)

    def reset(self):
        return self.started(self.envs.reset(seed=self.seed)[0])

    def step(self, action):
        obs, reward, terminated, truncated, _ = self.envs.step(action.cpu().numpy())
        reward = reward.astype(np.float32)
        return self.stepped(obs, reward, terminated, truncated, reward, terminated | truncated)


def import_gymnasium(env_id):
    """Gymnasium, with the envs the id asks for registered: MinAtar's games (the package `minatar`), or those of the
    module an id `module.path:EnvName-v0` names, which registers them when imported (as gym.make does it)."""
    import gymnasium as gym

    if ":" in env_id:
        importlib.import_module(env_id.split(":")[0])
    if env_id.startswith("MinAtar/"):
        import logging

        logging.disable(logging.WARNING)  # minatar.gym warns at import where seaborn (only to render) is missing
        try:
            import minatar.gym
        finally:
            logging.disable(logging.NOTSET)
        if "MinAtar/Breakout-v1" not in gym.registry:
            minatar.gym.register_envs()
    return gym


def atari_ids():
    from envpool.registration import registry

    return [env_id for env_id, spec in registry.specs.items() if spec[0] == "envpool.atari"]


def make_envs(args, device):
    """An Ocean env of p3o_ocean.py for `--env-id ocean/NAME` (the only import across files), EnvPool Atari for its
    ids, and Gymnasium for any other id."""
    if args.env_id.startswith("ocean/"):
        from p3o_ocean import make_envs as make_ocean_envs

        return make_ocean_envs(replace(args, env_id=args.env_id[len("ocean/") :]), device)
    if args.env_id in atari_ids():
        return AtariEnvs(args.env_id, args.num_envs, device, args.seed)
    return GymnasiumEnvs(args.env_id, args.num_envs, device, args.seed)


# ---------------------------------------------------------------------------------------------------------
# Data parallel under torchrun (`torchrun --standalone --nproc_per_node N` this script): each rank steps its
# share of the envs, and these helpers are all that crosses between ranks; in a plain run each is a no-op
# ---------------------------------------------------------------------------------------------------------
def all_sum(*tensors):
    """Each tensor summed over the ranks of a torchrun launch, in one all-reduce (float32); in a single process the
    tensors as they are. Every reduction across ranks goes through here. A tensor that carries a gradient keeps it:
    the other ranks' part joins as a constant, and their gradients join through the update's all_sum of the
    gradients. One tensor in, one out; several in, a tuple out."""
    if not (dist.is_available() and dist.is_initialized()):
        return tensors if len(tensors) > 1 else tensors[0]
    flat = torch.cat([tensor.detach().reshape(-1).float() for tensor in tensors])
    dist.all_reduce(flat)
    parts = flat.split([tensor.numel() for tensor in tensors])
    totals = [total.view_as(tensor).to(tensor.dtype) for total, tensor in zip(parts, tensors)]
    totals = tuple(tensor + (total - tensor.detach()) if tensor.requires_grad else total
                   for tensor, total in zip(tensors, totals))
    return totals if len(totals) > 1 else totals[0]


def all_gather(value):
    """Every rank's `value` (any picklable object: the games that ended, a checkpoint's envs), in rank order; [value]
    in a single process."""
    if not (dist.is_available() and dist.is_initialized()):
        return [value]
    values = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return values


def dist_backend(args):
    """NCCL where each rank has a GPU, gloo on CPUs; P3O_DIST_BACKEND=gloo lets several ranks share one GPU."""
    return os.environ.get("P3O_DIST_BACKEND", "nccl" if args.cuda and torch.cuda.is_available() else "gloo")


class NoWriter:
    """The SummaryWriter of the ranks past 0: rank 0 alone logs (the global figures)."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def open_writer(args, run_name, checkpoint, rank):
    """Rank 0's TensorBoard writer, synced to Weights and Biases with --track, the run's args in its text tab. A
    resumed run drops the events its previous life logged after the checkpoint, so the curve continues."""
    if rank > 0:
        return NoWriter()
    if args.track:
        import wandb

        wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, sync_tensorboard=True, config=vars(args),
                   name=run_name, save_code=True)
    writer = SummaryWriter(f"runs/{run_name}", purge_step=checkpoint["global_step"] + 1 if checkpoint else None)
    table = "\n".join([f"|{key}|{value}|" for key, value in vars(args).items()])
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n%s" % table)
    return writer


def close_writer(writer, args, rank):
    writer.close()
    if args.track and rank == 0:
        import wandb

        wandb.finish()


# ---------------------------------------------------------------------------------------------------------
# Checkpoints and refusals: a run killed at any moment loses at most one --save-interval; bad input stops
# before any env or device is touched
# ---------------------------------------------------------------------------------------------------------
def save_checkpoint(path, state):
    """Write to a temporary file, flush it to disk, then rename over the old one: a kill at any moment leaves
    either the previous checkpoint or this one, whole."""
    temporary = f"{path}.tmp"
    torch.save(state, temporary)
    with open(temporary, "rb") as file:
        os.fsync(file.fileno())
    os.replace(temporary, path)


def claim_run_folder(run_name):
    """Create runs/{run_name} and return its name; if a run already has that folder (two runs started in the
    same second), take {run_name}-2, -3, ... instead. Creating is the claim, so parallel starts never share one."""
    name, copy = run_name, 1
    while True:
        try:
            os.makedirs(f"runs/{name}")
            return name
        except FileExistsError:
            copy += 1
            name = f"{run_name}-{copy}"


def checkpoint_state(args, run_name, iteration, global_step, agent, optimizer, envs, next_obs, next_valid, history):
    """A checkpoint's content: what --resume needs to continue the run after `iteration`. Every rank calls it: the
    envs and random numbers of ranks 1, 2, ... (torchrun) go under "ranks", on the CPU."""
    def on_cpu(value):  # what travels between ranks travels on the CPU
        if isinstance(value, dict):
            return {key: on_cpu(item) for key, item in value.items()}
        return value.cpu() if torch.is_tensor(value) else value

    # the random state a resume needs: torch's alone, as nothing here draws from Python's or NumPy's generators
    rng = {"torch": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}
    own = {"envs": envs.state_dict(), "next_obs": next_obs, "next_valid": next_valid, "rng": rng}
    others = all_gather(on_cpu(own))[1:]
    return {"script": Path(__file__).name, "args": vars(args), "run_name": run_name, "iteration": iteration,
            "global_step": global_step, "model": agent.state_dict(), "optimizer": optimizer.state_dict(), **own,
            "history": history, "ranks": others}


def resume(checkpoint, rank, agent, optimizer, envs, next_obs, next_valid, avg_returns, iteration_scores):
    """Load a checkpoint into the run: the parameters, the optimizer, the games' history, this rank's random numbers
    and, where they could be saved (the Ocean envs'), its envs. Returns the step and iteration it continues from, and
    the envs' next observation and validity."""
    agent.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    own = checkpoint if rank == 0 else checkpoint["ranks"][rank - 1]  # torchrun: this rank's envs and RNG
    if own["envs"] is not None:
        envs.load_state_dict(own["envs"])
        next_obs, next_valid = own["next_obs"].to(next_obs.device), own["next_valid"].to(next_obs.device)
    avg_returns.extend(checkpoint["history"][0])
    # (score sum, games) an iteration; a checkpoint written before kept its last 20 games' scores, a game an entry
    iteration_scores.extend(tuple(entry) if isinstance(entry, (list, tuple)) else (entry, 1)
                            for entry in checkpoint["history"][1])
    torch.set_rng_state(own["rng"]["torch"])
    if own["rng"]["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(own["rng"]["cuda"])
    if rank == 0:
        fresh = "" if checkpoint["envs"] is not None else " with new episodes (this env's state cannot be saved)"
        print(f"{checkpoint['args']['env_id']}: resumed at iteration {checkpoint['iteration']}, step "
              f"{checkpoint['global_step']:,}{fresh}", flush=True)
    return checkpoint["global_step"], checkpoint["iteration"] + 1, next_obs, next_valid


def stop_nonfinite(what, state, writer, rank):
    """No silent NaN training: keep the last good state (this iteration's update stopped before the parameters
    changed) in crash.pt, resumable from this iteration's rollout, and exit non-zero."""
    path, iteration = f"runs/{state['run_name']}/crash.pt", state["iteration"] + 1
    if rank == 0:
        save_checkpoint(path, state)
    writer.close()
    sys.exit(f"{Path(__file__).name}: error: non-finite {what} at iteration {iteration}, step "
             f"{state['global_step'] + state['args']['batch_size']:,}; the update stopped; last good state: {path}")


CHECKPOINT_KEYS = ("script", "args", "run_name", "iteration", "global_step", "model", "optimizer", "envs", "next_obs",
                   "next_valid", "history", "rng")


def load_checkpoint(path, flag):
    """This script's checkpoint at `path`, or exit with what is wrong with it (nothing touched yet)."""
    def fail(reason):
        print(f"{Path(__file__).name}: error: {flag} {path}: {reason}", file=sys.stderr)
        sys.exit(2)

    if not os.path.isfile(path):
        fail("no such file")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated, not a torch file, or pickled objects we refuse to run
        fail(f"not a readable checkpoint ({type(error).__name__}: {str(error).splitlines()[0][:200]})")
    if not isinstance(checkpoint, dict) or any(key not in checkpoint for key in CHECKPOINT_KEYS):
        fail("not a checkpoint of these scripts (keys missing); checkpoints are runs/{run_name}/checkpoint.pt")
    if checkpoint["script"] != Path(__file__).name:
        fail(f"written by {checkpoint['script']}, not {Path(__file__).name}: use that script")
    # the evaluation's flags, evaluate.py's since, are no part of a run: the checkpoints written before still resume
    evaluation = ("eval_checkpoint", "eval_episodes", "eval_greedy", "capture_video")
    checkpoint["args"] = {name: value for name, value in checkpoint["args"].items() if name not in evaluation}
    unknown = set(checkpoint["args"]) - set(Args.__dataclass_fields__)
    if unknown:
        fail(f"its args {sorted(unknown)} are unknown to this version of {Path(__file__).name}")
    missing = set(Args.__dataclass_fields__) - set(checkpoint["args"])
    if missing and flag == "--resume":  # flags added since: their defaults could change the run's algorithm midway
        fail(f"written before {Path(__file__).name} had {sorted(missing)}: resume it with the version that wrote it")
    written, world_size = 1 + len(checkpoint.get("ranks", [])), int(os.environ.get("WORLD_SIZE", 1))
    if written != world_size and flag == "--resume":  # torchrun: each rank continues its own envs and random numbers
        launcher = f"torchrun --nproc_per_node {written}" if written > 1 else "python"
        fail(f"written by {written} rank(s), resumed by {world_size}: resume it with the world size that wrote it "
             f"({launcher})")
    return checkpoint


def resume_args(args):
    """The args a --resume continues with: the checkpoint's own, so the run goes on as it started."""
    checkpoint = load_checkpoint(args.resume, "--resume")
    kept = {"resume": args.resume, "progress": args.progress}
    defaults = Args()
    ignored = [name for name in Args.__dataclass_fields__ if name not in kept
               and getattr(args, name) != getattr(defaults, name) and getattr(args, name) != checkpoint["args"][name]]
    if ignored:
        flags = ", ".join("--" + name.replace("_", "-") for name in ignored)
        print(f"{Path(__file__).name}: --resume keeps the run's own args; ignored: {flags}", file=sys.stderr)
    return Args(**{**checkpoint["args"], **kept}), checkpoint


def first_nonfinite(**tensors):
    """The name of the first tensor holding a NaN or an infinity (torchrun: on any rank, so every rank stops at the
    same place), or None (one device sync for them all)."""
    nonfinite = all_sum(torch.stack([~torch.isfinite(tensor).all() for tensor in tensors.values()]).float()).tolist()
    return next((name for name, bad in zip(tensors, nonfinite) if bad), None)


def unknown_env_id(env_id, known):
    close = difflib.get_close_matches(env_id, known, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"--env-id {env_id!r} is not an EnvPool Atari id, a Gymnasium id or ocean/NAME{hint}"


def gymnasium_errors(env_id):
    """Why a Gymnasium id cannot train here, or []: an unknown id, a missing package, an action space that is not
    discrete, an observation no network fits. It builds one env, not the vector env, to read its spaces."""
    module = env_id.split(":")[0] if ":" in env_id else None
    try:
        gym = import_gymnasium(env_id)
        if env_id.split(":")[-1] not in gym.registry:
            return [unknown_env_id(env_id, atari_ids() + list(gym.registry))]
        env = gym.make(env_id)
    except ImportError as error:  # gymnasium, minatar, the id's module, what an env's entry point imports (ale_py, ...)
        if module is not None and error.name is not None and f"{module}.".startswith(f"{error.name}."):
            return [f"--env-id {env_id!r}: no module {module!r} to import ({error}): run from the folder that holds "
                    "it, or add that folder to PYTHONPATH"]
        package = (error.name or "?").split(".")[0]
        return [f"--env-id {env_id!r} needs the package {package!r}, which is missing ({error}): "
                f"pip install -r requirements.txt, or pip install {package}"]
    action_space, obs_shape = env.action_space, GymnasiumEnvs.observation_shape(env.observation_space)
    env.close()
    if not isinstance(action_space, gym.spaces.Discrete):
        return [f"--env-id {env_id!r} has a {action_space} action space: these scripts need a discrete one "
                "(a Categorical policy)"]
    try:
        make_network(obs_shape)
    except ValueError as error:
        return [f"--env-id {env_id!r}: {error}"]
    return []


def check_args(args):
    """Reject bad input before any env or device is touched, with a message that says what to change."""
    errors = []
    if args.env_id.startswith("ocean/"):
        from p3o_ocean import OCEAN_ENVS

        if args.env_id[len("ocean/") :] not in OCEAN_ENVS:
            errors.append(unknown_env_id(args.env_id, [f"ocean/{name}" for name in OCEAN_ENVS]))
    elif args.env_id not in atari_ids():
        errors += gymnasium_errors(args.env_id)
    for name in ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs", "delay",
                 "forage_distance", "password_length", "spread", "choice_distance"):
        if getattr(args, name) < 1:
            errors.append(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not args.reward_noise >= 0:
        errors.append(f"--reward-noise must be >= 0, got {args.reward_noise}")
    if not 0 <= args.choice_near_reward < 1:
        errors.append(f"--choice-near-reward must be in [0, 1), below the far reward 1.0, got "
                      f"{args.choice_near_reward}")
    if args.num_minibatches >= 1 and (args.num_envs * args.num_steps) % args.num_minibatches != 0:
        errors.append(f"--num-minibatches {args.num_minibatches} must divide the batch, "
                      f"--num-envs x --num-steps = {args.num_envs * args.num_steps}")
    if not args.learning_rate > 0:
        errors.append(f"--learning-rate must be > 0, got {args.learning_rate}")
    if args.save_interval < 0:
        errors.append(f"--save-interval must be >= 0 (0: no checkpoints), got {args.save_interval}")
    # P3O: its own flags
    if args.horizon < 1:
        errors.append(f"--horizon must be >= 1, got {args.horizon}")
    if not 0 <= args.td_lambda <= 1:
        errors.append(f"--td-lambda must be in [0, 1], got {args.td_lambda}")
    if not args.window_loss_coef >= 0:
        errors.append(f"--window-loss-coef must be >= 0 (0: the NLL alone), got {args.window_loss_coef}")
    if not 0 < args.value_fraction <= 1:
        errors.append(f"--value-fraction must be in (0, 1], got {args.value_fraction}")
    # end P3O
    # torchrun: each rank steps num_envs / WORLD_SIZE envs, and with NCCL each rank needs a GPU of its own
    world_size, local_world_size = int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    rank_batch = args.num_envs // world_size * args.num_steps
    if args.num_envs % world_size != 0:
        errors.append(f"--num-envs {args.num_envs} must be divisible by the world size {world_size}: "
                      "each rank steps num_envs / world_size envs")
    elif world_size > 1 and args.num_minibatches >= 1 and rank_batch % args.num_minibatches != 0:  # plain runs: above
        errors.append(f"--num-minibatches {args.num_minibatches} must divide each rank's batch, "
                      f"--num-envs / world size x --num-steps = {rank_batch}")
    if world_size > 1 and dist_backend(args) not in ("nccl", "gloo"):
        errors.append(f"P3O_DIST_BACKEND={dist_backend(args)!r}: nccl or gloo")
    elif world_size > 1 and dist_backend(args) == "nccl" and local_world_size > torch.cuda.device_count():
        gpus = torch.cuda.device_count()
        errors.append(f"{local_world_size} ranks on this machine share {gpus} GPU(s), but NCCL needs a GPU per rank: "
                      f"launch --nproc_per_node {gpus}, or let them share with P3O_DIST_BACKEND=gloo")
    if errors:
        for error in errors:
            print(f"{Path(__file__).name}: error: {error}", file=sys.stderr)
        sys.exit(2)


# ---------------------------------------------------------------------------------------------------------
# Progress and timers
# ---------------------------------------------------------------------------------------------------------
class PhaseTimer:
    """Seconds spent in each phase of the iteration (synchronising the GPU, so the figures are honest)."""

    def __init__(self, device):
        self.device, self.totals, self.total, self.last = device, {}, 0.0, time.perf_counter()

    def lap(self, phase):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        now = time.perf_counter()
        self.totals[phase] = self.totals.get(phase, 0.0) + now - self.last
        self.total += now - self.last
        self.last = now


def show_progress(args, global_step, sps, avg_returns, iteration, start_iteration, start_time):
    """Steps, SPS, the mean return of the last 20 games and the ETA in one line, rewritten in place on a terminal; on
    a pipe (CI, nohup) a line every tenth of the run."""
    recent = np.mean(avg_returns) if avg_returns else float("nan")
    eta = (args.num_iterations - iteration) * (time.time() - start_time) / (iteration - start_iteration + 1)
    line = f"step {global_step:,}/{args.num_iterations * args.batch_size:,} | {sps:,} SPS | return {recent:.2f}"
    line, done = f"{args.env_id}: {line} | ETA {eta:.0f}s", iteration == args.num_iterations
    if sys.stderr.isatty():
        print("\r" + line.ljust(100), end="\n" if done else "", file=sys.stderr, flush=True)
    elif done or iteration % max(1, args.num_iterations // 10) == 0:
        print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    args = tyro.cli(Args)
    check_args(args)
    args, checkpoint = resume_args(args) if args.resume else (args, None)
    if "RANK" in os.environ:  # launched by torchrun: one process per rank, on GPU LOCAL_RANK where there are GPUs
        if args.cuda and torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
        dist.init_process_group(backend=dist_backend(args))
    result = train(args, checkpoint)
    if dist.is_initialized():
        dist.destroy_process_group()
    if int(os.environ.get("RANK", 0)) == 0:
        print(f"{result['env']}: return {result['return']:.2f} (mean of the last {result['episodes']} games), "
              f"{result['steps']:,} steps, {result['SPS']:,} SPS")
