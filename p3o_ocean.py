# P3O on the Ocean suite: small vectorised PyTorch environments that train in seconds to minutes. The algorithm is
# docs/algorithm.md: PPO with GAE replaced by a multi-horizon Gaussian value head and a precision-weighted advantage
# (kernels/advantage.cu on a GPU, its PyTorch twin `p3o_advantage` elsewhere). The maths and train are p3o_atari.py's,
# text for text; the Ocean envs (make_envs) and the plumbing are below train.
"""Usage:
    python p3o_ocean.py                                  # the whole suite in sequence, then a table
    python p3o_ocean.py --env-id delay --delay 32        # one env
    python p3o_ocean.py --env-id spread --horizon 32 --no-clock
    python evaluate.py runs/{run}/checkpoint.pt --capture-video  # plays the run: GIFs in runs/{run}/videos/
    tensorboard --logdir runs
"""
import difflib
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
    """if toggled, a one-line progress display (steps, SPS, score, ETA) is printed during training"""
    save_interval: int = 25
    """write runs/{run_name}/checkpoint.pt every this many iterations and at the end (0: never)"""
    resume: Optional[str] = None
    """continue the run of this checkpoint: its args, its run folder, its curve"""

    # Algorithm specific arguments
    env_id: str = "all"
    """the Ocean env to train (`all`: the whole suite, one env after the other)"""
    total_timesteps: int = 0
    """total timesteps of the experiment (0: the env's own budget, `default_timesteps`)"""
    learning_rate: float = 3e-3
    """the learning rate of the optimizer"""
    num_envs: int = 256
    """the number of parallel environments"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """Toggle learning rate annealing for policy and value networks"""
    num_minibatches: int = 4
    """the number of mini-batches (on the CPU, keep them under ~30k samples at H = 128: docs/algorithm.md)"""
    update_epochs: int = 2
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
    hidden_size: int = 64
    """width of the shared MLP trunk"""

    # P3O specific arguments, the same defaults as p3o_atari.py's (docs/algorithm.md)
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

    # Ocean env options (each env reads the ones it needs)
    delay: int = 4
    """delay: steps between a decision and its reward"""
    forage_distance: int = 16
    """forage: distance to the large reward"""
    password_length: int = 5
    """password: number of bits to guess"""
    reward_noise: float = 0.0
    """delay, spread: the std of Gaussian noise added to every reward (mean 0)"""
    spread: int = 8
    """spread: steps over which each decision's reward is paid, in equal parts"""
    choice_distance: int = 16
    """choice: steps between choosing the far reward and its payment"""
    choice_near_reward: float = 0.7
    """choice: the near reward, paid at once (the far one is 1.0): 0.9 leaves a margin of 10%"""

    # to be filled in runtime
    batch_size: int = 0
    """the batch size (computed in runtime)"""
    minibatch_size: int = 0
    """the mini-batch size (computed in runtime)"""
    num_iterations: int = 0
    """the number of iterations (computed in runtime)"""

    def __post_init__(self):  # --total-timesteps 0: the env's own budget (with `all`, each env's as train meets it)
        if self.total_timesteps == 0 and self.env_id in OCEAN_ENVS:
            self.total_timesteps = OCEAN_ENVS[self.env_id].default_timesteps


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


