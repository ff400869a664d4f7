"""WarpCartPole-v1: Gymnasium's CartPole-v1 described to gpu_vecenv, and its vector entry point."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import torch
from gymnasium import spaces
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from envs.cartpole import sim
from envs.cartpole.reference import CartPoleReference
from envs.cartpole.render import draw_games
from gpu_vecenv.definition import EnvDefinition, Phase, StateArray
from gpu_vecenv.vector_env import GpuVectorEnv

NAME = "WarpCartPole-v1"


def cartpole_definition() -> EnvDefinition:
    """The :class:`EnvDefinition` of CartPole: one cart per game, ``Discrete(2)`` actions, 4 observations."""
    return EnvDefinition(
        name=NAME,
        num_agents=1,
        action_nvec=(2,),
        obs_dim=4,
        # float64, as Gymnasium keeps its state; observations are rounded to float32 only when written.
        state=(
            StateArray("x", "float64"),
            StateArray("x_dot", "float64"),
            StateArray("theta", "float64"),
            StateArray("theta_dot", "float64"),
            # The bounds of a game's next reset draw: the defaults, or a reset's options low/high.
            StateArray("reset_low", "float64", per="game"),
            StateArray("reset_span", "float64", per="game"),
        ),
        # The physics constants are float64 globals of sim.py; definition constants would be float32.
        constants={},
        update_phases=(Phase(sim.push_cart),),
        observe_phases=(Phase(sim.observe_cart),),
        reward_phases=(Phase(sim.reward_step), Phase(sim.end_if_fallen, "game")),
        # Two phases, so that the GPU rounds low + span * u as the reference does (see draw_initial_state).
        reset_phases=(
            Phase(sim.draw_initial_state),
            Phase(sim.offset_initial_state),
        ),
        reset_option_names=("low", "high"),
        reset_options=apply_reset_bounds,
        setup=default_reset_bounds,
        observation_space=cartpole_observation_space(),
        discrete_actions=True,
        reference=CartPoleReference,
        render=draw_games,
    )


def default_reset_bounds(views: Mapping[str, torch.Tensor]) -> None:
    """Every game's reset bounds the defaults from the start, also for a game a first, masked reset leaves out."""
    apply_reset_bounds(views, {}, torch.ones_like(views["reset_low"], dtype=torch.bool))


def apply_reset_bounds(views: Mapping[str, torch.Tensor], options: Mapping[str, Any], game_mask: torch.Tensor) -> None:
    """Gymnasium's CartPole reset options: every state variable of the reset games drawn uniform in
    ``[low, high)`` (``low`` default -0.05, ``high`` 0.05, each optional), at this reset and at the games'
    autoresets until a reset with other options or none, as Gymnasium's vector CartPole (``CartPoleVectorEnv``)
    keeps them. Raises ``ValueError`` (before writing) unless both are finite numbers with ``low <= high`` and a
    finite ``high - low``."""
    low, high = options.get("low", float(sim.RESET_LOW)), options.get("high", float(sim.RESET_HIGH))
    for key, value in (("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise ValueError(f"{NAME}: reset option {key} must be a finite number, got {value!r}")
    if low > high:
        raise ValueError(f"{NAME}: reset option low must be <= high, got low={low!r}, high={high!r}")
    # Subtracted in float64, as the reference does; the kernel then draws low + (high - low) * u.
    span = float(high) - float(low)
    if not math.isfinite(span):
        raise ValueError(f"{NAME}: reset options high - low must be finite, got low={low!r}, high={high!r}")
    views["reset_low"].masked_fill_(game_mask, float(low))
    views["reset_span"].masked_fill_(game_mask, span)


def cartpole_observation_space() -> spaces.Box:
    """Gymnasium's own CartPole observation space: ``Box((4,), float32)``, x and theta bounded at twice their limits."""
    return CartPoleEnv().observation_space  # a fresh Box per call, shared with nothing


def make_warp_cartpole(num_envs: int = 1, **kwargs: Any) -> GpuVectorEnv:
    """Vector entry point of ``WarpCartPole-v1``: ``num_envs`` independent carts, one slot each.

    CartPole has no parameters of its own; keyword arguments are the options
    of :class:`~gpu_vecenv.vector_env.GpuVectorEnv` (``device``,
    ``autoreset_mode``, ``max_episode_steps``, ``copy``, ...).
    """
    unknown = sorted(set(kwargs) - GpuVectorEnv.OPTIONS)
    if unknown:
        raise TypeError(f"{NAME}: unknown parameter(s) {unknown}; valid parameters are {sorted(GpuVectorEnv.OPTIONS)}")
    return GpuVectorEnv(cartpole_definition(), num_games=num_envs, **kwargs)
