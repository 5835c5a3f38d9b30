"""Capture what a training loop (p3o_ocean.train, p3o_atari.train, ppo_baseline.train) computes in each iteration,
without touching the scripts: the env's steps, the networks' forward passes (hooks), the minibatch order
(torch.randperm), the losses and advantages the non-finite guard sees, the P3O functions the loop calls, and the
logged scalars. Then recompute each quantity the independent way, in float64 with plain loops, straight from
docs/algorithm.md (P3O) and the PPO paper (GAE, clipped objectives): nothing here calls the scripts' maths."""
import math

import numpy as np
import torch

import p3o_ocean


class ScalarWriter:
    """A SummaryWriter stand-in that keeps the scalars: scalars[tag] = [(step, value), ...]."""

    scalars = None

    def __init__(self, *args, **kwargs):
        pass

    def add_scalar(self, tag, value, step):
        ScalarWriter.scalars.setdefault(tag, []).append((step, float(value)))

    def __getattr__(self, name):  # add_text, add_histogram, add_histogram_raw, close: nothing kept
        return lambda *args, **kwargs: None


class Capture:
    """Install the spies on `module` (the script) for env `env_name` (an Ocean env name)."""

    def __init__(self, module, env_name, monkeypatch):
        self.module, self.steps, self.critic, self.actor, self.perms, self.losses, self.advantages = module, [], [], [], [], [], []
        self.calls = {"advantage": [], "tie_z": [], "clock_step": []}
        self.agent = None
        ScalarWriter.scalars = self.scalars = {}
        monkeypatch.setattr(module, "SummaryWriter", ScalarWriter)

        steps = self.steps
        env_class = p3o_ocean.OCEAN_ENVS[env_name]

        class Recorded(env_class):
            def step(self, actions):
                clock = self.episode_length.clone()
                obs, reward, terminated, truncated, info = super().step(actions)
                steps.append({"actions": actions.clone(), "clock": clock, "reward": reward.clone(), "done": (terminated | truncated).float(), "info": {k: v.clone() for k, v in info.items()}})
                return obs, reward, terminated, truncated, info

        self.env_class = Recorded
        monkeypatch.setitem(p3o_ocean.OCEAN_ENVS, env_name, Recorded)  # p3o_atari and ppo_baseline import this dict for ocean/NAME

        original_agent = module.Agent

        def agent_with_hooks(*args, **kwargs):
            agent = original_agent(*args, **kwargs)
            self.agent = agent

            def critic_hook(layer, inputs, output):
                self.critic.append({"grad": torch.is_grad_enabled(), "hidden": inputs[0].detach().clone(), "out": output.detach().clone(),
                                    "weight": layer.weight.detach().clone(), "bias": layer.bias.detach().clone(),
                                    "log_sigma": agent.log_sigma.detach().clone() if hasattr(agent, "log_sigma") else None,
                                    "table": agent.clock_table.clone() if getattr(agent, "clock_table", None) is not None else None})

            def actor_hook(layer, inputs, output):
                self.actor.append({"grad": torch.is_grad_enabled(), "logits": output.detach().clone()})

            agent.critic.register_forward_hook(critic_hook)
            agent.actor.register_forward_hook(actor_hook)
            return agent

        monkeypatch.setattr(module, "Agent", agent_with_hooks)

        randperm = torch.randperm

        def randperm_spy(n, *args, **kwargs):
            result = randperm(n, *args, **kwargs)
            self.perms.append(result.clone())
            return result

        monkeypatch.setattr(torch, "randperm", randperm_spy)

        first_nonfinite = module.first_nonfinite

        def guard_spy(**tensors):
            if "advantages" in tensors:
                self.advantages.append(tensors["advantages"].clone())
            if "loss" in tensors:
                self.losses.append(tensors["loss"].detach().clone())
            return first_nonfinite(**tensors)

        monkeypatch.setattr(module, "first_nonfinite", guard_spy)

        if hasattr(module, "p3o_advantage"):
            for name, key in (("p3o_advantage", "advantage"), ("tie_z", "tie_z"), ("step_clock_table", "clock_step")):
                monkeypatch.setattr(module, name, self._spy(getattr(module, name), key))

    def _spy(self, function, key):
        def spy(*args, **kwargs):
            before = [x.clone() if isinstance(x, torch.Tensor) else x for x in args]
            result = function(*args, **kwargs)
            after = [x.clone() if isinstance(x, torch.Tensor) else x for x in args]  # step_clock_table changes its table in place
            self.calls[key].append({"args": before, "after": after, "result": result.clone() if isinstance(result, torch.Tensor) else result})
            return result

        return spy

    # ------------------------------------------------------------------------------------------------------
    def rollout(self, iteration, T, autoreset=False):
        """Iteration `iteration` (1-based) as the env and the networks saw it, float64 numpy: rewards, dones, clocks,
        actions, valid [T, N]; the old log-probs and entropies from the rollout's logits; the critic's rollout
        outputs [T, N, H] and its bootstrap output on the next observation [N, H], with the clock table then."""
        steps = self.steps[(iteration - 1) * T : iteration * T]
        stack = lambda key: np.stack([s[key].double().numpy() for s in steps])
        rewards, dones, clocks = stack("reward"), stack("done"), stack("clock").astype(np.int64)
        actions = np.stack([s["actions"].numpy() for s in steps])
        # valid[t] = 0 after a done where the env spends the next step on the reset (its first step follows a reset: valid)
        all_dones = np.stack([s["done"].double().numpy() for s in self.steps[: iteration * T]])
        valid = np.ones_like(rewards)
        if autoreset:
            previous = all_dones[(iteration - 1) * T - 1 : iteration * T - 1] if iteration > 1 else np.concatenate([np.zeros((1, rewards.shape[1])), all_dones[: T - 1]])
            valid = 1.0 - previous
        no_grad_actor = [a for a in self.actor if not a["grad"]]
        logits = torch.stack([a["logits"] for a in no_grad_actor[(iteration - 1) * T : iteration * T]]).double()
        log_p = torch.log_softmax(logits, -1)
        logprobs = np.take_along_axis(log_p.numpy(), actions[..., None], -1)[..., 0]
        entropies = -(log_p.exp() * log_p).sum(-1).numpy()
        no_grad_critic = [c for c in self.critic if not c["grad"]]
        calls = no_grad_critic[(iteration - 1) * (T + 1) : iteration * (T + 1)]
        outs = np.stack([c["out"].double().numpy() for c in calls[:T]])
        tail = calls[T]["out"].double().numpy()
        next_clock = np.where(dones[-1] > 0, 0, clocks[-1] + 1)  # the Ocean envs count steps, and restart at a done
        return dict(rewards=rewards, dones=dones, clocks=clocks, actions=actions, valid=valid, logprobs=logprobs, entropies=entropies,
                    outs=outs, tail=tail, next_clock=next_clock, table=calls[0]["table"], log_sigma=calls[0]["log_sigma"])

    def update_calls(self, iteration, per_iteration):
        """The update's forward passes of `iteration`, one (logits, critic record) pair per minibatch."""
        actor = [a for a in self.actor if a["grad"]][(iteration - 1) * per_iteration : iteration * per_iteration]
        critic = [c for c in self.critic if c["grad"]][(iteration - 1) * per_iteration : iteration * per_iteration]
        return list(zip(actor, critic))


