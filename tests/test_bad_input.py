"""Bad input gets a clear error naming what was expected and what came, and leaves the env working."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import SMALL_TAG

import gpu_vecenv  # noqa: F401
from gpu_vecenv.oracle import compare_with_reference


def make(**kwargs):
    return gym.make_vec("WarpTag-v0", num_envs=3, device="cpu", **dict(SMALL_TAG, **kwargs))


def still_correct(envs):
    """The env still steps exactly like its reference after the rejected call."""
    report = compare_with_reference(envs.unwrapped, steps=6, seed=11)
    assert report.ok, report.table()


@pytest.mark.parametrize(
    ("actions", "error", "match"),
    [
        (np.zeros((20, 2), np.int64), ValueError, r"shape \(21, 2\) .* or \(3, 7, 2\) .*got \(20, 2\)"),
        (np.zeros((21,), np.int64), ValueError, r"got \(21,\)"),
        (np.zeros((21, 2), np.float32), TypeError, "integer dtype .* got float32"),
        (np.zeros((21, 2), bool), TypeError, "integer dtype .* got bool"),
        (torch.zeros((21, 2)), TypeError, "integer dtype .* got torch.float32"),
        ("left", TypeError, "integer dtype .* got <U4 \\(str\\)"),
    ],
)
def test_malformed_actions_raise_before_anything_is_stepped(actions, error, match):
    envs = make()
    envs.reset(seed=0)
    x = envs.state["x"].clone()
    with pytest.raises(error, match=match):
        envs.step(actions)
    assert torch.equal(envs.state["x"], x)
    still_correct(envs)


def test_lists_and_small_integer_dtypes_are_fine():
    envs = make()
    envs.reset(seed=0)
    envs.step([[1, 2]] * 21)
    envs.step(np.ones((21, 2), np.uint8))
    envs.step(torch.ones((21, 2), dtype=torch.int32))
    envs.step(torch.ones((2, 21), dtype=torch.int64).T)  # non-contiguous: copied into the env's buffer


@pytest.mark.gpu
def test_actions_on_the_wrong_device():
    envs = gym.make_vec("WarpTag-v0", num_envs=3, device="cuda", **SMALL_TAG)
    envs.reset(seed=0)
    with pytest.raises(ValueError, match=r"actions are on cpu but the env is on cuda:0"):
        envs.step(torch.zeros((21, 2), dtype=torch.int64))


def test_out_of_range_actions_are_no_ops_reported_at_the_next_reset():
    envs = make()
    envs.reset(seed=0)
    reference = make()
    reference.reset(seed=0)
    actions = np.ones((21, 2), np.int64)
    clean = actions.copy()
    actions[9, 0], clean[9, 0] = 21, 0  # one past the end acts as the no-op 0
    actions[15, 1], clean[15, 1] = -4, 0
    torch.testing.assert_close(envs.step(actions)[0], reference.step(clean)[0], rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"action component 0 of slot 9 \(game 1, agent 2\) was 21, expected 0 <= "
                                         r"value < 21.*2 slot\(s\)"):  # fmt: skip
        envs.reset(seed=1)
    assert int(envs.state["t"][0]) == 1  # that reset did not happen
    envs.reset(seed=1)  # reported once; the next reset goes on
    still_correct(envs)


def test_strict_mode_raises_at_the_step_and_steps_nothing():
    envs = make(strict=True)
    envs.reset(seed=0)
    x, t = envs.state["x"].clone(), envs.state["t"].clone()
    actions = np.zeros((21, 2), np.int64)
    actions[20, 1] = 2**40
    with pytest.raises(ValueError, match=r"component 1 of slot 20 \(game 2, agent 6\) was 1099511627776.*strict"):
        envs.step(actions)
    assert torch.equal(envs.state["x"], x) and torch.equal(envs.state["t"], t)
    still_correct(envs)


@pytest.mark.parametrize(
    ("seed", "error", "match"),
    [
        (-1, ValueError, r"seed must be in \[0, 2\*\*63 - num_games\], got -1"),
        (2**63 - 1, ValueError, "seed must be in"),
        (1.5, TypeError, "seed must be an int, a list of ints or None, got float"),
        (True, TypeError, "seed must be an int"),
        ([1, 2], ValueError, r"one seed per game \(3\), or per slot \(21\); got 2"),
        ([1, 2, -3], ValueError, r"every seed must be an int in \[0, 2\*\*63\), got -3"),
    ],
)
def test_bad_seeds(seed, error, match):
    envs = make()
    envs.reset(seed=0)
    with pytest.raises(error, match=match):
        envs.reset(seed=seed)
    still_correct(envs)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"reset_mask": np.ones(4, bool)}, ValueError, r"reset_mask must have shape \(21,\) or \(3,\), got \(4,\)"),
        ({"reset_mask": np.ones(3, np.int64)}, TypeError, "reset_mask must be a bool array, got dtype torch.int64"),
        ({"initial_speed": 1.0}, ValueError, r"unknown reset option\(s\) \['initial_speed'\]; known: "),
        (
            {"initial_positions": np.zeros((7, 3))},
            ValueError,
            r"initial_positions must have shape \(7, 2\), got \(7, 3\)",
        ),
        ({"initial_directions": np.full(7, 7.0)}, ValueError, r"initial_directions must lie in \[0, 2\*pi\)"),
    ],
)
def test_bad_reset_options_change_nothing(options, error, match):
    envs = make()
    envs.reset(seed=0)
    x = envs.state["x"].clone()
    with pytest.raises(error, match=match):
        envs.reset(options=options)
    assert torch.equal(envs.state["x"], x)
    still_correct(envs)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_taggers": 0}, ValueError, "num_taggers=0 is invalid; expected an integer >= 1"),
        ({"num_runners": 2.5}, ValueError, "num_runners=2.5 is invalid"),
        ({"num_other_agents_observed": 7}, ValueError, r"num_other_agents_observed=7 .* \[1, num_agents - 1 = 6\]"),
        ({"grid_length": 0.0}, ValueError, "grid_length=0.0 is invalid; expected a finite number > 0"),
        ({"episode_length": -5}, ValueError, "episode_length=-5 is invalid"),
        ({"tag_penalty_for_runner": 1.0}, ValueError, "tag_penalty_for_runner=1.0 .* a finite penalty <= 0"),
        ({"edge_hit_penalty": 0.5}, ValueError, "edge_hit_penalty=0.5"),
        ({"tagging_distance": 1.5}, ValueError, r"tagging_distance=1.5 .* in \[0, 1\]"),
        ({"tagger_ids": [0, 0]}, ValueError, r"tagger_ids=\(0, 0\) .* 2 distinct agent ids in \[0, 7\)"),
        ({"min_acceleration": 1.0}, ValueError, "min_acceleration=1.0 .* <= max_acceleration"),
        ({"num_taggerz": 3}, TypeError, r"unknown parameter\(s\) \['num_taggerz'\]; valid parameters are"),
        ({"autoreset_mode": "sometimes"}, ValueError, "autoreset_mode must be an AutoresetMode or one of"),
        ({"backend": "tpu"}, ValueError, "backend must be 'auto', 'cuda', 'cpu' or 'reference', got 'tpu'"),
        ({"max_episode_steps": 0}, ValueError, "max_episode_steps must be None or an integer >= 1, got 0"),
        ({"threads_per_block": 2048}, ValueError, r"threads_per_block must be an integer in \[1, 1024\]"),
    ],
)
def test_invalid_configurations_raise_at_construction(kwargs, error, match):
    params = dict(SMALL_TAG, **kwargs)
    if "threads_per_block" in kwargs:
        pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("threads_per_block is checked by the CUDA backend")
        params["device"] = "cuda"
    else:
        params.setdefault("device", "cpu")
    with pytest.raises(error, match=match):
        gym.make_vec("WarpTag-v0", num_envs=3, **params)


@pytest.mark.parametrize("num_envs", [0, -2, 2.5, True])
def test_bad_numbers_of_games(num_envs):
    with pytest.raises(ValueError, match=r"num_envs \(the number of games\) must be an integer >= 1"):
        gym.make_vec("WarpTag-v0", num_envs=num_envs, device="cpu", **SMALL_TAG)


def test_more_games_than_memory_is_refused_before_allocating():
    with pytest.raises(MemoryError, match=r"games need about .* GiB .* bytes per game\) but only .* GiB is free"):
        gym.make_vec("WarpTag-v0", num_envs=10**9, device="cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_without_a_gpu():
    with pytest.raises(ValueError, match="device='cuda' was requested but torch sees no CUDA device"):
        gym.make_vec("WarpTag-v0", num_envs=1, device="cuda")
