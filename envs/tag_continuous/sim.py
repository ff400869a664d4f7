"""The phases of continuous Tag, one source for the GPU kernel and the CPU backend.

Each function is a phase of :mod:`gpu_vecenv.definition`: its parameters are
names of state arrays (``x[g, a]``, ``nbr_id[k, g, a]``, ...), constants and
framework arrays, and an agent phase writes only agent ``a``'s slots. All
arithmetic is float32 (constants are float32 scalars), in the order the
numpy reference uses, so that the backends agree with it to rounding.
"""

from __future__ import annotations

import math

import numpy as np

from gpu_vecenv import shared
from gpu_vecenv.counter_rng import randint, uniform01
from gpu_vecenv.distance_keys import distance_key, key_distance, key_id
from gpu_vecenv.paired_store import pair_aligned, store_pair

TWO_PI = np.float32(2.0 * math.pi)
HALF_PI = np.float32(0.5 * math.pi)
ZERO = np.float32(0.0)
FAR = np.float32(np.inf)
TAGGER = 1
# The slots a stage of count_runners_left combines, a power of two (its stages shift by COUNT_RADIX_BITS):
# 4 takes half the stages (and barriers) of pairs, for as many loads in all.
COUNT_RADIX_BITS = 2
COUNT_RADIX = 1 << COUNT_RADIX_BITS


@shared
def move(g, a, action, acc_table, turn_table, x, y, speed, direction, acceleration, alive, agent_type,
         tagger_max_speed, runner_max_speed, grid_length, edge_hit_penalty, rewards):  # fmt: skip
    """Steps 1-6 of the spec: accelerate, turn, move, clip to the square."""
    live = np.float32(alive[g, a])
    top = tagger_max_speed if agent_type[g, a] == TAGGER else runner_max_speed
    acc = acceleration[g, a] + acc_table[action[0, g, a]]
    d = (direction[g, a] + turn_table[action[1, g, a]]) % TWO_PI
    if d >= TWO_PI:  # float32 rounding of a tiny negative angle can land on 2*pi itself
        d = d - TWO_PI
    d = d * live
    s = min(max(speed[g, a] + acc, ZERO), top) * live
    if s <= ZERO or s >= top:
        acc = ZERO
    nx = x[g, a] + s * np.float32(math.cos(d))
    ny = y[g, a] + s * np.float32(math.sin(d))
    hit = False
    if nx < ZERO:
        nx, hit = ZERO, True
    elif nx > grid_length:
        nx, hit = grid_length, True
    if ny < ZERO:
        ny, hit = ZERO, True
    elif ny > grid_length:
        ny, hit = grid_length, True
    if hit and alive[g, a] != 0:
        rewards[g, a] += edge_hit_penalty
    x[g, a] = nx
    y[g, a] = ny
    speed[g, a] = s
    direction[g, a] = d
    acceleration[g, a] = acc


@shared
def feature_values(g, a, j, relative, x, y, speed, direction, acceleration, alive, agent_type, pos_scale,
                   speed_scale, dir_scale):  # fmt: skip
    """The seven features of agent ``j`` as seen by agent ``a``: (dx, dy, dspeed, dacc, ddir, type, alive).

    With ``relative`` False the five relative features are zero (the observer
    is out of the game); type and alive are always given. Every value is
    loaded before ``relative`` is looked at: the loads then go out together
    whatever ``relative`` is, not in a second round that waits for the load
    ``relative`` came from.
    """
    dx = (x[g, j] - x[g, a]) * pos_scale
    dy = (y[g, j] - y[g, a]) * pos_scale
    dspeed = (speed[g, j] - speed[g, a]) * speed_scale
    dacc = (acceleration[g, j] - acceleration[g, a]) * speed_scale
    ddir = (direction[g, j] - direction[g, a]) * dir_scale
    kind = np.float32(agent_type[g, j])
    present = np.float32(alive[g, j])
    if not relative:
        dx = ZERO
        dy = ZERO
        dspeed = ZERO
        dacc = ZERO
        ddir = ZERO
    return dx, dy, dspeed, dacc, ddir, kind, present


@shared
def write_features(g, a, j, slot, relative, obs, num_observed, x, y, speed, direction, acceleration, alive,
                   agent_type, pos_scale, speed_scale, dir_scale):  # fmt: skip
    """:func:`feature_values` of agent ``j`` as seen by agent ``a``, into entries ``f * num_observed + slot``,
    every value loaded before the first store."""
    dx, dy, dspeed, dacc, ddir, kind, present = feature_values(g, a, j, relative, x, y, speed, direction,
                                                               acceleration, alive, agent_type, pos_scale,
                                                               speed_scale, dir_scale)  # fmt: skip
    obs[g, a, slot] = dx
    obs[g, a, num_observed + slot] = dy
    obs[g, a, 2 * num_observed + slot] = dspeed
    obs[g, a, 3 * num_observed + slot] = dacc
    obs[g, a, 4 * num_observed + slot] = ddir
    obs[g, a, 5 * num_observed + slot] = kind
    obs[g, a, 6 * num_observed + slot] = present


@shared
def tail_entry(k, g, a, t, episode_length, alive, agent_type):
    """Entry ``k`` after the listed agents: 0 the time, 1 (with ``observe_own_type``) the agent's own type."""
    if k == 0:
        return np.float32(t[g]) / np.float32(episode_length) if alive[g, a] != 0 else ZERO
    return np.float32(agent_type[g, a])


@shared
def write_tail(g, a, obs, num_observed, tail_entries, steps, episode_length, live, own_type):
    """The ``tail_entries`` entries after the listed agents' features, from values the caller loaded
    (``steps = t[g]``, ``live = alive[g, a] != 0``, ``own_type = agent_type[g, a]``): the same values
    as :func:`tail_entry`'s."""
    tail = 7 * num_observed
    obs[g, a, tail] = np.float32(steps) / np.float32(episode_length) if live else ZERO
    if tail_entries > 1:
        obs[g, a, tail + 1] = np.float32(own_type)


