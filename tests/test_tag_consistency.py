"""WarpTag-v0 on the CPU backend (and the GPU when present) agrees with the numpy reference, step by step."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import SMALL_TAG

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from gpu_vecenv.oracle import compare_with_reference


def make(device, **kwargs):
    params = dict(SMALL_TAG)
    params.update(kwargs)
    games = params.pop("num_envs", 3)
    return gym.make_vec("WarpTag-v0", num_envs=games, device=device, **params)


def check(envs, steps, **kwargs):
    report = compare_with_reference(envs, steps, **kwargs)
    assert report.ok, "\n" + report.table()
    return report


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_two_full_episodes_in_every_autoreset_mode(device, mode):
    envs = make(device, autoreset_mode=mode)
    report = check(envs, steps=40, seed=3)
    # Each of the 3 games plays at least two whole episodes (episode_length=15).
    assert report.game_ends >= 6
    assert report.resets >= 3 + 6 - (3 if mode == "NextStep" else 0)


def test_one_tagger_tags_many_runners_in_one_step(device):
    n_taggers, n_runners = 2, 6
    positions = np.full((n_taggers + n_runners, 2), np.nan, np.float32)
    positions[0] = (2.5, 2.5)
    positions[1] = (0.2, 0.2)
    # Every runner sits within tag range of tagger 0 (radius 0.2 * 5 = 1), nearer to it than to tagger 1.
    for i in range(n_runners):
        angle = 2 * math.pi * i / n_runners
        positions[n_taggers + i] = (2.5 + 0.3 * math.cos(angle), 2.5 + 0.3 * math.sin(angle))
    options = {"initial_positions": positions}
    envs = make(device, num_taggers=n_taggers, num_runners=n_runners, tagging_distance=0.2, num_envs=2,
                min_acceleration=0.0, max_acceleration=0.0)  # fmt: skip
    check(envs, steps=6, seed=1, options=options)

    envs.reset(seed=1, options=options)
    _, rewards, terminated, _, info = envs.step(np.zeros((envs.num_envs, 2), np.int64))
    rewards = envs.per_game(rewards)
    # Tagger 0 is rewarded once per runner it tagged, every runner once; the game ends with no runner left.
    assert rewards[:, 0].tolist() == [10.0 * n_runners] * 2
    assert torch.all(rewards[:, n_taggers:] == -10.0)
    assert torch.all(terminated)
    assert torch.all(info["active"])


def test_all_runners_tagged_early_ends_games_and_resets(device):
    # A tag radius as large as the arena: every runner is tagged on the first step of every episode.
    envs = make(device, tagging_distance=1.0, num_envs=4)
    report = check(envs, steps=8, seed=5)
    assert report.game_ends >= 4 * 4


@pytest.mark.parametrize("runners, own_type", [(4, True), (5, True), (5, False)])
def test_full_observation_mode(device, runners, own_type):
    # 5 others: one a call. 6 others: two a call, each pair of entries by one 8-byte store; with the own type
    # every row of 7 * 6 + 2 entries starts 8-byte aligned, without it (7 * 6 + 1) every other one does not.
    envs = make(device, use_full_observation=True, num_runners=runners, observe_own_type=own_type)
    others = 2 + runners - 1
    assert envs.single_observation_space.shape == (7 * others + 1 + own_type,)
    check(envs, steps=35, seed=11)


def test_runners_stay_after_being_tagged(device):
    envs = make(device, runner_exits_game_after_tagged=False, tagging_distance=0.3)
    report = check(envs, steps=35, seed=2)
    assert report.game_ends >= 6  # only the time limit ends games


def test_edge_hits_are_penalised(device):
    n = 7
    positions = np.full((n, 2), 0.05, np.float32)
    positions[:, 1] = np.linspace(0.5, 4.5, n)
    directions = np.full(n, math.pi, np.float32)  # everyone heads for the x = 0 wall
    envs = make(device, edge_hit_penalty=-1.0, tagging_distance=0.0, min_acceleration=0.5, max_acceleration=0.5)
    options = {"initial_positions": positions, "initial_directions": directions}
    check(envs, steps=20, seed=4, options=options)

    envs.reset(seed=4, options=options)
    full_throttle = np.tile([1, 0], (envs.num_envs, 1))
    _, rewards, _, _, _ = envs.step(full_throttle)
    assert torch.all(rewards == -1.0)
    assert torch.all(envs.state["x"] == 0.0)


def test_k_larger_than_the_agents_alive(device):
    # K = N - 1 while runners leave the game: observations are zero-padded.
    envs = make(device, num_other_agents_observed=6, tagging_distance=0.3, num_envs=2)
    check(envs, steps=30, seed=9)
    obs, _ = envs.reset(seed=9)
    assert obs.shape == (envs.num_envs, 7 * 6 + 2)


def test_warpdrive_layout_without_own_type(device):
    envs = make(device, observe_own_type=False)
    assert envs.single_observation_space.shape == (7 * 3 + 1,)
    check(envs, steps=20, seed=6)


@pytest.mark.gpu
def test_a_large_full_observation_steps_in_its_wider_default_block_on_gpu():
    envs = make("cuda", use_full_observation=True, num_taggers=5, num_runners=60)
    assert envs.unwrapped._backend.block == envs.unwrapped.definition.threads_per_block == 288
    check(envs, steps=20, seed=9)
    narrow = make("cuda", use_full_observation=True, num_taggers=5, num_runners=60, threads_per_block=64)
    assert narrow.unwrapped._backend.block == 64  # the user's block size wins


@pytest.mark.gpu
def test_more_agents_than_threads_per_block_on_gpu():
    envs = make("cuda", num_runners=70, num_other_agents_observed=5, threads_per_block=32)
    check(envs, steps=20, seed=8)
