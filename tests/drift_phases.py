"""A small env whose state arrays have a leading axis (``StateArray(length=2)``, per agent and per game), for the
checker's tests: each agent drifts on a plane with its game's wind and steps left, not at all or right."""

from __future__ import annotations

from functools import partial

import numpy as np

from gpu_vecenv import EnvDefinition, Phase, StateArray, shared
from gpu_vecenv.counter_rng import uniform01


@shared
def drift(g, a, action, pos, wind):
    pos[0, g, a] = pos[0, g, a] + np.float32(action[0, g, a] - 1) + wind[0, g]
    pos[1, g, a] = pos[1, g, a] + wind[1, g]


@shared
def observe(g, a, pos, wind, obs):
    obs[g, a, 0] = pos[0, g, a]
    obs[g, a, 1] = pos[1, g, a]
    obs[g, a, 2] = wind[0, g] - pos[0, g, a]


@shared
def reward(g, a, pos, rewards):
    rewards[g, a] = -abs(pos[0, g, a])


@shared
def end(g, t, terminated, episode_length):
    if t[g] >= episode_length:
        terminated[g] = 1


@shared
def place(g, a, seed, episode, pos):
    pos[0, g, a] = uniform01(seed[g], episode[g], 2 * a)
    pos[1, g, a] = uniform01(seed[g], episode[g], 2 * a + 1)


@shared
def blow(g, seed, episode, wind, num_agents):
    wind[0, g] = uniform01(seed[g], episode[g], 2 * num_agents)
    wind[1, g] = uniform01(seed[g], episode[g], 2 * num_agents + 1)


class DriftReference:
    """One game: ``pos`` ``(2, agents)``, ``wind`` ``(2,)``, as the checker reads them from the env."""

    def __init__(self, num_agents: int, episode_length: int) -> None:
        self.n, self.episode_length = num_agents, episode_length
        self.pos = np.zeros((2, num_agents), np.float32)
        self.wind = np.zeros(2, np.float32)
        self.t = 0

    def get_state(self):
        return {"pos": self.pos.copy(), "wind": self.wind.copy(), "t": self.t}

    def set_state(self, state):
        self.pos[:], self.wind[:], self.t = state["pos"], state["wind"], int(state["t"])

    def observe(self):
        return np.stack([self.pos[0], self.pos[1], self.wind[0] - self.pos[0]], axis=1).astype(np.float32)

    def reset(self, seed, episode, options=None):
        draw = getattr(uniform01, "py_func", uniform01)
        self.pos[:] = [[draw(seed, episode, 2 * a + k) for a in range(self.n)] for k in range(2)]
        self.wind[:] = [draw(seed, episode, 2 * self.n + k) for k in range(2)]
        self.t = 0
        return self.observe()

    def step(self, actions):
        self.pos[0] += np.asarray(actions).reshape(self.n).astype(np.float32) - 1 + self.wind[0]
        self.pos[1] += self.wind[1]
        self.t += 1
        return self.observe(), -np.abs(self.pos[0]), self.t >= self.episode_length


def drift_definition(num_agents: int = 3, episode_length: int = 6) -> EnvDefinition:
    return EnvDefinition(
        name="Drift",
        num_agents=num_agents,
        action_nvec=(3,),
        discrete_actions=True,
        obs_dim=3,
        state=(StateArray("pos", "float32", length=2), StateArray("wind", "float32", per="game", length=2)),
        constants={"episode_length": int(episode_length)},
        update_phases=(Phase(drift),),
        observe_phases=(Phase(observe),),
        reward_phases=(Phase(reward), Phase(end, "game")),
        reset_phases=(Phase(place), Phase(blow, "game")),
        reference=partial(DriftReference, num_agents, episode_length),
    )