@shared
def observe_every_other(g, a, slot, obs, num_observed, tail_entries, x, y, speed, direction, acceleration, alive,
                        agent_type, pos_scale, speed_scale, dir_scale, t, episode_length):  # fmt: skip
    """Full observation, slot ``slot < num_observed``: the features of the ``slot``-th other agent in id
    order (agent ``slot``, or ``slot + 1`` from agent ``a`` on); slot 0 also writes the entries after them.

    The entries after the listed agents ride on slot 0 rather than a slot of their own: a slot of
    their own made one lane of a warp in every few take a path of its own, whose loads waited on
    each other after the other lanes' (the warp runs divergent paths one after the other). Their
    values are loaded with the others, before any store, and only slot 0 stores them.
    """
    steps = t[g]
    live = alive[g, a] != 0
    own_type = agent_type[g, a]
    j = slot if slot < a else slot + 1
    write_features(g, a, j, slot, live, obs, num_observed, x, y, speed, direction, acceleration, alive, agent_type,
                   pos_scale, speed_scale, dir_scale)  # fmt: skip
    if slot == 0:
        write_tail(g, a, obs, num_observed, tail_entries, steps, episode_length, live, own_type)


@shared
def store_entry_pair(obs, g, a, e, first, second, has_first, has_second):
    """Entries ``e`` and ``e + 1`` of agent ``a``'s observation (``e`` 8-byte aligned): both by one 8-byte
    store, or the one of them that is there."""
    if has_first and has_second:
        store_pair(obs, g, a, e, first, second)
    elif has_first:
        obs[g, a, e] = first
    elif has_second:
        obs[g, a, e + 1] = second


@shared
def paired_slots(g, a, slot, obs, num_observed):
    """The two slots of call ``slot`` of a two-a-call observation (see :func:`observe_every_other_paired`):
    ``(first, has_first, has_second, load_first, load_second)``, slots ``first`` and ``first + 1``, whether
    each is inside ``0..num_observed - 1``, and the slots to load their values from (a slot that is not
    there is loaded as the other one, or as slot 0, and its values are not stored)."""
    shift = 0 if pair_aligned(obs, g, a, 0) else 1
    first = np.int64(2 * slot) - shift
    second = first + 1
    has_first = 0 <= first < num_observed
    has_second = second < num_observed
    load_first = first if has_first else (second if has_second else 0)
    load_second = second if has_second else load_first
    return first, has_first, has_second, load_first, load_second


@shared
def store_features_pair(obs, g, a, num_observed, first, has_first, has_second, values_first, values_second):
    """The seven features of slots ``first`` and ``first + 1`` (:func:`feature_values` tuples), each
    feature's two entries by :func:`store_entry_pair`."""
    for f in range(7):
        store_entry_pair(obs, g, a, f * num_observed + first, values_first[f], values_second[f], has_first,
                         has_second)  # fmt: skip


@shared
def observe_every_other_paired(g, a, slot, obs, num_observed, tail_entries, x, y, speed, direction, acceleration,
                               alive, agent_type, pos_scale, speed_scale, dir_scale, t, episode_length):  # fmt: skip
    """:func:`observe_every_other` two observed agents a call, for an even ``num_observed``: call ``slot``
    of ``num_observed // 2 + 1`` writes slots ``2 * slot - shift`` and the one after (those inside
    ``0..num_observed - 1``), each feature's two entries by one 8-byte store; call 0 also the tail.

    A kernel that writes the full observation is bound by its stores
    (``benchmarks/NOTES.md``, v31), and 8-byte stores halve their number.
    They need 8-byte aligned entries: ``shift`` is 1 when agent
    ``a``'s row of ``obs`` starts 4 bytes past an 8-byte boundary, and as
    ``num_observed`` is even every feature's first entry then is too, so each
    feature's first and last slots are written alone, by the first and the
    last call; with ``shift`` 0 the last call has nothing to write.
    """
    steps = t[g]
    live = alive[g, a] != 0
    own_type = agent_type[g, a]
    first, has_first, has_second, load_first, load_second = paired_slots(g, a, slot, obs, num_observed)
    j0 = load_first if load_first < a else load_first + 1
    j1 = load_second if load_second < a else load_second + 1
    values_first = feature_values(g, a, j0, live, x, y, speed, direction, acceleration, alive, agent_type,
                                  pos_scale, speed_scale, dir_scale)  # fmt: skip
    values_second = feature_values(g, a, j1, live, x, y, speed, direction, acceleration, alive, agent_type,
                                   pos_scale, speed_scale, dir_scale)  # fmt: skip
    store_features_pair(obs, g, a, num_observed, first, has_first, has_second, values_first, values_second)
    if slot == 0:
        write_tail(g, a, obs, num_observed, tail_entries, steps, episode_length, live, own_type)


@shared
def clear_nearest(k_max, near_d2, near_id):
    """An empty top-K list: every place at infinite distance with id -1 (an empty place of ``nbr_id``)."""
    for m in range(k_max):
        near_d2[m] = FAR
        near_id[m] = -1


@shared
def insert_nearest(j, d2, k_max, near_d2, near_id):
    """Put agent ``j`` at squared distance ``d2`` into the top-K list, kept sorted by distance then id, where
    ``j`` is larger than every id in the list (a scan by ascending id): a tie in distance then never beats.

    The list is sorted, so the candidate beats every place from the first it
    beats on: place ``m`` then takes what was at ``m - 1``, or the candidate
    if it does not beat ``m - 1``; places before the first it beats keep
    theirs. Each place is decided from its own old value and the one above,
    going from the last place up, so no value is carried from place to place:
    where a warp runs one thread an agent and few warps share a scheduler,
    the places' comparisons and selects issue side by side instead of waiting
    on each other. The fixed trip count lets the GPU compiler unroll the loop,
    keep the list in registers and turn the choices into selects (no branch,
    no local memory). Candidates out of id order use :func:`insert_key`.
    """
    beats = d2 < near_d2[k_max - 1]
    for step in range(k_max - 1):
        m = k_max - 1 - step
        above_d2 = near_d2[m - 1]
        above_id = near_id[m - 1]
        beats_above = d2 < above_d2
        near_d2[m] = (above_d2 if beats_above else d2) if beats else near_d2[m]
        near_id[m] = (above_id if beats_above else j) if beats else near_id[m]
        beats = beats_above
    near_d2[0] = d2 if beats else near_d2[0]
    near_id[0] = j if beats else near_id[0]


