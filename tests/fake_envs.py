"""Fake environments shared by the tests."""
import torch

import p3o_ocean


class NextStepResetBandit(p3o_ocean.Bandit):
    """Bandit the EnvPool way: the step after a done ignores its action, pays 0 and ends nothing. Its
    observation is the done step's (the terminal observation), which `poison` can replace."""

    autoreset_next_step = True
    poison = None  # "terminal": garbage terminal observations; "decision": garbage observations of decisions

    def reset(self):
        self.resetting = torch.zeros(self.num_envs, dtype=torch.bool)
        return super().reset()

    def step(self, actions):
        obs, reward, terminated, truncated, info = super().step(actions)
        reward = torch.where(self.resetting, 0.0, reward)
        terminated = terminated & ~self.resetting
        self.resetting = terminated.clone()
        if self.poison is not None:
            garbage = 1e3 * torch.randn(obs.shape, generator=torch.Generator().manual_seed(int(self.episode_length.sum())))
            poisoned = terminated if self.poison == "terminal" else ~terminated  # "terminal": seen only by autoreset steps
            obs = torch.where(poisoned[:, None], garbage, obs)
        return obs, reward, terminated, truncated, info