class Agent(nn.Module):
    def __init__(self, obs_shape, num_actions, args):
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Linear(obs_shape[0], args.hidden_size)),
            nn.Tanh(),
            layer_init(nn.Linear(args.hidden_size, args.hidden_size)),
            nn.Tanh(),
        )
        self.actor = layer_init(nn.Linear(args.hidden_size, num_actions), std=0.01)
        # P3O: mu[j] predicts the reward j steps ahead; one learned spread per offset, shared by all states.
        # Zero weights, so every offset starts at mu = 0 whatever H (an orthogonal init's rows shrink as H grows).
        self.critic = layer_init(nn.Linear(args.hidden_size, args.horizon), std=0)
        self.log_sigma = nn.Parameter(torch.zeros(args.horizon))
        # --clock: c[s, j] added to mu[j] for a decision s steps into its episode (step_clock_table steps it)
        self.register_buffer("clock_table", torch.zeros(CLOCK_ROWS, args.horizon) if args.clock else None)

    def clock_mu(self, clock):
        """--clock: the table's part of mu at decisions `clock` steps into their episodes, [*clock.shape, H] (or 0)."""
        if self.clock_table is None:
            return 0.0
        return self.clock_table.index_select(0, clock.clamp(0, CLOCK_ROWS - 1).reshape(-1)).view(*clock.shape, -1)

    def get_features(self, x):
        """The trunk's features [B, F]: the update's window loss reads them beside mu."""
        return self.network(x)

    def get_logits(self, x):
        return self.actor(self.network(x))

    def mu(self, hidden, clock):
        """mu [B, H], the rewards ahead as predicted: the head's, plus --clock's table at the decisions' `clock`."""
        return self.critic(hidden) + self.clock_mu(clock)

    def get_action_and_value(self, x, clock, action=None, hidden=None, value_rows=None):
        hidden = self.network(x) if hidden is None else hidden  # the update passes those it computed
        logits = self.actor(hidden)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        # mu of the first value_rows (all by default), whose clocks are `clock`
        return action, probs.log_prob(action), probs.entropy(), self.mu(hidden[:value_rows], clock)


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
# Ocean environments: vectorised over envs, on the model's device, all randomness from a seeded generator.
# Every env returns obs [N, obs_dim] float32 and takes Discrete(num_actions) actions, an int64 tensor [N] on its
# device; it reports a normalised `score` in [0, 1] at episode end. Lookups use index_select rather than t[idx]:
# advanced indexing is several times slower on the CPU, and these envs are meant to cost microseconds per step.
# ---------------------------------------------------------------------------------------------------------
class OceanEnv:
    """Shared bookkeeping: the RNG, reset and step, the running episode return and length and the info dict. An env
    gives its observation (_obs), its step's reward, termination and score (_transition), its per-episode counters
    and their values at an episode's start (`starts`), the rest of its reset (_start), `max_steps` where it truncates
    episodes, and the scores and the study budget where its own differ."""

    optimal_score = 1.0
    solved_score = 0.9
    default_timesteps = 2_000_000
    # Ocean envs reset inside the step that ends an episode, so every step is a real decision. EnvPool and
    # Gymnasium vector envs instead spend the next step on the reset (its action ignored): True there.
    autoreset_next_step = False
    starts = {"t": 0}  # the step within the episode
    max_steps = None  # truncation after this many steps (None: never)

    def __init__(self, num_envs: int, device="cpu", seed: int = 0, **kwargs):
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.episode_return = torch.zeros(num_envs, device=self.device)
        self.episode_length = torch.zeros(num_envs, dtype=torch.int64, device=self.device)

    def _randint(self, high, size=None):
        size = (self.num_envs,) if size is None else size
        return torch.randint(high, size, generator=self.generator, device=self.device)

    def _start(self):
        """The per-episode state that `starts` does not hold, at a reset (none by default)."""

    def reset(self):
        self.episode_return.zero_()
        self.episode_length.zero_()
        for name, start in self.starts.items():
            setattr(self, name, torch.full((self.num_envs,), start, device=self.device))
        self._start()
        return self._obs()

    def step(self, actions):
        """The env's transition, then the episode stats, reported where an episode ended and cleared there; finished
        envs start over inside this step (same-step autoreset), so the observation is the new episode's first."""
        reward, terminated, score = self._transition(actions)
        truncated = ~terminated & (self.t >= self.max_steps) if self.max_steps else torch.zeros_like(terminated)
        self.episode_return += reward
        self.episode_length += 1
        done = terminated | truncated
        info = {"score": torch.where(done, score, 0.0), "episode_return": torch.where(done, self.episode_return, 0.0),
                "episode_length": torch.where(done, self.episode_length, 0)}
        self.episode_return.masked_fill_(done, 0.0)
        self.episode_length.masked_fill_(done, 0)
        for name, start in self.starts.items():
            getattr(self, name).masked_fill_(done, start)
        return self._obs(), reward, terminated, truncated, info

    def state_dict(self):
        """Everything needed to continue these envs exactly: their tensors and their RNG's state."""
        state = {name: value.clone() for name, value in vars(self).items() if isinstance(value, torch.Tensor)}
        return {**state, "generator": self.generator.get_state()}

    def load_state_dict(self, state):
        for name, value in state.items():
            if name == "generator":
                self.generator.set_state(value)
            else:
                setattr(self, name, value.to(self.device))


