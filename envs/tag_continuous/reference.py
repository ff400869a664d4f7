"""A plain numpy reference of continuous Tag: one game, written to be read.

This is the executable form of the game specification and the oracle the
backends are tested against. It shares nothing with the kernel phases except
the counter-based random draws (run here as plain Python) that define the
initial states.
"""

from __future__ import annotations

import math

import numpy as np

from envs.tag_continuous.config import TagConfig
from gpu_vecenv.counter_rng import randint, uniform01

F32 = np.float32
STATE_KEYS = ("x", "y", "speed", "direction", "acceleration", "alive")


def _python(fn):
    return getattr(fn, "py_func", fn)


class TagReference:
    """One Tag game. State arrays have one entry per agent; ``t`` counts steps.

    Args:
        config: the game's parameters.
    """

    def __init__(self, config: TagConfig) -> None:
        self.config = config
        n = config.num_agents
        self.agent_type = np.zeros(n, np.int32)
        self.agent_type[list(config.taggers)] = 1
        self.acc_table = config.acceleration_table()
        self.turn_table = config.turn_table()
        self.top_speed = np.where(
            self.agent_type == 1,
            F32(config.max_speed * config.skill_level_tagger),
            F32(config.max_speed * config.skill_level_runner),
        ).astype(np.float32)
        self.pos_scale = F32(1.0 / (math.sqrt(2.0) * config.grid_length))
        self.speed_scale = F32(1.0 / (config.max_speed + 1e-10))
        self.dir_scale = F32(1.0 / (2.0 * math.pi))
        self.tag_radius = F32(config.tagging_distance * config.grid_length)
        self.x = np.zeros(n, np.float32)
        self.y = np.zeros(n, np.float32)
        self.speed = np.zeros(n, np.float32)
        self.direction = np.zeros(n, np.float32)
        self.acceleration = np.zeros(n, np.float32)
        self.alive = np.ones(n, np.int32)
        self.t = 0

    # -- state ---------------------------------------------------------------
    def get_state(self) -> dict[str, np.ndarray | int]:
        state: dict[str, np.ndarray | int] = {k: getattr(self, k).copy() for k in STATE_KEYS}
        state["t"] = self.t
        return state

    def set_state(self, state: dict) -> None:
        for k in STATE_KEYS:
            getattr(self, k)[:] = state[k]
        self.t = int(state["t"])

    # -- reset ---------------------------------------------------------------
    def reset(self, seed: int, episode: int, options: dict | None = None) -> np.ndarray:
        """Draw the initial state of reset number ``episode`` of a game seeded ``seed``.

        ``options`` may fix ``initial_positions`` ``(N, 2)`` and
        ``initial_directions`` ``(N,)``; NaN entries stay random.
        """
        options = options or {}
        positions = options.get("initial_positions")
        directions = options.get("initial_directions")
        n = self.config.num_agents
        draw_uniform, draw_int = _python(uniform01), _python(randint)
        L = F32(self.config.grid_length)
        for a in range(n):
            self.x[a] = draw_uniform(seed, episode, 3 * a) * L
            self.y[a] = draw_uniform(seed, episode, 3 * a + 1) * L
            self.direction[a] = F32(draw_int(seed, episode, 3 * a + 2, 4)) * F32(0.5 * math.pi)
        if positions is not None:
            positions = np.asarray(positions, np.float32)
            use = ~np.isnan(positions)
            self.x[use[:, 0]] = positions[use[:, 0], 0]
            self.y[use[:, 1]] = positions[use[:, 1], 1]
        if directions is not None:
            directions = np.asarray(directions, np.float32)
            use = ~np.isnan(directions)
            self.direction[use] = directions[use]
        self.speed[:] = 0
        self.acceleration[:] = 0
        self.alive[:] = 1
        self.t = 0
        return self.observe()

    # -- step ----------------------------------------------------------------
    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """Advance one step. ``actions``: ``(N, 2)`` integers; out-of-range entries act as 0.

        Returns ``(obs (N, D) float32, rewards (N,) float32, game_over)``.
        """
        c = self.config
        actions = np.asarray(actions, np.int64)
        acc_idx = np.where((actions[:, 0] >= 0) & (actions[:, 0] < len(self.acc_table)), actions[:, 0], 0)
        turn_idx = np.where((actions[:, 1] >= 0) & (actions[:, 1] < len(self.turn_table)), actions[:, 1], 0)
        self.t += 1
        live = self.alive.astype(np.float32)

        # 1-4: acceleration, direction, speed
        self.acceleration = (self.acceleration + self.acc_table[acc_idx]).astype(np.float32)
        direction = np.remainder(self.direction + self.turn_table[turn_idx], F32(2 * math.pi)).astype(np.float32)
        direction = np.where(direction >= F32(2 * math.pi), direction - F32(2 * math.pi), direction)
        self.direction = (direction * live).astype(np.float32)
        self.speed = (np.minimum(np.maximum(self.speed + self.acceleration, F32(0)), self.top_speed) * live).astype(
            np.float32
        )
        at_limit = (self.speed <= 0) | (self.speed >= self.top_speed)
        self.acceleration = np.where(at_limit, F32(0), self.acceleration).astype(np.float32)

        # 5-6: move, clip to the square
        x = (self.x + self.speed * np.cos(self.direction)).astype(np.float32)
        y = (self.y + self.speed * np.sin(self.direction)).astype(np.float32)
        L = F32(c.grid_length)
        hit = (x < 0) | (x > L) | (y < 0) | (y > L)
        self.x = np.clip(x, F32(0), L).astype(np.float32)
        self.y = np.clip(y, F32(0), L).astype(np.float32)

        obs = self.observe()

        # Rewards
        is_tagger = self.agent_type == 1
        alive_before = self.alive.astype(bool)
        rewards = np.zeros(c.num_agents, np.float32)
        rewards[hit & alive_before] += F32(c.edge_hit_penalty)
        rewards[is_tagger & alive_before] += F32(c.step_penalty_for_tagger)
        rewards[~is_tagger & alive_before] += F32(c.step_reward_for_runner)
        taggers = np.flatnonzero(is_tagger & alive_before)
        tagged_by = np.full(c.num_agents, -1)
        for r in np.flatnonzero(~is_tagger & alive_before):
            dx = self.x[taggers] - self.x[r]
            dy = self.y[taggers] - self.y[r]
            d2 = (dx * dx + dy * dy).astype(np.float32)
            nearest = int(np.argmin(d2))  # first minimum: the lower id wins ties
            if F32(np.sqrt(d2[nearest])) < self.tag_radius:
                tagged_by[r] = taggers[nearest]
                rewards[r] += F32(c.tag_penalty_for_runner)
                if c.runner_exits_game_after_tagged:
                    self.alive[r] = 0
        for tagger in taggers:
            for _ in range(int(np.sum(tagged_by == tagger))):
                rewards[tagger] += F32(c.tag_reward_for_tagger)
        if self.t == c.episode_length:
            survivors = ~is_tagger & (self.alive == 1) & (tagged_by < 0)
            rewards[survivors] += F32(c.end_of_game_reward_for_runner)
        game_over = self.t >= c.episode_length or not np.any(~is_tagger & (self.alive == 1))
        return obs, rewards, bool(game_over)

    # -- observation ---------------------------------------------------------
    def observe(self) -> np.ndarray:
        """``(N, obs_dim)`` float32 observations of the current state."""
        c = self.config
        n, M = c.num_agents, c.num_observed
        obs = np.zeros((n, c.obs_dim), np.float32)
        for i in range(n):
            if c.use_full_observation:
                listed = [j for j in range(n) if j != i]
                relative = bool(self.alive[i])
            elif self.alive[i]:
                others = [j for j in range(n) if j != i and self.alive[j]]
                dx = self.x[others] - self.x[i]
                dy = self.y[others] - self.y[i]
                d2 = (dx * dx + dy * dy).astype(np.float32)
                order = np.lexsort((np.asarray(others), d2))  # by distance, then id
                listed = [others[k] for k in order[:M]]
                relative = True
            else:
                listed, relative = [], False
            for m, j in enumerate(listed):
                if relative:
                    obs[i, m] = (self.x[j] - self.x[i]) * self.pos_scale
                    obs[i, M + m] = (self.y[j] - self.y[i]) * self.pos_scale
                    obs[i, 2 * M + m] = (self.speed[j] - self.speed[i]) * self.speed_scale
                    obs[i, 3 * M + m] = (self.acceleration[j] - self.acceleration[i]) * self.speed_scale
                    obs[i, 4 * M + m] = (self.direction[j] - self.direction[i]) * self.dir_scale
                obs[i, 5 * M + m] = self.agent_type[j]
                obs[i, 6 * M + m] = self.alive[j]
            if self.alive[i]:
                obs[i, 7 * M] = F32(self.t) / F32(c.episode_length)
            if c.observe_own_type:
                obs[i, 7 * M + 1] = self.agent_type[i]
        return obs