@shared
def insert_key(key, k_max, near_key):
    """:func:`insert_nearest` for a list of :func:`~gpu_vecenv.distance_keys.distance_key` keys, sorted
    ascending: the key's order is (distance, id), so one integer comparison a place decides where
    :func:`insert_nearest` would need two (the distances, then the ids on a tie), and one value moves.

    The same scheme: each place is decided from its own old value and the one
    above, from the last place up, with no value carried between places.
    """
    beats = key < near_key[k_max - 1]
    for step in range(k_max - 1):
        m = k_max - 1 - step
        above = near_key[m - 1]
        beats_above = key < above
        near_key[m] = (above if beats_above else key) if beats else near_key[m]
        beats = beats_above
    near_key[0] = key if beats else near_key[0]


@shared(inline=False)
def count_alive(g, num_agents, alive, alive_count):
    """Once per game: slot ``a`` of ``alive_count[0]`` gets the number of agents in the game among ``0..a``."""
    total = np.int32(0)
    for a in range(num_agents):
        if alive[g, a] != 0:
            total += np.int32(1)
        alive_count[0, g, a] = total


@shared
def count_alive_before(g, a, stage, alive, alive_count):
    """Stage ``stage`` of :func:`count_alive`'s prefix count, spread over the agents (a Hillis-Steele scan).

    After stage ``s``, slot ``a`` of plane ``s % 2`` of ``alive_count`` holds
    the number of agents in the game among the ``2**(s + 1)`` slots up to and
    including ``a``: agent ``a`` adds the previous plane's count ``2**s``
    slots below to its own. After ``ceil(log2(num_agents))`` stages plane
    ``(stages - 1) % 2`` holds :func:`count_alive`'s counts.
    """
    one = np.uint32(1)  # unsigned throughout, as in merge_cell_runs
    s = np.uint32(stage)
    q = np.uint32(a)
    width = np.uint32(one << s)
    if s == 0:
        total = np.int32(1) if alive[g, q] != 0 else np.int32(0)
        if q >= one and alive[g, q - one] != 0:
            total += np.int32(1)
    else:
        src = np.uint32((s + one) & one)
        total = alive_count[src, g, q]
        if q >= width:
            total += alive_count[src, g, q - width]
    alive_count[s & one, g, q] = total


@shared
def list_alive(g, a, num_agents, x, y, alive, alive_count, count_plane, alive_list, list_row, row_x, row_y):
    """From the prefix counts: agent ``a``'s row among the agents in the game (``list_row``, -1 if out),
    and in slot ``a`` of ``alive_list`` the id of the ``a``-th agent in the game, in ascending ids, with
    its position in slot ``a`` of ``row_x`` / ``row_y``."""
    counted = alive_count[count_plane, g, a]
    list_row[g, a] = counted - np.int32(1) if alive[g, a] != 0 else np.int32(-1)
    if np.int64(a) < np.int64(alive_count[count_plane, g, num_agents - 1]):
        # The a-th agent in the game is at the first slot whose count exceeds a.
        one = np.uint32(1)
        lo = np.uint32(0)
        hi = np.uint32(num_agents - 1)
        while lo < hi:
            m = np.uint32((lo + hi) >> one)
            if np.int64(alive_count[count_plane, g, m]) > np.int64(a):
                hi = m
            else:
                lo = np.uint32(m + one)
        alive_list[g, a] = lo
        row_x[g, a] = x[g, lo]
        row_y[g, a] = y[g, lo]


@shared(inline=False)
def find_nearest(g, a, num_agents, num_observed, row_x, row_y, alive_count, count_plane, alive_list, near_d2,
                 near_id, nbr_id):  # fmt: skip
    """The K nearest others in the game of the agent in row ``a`` of ``alive_list``, nearest first, ties to
    the lower id, into ``nbr_id[:, g, a]`` (read through ``list_row``); rows past the last agent get -1s.

    Thread ``a`` works for the ``a``-th agent in the game and looks only at
    agents in the game, so the threads of agents out of it neither idle
    inside busy warps nor cost every search a skipped candidate. The
    candidates are the rows, read from the positions :func:`list_alive`
    copied in row order (two loads a candidate, neither waiting on another);
    rows ascend with ids, so the list keeps rows and ties go to the lower
    row, and the ids are looked up once at the end. The running top-K list
    is kept sorted in the scratch arrays ``near_d2`` / ``near_id``; empty
    places get -1 (fewer than K others in the game).
    """
    k_max = num_observed
    clear_nearest(k_max, near_d2, near_id)
    in_game = alive_count[count_plane, g, num_agents - 1]
    if np.int64(a) < np.int64(in_game):
        # Rows as unsigned subscripts, as in merge_cell_runs.
        me = np.uint32(a)
        xa = row_x[g, me]
        ya = row_y[g, me]
        end = np.uint32(in_game)
        i = np.uint32(0)
        while i < end:
            row = i
            i = np.uint32(i + np.uint32(1))
            if row == me:
                continue
            dx = row_x[g, row] - xa
            dy = row_y[g, row] - ya
            d2 = dx * dx + dy * dy
            # Ascending rows: a tie with the last place never beats it. Most candidates stop here.
            if d2 < near_d2[k_max - 1]:
                insert_nearest(np.int32(row), d2, k_max, near_d2, near_id)
    for m in range(k_max):
        row = near_id[m]
        nbr_id[m, g, a] = alive_list[g, np.uint32(row)] if row >= 0 else np.int32(-1)


@shared
def cell_column(v, index_cells, inv_cell_size):
    """The column (or, given a y, the row) of the index's cells that coordinate ``v`` falls in."""
    return min(int(v * inv_cell_size), index_cells - 1)