class Bandit(OceanEnv):
    """Noisy one-step credit assignment: 4 Bernoulli arms with success probabilities [0.2, 0.4, 0.6, 0.8], permuted
    once by the seed. Tests that the agent can average out reward noise. Score 1 iff the best arm was pulled.
    Optimal score: 1.0 (random policy 0.25). Solved: score >= 0.9."""

    default_timesteps = 1_000_000
    starts = {}

    def __init__(self, num_envs: int, device="cpu", seed: int = 0, **kwargs):
        super().__init__(num_envs, device, seed)
        self.obs_dim, self.num_actions = 1, 4
        perm = torch.randperm(4, generator=self.generator, device=self.device)
        self.probs = torch.tensor([0.2, 0.4, 0.6, 0.8], device=self.device)[perm]
        self.best_arm = self.probs.argmax()  # stays a tensor: no host sync

    def _obs(self):
        return torch.ones(self.num_envs, 1, device=self.device)

    def _transition(self, actions):
        u = torch.rand(self.num_envs, generator=self.generator, device=self.device)
        reward = (u < self.probs.index_select(0, actions)).float()
        terminated = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        return reward, terminated, (actions == self.best_arm).float()


class Password(OceanEnv):
    """Sparse-reward exploration: enter a fixed binary password (drawn from the seed) one bit per step; reward 1 on
    the last step iff every bit was right. Obs is the one-hot step index, so only exploration can find the password
    (random policy: 2**-L = 1/32). Kwarg: password_length (default 5). Optimal score: 1.0. Solved: score >= 0.9."""

    default_timesteps = 1_000_000
    starts = {"t": 0, "all_correct": True}

    def __init__(self, num_envs: int, device="cpu", seed: int = 0, **kwargs):
        super().__init__(num_envs, device, seed)
        self.length = int(kwargs.get("password_length", 5))
        assert self.length >= 1, "password_length must be >= 1"
        self.obs_dim, self.num_actions = self.length, 2
        self.password = self._randint(2, (self.length,))
        self._eye = torch.eye(self.length, device=self.device)

    def _obs(self):
        return self._eye.index_select(0, self.t)

    def _transition(self, actions):
        self.all_correct &= actions == self.password.index_select(0, self.t)
        self.t += 1
        terminated = self.t == self.length
        reward = (terminated & self.all_correct).float()
        return reward, terminated, reward


class Stochastic(OceanEnv):
    """The optimum is a mixed strategy. The obs is constant (the agent cannot tell steps apart), 10 steps, 2
    actions; at the last step reward = 1 - |n0/10 - p| / max(p, 1-p) with p = 0.7 and n0 = number of action-0 picks.
    A deterministic memoryless policy plays one action throughout: 1 - 0.3/0.7 = 0.571 (always 0) or 0 (always 1);
    only sampling action 0 with probability ~0.7 does well.

    Derivation of the optimum over i.i.d. policies P(a=0) = q, n0 ~ Binomial(10, q):
        E[r](q) = 1 - E|n0 - 7| / 7
        d/dq E|n0 - 7| = 10 * (1 - 2 * P(Binomial(9, q) <= 6)),
    so the optimum solves P(Binomial(9, q) <= 6) = 1/2, i.e. q* = 0.7137633, giving
    E[r](q*) = sum_k C(10,k) q*^k (1-q*)^(10-k) (1 - |k-7|/7) = 0.8406368
    (q = 0.7 gives 0.8399032, uniform random 0.6953125).
    Optimal score: 0.8406368. Solved: score >= 0.79 (= floor(0.95 * optimal, 2 decimals))."""

    optimal_score = 0.8406368
    solved_score = 0.79
    default_timesteps = 1_000_000
    episode_steps = 10
    p = 0.7
    obs_dim, num_actions = 1, 2
    starts = {"t": 0, "n0": 0}

    def _obs(self):
        return torch.zeros(self.num_envs, 1, device=self.device)

    def _transition(self, actions):
        self.n0 += actions == 0
        self.t += 1
        terminated = self.t == self.episode_steps
        # |n0/10 - p| written as |n0 - 10p| / 10 so that n0 = 7 gives exactly 0 in float32.
        dev = (self.n0.float() - self.episode_steps * self.p).abs()
        final = 1.0 - dev / (self.episode_steps * max(self.p, 1.0 - self.p))
        reward = torch.where(terminated, final, 0.0)
        return reward, terminated, reward


