"""Staged phases: work once done by one thread per game, spread over the game's agents in stages.

``Phase(fn, stages=S)`` runs ``fn`` for every agent at ``stage = 0``, then, after a barrier, at
``stage = 1``, and so on. WarpTag-v0 uses it with ``game_work="staged"``: the spatial index's sort
by cell becomes a merge sort (``merge_cell_runs``, then ``list_cells``) and the count of runners
left a tree sum (``count_runners_left``). Whatever runs the work, the game must be the same, bit
for bit, and no stage may depend on the order its agents run in.
"""

from __future__ import annotations

import dataclasses
import io

import gymnasium as gym
import numba
import numpy as np
import pytest
import torch
from conftest import SMALL_TAG

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from envs.tag_continuous import sim
from envs.tag_continuous.config import TagConfig
from envs.tag_continuous.env import index_cells_per_side, stages_for, tag_definition
from gpu_vecenv.check import check_agent_order
from gpu_vecenv.codegen import generate_source
from gpu_vecenv.definition import Phase

merge_cell_runs = sim.merge_cell_runs.py_func
list_cells = sim.list_cells.py_func
place_cell_key = sim.place_cell_key.py_func
assign_cell = sim.assign_cell.py_func
build_index = sim.build_index.py_func
count_runners_left = sim.count_runners_left.py_func
count_alive = sim.count_alive.py_func
count_alive_before = sim.count_alive_before.py_func
list_alive = sim.list_alive.py_func
COUNT_RADIX = sim.COUNT_RADIX


def run_stages(phase, stages, num_agents, args, rng):
    """Every stage of a staged phase for one game (g = 0), its agents in a random order each stage."""
    for stage in range(stages):
        for a in rng.permutation(num_agents):
            phase(0, int(a), stage, *args)


@pytest.mark.parametrize("num_agents", [*range(2, 130), 255, 256, 257, 511, 512, 513, 1000, 1025])
def test_the_merge_sort_builds_the_index_the_serial_build_builds(num_agents):
    rng = np.random.default_rng(num_agents)
    side = index_cells_per_side(num_agents, 10)
    cells = side * side
    stages = stages_for(num_agents)
    assert 2**stages >= num_agents and (stages == 1 or 2 ** (stages - 1) < num_agents)

    # A quarter of the agents out of the game: they are in no cell, and only the others' keys are sorted.
    x, y = (rng.random((2, 1, num_agents), np.float32) * np.float32(10.0)).astype(np.float32)
    alive = (rng.random((1, num_agents)) >= 0.25).astype(np.int32)
    inv_cell_size = np.float32(side / 10.0)
    alive_count = np.full((2, 1, num_agents), -7, np.int32)
    run_stages(count_alive_before, stages, num_agents, (alive, alive_count), rng)
    count_plane = (stages - 1) % 2
    sort_key = np.full((2, 1, num_agents), -7, np.int32)
    staged_start, staged_agents = np.full((2, 1, num_agents), -7, np.int32)
    for a in rng.permutation(num_agents):
        place_cell_key(0, int(a), x, y, alive, sort_key, alive_count, count_plane, staged_start, staged_agents,
                       num_agents, side, inv_cell_size)  # fmt: skip
    in_game = int(alive.sum())
    assert staged_start[0, cells] == in_game
    cell_of = np.full((1, num_agents), -7, np.int32)
    for a in range(num_agents):
        assign_cell(0, a, x, y, alive, cell_of, side, inv_cell_size)
    assert (cell_of[0, alive[0] == 0] == cells).all() and (cell_of[0, alive[0] != 0] < cells).all()
    keys = np.sort(cell_of[0, alive[0] != 0].astype(np.int64) * num_agents + np.flatnonzero(alive[0]))  # cell * n + id
    assert np.array_equal(np.sort(sort_key[0, 0, :in_game]), keys)  # every key in the game placed first
    assert (sort_key[0, 0, in_game:] == -7).all()
    # The agents out of the game listed after the places of those in the game, in ascending ids.
    assert np.array_equal(staged_agents[0, in_game:], np.flatnonzero(alive[0] == 0))

    run_stages(merge_cell_runs, stages, num_agents, (sort_key, staged_start, side), rng)
    plane = stages % 2
    assert np.array_equal(sort_key[plane, 0, :in_game], keys)

    staged_x, staged_y = np.full((2, 1, num_agents), -7, np.float32)
    for a in rng.permutation(num_agents):
        list_cells(0, int(a), x, y, sort_key, staged_agents, staged_start, staged_x, staged_y, num_agents, side,
                   plane)  # fmt: skip
    serial_start, serial_agents = np.full((2, 1, num_agents), -7, np.int32)
    serial_x, serial_y = np.full((2, 1, num_agents), -7, np.float32)
    build_index(0, num_agents, side, x, y, cell_of, serial_start, serial_agents, serial_x, serial_y)
    # The same cell starts, the same agents in each cell in ascending ids, then the same agents out of the game.
    assert np.array_equal(staged_start[0, : cells + 1], serial_start[0, : cells + 1])
    assert np.array_equal(staged_agents, serial_agents)
    assert np.array_equal(np.sort(serial_agents[0]), np.arange(num_agents))  # every agent listed once
    # Each listed agent's position beside it, in both builds.
    ids = serial_agents[0, :in_game]
    for copied in ((serial_x, serial_y), (staged_x, staged_y)):
        assert np.array_equal(copied[0][0, :in_game], x[0, ids]) and np.array_equal(copied[1][0, :in_game], y[0, ids])
        assert (copied[0][0, in_game:] == -7).all() and (copied[1][0, in_game:] == -7).all()