@shared
def cell_containing(g, a, x, y, alive, index_cells, inv_cell_size):
    """Agent ``a``'s cell of the spatial index (row-major, ``index_cells`` per side); ``index_cells**2`` if out."""
    if alive[g, a] == 0:
        return index_cells * index_cells
    cx = cell_column(x[g, a], index_cells, inv_cell_size)
    cy = cell_column(y[g, a], index_cells, inv_cell_size)
    return cy * index_cells + cx


@shared
def assign_cell(g, a, x, y, alive, cell_of, index_cells, inv_cell_size):
    """Agent ``a``'s cell, for :func:`build_index`."""
    cell_of[g, a] = cell_containing(g, a, x, y, alive, index_cells, inv_cell_size)


@shared
def agents_in_index(g, cell_start, index_cells):
    """How many of the game's agents the index lists (those in the game): slot ``index_cells**2`` of
    ``cell_start``, past the last cell's start, where :func:`place_cell_key` (staged) and
    :func:`build_index` (serial) leave it."""
    return cell_start[g, index_cells * index_cells]


@shared
def place_cell_key(g, a, x, y, alive, sort_key, alive_count, count_plane, cell_start, cell_agents, num_agents,
                   index_cells, inv_cell_size):  # fmt: skip
    """If agent ``a`` is in the game, its sort key ``cell * num_agents + a`` for :func:`merge_cell_runs`,
    placed among the keys of the agents in the game by the prefix counts of :func:`count_alive_before`
    (plane ``count_plane``), so that only they are sorted; else its id in ``cell_agents``, at its place
    among the agents out of the game after the ``n`` places that :func:`list_cells` fills (ascending ids,
    as :func:`build_index` lists them). The last agent stores ``n`` in ``cell_start[g, index_cells**2]``,
    where :func:`list_cells` leaves it.
    """
    counted = alive_count[count_plane, g, a]
    if alive[g, a] != 0:
        c = cell_containing(g, a, x, y, alive, index_cells, inv_cell_size)
        sort_key[0, g, counted - np.int32(1)] = c * num_agents + a
    else:
        in_game = alive_count[count_plane, g, num_agents - 1]
        cell_agents[g, in_game + np.int32(a) - counted] = a
    if a == num_agents - 1:
        cell_start[g, index_cells * index_cells] = counted


@shared(inline=False)
def build_index(g, num_agents, index_cells, x, y, cell_of, cell_start, cell_agents, row_x, row_y):
    """Counting sort of the game's agents by cell, once per game.

    Afterwards cell ``c`` holds ``cell_agents[g, cell_start[g, c] : cell_start[g, c + 1]]``
    in ascending ids, and the agent at place ``p`` of that list has its position in slot ``p`` of
    ``row_x`` / ``row_y``; agents out of the game are in no cell, and follow the last cell's agents in
    ``cell_agents``, in ascending ids (for :func:`observe_indexed`). ``cell_start`` is an
    agent-sized array whose first ``index_cells**2 + 1`` slots are used.
    """
    num_cells = index_cells * index_cells
    for c in range(num_cells + 1):
        cell_start[g, c] = 0
    for j in range(num_agents):
        c = cell_of[g, j]
        if c < num_cells:
            cell_start[g, c + 1] += 1
    for c in range(num_cells):
        cell_start[g, c + 1] += cell_start[g, c]
    # Each placement advances its cell's start to the next free place; when done, start[c] is the
    # old start[c + 1], so one shift restores the starts.
    for j in range(num_agents):
        c = cell_of[g, j]
        if c < num_cells:
            cell_agents[g, cell_start[g, c]] = j
            row_x[g, cell_start[g, c]] = x[g, j]
            row_y[g, cell_start[g, c]] = y[g, j]
            cell_start[g, c] += 1
    for c in range(num_cells, 0, -1):
        cell_start[g, c] = cell_start[g, c - 1]
    cell_start[g, 0] = 0
    place = cell_start[g, num_cells]
    for j in range(num_agents):
        if cell_of[g, j] >= num_cells:
            cell_agents[g, place] = j
            place += 1


@shared
def merge_cell_runs(g, a, stage, sort_key, cell_start, index_cells):
    """Stage ``stage`` of a merge sort of the keys of the agents in the game, the staged form of
    :func:`build_index`.

    The keys are the first ``n = cell_start[g, index_cells**2]`` places of
    plane 0 (:func:`place_cell_key`). Before the stage, plane ``stage % 2``
    of ``sort_key`` holds runs of ``2**stage`` ascending keys; agent
    ``a < n`` writes place ``a`` of the merged pair of runs into the other
    plane, finding it by a binary search along the merge path (what it
    writes is the ``k``-th smallest key of the pair, ``k`` its place there),
    so no two agents write one place; agents from ``n`` on have no place.
    The keys are unique (the id is part of them). After
    ``ceil(log2(num_agents))`` stages the ``n`` keys are one ascending run.
    """
    # Every position is unsigned (no negative-index wraparound per subscript), every literal too: an
    # unsigned 64-bit value met with a signed one would make a float.
    one = np.uint32(1)
    s = np.uint32(stage)
    q = np.uint32(a)
    n = np.uint32(agents_in_index(g, cell_start, index_cells))
    if q >= n:
        return
    src = s & one
    dst = src ^ one
    width = np.uint32(one << s)
    start = np.uint32(q - q % (width + width))
    mid = np.uint32(min(start + width, n))
    end = np.uint32(min(mid + width, n))
    if mid == end:  # the last run of an odd count has no partner: it stays
        sort_key[dst, g, q] = sort_key[src, g, q]
        return
    k = np.uint32(q - start)
    # The first k keys of the merged run are the first i of run one and the first k - i of run two.
    lo = np.uint32(k - (end - mid) if k > end - mid else np.uint32(0))
    hi = np.uint32(min(k, mid - start))
    while lo < hi:
        i = np.uint32((lo + hi) >> one)
        if sort_key[src, g, start + i] < sort_key[src, g, mid + (k - i - one)]:
            lo = np.uint32(i + one)
        else:
            hi = i
    i = np.uint32(start + lo)
    j = np.uint32(mid + (k - lo))
    if j >= end or (i < mid and sort_key[src, g, i] < sort_key[src, g, j]):
        sort_key[dst, g, q] = sort_key[src, g, i]
    else:
        sort_key[dst, g, q] = sort_key[src, g, j]