class Squared(OceanEnv):
    """Grid navigation: 7x7 grid, agent starts at the centre, one target at a uniformly random other cell. Actions:
    stay, up, down, left, right (clamped at walls). Obs: two flattened one-hot planes (agent, target), dim 98.
    Reward 1 and termination on reaching the target, truncation after 14 steps (every target is <= 6 moves away).
    Optimal score: 1.0. Solved: score >= 0.95."""

    solved_score = 0.95
    default_timesteps = 1_000_000
    size = 7
    centre = size // 2
    obs_dim, num_actions, max_steps = 2 * size * size, 5, 2 * size
    starts = {"row": centre, "col": centre, "t": 0}

    def __init__(self, num_envs: int, device="cpu", seed: int = 0, **kwargs):
        super().__init__(num_envs, device, seed)
        #                                stay  up  down left right
        self.d_row = torch.tensor([0, -1, 1, 0, 0], device=self.device)
        self.d_col = torch.tensor([0, 0, 0, -1, 1], device=self.device)
        self._eye = torch.eye(self.size * self.size, device=self.device)

    def _new_targets(self):
        # Uniform over the S*S - 1 non-centre cells: draw from S*S - 1 and skip the centre.
        centre_idx = self.centre * self.size + self.centre
        idx = self._randint(self.size * self.size - 1)
        return idx + (idx >= centre_idx).long()

    def _start(self):
        self.target = self._new_targets()

    def _obs(self):
        # Rows (agent, target) of env i, laid side by side, are obs[i] = [agent plane, target plane].
        agent = self.row * self.size + self.col
        return self._eye.index_select(0, torch.stack([agent, self.target], 1).view(-1)).view(self.num_envs, -1)

    def _transition(self, actions):
        self.row = (self.row + self.d_row.index_select(0, actions)).clamp(0, self.size - 1)
        self.col = (self.col + self.d_col.index_select(0, actions)).clamp(0, self.size - 1)
        self.t += 1
        terminated = self.row * self.size + self.col == self.target
        # Draw targets for every env (keeps it branch-free) and keep them where an episode ends (reached or truncated).
        self.target = torch.where(terminated | (self.t >= self.max_steps), self._new_targets(), self.target)
        reward = terminated.float()
        return reward, terminated, reward

    def grid(self, obs):
        """Its picture, as evaluate.py --capture-video draws it: the agent's plane and the target's, a grid of two
        channels [N, 2, 7, 7] (the agent in the palette's first colour, the target in its second)."""
        return obs.view(-1, 2, self.size, self.size)


class Delay(OceanEnv):
    """Horizon probe / delayed credit assignment. Each step shows a random cue bit (one-hot, dim 2); action == cue
    is correct, and the reward for the decision at step t is paid at step t + D (D = kwarg `delay`, default 4,
    >= 1), interleaved with the rewards of the later decisions. An episode has 64 scored decisions (steps 0..63) plus D
    unscored tail steps so every reward lands inside the episode (length 64 + D, ends terminated). Kwarg
    `reward_noise` (default 0): the std of Gaussian noise added to every step's reward (mean 0; the score does not
    see it). Score = max(0, 2 * accuracy - 1) over the 64 decisions (random ~0). Note: GAE at gamma 0.99 / lambda
    0.95 weighs a reward 64 steps out by about (0.99 * 0.95)**64 ~= 0.02, so large D stresses the advantage horizon.
    Optimal score: 1.0. Solved: score >= 0.9."""

    default_timesteps = 1_000_000
    num_decisions = 64
    starts = {"t": 0, "n_correct": 0}

    def __init__(self, num_envs: int, device="cpu", seed: int = 0, **kwargs):
        super().__init__(num_envs, device, seed)
        self._setup(delay=int(kwargs.get("delay", 4)), spread=1, reward_noise=float(kwargs.get("reward_noise", 0.0)))
        assert self.delay >= 1, "delay must be >= 1"

    def _setup(self, delay, spread, reward_noise):
        """A decision's reward is paid in `spread` equal parts at the steps t + delay .. t + delay + spread - 1."""
        assert spread >= 1 and reward_noise >= 0, "spread must be >= 1 and reward_noise >= 0"
        self.delay, self.spread, self.reward_noise = delay, spread, reward_noise
        self.obs_dim, self.num_actions = 2, 2
        self.episode_steps = self.num_decisions + delay + spread - 1
        self._eye = torch.eye(2, device=self.device)
        self._parts = torch.arange(delay, delay + spread, device=self.device)

    def _start(self):
        # Ring buffer of rewards not yet paid: slot u % (delay + spread) holds what step u pays.
        self.pending = torch.zeros(self.num_envs, self.delay + self.spread, device=self.device)
        self.cue = self._randint(2)

    def _obs(self):
        return self._eye.index_select(0, self.cue)

    def _transition(self, actions):
        scored = self.t < self.num_decisions
        correct = (actions == self.cue) & scored
        slots = self.pending.shape[1]
        parts = (correct.float() / self.spread).unsqueeze(1).expand(-1, self.spread)
        self.pending.scatter_add_(1, (self.t.unsqueeze(1) + self._parts) % slots, parts)
        # Pay this step's slot and clear it for the step that wraps onto it. No clearing at an episode's end: every
        # reward lands inside the episode, and each paid slot was cleared.
        slot = (self.t % slots).unsqueeze(1)
        reward = self.pending.gather(1, slot).squeeze(1)
        self.pending.scatter_(1, slot, 0.0)
        if self.reward_noise > 0:
            noise = torch.randn(self.num_envs, generator=self.generator, device=self.device)
            reward = reward + self.reward_noise * noise
        self.n_correct += correct
        self.t += 1
        terminated = self.t == self.episode_steps
        score = (2.0 * self.n_correct.float() / self.num_decisions - 1.0).clamp(min=0.0)
        self.cue = self._randint(2)
        return reward, terminated, score