def table_rows(table, clocks):
    """The clock table's rows at `clocks` (float64 numpy), the last row for every later step."""
    return table.double().numpy()[np.minimum(clocks, table.shape[0] - 1)]


def value_windows(rewards, dones, horizon):
    """P3O's value targets, per docs/algorithm.md, by loops: for decision (t, n), target[j] = rewards[t + j] up to its
    episode's terminal and 0 after it, inside the rollout. window: the offsets whose target is known (H where the
    episode ends inside the rollout, else up to the rollout's end); inside: the offsets up to and including the
    terminal (or the rollout's end). Returns targets [T, N, H], window, inside [T, N]."""
    T, N = rewards.shape
    targets = np.zeros((T, N, horizon))
    window = np.zeros((T, N), dtype=np.int64)
    inside = np.zeros((T, N), dtype=np.int64)
    for n in range(N):
        for t in range(T):
            last = None
            for j in range(T - t):
                if dones[t + j, n]:
                    last = j
                    break
            for j in range(min(horizon, T - t)):
                if last is None or j <= last:
                    targets[t, n, j] = rewards[t + j, n]
            window[t, n] = horizon if last is not None else min(horizon, T - t)
            inside[t, n] = min(horizon, last + 1) if last is not None else min(horizon, T - t)
    return targets, window, inside