@shared
def list_cells(g, a, x, y, sort_key, cell_agents, cell_start, row_x, row_y, num_agents, index_cells, sorted_plane):
    """:func:`build_index`'s result from the sorted keys of :func:`merge_cell_runs` (plane ``sorted_plane``).

    Agent ``a`` lists the agent at place ``a`` (if that many are in the game,
    ``cell_start[g, index_cells**2]``) with its position and, for
    ``a < index_cells**2``, finds where cell ``a`` starts by a binary search
    of the keys; ``cell_agents`` past the last agent in the game lists the
    agents out of the game, as :func:`place_cell_key` left it.
    """
    n = np.int64(num_agents)
    num_cells = np.int64(index_cells) * np.int64(index_cells)
    in_game = agents_in_index(g, cell_start, index_cells)
    if np.int64(a) < np.int64(in_game):
        j = np.int64(sort_key[sorted_plane, g, a]) % n
        cell_agents[g, a] = j
        row_x[g, a] = x[g, j]
        row_y[g, a] = y[g, j]
    if np.int64(a) < num_cells:
        first = np.int64(a) * n
        one = np.uint32(1)
        lo = np.uint32(0)
        hi = np.uint32(in_game)
        while lo < hi:
            m = np.uint32((lo + hi) >> one)
            if sort_key[sorted_plane, g, m] < first:
                lo = np.uint32(m + one)
            else:
                hi = m
        cell_start[g, a] = lo


@shared(inline=False)
def find_nearest_indexed(g, a, num_observed, row_x, row_y, cell_start, cell_agents, index_cells, inv_cell_size,
                         cell_size, index_margin, near_key, nbr_id):  # fmt: skip
    """:func:`find_nearest`'s result for the agent at place ``a`` of the index's list, searching the
    index's cells ring by ring around it.

    Thread ``a`` works for the agent the index lists at place ``a``, so a
    warp's agents are neighbours that search the same cells, and agents out
    of the game take no thread. The first ring is the 3 x 3 cells around the
    agent's; a ring is read by rows, a row's ring cells in one run of the
    list where they are neighbours (the first ring's rows, a ring's top and
    bottom rows), else one run a cell. The rings grow until the list holds K agents
    all nearer than anything outside the rings searched (their distance to
    the rings' border, less ``index_margin`` for the rounding of cell
    assignment). Candidates are places of the list, read from the positions
    the index copied in its order (two loads a candidate, neither waiting on
    another); a candidate's id is loaded only where its distance is no more
    than the last place's. Candidates arrive out of id order, so the list
    holds :func:`~gpu_vecenv.distance_keys.distance_key` keys, whose order
    breaks ties on the id (:func:`insert_key`; before, a separate comparison
    of the ids on equal distances was 11% of the 100+900 step's instructions).
    """
    # Places past the agents in the game have no list: their rows of nbr_id are never read, so not written.
    if np.int64(a) >= np.int64(agents_in_index(g, cell_start, index_cells)):
        return
    k_max = num_observed
    empty = distance_key(FAR, -1)
    for m in range(k_max):
        near_key[m] = empty
    xa = row_x[g, a]
    ya = row_y[g, a]
    # The agent's cell, as cell_containing computed it from the same position.
    cx = cell_column(xa, index_cells, inv_cell_size)
    cy = cell_column(ya, index_cells, inv_cell_size)
    last = index_cells - 1
    rings = max(max(cx, last - cx), max(cy, last - cy))
    # The first ring searched is the 3 x 3 cells around the agent's (one cell rarely holds K agents).
    for r in range(1, max(rings, 1) + 1):
        for qy in range(max(cy - r, 0), min(cy + r, last) + 1):
            row = qy * index_cells
            # A row of ring cells is one run of the index's list (cells of a row are neighbours in it):
            # the ring's top and bottom rows, and every row of the first ring; other rows hold two ring
            # cells, one at each end.
            edge = r == 1 or qy == cy - r or qy == cy + r
            for end in range(2):
                if edge:
                    if end == 1:
                        break
                    first = row + max(cx - r, 0)
                    past = row + min(cx + r, last) + 1
                else:
                    qx = cx - r if end == 0 else cx + r
                    if qx < 0 or qx > last:
                        continue
                    first = row + qx
                    past = first + 1
                for p in range(cell_start[g, first], cell_start[g, past]):
                    if p == a:
                        continue
                    dx = row_x[g, p] - xa
                    dy = row_y[g, p] - ya
                    d2 = dx * dx + dy * dy
                    if d2 <= key_distance(near_key[k_max - 1]):
                        insert_key(distance_key(d2, cell_agents[g, p]), k_max, near_key)
        worst = key_distance(near_key[k_max - 1])
        if key_id(near_key[k_max - 1]) >= 0:  # the list is full
            gap = FAR  # distance from the agent to the nearest cell not yet searched
            if cx - r > 0:
                gap = min(gap, xa - np.float32(cx - r) * cell_size)
            if cx + r < last:
                gap = min(gap, np.float32(cx + r + 1) * cell_size - xa)
            if cy - r > 0:
                gap = min(gap, ya - np.float32(cy - r) * cell_size)
            if cy + r < last:
                gap = min(gap, np.float32(cy + r + 1) * cell_size - ya)
            gap = gap - index_margin
            if gap > ZERO and worst < gap * gap:
                break
    for m in range(k_max):
        nbr_id[m, g, a] = key_id(near_key[m])


@shared
def clear_features(g, a, slot, obs, num_observed):
    """Zeros for the seven features of slot ``slot`` of agent ``a``'s partial observation (an empty place)."""
    for f in range(7):
        obs[g, a, f * num_observed + slot] = ZERO


