"""Helpers for the WarpCartPole tests: a lock-step comparison with Gymnasium's own CartPole-v1.

Imported by tests/test_cartpole.py and by tests/cudasim_cartpole.py (which runs
under Numba's CUDA simulator in a process of its own).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from gpu_vecenv.vector_env import GpuVectorEnv

STATE_KEYS = ("x", "x_dot", "theta", "theta_dot")
Policy = Callable[[np.ndarray], np.ndarray]


def read_states(envs: GpuVectorEnv) -> np.ndarray:
    """Every game's float64 state, ``(num_games, 4)``: x, x_dot, theta, theta_dot."""
    return torch.stack([envs.state[k][:, 0] for k in STATE_KEYS], dim=1).cpu().numpy()


def balancing_policy(obs: np.ndarray) -> np.ndarray:
    """Push towards the side the pole leans to (with some cart centring): ``(G, 4)`` float32 -> ``(G,)`` int64.

    Keeps every game from the default initial states up for at least 500 steps.
    """
    return (obs @ np.array([0.05, 0.1, 1.0, 0.5], np.float32) > 0).astype(np.int64)


@dataclass
class LockstepResult:
    """Counts of a lock-step run, and how close the two envs stayed."""

    episodes: int = 0
    steps: int = 0
    terminated: int = 0
    truncated: int = 0
    max_obs_abs_diff: float = 0.0
    state_bitwise_equal: bool = True


def lockstep_with_gymnasium(
    envs: GpuVectorEnv,
    seed: int,
    rng: np.random.Generator,
    policy: Policy | None = None,
    max_steps: int = 10_000,
    resync: bool = False,
) -> LockstepResult:
    """Reset ``envs`` (NEXT_STEP mode) and run each game next to its own ``gym.make("CartPole-v1")``.

    Gymnasium's env starts from the game's initial state (read from
    ``envs.state``), with the same time limit, and takes the same actions;
    every step until the game's first end, obs must agree to float32
    precision, and rewards, terminated and truncated exactly.
    ``policy(obs (G, 4) float32) -> actions (G,)`` defaults to uniformly
    random actions drawn from ``rng``. ``resync``: before every step, load
    each Gymnasium env with the game's current state, so that every step is
    compared from identical states (needed over long episodes on a GPU, see
    tests/test_cartpole.py). Raises ``AssertionError`` on a mismatch.
    """
    G = envs.num_games
    # -1: no TimeLimit wrapper at all, like a WarpCartPole without max_episode_steps.
    limit = envs.max_episode_steps or -1
    obs, _ = envs.reset(seed=seed)
    obs_np = obs.cpu().numpy()
    states = read_states(envs)
    refs = []
    for g in range(G):
        ref = gym.make("CartPole-v1", max_episode_steps=limit)
        ref.reset(seed=seed + g)
        ref.unwrapped.state = states[g].copy()
        refs.append(ref)
        np.testing.assert_array_equal(obs_np[g], states[g].astype(np.float32), err_msg=f"game {g}, reset")
    result = LockstepResult(episodes=G)
    running = np.ones(G, bool)
    for step in range(1, max_steps + 1):
        if not running.any():
            break
        actions = rng.integers(0, 2, G) if policy is None else np.asarray(policy(obs_np))
        if resync:
            for g in np.flatnonzero(running):
                refs[g].unwrapped.state = states[g].copy()
        obs, rewards, terminated, truncated, _ = envs.step(torch.as_tensor(actions, device=envs.device))
        obs_np = obs.cpu().numpy()
        rewards, terminated, truncated = rewards.cpu().numpy(), terminated.cpu().numpy(), truncated.cpu().numpy()
        states = read_states(envs)
        for g in np.flatnonzero(running):
            want_obs, want_r, want_term, want_trunc, _ = refs[g].step(int(actions[g]))
            where = f"game {g}, step {step}"
            np.testing.assert_allclose(obs_np[g], want_obs, rtol=1e-6, atol=1e-7, err_msg=where)
            assert float(rewards[g]) == want_r, f"{where}: reward {rewards[g]} != {want_r}"
            assert bool(terminated[g]) == want_term, f"{where}: terminated {terminated[g]} != {want_term}"
            assert bool(truncated[g]) == want_trunc, f"{where}: truncated {truncated[g]} != {want_trunc}"
            result.steps += 1
            result.max_obs_abs_diff = max(result.max_obs_abs_diff, float(np.abs(obs_np[g] - want_obs).max()))
            result.state_bitwise_equal &= bool(np.array_equal(states[g], refs[g].unwrapped.state))
            if want_term or want_trunc:
                result.terminated += int(want_term)
                result.truncated += int(want_trunc and not want_term)
                running[g] = False
    assert not running.any(), f"{int(running.sum())} game(s) did not end within {max_steps} steps"
    return result