def tie_z(rewards, dones, mus, tail, score, valid):
    """z[j] = |corr(target[j] - mu[j], score)| * sqrt(n) over the n valid decisions (docs/algorithm.md step 2), with the
    tail: the targets past the rollout's end are the bootstrap predictions where the episode still runs."""
    T, N, H = mus.shape
    products, squares = np.zeros(H), np.zeros(H)
    for n in range(N):
        for t in range(T):
            if not valid[t, n]:
                continue
            ended = False
            for j in range(H):
                if t + j < T:
                    target = 0.0 if ended else rewards[t + j, n]
                    ended = ended or dones[t + j, n] > 0
                else:
                    target = 0.0 if ended else tail[n, t + j - T]
                residual = target - mus[t, n, j]
                products[j] += residual * score[t, n]
                squares[j] += residual * residual
    score_squares = sum(score[t, n] ** 2 for t in range(T) for n in range(N) if valid[t, n])
    count = int(valid.sum())
    return np.array([abs(products[j]) / math.sqrt(squares[j] * score_squares) * math.sqrt(count) if squares[j] * score_squares > 0 else 0.0 for j in range(H)])


def gae(rewards, dones, values, next_value, gamma, lam):
    """GAE by the textbook recursion, float64: delta[t] = r[t] + gamma V[t+1] (1 - d[t]) - V[t], A[t] = delta[t] +
    gamma lambda (1 - d[t]) A[t+1], V[T] the bootstrap value."""
    T, N = rewards.shape
    advantages = np.zeros((T, N))
    for n in range(N):
        running = 0.0
        for t in reversed(range(T)):
            following = next_value[n] if t == T - 1 else values[t + 1, n]
            alive = 1.0 - dones[t, n]
            delta = rewards[t, n] + gamma * following * alive - values[t, n]
            running = delta + gamma * lam * alive * running
            advantages[t, n] = running
    return advantages


def policy_terms(logits, actions, old_logprobs, advantages, valid, clip_coef, norm_adv=True):
    """PPO's clipped surrogate, the mean entropy and the share of ratios outside the clip range of one minibatch, float64: logits [B, A] of the update's forward
    pass; the rest [B]. The advantages are normalised over the minibatch's valid decisions."""
    log_p = torch.log_softmax(logits.double(), -1).numpy()
    new_logprobs = np.take_along_axis(log_p, actions[:, None], -1)[:, 0]
    entropy = -(np.exp(log_p) * log_p).sum(-1)
    count = max(valid.sum(), 1.0)
    adv = advantages
    if norm_adv:
        mean = (adv * valid).sum() / count
        std = math.sqrt(((adv - mean) ** 2 * valid).sum() / count)
        adv = (adv - mean) / (std + 1e-8)
    ratio = np.exp(new_logprobs - old_logprobs)
    surrogate = np.maximum(-adv * ratio, -adv * np.clip(ratio, 1 - clip_coef, 1 + clip_coef))
    clipped = (np.abs(ratio - 1) > clip_coef) & (valid > 0)  # where the clip bites (or would, for the other sign)
    return (surrogate * valid).sum() / count, (entropy * valid).sum() / count, clipped.mean()