@shared
def write_listed_slot(g, a, j, slot, obs, num_observed, tail_entries, x, y, speed, direction, acceleration, alive,
                      agent_type, pos_scale, speed_scale, dir_scale, steps, episode_length, live,
                      own_type):  # fmt: skip
    """Slot ``slot`` of agent ``a``'s partial observation: the seven features of agent ``j`` (zeros where
    ``j < 0``, an empty place) and, for slot 0, the entries after them (:func:`write_tail`'s arguments
    loaded by the caller)."""
    if j < 0:
        clear_features(g, a, slot, obs, num_observed)
    else:
        write_features(g, a, j, slot, True, obs, num_observed, x, y, speed, direction, acceleration, alive,
                       agent_type, pos_scale, speed_scale, dir_scale)  # fmt: skip
    if slot == 0:
        write_tail(g, a, obs, num_observed, tail_entries, steps, episode_length, live, own_type)


@shared
def observe_listed(g, a, slot, obs, obs_kept, num_observed, tail_entries, x, y, speed, direction, acceleration,
                   alive, agent_type, list_row, nbr_id, out_when_observed, pos_scale, speed_scale, dir_scale, t,
                   episode_length):  # fmt: skip
    """Partial observation, slot ``slot < num_observed``: the seven features of the agent listed at
    ``nbr_id[slot]`` in agent ``a``'s row ``list_row[a]`` (zeros for an empty place, or for every place
    when ``a`` is out of the game); slot 0 also writes the entries after them (as in
    :func:`observe_every_other`, whose reasons hold here too). A kept row that already is that of an
    agent out of the game is left, as in :func:`observe_indexed`.

    The listed id is loaded once and the seven values side by side, before any store: one chain of
    loads per listed agent rather than one per entry.
    """
    live = alive[g, a] != 0
    if not live and obs_kept != 0 and out_when_observed[g, a] != 0:
        return
    steps = t[g]
    own_type = agent_type[g, a]
    row = list_row[g, a]
    j = nbr_id[slot, g, row] if row >= 0 else np.int32(-1)
    write_listed_slot(g, a, j, slot, obs, num_observed, tail_entries, x, y, speed, direction, acceleration, alive,
                      agent_type, pos_scale, speed_scale, dir_scale, steps, episode_length, live, own_type)  # fmt: skip


@shared
def tail_pair_value(e, tail, tail_entries, own_type):
    """Entry ``e`` of the row of an agent out of the game: zero, but for the own type after the time (which is
    zero out of the game) when the observation has it."""
    return np.float32(own_type) if tail_entries > 1 and e == tail + 1 else ZERO


@shared
def clear_row_share(g, a, slot, obs, num_observed, tail_entries, own_type):
    """Share ``slot`` of ``num_observed`` of the row of agent ``a``, out of the game: the entries
    :func:`clear_features` and :func:`write_tail` give it over all its slots, by 8-byte stores.

    The row's entries from ``shift`` on (1 where the row starts 4 bytes past
    an 8-byte boundary, else 0) are taken two at a time: pair ``p`` is
    entries ``shift + 2p`` and the next, and share ``slot`` writes the pairs
    ``p = slot, slot + num_observed, ...``, each by one 8-byte store (the
    row's last entry alone where a pair would leave the row); share 0 also
    writes entry 0 where ``shift`` is 1. So every entry is written by one
    share, and neighbouring shares of one row (neighbouring lanes of a warp)
    write neighbouring pairs: about 3.6 stores a share at K = 10, where the
    features' and the tail's stores wrote 4 bytes each, about 7.2 a slot.
    """
    tail = 7 * num_observed
    width = tail + tail_entries
    shift = 0 if pair_aligned(obs, g, a, 0) else 1
    if shift == 1 and slot == 0:
        obs[g, a, 0] = ZERO
    e = np.int64(shift) + 2 * np.int64(slot)
    while e < width:
        first = tail_pair_value(e, tail, tail_entries, own_type)
        if e + 1 < width:
            store_pair(obs, g, a, e, first, tail_pair_value(e + 1, tail, tail_entries, own_type))
        else:
            obs[g, a, e] = first
        e += 2 * np.int64(num_observed)


@shared
def observe_indexed(g, a, slot, obs, obs_kept, num_observed, tail_entries, x, y, speed, direction, acceleration,
                    alive, agent_type, cell_start, cell_agents, index_cells, nbr_id, out_when_observed, pos_scale,
                    speed_scale, dir_scale, t, episode_length):  # fmt: skip
    """The index's partial observation, slot ``slot``, of the agent its list names at place ``a``.

    The first ``n`` places (``cell_start[g, index_cells**2]``) are the agents
    in the game, each with the list :func:`find_nearest_indexed` left in
    row ``a`` of ``nbr_id``, written as :func:`observe_listed` writes it; the
    places after them are the agents out of the game, whose rows (zeros, and
    the entries :func:`write_tail` gives an agent out of the game) are
    written in shares of 8-byte stores (:func:`clear_row_share`). The list
    names every agent once, so every row is written, each by its own
    (place, slot) pairs, in one loop over the pairs.

    Where ``obs`` keeps what the launch before wrote (``obs_kept``: the
    env's own buffer, ``copy=False``), the row of an agent that was out of
    the game at that launch's observation too (``out_when_observed``, which
    :func:`note_out_of_game` writes after the observation) already holds
    these values, and is left as it is: out of the game, an agent's row
    stays the same until its game is reset. In a rollout of 100 + 900 most
    rows are such rows (78%, 450 MB a step at 2000 games).

    The place says whether its agent is in the game: a pair's first load is
    the list's entry (in shared memory on the GPU where the list is
    block-local), where reading the agent's ``alive`` flag was one more load
    from the game's state for each pair, most of them out of the game in a
    rollout. The tail's values (the step, the agent's type) are loaded by
    every pair before its first store: the compiler may not move a load
    above a store that could write the same memory, and loaded after the
    features' stores, slot 0 waited for them (a warp's pairs name three or
    four agents, so the extra loads are a few addresses a warp).
    """
    me = cell_agents[g, a]
    in_game = np.int64(a) < np.int64(agents_in_index(g, cell_start, index_cells))
    if not in_game and obs_kept != 0 and out_when_observed[g, me] != 0:
        return
    steps = t[g]
    own_type = agent_type[g, me]
    if in_game:
        # The observer's id and its list's entry side by side, then the listed agent's values.
        j = nbr_id[slot, g, a]
        write_listed_slot(g, me, j, slot, obs, num_observed, tail_entries, x, y, speed, direction, acceleration,
                          alive, agent_type, pos_scale, speed_scale, dir_scale, steps, episode_length, True,
                          own_type)  # fmt: skip
    else:
        clear_row_share(g, me, slot, obs, num_observed, tail_entries, own_type)