class Spread(Delay):
    """Horizon probe / credit spread thin: Delay's cues, but each decision's reward (1 if action == cue) is paid in S
    equal parts, one at each of the S steps from the decision's own on (S = kwarg `spread`, default 8), so every step
    pays the mean correctness of the last S decisions. 64 scored decisions plus S - 1 tail steps (length 63 + S). Kwarg
    `reward_noise` as in Delay. Score = max(0, 2 * accuracy - 1) (random ~0). Note: GAE at 0.99 / 0.95 credits a
    decision with sum_{k<S} 0.9405^k / S of its reward (0.45 at S = 32), beside the other S - 1 decisions' parts; P3O
    with H >= S sees it all. Optimal score: 1.0. Solved: score >= 0.9."""

    def __init__(self, num_envs: int, device="cpu", seed: int = 0, **kwargs):
        OceanEnv.__init__(self, num_envs, device, seed)
        self._setup(delay=0, spread=int(kwargs.get("spread", 8)), reward_noise=float(kwargs.get("reward_noise", 0.0)))


class Forage(OceanEnv):
    """Short vs long horizon: a 1-D corridor from -2 to +F (F = kwarg `forage_distance`, default 16), start at 0,
    actions left/right. Reaching -2 ends the episode with 0.1, reaching +F ends it with 1.0; truncation after 4F steps
    with 0. A myopic agent settles for the near 0.1. Obs: one-hot position (dim F + 3). Score = reward collected (random
    ~0.11). Optimal score: 1.0. Solved: score >= 0.9."""

    near_pos, near_reward, far_reward = -2, 0.1, 1.0
    starts = {"pos": 0, "t": 0}

    def __init__(self, num_envs: int, device="cpu", seed: int = 0, **kwargs):
        super().__init__(num_envs, device, seed)
        self.distance = int(kwargs.get("forage_distance", 16))
        assert self.distance >= 1, "forage_distance must be >= 1"
        self.obs_dim, self.num_actions = self.distance - self.near_pos + 1, 2
        self.max_steps = 4 * self.distance
        self._eye = torch.eye(self.obs_dim, device=self.device)

    def _obs(self):
        return self._eye.index_select(0, self.pos - self.near_pos)

    def _transition(self, actions):
        self.pos += 2 * actions - 1  # 0 = left, 1 = right
        self.t += 1
        near, far = self.pos == self.near_pos, self.pos == self.distance
        reward = near.float() * self.near_reward + far.float() * self.far_reward
        return reward, near | far, reward