def test_a_stage_count_is_the_least_that_reaches_every_agent():
    assert [stages_for(n) for n in (1, 2, 3, 4, 5, 1000, 1024, 1025)] == [1, 1, 2, 2, 3, 10, 10, 11]
    assert [stages_for(n, 4) for n in (1, 4, 5, 16, 17, 110, 1000, 1024, 1025, 4096)] == [1, 1, 2, 2, 3, 4, 5, 5, 6, 6]
    assert stages_for(np.int64(1000), 4) == 5


@pytest.mark.parametrize("num_agents", [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 63, 64, 65, 100, 110, 1000, 1025])
def test_the_tree_sum_counts_the_runners_left(num_agents):
    rng = np.random.default_rng(num_agents)
    alive = (rng.random((1, num_agents)) < 0.6).astype(np.int32)
    agent_type = (rng.random((1, num_agents)) < 0.2).astype(np.int32)  # 1: tagger
    runners_left = np.full((1, num_agents), -7, np.int32)
    run_stages(count_runners_left, stages_for(num_agents, COUNT_RADIX), num_agents, (alive, agent_type, runners_left,
                                                                        num_agents), rng)  # fmt: skip
    assert runners_left[0, 0] == int(((agent_type[0] != 1) & (alive[0] != 0)).sum())


@pytest.mark.parametrize("num_agents", [*range(1, 40), 63, 64, 65, 110, 127, 128, 129, 255, 256, 257, 511])
@pytest.mark.parametrize("in_game", [0.0, 0.4, 1.0])
def test_the_staged_prefix_count_lists_the_agents_in_the_game_as_the_serial_count(num_agents, in_game):
    rng = np.random.default_rng(num_agents)
    alive = (rng.random((1, num_agents)) < in_game).astype(np.int32)
    stages = stages_for(num_agents)
    staged_count = np.full((2, 1, num_agents), -7, np.int32)
    run_stages(count_alive_before, stages, num_agents, (alive, staged_count), rng)
    serial_count = np.full((1, 1, num_agents), -7, np.int32)
    count_alive(0, num_agents, alive, serial_count)
    assert np.array_equal(serial_count[0, 0], np.cumsum(alive[0]))
    plane = (stages - 1) % 2  # the env's count_plane when staged
    assert np.array_equal(staged_count[plane, 0], serial_count[0, 0])

    # Each agent's row among those in the game, and the rows' ids in ascending order; slots of
    # alive_list past the last agent in the game are left as they were.
    alive_list = np.full((1, num_agents), -7, np.int32)
    list_row = np.full((1, num_agents), -7, np.int32)
    x, y = rng.random((2, 1, num_agents), np.float32)
    row_x, row_y = np.full((2, 1, num_agents), -7, np.float32)
    for a in rng.permutation(num_agents):
        list_alive(0, int(a), num_agents, x, y, alive, staged_count, plane, alive_list, list_row, row_x, row_y)
    ids = np.flatnonzero(alive[0])
    assert np.array_equal(alive_list[0, : len(ids)], ids) and (alive_list[0, len(ids) :] == -7).all()
    assert np.array_equal(row_x[0, : len(ids)], x[0, ids]) and np.array_equal(row_y[0, : len(ids)], y[0, ids])
    expected_rows = np.full(num_agents, -1)
    expected_rows[ids] = np.arange(len(ids))
    assert np.array_equal(list_row[0], expected_rows)