@shared
def note_out_of_game(g, a, alive, out_when_observed):
    """Whether agent ``a`` was out of the game at this launch's observation, for the next launch's
    (:func:`observe_indexed`, :func:`observe_listed`): a phase of its own after the observation, since
    the observation's pairs read it, and no pair may read a note another pair of its row just wrote."""
    out_when_observed[g, a] = np.int32(1) if alive[g, a] == 0 else np.int32(0)


@shared
def pay_step_reward(g, a, alive, agent_type, tagged_by, rewards, step_penalty_for_tagger, step_reward_for_runner):
    """Clear agent ``a``'s tag record and pay its step reward; True for a runner in the game (it may be tagged)."""
    tagged_by[g, a] = -1
    if alive[g, a] == 0:
        return False
    if agent_type[g, a] == TAGGER:
        rewards[g, a] += step_penalty_for_tagger
        return False
    rewards[g, a] += step_reward_for_runner
    return True


@shared
def tag_if_caught(g, a, best, best_d2, alive, tagged_by, rewards, tag_radius, tag_penalty_for_runner,
                  runner_exits_game_after_tagged):  # fmt: skip
    """Runner ``a``, whose nearest tagger is ``best`` (-1: none) at squared distance ``best_d2``, is tagged
    when that tagger is nearer than the tag radius: it records the tagger, pays the penalty, maybe leaves."""
    if best >= 0 and np.float32(math.sqrt(best_d2)) < tag_radius:
        tagged_by[g, a] = best
        rewards[g, a] += tag_penalty_for_runner
        if runner_exits_game_after_tagged != 0:
            alive[g, a] = 0


@shared
def tag_runners(g, a, x, y, alive, agent_type, tagged_by, rewards, tagger_ids, tag_radius,
                step_penalty_for_tagger, step_reward_for_runner, tag_penalty_for_runner,
                runner_exits_game_after_tagged):  # fmt: skip
    """Reward step 1-2 for agent ``a``: step rewards, and a runner checks whether its nearest tagger caught it.

    The runner records the tagger in its own ``tagged_by`` slot; taggers count
    those records in the next phase, so no two threads write one address.
    """
    if not pay_step_reward(g, a, alive, agent_type, tagged_by, rewards, step_penalty_for_tagger,
                           step_reward_for_runner):  # fmt: skip
        return
    best = -1
    best_d2 = FAR
    xa = x[g, a]
    ya = y[g, a]
    for n in range(tagger_ids.shape[0]):  # ascending ids, so ties go to the lower id
        j = tagger_ids[n]
        if alive[g, j] != 0:
            dx = x[g, j] - xa
            dy = y[g, j] - ya
            d2 = dx * dx + dy * dy
            if d2 < best_d2:
                best = j
                best_d2 = d2
    tag_if_caught(g, a, best, best_d2, alive, tagged_by, rewards, tag_radius, tag_penalty_for_runner,
                  runner_exits_game_after_tagged)  # fmt: skip


@shared
def pay_survivor_bonus(g, a, alive, tagged_by, rewards, t, episode_length, end_of_game_reward_for_runner):
    """Runner ``a``, still in the game and not tagged this step when the game reaches its length, gains the bonus."""
    if alive[g, a] != 0 and tagged_by[g, a] < 0 and t[g] == episode_length:
        rewards[g, a] += end_of_game_reward_for_runner


@shared
def reward_taggers_and_survivors(g, a, alive, agent_type, tagged_by, rewards, num_agents, t, episode_length,
                                 tag_reward_for_tagger, end_of_game_reward_for_runner):  # fmt: skip
    """Reward step 2-3: a tagger gains once per runner it tagged; untagged survivors gain the end bonus."""
    if agent_type[g, a] == TAGGER:
        for j in range(num_agents):
            if tagged_by[g, j] == a:
                rewards[g, a] += tag_reward_for_tagger
    else:
        pay_survivor_bonus(g, a, alive, tagged_by, rewards, t, episode_length, end_of_game_reward_for_runner)


@shared
def disc_window(xc, yc, reach, index_cells, inv_cell_size):
    """Rows ``qy0..qy1`` and columns ``qx0..qx1`` (inclusive) of the index's cells that an agent within
    ``reach`` of ``(xc, yc)`` can be counted in: the cells of the disc's bounding box.

    :func:`cell_column` never decreases with its coordinate, so an agent whose
    coordinates lie within ``reach`` of ``(xc, yc)`` has its column and row
    between those of the box's corners.
    """
    return (cell_column(max(yc - reach, ZERO), index_cells, inv_cell_size),
            cell_column(yc + reach, index_cells, inv_cell_size),
            cell_column(max(xc - reach, ZERO), index_cells, inv_cell_size),
            cell_column(xc + reach, index_cells, inv_cell_size))  # fmt: skip


