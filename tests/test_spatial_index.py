"""The spatial index finds exactly the K nearest agents that the full scan finds.

WarpTag-v0 searches the K nearest agents through a grid of cells (``spatial_index=True``,
the default from 512 agents on a GPU, 256 on a CPU) or by scanning every agent. The observations must be
bit-identical either way, ties (equal distances, broken towards the lower id), agents on
cell borders and arena edges, agents leaving the game and K above the agents alive included.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from envs.tag_continuous import sim
from envs.tag_continuous.config import TagConfig
from envs.tag_continuous.env import SPATIAL_INDEX_MIN_AGENTS, index_cells_per_side, tag_definition
from gpu_vecenv.oracle import compare_with_reference


def rollout(spatial_index, steps, seed=0, options=None, device="cpu", **params):
    """Observations, and rewards with ends, of every step of a random rollout (same actions for any ``spatial_index``).

    With the index the tags are found through it too (only the taggers in the cells within the tag radius).
    """
    games = params.pop("num_envs", 3)
    envs = gym.make_vec("WarpTag-v0", num_envs=games, device=device, spatial_index=spatial_index, **params)
    rng = np.random.default_rng(seed)
    obs, _ = envs.reset(seed=seed, options=options)
    seen, outcomes = [obs.clone()], []
    for _ in range(steps):
        actions = torch.as_tensor(rng.integers(0, 21, (envs.num_envs, 2)), device=device)
        obs, rewards, terminated, truncated, _ = envs.step(actions)
        seen.append(obs.clone())
        outcomes.append(torch.stack([rewards, terminated.float(), truncated.float()]))
    return torch.stack(seen), torch.stack(outcomes)


def assert_same(indexed, scanned):
    assert torch.equal(indexed[0], scanned[0]), "observations differ"
    assert torch.equal(indexed[1], scanned[1]), "rewards or ends differ"


# K is 3 or 10 throughout: the kernels are compiled per observation size, and the full scan's are those
# the other tests use.
GAMES = {
    "60 agents, K=10": dict(num_taggers=6, num_runners=54, num_other_agents_observed=10, grid_length=10.0),
    "K above the agents alive": dict(num_taggers=2, num_runners=18, num_other_agents_observed=3,
                                     tagging_distance=0.3, grid_length=5.0),
    "runners stay after tags": dict(num_taggers=4, num_runners=36, num_other_agents_observed=3,
                                    runner_exits_game_after_tagged=False, tagging_distance=0.1),
    # 7 x 7 cells and wide tags: most runners leave the game within a few steps, and the searches of the
    # agents left go out many rings, through rows read as one run and rows read end cell by end cell.
    "a game emptied by tags": dict(num_taggers=40, num_runners=260, num_other_agents_observed=10,
                                   tagging_distance=0.2, episode_length=60),
    # 10 cells of 1.0 per side and a tag radius of 2.5: taggers are looked for three rings of cells out.
    "tag radius over three cells": dict(num_taggers=20, num_runners=180, num_other_agents_observed=3,
                                        grid_length=10.0, tagging_distance=0.25,
                                        runner_exits_game_after_tagged=False),
}  # fmt: skip


@pytest.mark.parametrize("name", list(GAMES))
def test_the_index_lists_the_same_agents_as_the_full_scan(name):
    params = dict(GAMES[name], episode_length=GAMES[name].get("episode_length", 25))
    indexed = rollout(True, steps=60, seed=4, **params)
    scanned = rollout(False, steps=60, seed=4, **params)
    assert_same(indexed, scanned)
    assert indexed[1][:, 0].abs().sum() > 0  # some rewards, tags among them, were paid


@pytest.mark.parametrize("index_cells", [1, 2, 7])
def test_any_grid_of_cells_lists_the_same_agents_as_the_full_scan(index_cells):
    params = dict(GAMES["60 agents, K=10"], episode_length=25)
    assert index_cells_per_side(60, 10) == 3  # the default; 7 is the most an agent-sized array holds
    indexed = rollout(True, steps=30, seed=5, index_cells=index_cells, **params)
    scanned = rollout(False, steps=30, seed=5, **params)
    assert_same(indexed, scanned)


@pytest.mark.parametrize("index_cells", [0, 8, 2.0, True])
def test_a_grid_of_cells_that_cannot_be_is_refused(index_cells):
    with pytest.raises(ValueError, match=r"index_cells must be None or an integer in \[1, 7\] for 60 agents"):
        gym.make_vec("WarpTag-v0", num_envs=1, device="cpu", index_cells=index_cells, **GAMES["60 agents, K=10"])


def test_ties_cell_borders_and_arena_edges_are_listed_like_the_full_scan():
    # 40 agents on a few points: stacked agents tie exactly (the lower id comes first), and the
    # points sit on the index's cell borders (2 cells of 4.5 per side) and on the arena's edges.
    points = np.array([(0.0, 0.0), (4.5, 4.5), (4.5, 2.0), (9.0, 9.0), (6.0, 0.0), (2.0, 4.5), (8.9, 4.5),
                       (4.4, 4.6)], np.float32)  # fmt: skip
    params = dict(num_taggers=4, num_runners=36, num_other_agents_observed=10, grid_length=9.0,
                  tagging_distance=0.0, min_acceleration=0.0, max_acceleration=0.0, num_envs=2)  # fmt: skip
    assert index_cells_per_side(40, 10) == 2
    options = {"initial_positions": np.repeat(points, 5, axis=0)}
    indexed = rollout(True, steps=3, seed=1, options=options, **params)
    scanned = rollout(False, steps=3, seed=1, options=options, **params)
    assert_same(indexed, scanned)
    # Agent 0 stands on agents 1-4: its first four listed agents are they, in id order, at distance 0.
    m = params["num_other_agents_observed"]
    first = indexed[0][0, 0]
    assert first[:4].tolist() == [0.0] * 4 and first[m : m + 4].tolist() == [0.0] * 4


def test_a_tagger_across_a_cell_border_or_corner_tags_through_the_index():
    # 2 cells of 4.5 per side and a tag radius of 0.3: three runners with a tagger just across a border
    # or the corner of their cell, one with a tagger just beyond the radius; nobody moves.
    taggers = [(4.6, 4.6), (4.55, 2.0), (2.0, 4.52), (8.0, 8.0)]
    runners = [(4.4, 4.4), (4.45, 2.0), (2.0, 4.48), (8.0, 8.35)] + [(1.0 + 0.2 * i, 0.5) for i in range(32)]
    params = dict(num_taggers=4, num_runners=36, num_other_agents_observed=10, grid_length=9.0,
                  tagging_distance=0.3 / 9.0, min_acceleration=0.0, max_acceleration=0.0, num_envs=2)  # fmt: skip
    assert index_cells_per_side(40, 10) == 2
    options = {"initial_positions": np.array(taggers + runners, np.float32)}
    indexed = rollout(True, steps=2, seed=1, options=options, **params)
    scanned = rollout(False, steps=2, seed=1, options=options, **params)
    assert_same(indexed, scanned)
    first_rewards = indexed[1][0, 0, :40]  # the first step, game 0 (agents are the vector's entries)
    assert (first_rewards[4:7] < 0).all(), "the runners within the radius across a border were not tagged"
    assert (first_rewards[[0, 1, 2]] > 0).all() and first_rewards[3] == 0 and first_rewards[7] >= 0


def test_the_index_agrees_with_the_reference():
    envs = gym.make_vec("WarpTag-v0", num_envs=2, device="cpu", spatial_index=True, num_taggers=3, num_runners=37,
                        num_other_agents_observed=3, episode_length=30, tagging_distance=0.05)  # fmt: skip
    report = compare_with_reference(envs, 70, seed=2)
    assert report.ok, report.table()
    assert report.game_ends >= 4


def test_4096_agents_a_game():
    params = dict(num_taggers=96, num_runners=4000, num_envs=1, episode_length=3)
    assert index_cells_per_side(4096, 10) == 28
    indexed = rollout(True, steps=4, seed=3, **params)
    scanned = rollout(False, steps=4, seed=3, **params)
    assert indexed[0].shape == (5, 4096, 72)
    assert_same(indexed, scanned)


def test_the_index_is_chosen_by_the_number_of_agents_where_it_pays_on_each_backend_unless_told():
    def uses_index(**params):
        envs = gym.make_vec("WarpTag-v0", num_envs=1, device="cpu", **params)
        return "cell_start" in envs.state

    def cuda_definition_uses_index(num_runners):
        definition = tag_definition(TagConfig(num_runners=num_runners), backend="cuda")
        return "cell_start" in {array.name for array in definition.state}

    assert SPATIAL_INDEX_MIN_AGENTS == {"cuda": 512, "cpu": 256}
    assert not uses_index()  # 110 agents
    assert not uses_index(num_runners=245) and uses_index(num_runners=246)  # 10 taggers + 246 = 256
    assert not cuda_definition_uses_index(501) and cuda_definition_uses_index(502)  # 10 + 502 = 512
    assert not uses_index(num_runners=246, spatial_index=False)
    assert uses_index(spatial_index=True)
    assert not uses_index(num_runners=246, use_full_observation=True, spatial_index=True)
    with pytest.raises(TypeError, match="spatial_index must be True, False or None, got 'yes'"):
        gym.make_vec("WarpTag-v0", num_envs=1, device="cpu", spatial_index="yes")
    # Without a backend named, the definition is for the device an env made without one would get.
    default_backend = "cuda" if torch.cuda.is_available() else "cpu"
    indexed = "cell_start" in {array.name for array in tag_definition(TagConfig(num_runners=300)).state}
    assert indexed == (10 + 300 >= SPATIAL_INDEX_MIN_AGENTS[default_backend])
    with pytest.raises(ValueError, match=r"backend must be one of \['cpu', 'cuda'\], got 'gpu'"):
        tag_definition(TagConfig(), backend="gpu")


@pytest.mark.gpu
def test_on_the_gpu_the_default_search_follows_the_gpu_threshold():
    def uses_index(**params):
        envs = gym.make_vec("WarpTag-v0", num_envs=1, **params)
        return "cell_start" in {array.name for array in envs.unwrapped.definition.state}

    assert not uses_index(num_runners=246)  # no device named: the GPU, where the scan pays to 511 agents
    assert not uses_index(device="cuda", num_runners=501) and uses_index(device="cuda", num_runners=502)
    assert uses_index(device="cpu", num_runners=246)


# Sizes where the GPU takes the index by default, and where its blocks run several agents a thread.
GPU_GAMES = {
    "1000 agents, 8 games": dict(num_taggers=100, num_runners=900, num_envs=8, tagging_distance=0.03,
                                 episode_length=20),
    "4096 agents, 2 games": dict(num_taggers=40, num_runners=4056, num_envs=2, tagging_distance=0.01,
                                 episode_length=8),
}  # fmt: skip


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(GPU_GAMES))
def test_on_the_gpu_the_index_lists_the_same_agents_as_the_full_scan_at_thousands_of_agents(name):
    params = GPU_GAMES[name]
    steps = params["episode_length"] + 4  # an autoreset included
    indexed = rollout(True, steps=steps, seed=6, device="cuda", **params)
    scanned = rollout(False, steps=steps, seed=6, device="cuda", **params)
    assert_same(indexed, scanned)
    assert indexed[1][:, 0].abs().sum() > 0


def test_cell_starts_fit_in_an_agent_sized_array():
    for n in range(2, 5000):
        for k in (1, 3, 10, 40):
            cells = index_cells_per_side(n, k)
            assert cells >= 1 and cells * cells + 1 <= n, (n, k, cells)


@pytest.mark.parametrize("num_observed, tail_entries", [(10, 2), (10, 1), (3, 2), (3, 1), (1, 1)])
def test_the_shares_of_a_row_out_of_the_game_write_it_whole_each_entry_once(num_observed, tail_entries):
    """Through the index, the row of an agent out of the game is written by its K (place, slot) pairs, each a
    share of the row by 8-byte stores (``sim.clear_row_share``): together they must write what the slots'
    zeros and the tail give that agent, and no entry twice (on the GPU, two pairs writing one entry race)."""
    width = 7 * num_observed + tail_entries
    runner = 1
    # Two rows: where the width is odd, the second starts 4 bytes past an 8-byte boundary.
    for a in range(2):
        expected = np.full((1, 2, width), np.nan, np.float32)
        for slot in range(num_observed):
            sim.clear_features(0, a, slot, expected, num_observed)
        sim.write_tail(0, a, expected, num_observed, tail_entries, 5, 10, False, runner)
        assert not np.isnan(expected[0, a]).any()
        shares = []
        for slot in range(num_observed):
            obs = np.full((1, 2, width), np.nan, np.float32)
            sim.clear_row_share(0, a, slot, obs, num_observed, tail_entries, runner)
            assert np.isnan(obs[0, 1 - a]).all(), "a share wrote another agent's row"
            shares.append(obs[0, a])
        written = ~np.isnan(np.stack(shares))
        assert (written.sum(axis=0) == 1).all(), f"entries written by no share or by two: {written.sum(axis=0)}"
        assert np.array_equal(np.nanmax(np.stack(shares), axis=0), expected[0, a])


@pytest.mark.parametrize("spatial_index", [True, False], ids=["index", "scan"])
def test_with_copy_false_the_rows_of_agents_out_of_the_game_since_the_launch_before_are_left_as_they_were(
    spatial_index,
):
    """Out of the game an agent's row stays the same until its game is reset, so where the env keeps its
    observation (``copy=False``) the partial observation leaves those rows: whatever the buffer holds there
    stays. Every other row is written, as with fresh outputs (``copy=True``)."""
    params = dict(num_taggers=2, num_runners=10, num_other_agents_observed=3, episode_length=30, grid_length=5.0,
                  tagging_distance=0.6, spatial_index=spatial_index)  # fmt: skip
    kept = gym.make_vec("WarpTag-v0", num_envs=3, device="cpu", copy=False, **params)
    # Fresh outputs written by the kernel itself at every step (on the CPU, small ones are copied out of the
    # env's own buffer, which is kept).
    fresh = gym.make_vec("WarpTag-v0", num_envs=3, device="cpu", copy=True, direct_write_bytes=0, **params)
    assert fresh.unwrapped.direct_write
    obs, _ = kept.reset(seed=4)
    fresh.reset(seed=4)
    rng = np.random.default_rng(4)
    rows_left = 0
    for _ in range(40):
        out_before = kept.unwrapped.state["out_when_observed"].reshape(-1) != 0
        obs[out_before] = 7.0  # the env's own buffer: copy=False returns a view of it
        actions = torch.as_tensor(rng.integers(0, 21, (kept.num_envs, 2)))
        obs, *_ = kept.step(actions)
        expected, *_ = fresh.step(actions)
        left = out_before & (kept.unwrapped.state["alive"].reshape(-1) == 0)
        assert (obs[left] == 7.0).all()
        assert torch.equal(obs[~left], expected[~left])
        # A row left was that of an agent out of the game: zeros, then its type.
        assert (expected[left][:, :-1] == 0).all()
        rows_left += int(left.sum())
    assert rows_left > 100
    kept.close()
    fresh.close()
