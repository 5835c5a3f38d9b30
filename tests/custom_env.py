"""A user's own Gymnasium env, as a user would write it: a module that registers CustomCorridor-v0 when imported, so
the scripts reach it as `--env-id tests.custom_env:CustomCorridor-v0` (the module:id form gym.make takes)."""
import gymnasium as gym
import numpy as np


class CustomCorridor(gym.Env):
    """A corridor of `length` cells: action 1 steps right, 0 left (not past cell 0); the last cell pays 1 and ends
    the episode. The observation is the position, one-hot."""

    def __init__(self, length=4):
        self.length, self.position = length, 0
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(length,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def observation(self):
        return np.eye(self.length, dtype=np.float32)[self.position]

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.position = 0
        return self.observation(), {}

    def step(self, action):
        self.position = max(0, self.position + (1 if action == 1 else -1))
        arrived = self.position == self.length - 1
        return self.observation(), float(arrived), arrived, False, {}


if "CustomCorridor-v0" not in gym.registry:
    gym.register("CustomCorridor-v0", entry_point=CustomCorridor, max_episode_steps=32)