@shared(inline=False)
def tag_runners_indexed(g, a, x, y, alive, agent_type, tagged_by, rewards, cell_start, cell_agents, index_cells,
                        inv_cell_size, index_margin, tag_radius, step_penalty_for_tagger, step_reward_for_runner,
                        tag_penalty_for_runner, runner_exits_game_after_tagged):  # fmt: skip
    """:func:`tag_runners`'s result, looking for taggers only in the index's cells within the tag radius.

    A runner is tagged when its nearest tagger is nearer than the tag radius;
    any such tagger lies in the cells of the box around the runner that holds
    the disc of the tag radius (widened by ``index_margin`` against rounding:
    a tagger's distance and its coordinates' differences are rounded apart),
    so the nearest of the taggers found there decides (ties to the lower id,
    explicitly, since cells list agents out of id order). The box spans one or
    two cells a side where the radius is less than half a cell (WarpTag's
    default: 0.4 against 1.43 at 1000 agents), about 2.4 cells on average
    against the 9 of the ring around the runner's own cell.
    """
    if not pay_step_reward(g, a, alive, agent_type, tagged_by, rewards, step_penalty_for_tagger,
                           step_reward_for_runner):  # fmt: skip
        return
    best = -1
    best_d2 = FAR
    xa = x[g, a]
    ya = y[g, a]
    qy0, qy1, qx0, qx1 = disc_window(xa, ya, tag_radius + index_margin, index_cells, inv_cell_size)
    for qy in range(qy0, qy1 + 1):
        row = qy * index_cells
        # The box's cells of a row are neighbours in the index's list: one run of it.
        for p in range(cell_start[g, row + qx0], cell_start[g, row + qx1 + 1]):
            j = cell_agents[g, p]
            # Listed, a tagger is in the game: the index lists only those, and taggers never leave it.
            if agent_type[g, j] != TAGGER:
                continue
            # Written out, as in tag_runners: a helper returning (best, best_d2) cost the CPU kernel 20%.
            dx = x[g, j] - xa
            dy = y[g, j] - ya
            d2 = dx * dx + dy * dy
            if d2 < best_d2 or (d2 == best_d2 and j < best):
                best = j
                best_d2 = d2
    tag_if_caught(g, a, best, best_d2, alive, tagged_by, rewards, tag_radius, tag_penalty_for_runner,
                  runner_exits_game_after_tagged)  # fmt: skip


@shared(inline=False)
def reward_taggers_and_survivors_indexed(g, a, x, y, alive, agent_type, tagged_by, rewards, cell_start,
                                         cell_agents, index_cells, inv_cell_size, index_margin, tag_radius, t,
                                         episode_length, tag_reward_for_tagger,
                                         end_of_game_reward_for_runner):  # fmt: skip
    """:func:`reward_taggers_and_survivors`'s result; a tagger counts the runners it tagged among the cells
    of the box around it that :func:`tag_runners_indexed` searched around them (a runner it tagged was
    within the tag radius)."""
    if agent_type[g, a] == TAGGER:
        # Out of the game: it tagged no one (runners look for taggers in the game).
        if alive[g, a] == 0:
            return
        qy0, qy1, qx0, qx1 = disc_window(x[g, a], y[g, a], tag_radius + index_margin, index_cells, inv_cell_size)
        for qy in range(qy0, qy1 + 1):
            row = qy * index_cells
            for p in range(cell_start[g, row + qx0], cell_start[g, row + qx1 + 1]):
                if tagged_by[g, cell_agents[g, p]] == a:
                    rewards[g, a] += tag_reward_for_tagger
    else:
        pay_survivor_bonus(g, a, alive, tagged_by, rewards, t, episode_length, end_of_game_reward_for_runner)


@shared
def end_game(g, alive, agent_type, num_agents, t, episode_length, terminated):
    """The game is over at the time limit or when no runner is left."""
    runners_left = 0
    for j in range(num_agents):
        if agent_type[g, j] != TAGGER and alive[g, j] != 0:
            runners_left += 1
    if runners_left == 0 or t[g] >= episode_length:
        terminated[g] = 1


@shared
def count_runners_left(g, a, stage, alive, agent_type, runners_left, num_agents):
    """Stage ``stage`` of a sum over the game's agents, the staged form of :func:`end_game`'s count (a tree
    of radix ``R =`` :data:`COUNT_RADIX`, 4).

    Before stage ``s`` the first ``size = ceil(num_agents / R**s)`` slots of
    ``runners_left`` hold partial sums (before stage 0, each agent's own
    0 or 1); agent ``a`` in the first ``R``-th of them, ``a < part =
    ceil(size / R)``, adds the slots ``part``, ``2 * part``, ... above its
    own (those below ``size``). After ``ceil(log_R(num_agents))`` stages
    slot 0 holds the number of runners in the game.
    """
    one = np.uint32(1)  # unsigned throughout, as in merge_cell_runs
    bits = np.uint32(COUNT_RADIX_BITS)
    s = np.uint32(stage)
    q = np.uint32(a)
    shift = np.uint32(bits * s)
    size = np.uint32((np.uint32(num_agents) + (one << shift) - one) >> shift)
    part = np.uint32((size + np.uint32(COUNT_RADIX) - one) >> bits)
    if q >= part:
        return
    total = np.int32(0)
    for j in range(COUNT_RADIX):
        other = np.uint32(q + np.uint32(j) * part)
        if other < size:
            if s == 0:
                if agent_type[g, other] != TAGGER and alive[g, other] != 0:
                    total += np.int32(1)
            else:
                total += runners_left[g, other]
    runners_left[g, q] = total


@shared
def end_game_counted(g, runners_left, t, episode_length, terminated):
    """:func:`end_game` with the runners counted by :func:`count_runners_left`."""
    if runners_left[g, 0] == 0 or t[g] >= episode_length:
        terminated[g] = 1


@shared
def place_agent(g, a, seed, episode, init_x, init_y, init_direction, x, y, speed, direction, acceleration,
                alive, tagged_by, grid_length):  # fmt: skip
    """A new initial state for agent ``a``: draws 3a, 3a+1 (position) and 3a+2 (heading) of this reset."""
    s = seed[g]
    e = episode[g]
    if math.isnan(init_x[g, a]):
        x[g, a] = uniform01(s, e, 3 * a) * grid_length
    else:
        x[g, a] = init_x[g, a]
    if math.isnan(init_y[g, a]):
        y[g, a] = uniform01(s, e, 3 * a + 1) * grid_length
    else:
        y[g, a] = init_y[g, a]
    if math.isnan(init_direction[g, a]):
        direction[g, a] = np.float32(randint(s, e, 3 * a + 2, 4)) * HALF_PI
    else:
        direction[g, a] = init_direction[g, a]
    speed[g, a] = ZERO
    acceleration[g, a] = ZERO
    alive[g, a] = 1
    tagged_by[g, a] = -1
