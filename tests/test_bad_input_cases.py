"""Bad input is refused with a message that says what was expected and what came, and leaves the env usable."""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import HAS_GPU, SMALL_TAG

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from gpu_vecenv.oracle import compare_with_reference

# SMALL_TAG: 2 taggers and 5 runners, so 3 games are 21 slots; actions are MultiDiscrete([21, 21]).
GAMES, AGENTS, SLOTS = 3, 7, 21


def make(device="cpu", games=GAMES, **kwargs):
    return gym.make_vec("WarpTag-v0", num_envs=games, device=device, **{**SMALL_TAG, **kwargs})


def still_steps_correctly(envs, seed=0):
    report = compare_with_reference(envs, steps=5, seed=seed)
    assert report.ok, "\n" + report.table()


def snapshot(envs):
    return {name: envs.state[name].clone() for name in ("x", "y", "speed", "direction", "t", "episode", "alive")}


def assert_unchanged(envs, before):
    for name, values in before.items():
        assert torch.equal(envs.state[name], values), f"{name} changed"


@pytest.fixture
def envs(device):
    envs = make(device)
    envs.reset(seed=0)
    envs.step(np.zeros((SLOTS, 2), np.int64))
    return envs


# -- actions ----------------------------------------------------------------------------------------------------

BAD_ACTIONS = [
    pytest.param(np.zeros(SLOTS, np.int64), ValueError,
                 r"actions must have shape \(21, 2\) \(one per slot\) or \(3, 7, 2\) .*got \(21,\)",
                 id="no-components"),
    pytest.param(np.zeros((SLOTS, 3), np.int64), ValueError, r"shape \(21, 2\).*got \(21, 3\)", id="3-components"),
    pytest.param(np.zeros((GAMES, 2), np.int64), ValueError, r"shape \(21, 2\).*got \(3, 2\)", id="one-per-game"),
    pytest.param(np.zeros((AGENTS, GAMES, 2), np.int64), ValueError, r"\(3, 7, 2\).*got \(7, 3, 2\)",
                 id="agents-by-games"),
    pytest.param(np.zeros((SLOTS, 2), np.float32), TypeError,
                 r"actions must have an integer dtype \(MultiDiscrete indices\), got float32 \(ndarray\)",
                 id="float32"),
    pytest.param(torch.zeros((SLOTS, 2), dtype=torch.float64), TypeError, r"integer dtype .*got torch\.float64",
                 id="float64-tensor"),
    pytest.param(np.zeros((SLOTS, 2), bool), TypeError, r"integer dtype .*got bool \(ndarray\)", id="bool"),
    pytest.param(torch.zeros((SLOTS, 2), dtype=torch.bool), TypeError, r"integer dtype .*got torch\.bool",
                 id="bool-tensor"),
    pytest.param([[0, 0.5]] * SLOTS, TypeError, r"integer dtype .*got float64 \(list\)", id="list-of-floats"),
    pytest.param([[0, "a"]] * SLOTS, TypeError, r"integer dtype .*got <U\d+ \(list\)", id="list-of-strings"),
]  # fmt: skip


@pytest.mark.parametrize("actions, error, message", BAD_ACTIONS)
def test_bad_actions_are_refused_before_stepping(envs, actions, error, message):
    if isinstance(actions, torch.Tensor):
        actions = actions.to(envs.device)
    before = snapshot(envs)
    with pytest.raises(error, match=message):
        envs.step(actions)
    assert_unchanged(envs, before)
    still_steps_correctly(envs)


def test_python_lists_are_accepted(device):
    by_list, by_array = make(device), make(device)
    by_list.reset(seed=3)
    by_array.reset(seed=3)
    rng = np.random.default_rng(3)
    for shape in ((SLOTS, 2), (GAMES, AGENTS, 2)):
        actions = rng.integers(0, 21, size=shape)
        a = by_list.step(actions.tolist())
        b = by_array.step(actions)
        for x, y in zip(a[:4], b[:4], strict=True):
            assert torch.equal(x, y)


@pytest.mark.gpu
def test_actions_on_the_wrong_device_are_refused():
    envs = make("cuda")
    envs.reset(seed=0)
    before = snapshot(envs)
    with pytest.raises(ValueError, match=r"actions are on cpu but the env is on cuda:0; move them with \.to"):
        envs.step(torch.zeros((SLOTS, 2), dtype=torch.int64))
    assert_unchanged(envs, before)
    still_steps_correctly(envs)


