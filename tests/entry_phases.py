"""WarpTag-v0's full observation written by an entry phase, one call per observation entry.

WarpTag-v0 itself writes it with a slot phase (one call per observed agent); this module keeps an
entry-phase version so that entry phases (``Phase(fn, "entry")`` and ``entry_block=B``) still run
end to end in the tests: on the CPU backend, under the CUDA simulator and in the agent-order check.
It lives in a module of its own because the generated kernel imports every phase by name.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from envs.tag_continuous.config import TagConfig
from envs.tag_continuous.env import tag_definition
from envs.tag_continuous.sim import ZERO, tail_entry
from gpu_vecenv import shared
from gpu_vecenv.definition import EnvDefinition, Phase


@shared
def observe_entry(g, a, i, obs, num_observed, x, y, speed, direction, acceleration, alive, agent_type, pos_scale,
                  speed_scale, dir_scale, t, episode_length):  # fmt: skip
    """Entry ``i`` of agent ``a``'s full observation: feature ``i // num_observed`` of the other agent
    ``i % num_observed`` (in id order, ``a`` skipped), then the tail entries."""
    tail = 7 * num_observed
    if i >= tail:
        obs[g, a, i] = tail_entry(i - tail, g, a, t, episode_length, alive, agent_type)
        return
    f = i // num_observed
    m = i - f * num_observed
    j = m if m < a else m + 1
    value = ZERO
    if f == 5:
        value = np.float32(agent_type[g, j])
    elif f == 6:
        value = np.float32(alive[g, j])
    elif alive[g, a] != 0:
        if f == 0:
            value = (x[g, j] - x[g, a]) * pos_scale
        elif f == 1:
            value = (y[g, j] - y[g, a]) * pos_scale
        elif f == 2:
            value = (speed[g, j] - speed[g, a]) * speed_scale
        elif f == 3:
            value = (acceleration[g, j] - acceleration[g, a]) * speed_scale
        else:
            value = (direction[g, j] - direction[g, a]) * dir_scale
    obs[g, a, i] = value


def entry_tag_definition(config: TagConfig, entry_block: int | None = None) -> EnvDefinition:
    """WarpTag-v0 with the full observation (``config`` must ask for it) written by :func:`observe_entry`."""
    if not config.use_full_observation:
        raise ValueError("entry_tag_definition needs a full-observation config")
    definition = tag_definition(config, backend="cpu")
    return dataclasses.replace(definition, observe_phases=(Phase(observe_entry, "entry", entry_block=entry_block),))
