"""Registering gpu_vecenv environments with Gymnasium."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


def register(id: str, vector_entry_point: str, max_episode_steps: int | None = None, **kwargs: Any) -> None:
    """Register a gpu_vecenv env so that ``gymnasium.make_vec(id, num_envs=G, ...)`` builds it.

    Args:
        id: the Gymnasium id, e.g. ``"MyGame-v0"``.
        vector_entry_point: ``"module:function"``, a callable taking
            ``num_envs`` (the number of games) and keyword arguments and
            returning a :class:`~gpu_vecenv.vector_env.GpuVectorEnv`. A string
            keeps the registry importable without importing the env.
        max_episode_steps: optional truncation limit, passed on to the env.
        **kwargs: default keyword arguments of the env.
    """
    if id in gym.registry:
        del gym.registry[id]  # re-registering (e.g. on module reload) replaces the entry
    gym.register(
        id=id,
        vector_entry_point=vector_entry_point,
        max_episode_steps=max_episode_steps,
        kwargs=kwargs,
    )