# -- out-of-range action indices --------------------------------------------------------------------------------


@pytest.mark.parametrize("component, value", [(1, 21), (0, -1), (1, 10**6)])
def test_out_of_range_action_is_a_no_op_reported_by_the_next_reset(device, component, value):
    envs, twin = make(device), make(device)
    envs.reset(seed=1)
    twin.reset(seed=1)
    rng = np.random.default_rng(1)
    actions = rng.integers(0, 21, size=(SLOTS, 2))
    actions[9, component] = value  # slot 9: game 1, agent 2
    as_no_op = actions.copy()
    as_no_op[9, component] = 0
    stepped = envs.step(actions)  # no exception at the step itself
    twin_stepped = twin.step(as_no_op)
    for x, y in zip(stepped[:4], twin_stepped[:4], strict=True):
        assert torch.equal(x, y)
    assert torch.equal(envs.state["x"], twin.state["x"])

    before = snapshot(envs)
    message = (
        rf"action component {component} of slot 9 \(game 1, agent 2\) was {value}, expected 0 <= value < 21; "
        r"seen at an earlier step; 1 slot\(s\) had out-of-range actions"
    )
    with pytest.raises(ValueError, match=message):
        envs.reset()
    assert_unchanged(envs, before)  # the failed reset reset nothing
    obs, _ = envs.reset()  # a second reset goes on
    assert obs.shape == (SLOTS, 7 * 3 + 2)
    still_steps_correctly(envs, seed=2)


def test_strict_mode_raises_at_the_step_before_stepping(device):
    envs = make(device, strict=True)
    envs.reset(seed=2)
    actions = np.zeros((SLOTS, 2), np.int64)
    actions[15] = (3, 25)  # slot 15: game 2, agent 1
    before = snapshot(envs)
    with pytest.raises(ValueError, match=r"component 1 of slot 15 \(game 2, agent 1\) was 25, expected 0 <= value < 21"
                       r"; seen at this step \(strict=True\); nothing was stepped"):  # fmt: skip
        envs.step(actions)
    assert_unchanged(envs, before)
    obs, *_ = envs.step(np.zeros((SLOTS, 2), np.int64))  # the env goes on...
    assert int(envs.state["t"][0]) == 1
    envs.reset()  # ...and has nothing left to report
    still_steps_correctly(envs)


# -- reset arguments --------------------------------------------------------------------------------------------

BAD_MASKS = [
    pytest.param(np.ones(GAMES + 1, bool), ValueError, r"reset_mask must have shape \(21,\) or \(3,\), got \(4,\)",
                 id="wrong-length"),
    pytest.param(np.ones((1, GAMES), bool), ValueError, r"shape \(21,\) or \(3,\), got \(1, 3\)", id="2-d"),
    pytest.param(np.ones((GAMES, AGENTS), bool), ValueError, r"shape \(21,\) or \(3,\), got \(3, 7\)",
                 id="games-by-agents"),
    pytest.param(np.ones(GAMES, np.int64), TypeError, r"reset_mask must be a bool array, got dtype torch\.int64",
                 id="int"),
    pytest.param(np.ones(SLOTS, np.float32), TypeError, r"must be a bool array, got dtype torch\.float32",
                 id="float"),
    pytest.param(np.arange(SLOTS) == 3, ValueError, r"reset_mask must be equal for all agents of a game",
                 id="one-agent-of-a-game"),
]  # fmt: skip

