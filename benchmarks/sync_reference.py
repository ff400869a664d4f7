"""The CPU baseline of ``bench_step.py``: Gymnasium's ``SyncVectorEnv`` over the numpy reference of Tag.

:class:`TagReferenceEnv` is one game of Tag as a plain ``gymnasium.Env`` around
:class:`~envs.tag_continuous.reference.TagReference`: observation ``(N, obs_dim)``
float32, action ``MultiDiscrete`` of shape ``(N, 2)``. Gymnasium's vector envs
keep one float reward per env, so ``step`` returns the sum over the agents and the
per-agent rewards in ``info["agent_rewards"]`` ``(N,)`` float32. Seeding follows
``WarpTag-v0``: ``reset(seed=s)`` draws reset number 0 of stream ``s``, later resets
(and autoresets) the next numbers, so ``SyncVectorEnv.reset(seed=s)`` starts game
``g`` from the same state as ``gym.make_vec("WarpTag-v0", ...).reset(seed=s)``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import SyncVectorEnv

from envs.tag_continuous.config import TagConfig
from envs.tag_continuous.reference import TagReference


class TagReferenceEnv(gym.Env):
    """One game of Tag stepped by the numpy reference, one Python call per step."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, config: TagConfig) -> None:
        self.game = TagReference(config)
        n = config.num_agents
        self.observation_space = spaces.Box(-np.inf, np.inf, (n, config.obs_dim), np.float32)
        nvec = np.array([config.num_acceleration_levels + 1, config.num_turn_levels + 1], np.int64)
        self.action_space = spaces.MultiDiscrete(np.tile(nvec, (n, 1)))
        self._stream = 0
        self._episode = -1

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self._stream, self._episode = int(seed), -1
        self._episode += 1
        return self.game.reset(self._stream, self._episode), {}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        obs, rewards, game_over = self.game.step(action)
        return obs, float(rewards.sum()), game_over, False, {"agent_rewards": rewards}


def make_sync_reference(config: TagConfig, num_games: int) -> SyncVectorEnv:
    """``num_games`` reference games in Gymnasium's ``SyncVectorEnv`` (NEXT_STEP autoreset, ``copy=True``)."""
    return SyncVectorEnv([partial(TagReferenceEnv, config) for _ in range(num_games)])
