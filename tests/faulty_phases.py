"""Phases that break the authoring rules on purpose, for tests that the framework's checks catch them.

They live in a module of their own because the generated kernel imports every phase by name.
"""

from __future__ import annotations

import numpy as np

from envs.tag_continuous.sim import agents_in_index, observe_indexed, observe_listed
from gpu_vecenv import shared


@shared
def observe_listed_and_overwrite_the_time(g, a, slot, obs, obs_kept, num_observed, tail_entries, x, y, speed,
                                          direction, acceleration, alive, agent_type, list_row, nbr_id,
                                          out_when_observed, pos_scale, speed_scale, dir_scale, t,
                                          episode_length):  # fmt: skip
    """WarpTag's slot phase, but every slot also writes the time entry, which belongs to slot 0 alone."""
    observe_listed(g, a, slot, obs, obs_kept, num_observed, tail_entries, x, y, speed, direction, acceleration,
                   alive, agent_type, list_row, nbr_id, out_when_observed, pos_scale, speed_scale, dir_scale, t,
                   episode_length)  # fmt: skip
    obs[g, a, 7 * num_observed] = np.float32(slot)


@shared
def observe_listed_in_game_only(g, a, slot, obs, obs_kept, num_observed, tail_entries, x, y, speed, direction,
                                acceleration, alive, agent_type, list_row, nbr_id, out_when_observed, pos_scale,
                                speed_scale, dir_scale, t, episode_length):  # fmt: skip
    """WarpTag's slot phase, but an agent out of the game keeps whatever its observation row held."""
    if alive[g, a] != 0:
        observe_listed(g, a, slot, obs, obs_kept, num_observed, tail_entries, x, y, speed, direction, acceleration,
                       alive, agent_type, list_row, nbr_id, out_when_observed, pos_scale, speed_scale, dir_scale, t,
                       episode_length)  # fmt: skip


@shared
def observe_indexed_leaving_every_row_out_of_the_game(g, a, slot, obs, obs_kept, num_observed, tail_entries, x, y,
                                                      speed, direction, acceleration, alive, agent_type, cell_start,
                                                      cell_agents, index_cells, nbr_id, out_when_observed, pos_scale,
                                                      speed_scale, dir_scale, t, episode_length):  # fmt: skip
    """WarpTag's indexed slot phase, but where ``obs`` is kept it leaves the row of every agent out of the game,
    also of one that was in the game at the launch before (its row still shows it in the game)."""
    if obs_kept != 0 and np.int64(a) >= np.int64(agents_in_index(g, cell_start, index_cells)):
        return
    observe_indexed(g, a, slot, obs, obs_kept, num_observed, tail_entries, x, y, speed, direction, acceleration,
                    alive, agent_type, cell_start, cell_agents, index_cells, nbr_id, out_when_observed, pos_scale,
                    speed_scale, dir_scale, t, episode_length)  # fmt: skip


@shared
def drift_reading_pos_without_its_axis(g, a, pos, wind, obs):
    """Drift's observation with ``pos`` (an agent array of length 2, ``pos[k, g, a]``) indexed as ``pos[g, a]``."""
    obs[g, a, 0] = pos[g, a]
    obs[g, a, 1] = pos[1, g, a]
    obs[g, a, 2] = wind[0, g] - pos[0, g, a]


@shared
def drift_observing_one_entry_too_many(g, a, pos, wind, obs):
    """Drift's observation, and one more entry at ``obs[g, a, obs_dim]``: the next agent's first."""
    obs[g, a, 0] = pos[0, g, a]
    obs[g, a, 1] = pos[1, g, a]
    obs[g, a, 2] = wind[0, g] - pos[0, g, a]
    obs[g, a, 3] = wind[1, g]