class Mixed(OceanEnv):
    """Rewards at two horizons at once, where one fixed gamma/lambda must compromise. 32 steps. Step 0 shows a
    "long" cue; matching it pays a bonus of 1.0 at the last step (step 31). Steps 1..31 each show a fresh "short"
    cue; matching it pays 0.1 at once. Obs: [is_step_0, cue one-hot(2)], dim 3 (the long cue is only visible at
    step 0). Score = 0.5 * bonus_obtained + 0.5 * fraction of the 31 short cues matched (random ~0.5).
    Optimal score: 1.0. Solved: score >= 0.9."""

    episode_steps = 32
    short_reward, bonus_reward = 0.1, 1.0
    starts = {"t": 0, "n_short": 0}

    def __init__(self, num_envs: int, device="cpu", seed: int = 0, **kwargs):
        super().__init__(num_envs, device, seed)
        self.obs_dim, self.num_actions = 3, 2
        # Row 2 * is_step_0 + cue -> observation; one gather builds the whole obs batch.
        self._obs_table = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 1.0]],
                                       device=self.device)

    def _obs(self):
        return self._obs_table.index_select(0, 2 * (self.t == 0).long() + self.cue)

    def _start(self):
        self.bonus = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self.cue = self._randint(2)

    def _transition(self, actions):
        match = actions == self.cue
        first = self.t == 0
        self.bonus = torch.where(first, match, self.bonus)  # (re)set at every episode's step 0
        short_hit = match & ~first
        self.n_short += short_hit
        self.t += 1
        terminated = self.t == self.episode_steps
        reward = short_hit.float() * self.short_reward + (terminated & self.bonus).float() * self.bonus_reward
        score = 0.5 * self.bonus.float() + 0.5 * self.n_short.float() / (self.episode_steps - 1)
        self.cue = self._randint(2)
        return reward, terminated, score


class Choice(OceanEnv):
    """Horizon probe / near-small against far-large. An episode is 4 rounds of D + 1 steps (D = kwarg `choice_distance`,
    default 16). A round's first step shows a choice flag: action 0 takes 0.7 at once (kwarg `choice_near_reward`),
    action 1 takes 1.0 paid D steps later, at the round's last step. Each of the round's other D steps shows a fresh
    cue; matching it pays 0.1 at once, so other decisions' rewards lie in between. Obs: [is_choice_step, cue one-hot(2),
    far_pending], dim 4: what is owed is in the state, so a critic (and a rollout's tail) can value it; the test is the
    credit, not memory. Score = the share of the episode's rounds that chose far (random ~0.5, always near 0). Note: PPO
    at gamma 0.99 values the far reward at 0.99^D (0.38 at D = 96), below the near 0.7, and learns to choose near; the
    episode (4D + 4 steps) outlasts a 128-step rollout from D = 31 on, so a round's payoff often lies past the rollout's
    end. Optimal score: 1.0. Solved: score >= 0.9."""

    rounds = 4
    near_reward, far_reward, cue_reward = 0.7, 1.0, 0.1
    starts = {"t": 0, "n_far": 0}

    def __init__(self, num_envs: int, device="cpu", seed: int = 0, **kwargs):
        super().__init__(num_envs, device, seed)
        self.distance = int(kwargs.get("choice_distance", 16))
        self.near_reward = float(kwargs.get("choice_near_reward", self.near_reward))
        assert self.distance >= 1, "choice_distance must be >= 1"
        self.obs_dim, self.num_actions = 4, 2
        # Row 4 * far_pending + 2 * is_choice_step + cue -> observation (no cue at the choice step).
        rows = [[choice, cue == 0 and not choice, cue == 1 and not choice, far]
                for far in (0, 1) for choice in (0, 1) for cue in (0, 1)]
        self._obs_table = torch.tensor(rows, dtype=torch.float32, device=self.device)

    def _start(self):
        self.far = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self.cue = self._randint(2)

    def _obs(self):
        choosing = self.t % (self.distance + 1) == 0
        return self._obs_table.index_select(0, 4 * (self.far & ~choosing).long() + 2 * choosing.long() + self.cue)

    def _transition(self, actions):
        choosing = self.t % (self.distance + 1) == 0
        self.far = torch.where(choosing, actions == 1, self.far)
        self.n_far += choosing & (actions == 1)
        near = choosing & (actions == 0)
        hit = ~choosing & (actions == self.cue)
        self.t += 1
        paid = self.far & (self.t % (self.distance + 1) == 0)  # the round's last step
        reward = near.float() * self.near_reward + hit.float() * self.cue_reward + paid.float() * self.far_reward
        terminated = self.t == self.rounds * (self.distance + 1)
        self.cue = self._randint(2)
        return reward, terminated, self.n_far.float() / self.rounds