BAD_SEEDS = [
    pytest.param(1.5, TypeError, r"seed must be an int, a list of ints or None, got float", id="float"),
    pytest.param("7", TypeError, r"seed must be an int, a list of ints or None, got str", id="str"),
    pytest.param(True, TypeError, r"seed must be an int, a list of ints or None, got True", id="bool"),
    pytest.param(-1, ValueError, r"seed must be in \[0, 2\*\*63 - num_games\], got -1", id="negative"),
    pytest.param(2**63 - 2, ValueError, r"seed must be in \[0, 2\*\*63 - num_games\], got 9223372036854775806",
                 id="too-large-for-3-games"),
    pytest.param([1, 2], ValueError, r"one seed per game \(3\), or per slot \(21\); got 2", id="list-too-short"),
    pytest.param([1, 2, 3, 4], ValueError, r"one seed per game \(3\), or per slot \(21\); got 4", id="list-too-long"),
    pytest.param([1, -2, 3], ValueError, r"every seed must be an int in \[0, 2\*\*63\), got -2", id="negative-in-list"),
    pytest.param([1, 2.5, 3], ValueError, r"every seed must be an int in \[0, 2\*\*63\), got 2\.5", id="float-in-list"),
    pytest.param(list(range(SLOTS)), ValueError, r"a seed list of length num_envs must repeat one seed for all agents",
                 id="per-slot-list-differing-within-a-game"),
]  # fmt: skip

BAD_OPTIONS = [
    pytest.param({"mask": np.ones(GAMES, bool)}, ValueError,
                 r"unknown reset option\(s\) \['mask'\]; known: \['initial_directions', 'initial_positions', "
                 r"'reset_mask'\]", id="gymnasium-0.29-mask"),
    pytest.param({"initial_position": np.zeros((AGENTS, 2))}, ValueError,
                 r"unknown reset option\(s\) \['initial_position'\]", id="typo"),
    pytest.param({"initial_positions": np.zeros((AGENTS - 1, 2))}, ValueError,
                 r"initial_positions must have shape \(7, 2\), got \(6, 2\)", id="positions-shape"),
    pytest.param({"initial_directions": np.full(AGENTS, 7.0)}, ValueError,
                 r"initial_directions must lie in \[0, 2\*pi\)", id="direction-out-of-range"),
    pytest.param({"initial_directions": np.zeros((AGENTS, 1))}, ValueError,
                 r"initial_directions must have shape \(7,\), got \(7, 1\)", id="directions-shape"),
]  # fmt: skip


@pytest.mark.parametrize(
    "seed, options, error, message",
    [pytest.param(None, {"reset_mask": p.values[0]}, *p.values[1:], id=f"mask-{p.id}") for p in BAD_MASKS]
    + [pytest.param(p.values[0], None, *p.values[1:], id=f"seed-{p.id}") for p in BAD_SEEDS]
    + [pytest.param(None, p.values[0], *p.values[1:], id=f"option-{p.id}") for p in BAD_OPTIONS],
)
def test_bad_reset_arguments_are_refused_before_resetting(envs, seed, options, error, message):
    before = snapshot(envs)
    with pytest.raises(error, match=message):
        envs.reset(seed=seed, options=options)
    assert_unchanged(envs, before)
    still_steps_correctly(envs)


# -- construction -------------------------------------------------------------------------------------------------


def test_unknown_make_vec_argument_is_a_type_error_listing_the_valid_names():
    message = r"unknown parameter\(s\) \['num_runner'\]; valid parameters are .*'num_runners'"
    with pytest.raises(TypeError, match=message):
        make(num_runner=5)


def test_unknown_make_vec_argument_message_lists_the_env_options_too():
    with pytest.raises(TypeError, match=r"'autoreset_mode'.*'device'"):
        make(devcie="cpu")


def config_error(name, value):
    return re.escape(f"WarpTag: {name}={value!r} is invalid; expected")


