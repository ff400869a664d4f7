"""Record a WarpTag-v0 rollout under random actions, for tests that compare two ways of running one game."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)


def record_rollout(steps, device="cpu", seed=5, options=None, **params):
    """``[obs, then obs, rewards, terminated, truncated of every step]`` of ``num_envs`` games (default 3).

    The actions are drawn from ``numpy``'s generator seeded with ``seed``, the games reset with ``seed``.
    """
    games = params.pop("num_envs", 3)
    envs = gym.make_vec("WarpTag-v0", num_envs=games, device=device, **params)
    rng = np.random.default_rng(seed)
    obs, _ = envs.reset(seed=seed, options=options)
    seen = [obs.clone()]
    for _ in range(steps):
        actions = torch.as_tensor(rng.integers(0, 21, (envs.num_envs, 2)), device=device)
        obs, rewards, terminated, truncated, _ = envs.step(actions)
        seen += [obs.clone(), rewards.clone(), terminated.clone(), truncated.clone()]
    return seen