def rollout(game_work, steps, device="cpu", **params):
    games = params.pop("num_envs", 3)
    envs = gym.make_vec("WarpTag-v0", num_envs=games, device=device, game_work=game_work, **params)
    rng = np.random.default_rng(5)
    obs, _ = envs.reset(seed=5)
    seen = [obs.clone()]
    for _ in range(steps):
        actions = torch.as_tensor(rng.integers(0, 21, (envs.num_envs, 2)), device=device)
        obs, rewards, terminated, truncated, _ = envs.step(actions)
        seen += [obs.clone(), rewards.clone(), terminated.clone(), truncated.clone()]
    return seen


@pytest.mark.parametrize("spatial_index", [True, False], ids=["index", "scan"])
def test_staged_game_work_plays_the_serial_game_bit_for_bit_until_every_runner_is_caught(spatial_index):
    # 33 agents, a tag radius that catches every runner within the episode: through the spatial index
    # (6 cells) the merge sort builds every step's index, and with the scan the prefix count lists
    # fewer agents in the game each step; the tree sum ends games early. 33 agents take 6 stages, an
    # even count: the sorted keys end in plane 0, where the sort began.
    params = dict(num_taggers=2, num_runners=31, num_other_agents_observed=3, tagging_distance=0.3,
                  grid_length=5.0, episode_length=25, spatial_index=spatial_index)  # fmt: skip
    assert stages_for(33) == 6
    serial = rollout("serial", 60, **params)
    staged = rollout("staged", 60, **params)
    for step, (a, b) in enumerate(zip(serial, staged, strict=True)):
        assert torch.equal(a, b), f"output {step % 4} of step {step // 4} differs"
    terminated_at = [i // 4 for i in range(3, len(serial), 4) if serial[i].any()]
    assert terminated_at and min(terminated_at) < 24, "no game ended before its time limit"


@pytest.mark.gpu
@pytest.mark.parametrize(
    "params",
    [
        # Through the index, several agents a thread, runners caught; the tagging distances of
        # test_spatial_index.py's GPU sizes, so that the serial kernels are shared with it.
        dict(num_taggers=100, num_runners=900, num_envs=8, tagging_distance=0.03, episode_length=20),
        dict(num_taggers=40, num_runners=4056, num_envs=2, tagging_distance=0.01, episode_length=8),
        # The scan with a tag radius that ends games early: the counts of agents in the game and of runners.
        dict(num_taggers=10, num_runners=100, num_envs=64, tagging_distance=0.2, episode_length=40),
    ],
    ids=["1000 agents", "4096 agents", "110 agents"],
)
def test_on_the_gpu_staged_game_work_plays_the_serial_game_bit_for_bit(params):
    steps = params["episode_length"] + 4
    serial = rollout("serial", steps, device="cuda", spatial_index=params["num_runners"] > 500, **params)
    staged = rollout("staged", steps, device="cuda", spatial_index=params["num_runners"] > 500, **params)
    for step, (a, b) in enumerate(zip(serial, staged, strict=True)):
        assert torch.equal(a, b), f"output {step % 4} of step {step // 4} differs"
    assert any(bool(serial[i].any()) for i in range(3, len(serial), 4)), "no game ended"


@pytest.mark.parametrize(
    "phase", [sim.merge_cell_runs, sim.list_cells, sim.count_runners_left, sim.count_alive_before, sim.list_alive]
)
@pytest.mark.parametrize("agent", [numba.uint32, numba.int64], ids=["cuda", "cpu"])  # a and stage on each target
def test_the_staged_phases_compute_in_integers_only(phase, agent):
    # In Numba an unsigned 64-bit integer met with a signed one makes a float64: a slow, silent conversion.
    plane = numba.types.Array(numba.int32, 3, "C")
    game = numba.types.Array(numba.int32, 2, "C")
    game_f32 = numba.types.Array(numba.float32, 2, "C")
    signatures = {
        "merge_cell_runs": (agent, agent, agent, plane, game, numba.int64),
        "list_cells": (
            agent,
            agent,
            *[game_f32] * 2,
            plane,
            game,
            game,
            *[game_f32] * 2,
            numba.int64,
            numba.int64,
            numba.int64,
        ),  # fmt: skip
        "count_runners_left": (agent, agent, agent, game, game, game, numba.int64),
        "count_alive_before": (agent, agent, agent, game, plane),
        "list_alive": (
            agent,
            agent,
            numba.int64,
            *[game_f32] * 2,
            game,
            plane,
            numba.int64,
            *[game] * 2,
            *[game_f32] * 2,
        ),  # fmt: skip
    }
    compiled = numba.njit(phase.py_func)
    compiled.compile(signatures[phase.py_func.__name__])
    types = io.StringIO()
    compiled.inspect_types(file=types)
    floats = [line.strip() for line in types.getvalue().splitlines() if "::" in line and "float64" in line]
    assert floats == []


@pytest.mark.parametrize(
    "spatial_index, staged_phases",
    [
        (True, ["count_alive_before", "merge_cell_runs", "count_runners_left"]),
        (False, ["count_alive_before", "count_runners_left"]),
    ],
    ids=["index", "scan"],
)
def test_staged_game_work_passes_the_agent_order_check(spatial_index, staged_phases):
    config = TagConfig(**dict(SMALL_TAG, tagging_distance=0.4))
    definition = tag_definition(config, spatial_index=spatial_index, backend="cpu", game_work="staged")
    assert [p.name for p in definition.all_phases if p.stages] == staged_phases
    assert check_agent_order(definition, num_games=2, steps=20) == []


def block_after(source, header):
    """The lines of the first block under ``header`` in generated source, without the trailing ``pass``."""
    lines = source.split("\n")
    start = next(i for i, line in enumerate(lines) if line.strip() == header)
    depth = len(lines[start]) - len(lines[start].lstrip())
    body = []
    for line in lines[start + 1 :]:
        if len(line) - len(line.lstrip()) <= depth:
            break
        body.append(line.strip())
    return body[:-1] if body[-1] == "pass" else body


def test_a_staged_phase_ends_each_stage_with_a_barrier_on_the_gpu():
    definition = tag_definition(TagConfig(num_taggers=2, num_runners=30), spatial_index=True, backend="cuda",
                                game_work="staged")  # fmt: skip
    source = generate_source(definition, "cuda")
    pairs, quads = (f"for _st in range({stages_for(32, radix)}):" for radix in (2, COUNT_RADIX))
    assert (pairs, quads) == ("for _st in range(5):", "for _st in range(3):")
    # The count of the agents in the game and the merge sort wherever observations are made (reset, frozen
    # game, step, same-step reset), the count of runners left once.
    assert source.count(pairs) == 8 and source.count(quads) == 1
    for loop in (pairs, quads):
        stage = block_after(source, loop)
        assert stage[0] == "stage = np.uint32(_st)"
        assert stage[-1] == "cuda.syncthreads()"
    assert "_phase" in " ".join(stage) and "while a < num_agents:" in stage


@pytest.mark.parametrize(
    ("phase", "message"),
    [
        (Phase(sim.end_game, "game", stages=3), "only an agent phase may have them"),
        (Phase(sim.count_runners_left, stages=0), "stages must be None or an integer in [1, 64]"),
        (Phase(sim.count_runners_left, stages=65), "stages must be None or an integer in [1, 64]"),
        (Phase(sim.count_runners_left, stages=2.0), "stages must be None or an integer in [1, 64]"),
        (Phase(sim.count_runners_left), "takes parameter 'stage', which is no state array"),
    ],
)
def test_a_bad_staged_phase_is_refused(phase, message):
    definition = tag_definition(TagConfig(**SMALL_TAG), backend="cpu", game_work="staged")
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        dataclasses.replace(definition, reward_phases=(phase,) + definition.reward_phases[1:])


@pytest.mark.parametrize("game_work", ["parallel", "", 1, True])
def test_an_unknown_game_work_is_refused(game_work):
    with pytest.raises(ValueError, match=r"game_work must be one of \('serial', 'staged'\) or None, got"):
        gym.make_vec("WarpTag-v0", num_envs=1, device="cpu", game_work=game_work)


def test_the_per_game_work_is_staged_on_a_gpu_and_serial_on_a_cpu_unless_told():
    def phases(**kwargs):
        definition = tag_definition(TagConfig(num_taggers=10, num_runners=600), **kwargs)
        return [p.name for p in definition.all_phases]

    assert "merge_cell_runs" in phases(backend="cuda") and "count_runners_left" in phases(backend="cuda")
    assert "build_index" in phases(backend="cpu") and "end_game" in phases(backend="cpu")
    assert "build_index" in phases(backend="cuda", game_work="serial")
    assert "merge_cell_runs" in phases(backend="cpu", game_work="staged")
