"""Late rewards for any Gymnasium env: every reward paid K steps after it was earned, or summed and paid every K
steps (the delayed-Atari and delayed-MuJoCo benchmarks of credit assignment: Arjona-Medina et al. 2019, Zheng et al.
2018, Gangwani et al. 2020). What is still owed when an episode ends (terminated or truncated) is paid at its last
step, so an episode's return, and the return and score the scripts log, are the base env's.

    python p3o_atari.py --env-id envs.delayed:MinAtar/Breakout-Delay32-v1     # each reward 32 steps late
    python p3o_atari.py --env-id envs.delayed:MinAtar/Breakout-Sum32-v1       # the rewards summed, paid every 32 steps

Importing this module registers MinAtar's five games at the delays of DELAYS in both forms. For another env or
delay, register it from a module of your own and train on that module's id:

    from envs.delayed import register
    register("CartPole-v1", 50)                       # CartPole-Delay50-v1; summed=True gives CartPole-Sum50-v1

The delay is invisible: the observation is the base env's, so nothing the agent sees says what is owed. And ending an
episode pays what is owed at once: a learner that discounts can prefer to end an episode right after a reward (on
MinAtar, P3O on Breakout at K = 32, and P3O at H = 32 and PPO at 0.99 on SpaceInvaders at K = 96: docs/results.md,
"Late rewards"). research/tools/cash_in.py plays a checkpoint on the base env and says whether it does."""
from collections import deque

import gymnasium as gym

DELAYS = (16, 32, 64, 96, 128)
MINATAR_GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")


def check_delay(delay):
    """The delay K as an int, or a one-line ValueError: a whole number of steps, at least 1."""
    if isinstance(delay, bool) or not isinstance(delay, int) or delay < 1:
        raise ValueError(f"envs.delayed: the delay must be a whole number of steps >= 1, not {delay!r}")
    return delay


class DelayedRewards(gym.Wrapper):
    """The base env with each reward paid `delay` steps after it was earned (summed=False), or summed and paid at
    every `delay`-th step of the episode (summed=True); at the episode's last step, whatever is still owed."""

    def __init__(self, env, delay, summed=False):
        super().__init__(env)
        self.delay, self.summed = check_delay(delay), summed
        self.owed, self.steps = deque(), 0

    def reset(self, **kwargs):
        self.owed.clear()  # nothing owed crosses episodes
        self.steps = 0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.owed.append(float(reward))
        self.steps += 1
        if terminated or truncated or (self.summed and self.steps % self.delay == 0):
            paid = sum(self.owed)
            self.owed.clear()
        elif not self.summed and len(self.owed) > self.delay:
            paid = self.owed.popleft()  # the reward earned `delay` steps ago
        else:
            paid = 0.0
        return obs, paid, terminated, truncated, info


def delayed_id(base_id, delay, summed=False):
    """The id of `base_id` delayed: MinAtar/Breakout-v1 -> MinAtar/Breakout-Delay32-v1 (Sum32 when summed)."""
    spec = gym.spec(base_id)
    name = f"{spec.name}-{'Sum' if summed else 'Delay'}{check_delay(delay)}"
    return gym.envs.registration.get_env_id(spec.namespace, name, spec.version)


def make(base_id, delay, summed=False, **kwargs):
    return DelayedRewards(gym.make(base_id, disable_env_checker=True, **kwargs), delay, summed)


def register(base_id, delay, summed=False):
    """Register `base_id` with its rewards `delay` steps late (or summed every `delay` steps); returns the new id. The
    base env keeps its own time limit and wrappers."""
    env_id = delayed_id(base_id, delay, summed)
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=make, kwargs={"base_id": base_id, "delay": delay, "summed": summed})
    return env_id


def register_minatar():
    import logging

    logging.disable(logging.WARNING)  # minatar.gym warns at import where seaborn (only to render) is missing
    try:
        import minatar.gym
    finally:
        logging.disable(logging.NOTSET)
    if "MinAtar/Breakout-v1" not in gym.registry:
        minatar.gym.register_envs()
    for game in MINATAR_GAMES:
        for delay in DELAYS:
            for summed in (False, True):
                register(f"MinAtar/{game}-v1", delay, summed)


register_minatar()