def make_envs(args, device):
    """The Ocean env `--env-id NAME`, on the model's device, so observations never leave it, with the Ocean env options
    of the run's Args (each env reads the ones it needs)."""
    options = dict(delay=args.delay, forage_distance=args.forage_distance, password_length=args.password_length,
                   reward_noise=args.reward_noise, spread=args.spread, choice_distance=args.choice_distance,
                   choice_near_reward=args.choice_near_reward)
    return OCEAN_ENVS[args.env_id](args.num_envs, device=device, seed=args.seed, **options)


# The suite, in its order: --env-id NAME is the env's class, in lower case
OCEAN_ENVS = {env.__name__.lower(): env for env in (Bandit, Password, Stochastic, Squared, Delay, Forage, Mixed, Spread,
                                                    Choice)}


# ---------------------------------------------------------------------------------------------------------
# Across ranks: p3o_atari.py runs under torchrun, this script never does (its train finds no process group: rank 0 of
# 1), so all_sum, all_gather and open_writer are p3o_atari.py's in a single process (no NoWriter for other ranks)
# ---------------------------------------------------------------------------------------------------------
def all_sum(*tensors):
    """p3o_atari.py's sum over the ranks, in a single process: the tensors as they are. One tensor in, one out;
    several in, a tuple out."""
    return tensors if len(tensors) > 1 else tensors[0]


def all_gather(value):
    """p3o_atari.py's gather of every rank's `value`, in a single process: [value]."""
    return [value]


def open_writer(args, run_name, checkpoint, rank):
    """Rank 0's TensorBoard writer, synced to Weights and Biases with --track, the run's args in its text tab. A
    resumed run drops the events its previous life logged after the checkpoint, so the curve continues."""
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


def check_args(args):
    """Reject bad input before any env or device is touched, with a message that says what to change."""
    errors = []
    if args.env_id != "all" and args.env_id not in OCEAN_ENVS:
        close = difflib.get_close_matches(args.env_id, OCEAN_ENVS, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        errors.append(f"--env-id {args.env_id!r} is not an Ocean env{hint}; choose from all, {', '.join(OCEAN_ENVS)}")
    for name in ("horizon", "num_envs", "num_steps", "num_minibatches", "update_epochs", "hidden_size", "delay",
                 "forage_distance", "password_length", "spread", "choice_distance"):
        if getattr(args, name) < 1:
            errors.append(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not 0 <= args.td_lambda <= 1:
        errors.append(f"--td-lambda must be in [0, 1], got {args.td_lambda}")
    if not args.reward_noise >= 0:
        errors.append(f"--reward-noise must be >= 0, got {args.reward_noise}")
    if not 0 <= args.choice_near_reward < 1:
        errors.append(f"--choice-near-reward must be in [0, 1), below the far reward 1.0, got "
                      f"{args.choice_near_reward}")
    if args.num_minibatches >= 1 and (args.num_envs * args.num_steps) % args.num_minibatches != 0:
        errors.append(f"--num-minibatches {args.num_minibatches} must divide the batch, "
                      f"--num-envs x --num-steps = {args.num_envs * args.num_steps}")
    if args.total_timesteps < 0:
        errors.append(f"--total-timesteps must be >= 0 (0: the env's own budget), got {args.total_timesteps}")
    if not args.window_loss_coef >= 0:
        errors.append(f"--window-loss-coef must be >= 0 (0: the NLL alone), got {args.window_loss_coef}")
    if not 0 < args.value_fraction <= 1:
        errors.append(f"--value-fraction must be in (0, 1], got {args.value_fraction}")
    if not args.learning_rate > 0:
        errors.append(f"--learning-rate must be > 0, got {args.learning_rate}")
    if args.save_interval < 0:
        errors.append(f"--save-interval must be >= 0 (0: no checkpoints), got {args.save_interval}")
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
    env_ids = list(OCEAN_ENVS) if args.env_id == "all" else [args.env_id]
    results = [train(replace(args, env_id=env_id), checkpoint) for env_id in env_ids]
    print(f"\n{'env':<12}{'score':>8}{'solved':>8}{'steps':>12}{'SPS':>10}")
    for result in results:
        solved = "yes" if result["solved"] else "no"
        print(f"{result['env']:<12}{result['score']:>8.3f}{solved:>8}{result['steps']:>12,}{result['SPS']:>10,}")