BAD_CONFIGS = [
    pytest.param(dict(num_taggers=0), config_error("num_taggers", 0) + " an integer >= 1", id="no-taggers"),
    pytest.param(dict(num_runners=0), config_error("num_runners", 0), id="no-runners"),
    pytest.param(dict(num_taggers=2.0), config_error("num_taggers", 2.0), id="float-count"),
    pytest.param(dict(num_other_agents_observed=7),
                 config_error("num_other_agents_observed", 7) + r" an integer in \[1, num_agents - 1 = 6\]",
                 id="K-above-N-1"),
    pytest.param(dict(num_other_agents_observed=0), config_error("num_other_agents_observed", 0), id="K-zero"),
    pytest.param(dict(grid_length=0.0), config_error("grid_length", 0.0) + " a finite number > 0", id="grid-zero"),
    pytest.param(dict(grid_length=-5.0), config_error("grid_length", -5.0), id="grid-negative"),
    pytest.param(dict(grid_length=float("inf")), config_error("grid_length", float("inf")), id="grid-inf"),
    pytest.param(dict(episode_length=0), config_error("episode_length", 0) + " an integer >= 1", id="episode-zero"),
    pytest.param(dict(episode_length=-3), config_error("episode_length", -3), id="episode-negative"),
    pytest.param(dict(tag_penalty_for_runner=10.0),
                 config_error("tag_penalty_for_runner", 10.0) + " a finite penalty <= 0", id="runner-penalty-positive"),
    pytest.param(dict(step_penalty_for_tagger=0.1), config_error("step_penalty_for_tagger", 0.1) + " a finite penalty",
                 id="step-penalty-positive"),
    pytest.param(dict(edge_hit_penalty=1.0), config_error("edge_hit_penalty", 1.0) + " a finite penalty",
                 id="edge-penalty-positive"),
    pytest.param(dict(tagging_distance=-0.1),
                 config_error("tagging_distance", -0.1) + r" a fraction of grid_length in \[0, 1\]",
                 id="tagging-distance-negative"),
    pytest.param(dict(tagging_distance=1.5), config_error("tagging_distance", 1.5), id="tagging-distance-above-1"),
    pytest.param(dict(tagging_distance=float("nan")), config_error("tagging_distance", float("nan")),
                 id="tagging-distance-nan"),
    pytest.param(dict(tagger_ids=(0,)),
                 config_error("tagger_ids", (0,)) + r" 2 distinct agent ids in \[0, 7\)", id="tagger-ids-too-few"),
    pytest.param(dict(tagger_ids=(1, 1)), config_error("tagger_ids", (1, 1)), id="tagger-ids-repeated"),
    pytest.param(dict(tagger_ids=(0, 7)), config_error("tagger_ids", (0, 7)), id="tagger-ids-out-of-range"),
    pytest.param(dict(min_acceleration=0.2, max_acceleration=0.1),
                 config_error("min_acceleration", 0.2) + r" <= max_acceleration \(0\.1\)", id="acceleration-range"),
    pytest.param(dict(num_acceleration_levels=0), config_error("num_acceleration_levels", 0), id="no-levels"),
    pytest.param(dict(grid_length=True), config_error("grid_length", True), id="bool-grid-length"),
    pytest.param(dict(tagging_distance=True), config_error("tagging_distance", True), id="bool-tagging-distance"),
]  # fmt: skip


@pytest.mark.parametrize("params, message", BAD_CONFIGS)
def test_invalid_configuration_is_refused_at_construction(params, message):
    with pytest.raises(ValueError, match=message):
        make(**params)


def test_numpy_scalars_are_valid_parameters():
    envs = make(grid_length=np.float32(5.0), tagging_distance=np.float32(0.1), max_speed=np.float32(1.0))
    assert envs.unwrapped.definition.constants["grid_length"] == 5.0


@pytest.mark.parametrize(
    "num_envs, shown",
    [(0, "0"), (-2, "-2"), (2.5, "2.5"), ("3", "'3'"), (True, "True"), (None, "None")],
)
def test_num_envs_must_be_a_positive_integer(num_envs, shown):
    with pytest.raises(ValueError, match=rf"num_envs \(the number of games\) must be an integer >= 1, got {shown}"):
        gym.make_vec("WarpTag-v0", num_envs=num_envs, device="cpu", **SMALL_TAG)


@pytest.mark.parametrize("limit", [0, -1, 2.5, True])
def test_max_episode_steps_must_be_a_positive_integer(limit):
    with pytest.raises(ValueError, match=rf"max_episode_steps must be None or an integer >= 1, got {limit!r}"):
        make(max_episode_steps=limit)


@pytest.mark.skipif(HAS_GPU, reason="needs a machine without CUDA")
def test_cuda_device_without_cuda_is_refused():
    with pytest.raises(ValueError, match=r"device='cuda' was requested but torch sees no CUDA device"):
        make("cuda")
    with pytest.raises(ValueError, match=r"device='cuda:1' was requested but torch sees no CUDA device"):
        make("cuda:1")


def test_device_other_than_cpu_or_cuda_is_refused():
    with pytest.raises(ValueError, match=r"device must be 'cpu' or 'cuda\[:N\]', got 'meta'"):
        make("meta")
