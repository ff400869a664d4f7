"""WarpTag-v0's K-nearest scan split over several calls an agent (``search_parts``) plays the one-call game."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import SMALL_TAG
from tag_rollouts import record_rollout

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from envs.tag_continuous.config import TagConfig
from envs.tag_continuous.env import tag_definition
from gpu_vecenv.check import check_agent_order
from gpu_vecenv.oracle import compare_with_reference


def rollout(search_parts, steps, device="cpu", options=None, **params):
    return record_rollout(steps, device=device, seed=7, options=options, search_parts=search_parts, **params)


@pytest.mark.parametrize("search_parts", [2, 3, 5])
def test_a_split_scan_plays_the_one_call_game_bit_for_bit(search_parts):
    # 24 agents, K = 6, runners caught along the way: parts of 12, 8 and 5 candidates, fewer as agents leave.
    params = dict(num_taggers=3, num_runners=21, num_other_agents_observed=6, tagging_distance=0.25,
                  grid_length=5.0, episode_length=30)  # fmt: skip
    one_call = rollout(1, 40, **params)
    split = rollout(search_parts, 40, **params)
    for step, (a, b) in enumerate(zip(one_call, split, strict=True)):
        assert torch.equal(a, b), f"output {step % 4} of step {step // 4} differs"


def test_ties_in_distance_go_to_the_lower_id_across_parts():
    # 16 agents on four points: every agent has three others at distance 0 and the rest in groups of four
    # at equal distances, so the K = 5 nearest are decided by ids, across the three parts' lists.
    points = np.array([(0.0, 0.0), (2.5, 2.5), (2.5, 1.0), (4.9, 4.9)], np.float32)
    options = {"initial_positions": np.repeat(points, 4, axis=0)}
    params = dict(num_taggers=2, num_runners=14, num_other_agents_observed=5, tagging_distance=0.0,
                  grid_length=5.0, episode_length=10)  # fmt: skip
    one_call = rollout(1, 3, options=options, **params)
    split = rollout(3, 3, options=options, **params)
    assert all(torch.equal(a, b) for a, b in zip(one_call, split, strict=True))
    envs = gym.make_vec("WarpTag-v0", num_envs=2, device="cpu", search_parts=3, **params)
    report = compare_with_reference(envs, 3, seed=2, options=options)
    assert report.ok, "\n" + report.table()


def test_a_split_scan_passes_the_agent_order_check():
    definition = tag_definition(TagConfig(**dict(SMALL_TAG, tagging_distance=0.4)), backend="cpu", search_parts=3)
    assert [p.name for p in definition.observe_phases if p.per == "slot"] == ["find_nearest_part", "observe_listed"]
    assert check_agent_order(definition, num_games=2, steps=20) == []


def test_the_block_holds_every_part_of_every_agent():
    def block(taggers, runners, parts):
        config = TagConfig(**dict(SMALL_TAG, num_taggers=taggers, num_runners=runners))
        return tag_definition(config, backend="cuda", spatial_index=False, search_parts=parts).threads_per_block

    assert block(10, 100, 1) is None  # the default: agents rounded up to whole warps
    assert block(10, 100, 4) == 448  # 110 agents x 4 parts, rounded up to whole warps
    assert block(100, 900, 4) == 512  # at most 512 (1024 would not launch above 64 registers a thread)


@pytest.mark.parametrize("parts", [0, 33, True, 2.0, "2"])
def test_a_bad_number_of_parts_is_refused(parts):
    with pytest.raises(ValueError, match=rf"search_parts must be None or an integer in \[1, 32\], got {parts!r}"):
        gym.make_vec("WarpTag-v0", num_envs=1, device="cpu", search_parts=parts)


def test_more_parts_than_an_agent_has_calls_are_refused():
    # K = 1: an observation of 7 + 2 entries, so at most 9 calls an agent.
    with pytest.raises(ValueError, match="search_parts must be at most the observation's length, 9 here, got 10"):
        gym.make_vec("WarpTag-v0", num_envs=1, device="cpu", num_other_agents_observed=1, search_parts=10)


def test_none_is_one_part_and_parts_pick_the_scan_where_the_search_is_left_open():
    def phases(**options):
        definition = tag_definition(TagConfig(num_taggers=10, num_runners=290), backend="cpu", **options)
        return [p.name for p in definition.observe_phases]

    # 300 agents: the CPU's default search there is the spatial index; asked for parts, the split scan.
    assert "find_nearest_indexed" in phases(search_parts=None)
    assert "find_nearest_part" in phases(search_parts=2)
    assert phases(search_parts=None) == phases()


def test_parts_where_there_is_no_scan_are_refused():
    with pytest.raises(ValueError, match="search_parts=2 splits the K-nearest search; the full observation has none"):
        gym.make_vec("WarpTag-v0", num_envs=1, device="cpu", use_full_observation=True, search_parts=2)
    with pytest.raises(ValueError, match=r"the spatial index has none \(pass spatial_index=False with it\)"):
        gym.make_vec("WarpTag-v0", num_envs=1, device="cpu", spatial_index=True, search_parts=2)


@pytest.mark.gpu
def test_on_the_gpu_a_split_scan_plays_the_one_call_game_bit_for_bit():
    params = dict(num_taggers=10, num_runners=100, num_envs=16, tagging_distance=0.2, episode_length=40)
    one_call = rollout(1, 44, device="cuda", **params)
    split = rollout(4, 44, device="cuda", **params)
    for step, (a, b) in enumerate(zip(one_call, split, strict=True)):
        assert torch.equal(a, b), f"output {step % 4} of step {step // 4} differs"
