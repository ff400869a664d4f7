"""Bad input is refused with an error naming what was expected and what came, and harms nothing.

Every rejected call below is followed by the same proof that the env was left
intact: its whole state equals, bit for bit, that of a twin env that never saw
the bad call; the two then step alike, bit for bit; and the env agrees with
its numpy reference over a reset and several steps. Tests taking ``device``
run on the CPU backend and, with a GPU, on the CUDA backend too.

WarpTag-v0's actions are discrete indices (``MultiDiscrete([21, 21])``), so
NaN and infinity cannot be given as actions: every floating-point action is
refused, whole numbers included, and no value is ever rounded silently.
"""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import HAS_GPU, SMALL_TAG

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from gpu_vecenv.oracle import compare_with_reference

# SMALL_TAG: 2 taggers and 5 runners in a 5 x 5 arena, so 3 games are 21 slots; actions are MultiDiscrete([21, 21]).
GAMES, AGENTS, SLOTS = 3, 7, 21
FIRST_ACTIONS = np.random.default_rng(0).integers(0, 21, size=(SLOTS, 2))


def make(device="cpu", games=GAMES, **kwargs):
    return gym.make_vec("WarpTag-v0", num_envs=games, device=device, **{**SMALL_TAG, **kwargs})


def make_pair(device="cpu", **kwargs):
    """An env and its twin in the same state: reset with seed 0, then stepped once."""
    pair = make(device, **kwargs), make(device, **kwargs)
    for envs in pair:
        envs.reset(seed=0)
        envs.step(FIRST_ACTIONS)
    return pair


@pytest.fixture
def pair(device):
    return make_pair(device)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bit for bit (NaN equals NaN; 0.0 and -0.0 differ)."""
    if a.is_floating_point():
        bits = {4: torch.int32, 8: torch.int64}[a.element_size()]
        return a.dtype == b.dtype and torch.equal(a.view(bits), b.view(bits))
    return torch.equal(a, b)


def snapshot(envs):
    return {name: values.clone() for name, values in envs.state.items()}


def assert_state_equals(envs, state):
    for name, values in state.items():
        assert same_bits(envs.state[name], values), f"state {name!r} changed"


def assert_unharmed(envs, twin, steps=4):
    """``envs`` is where ``twin`` is, steps exactly like it, and still agrees with the reference."""
    assert_state_equals(envs, snapshot(twin))
    rng = np.random.default_rng(5)
    for _ in range(steps):
        actions = rng.integers(0, 21, size=(SLOTS, 2))
        ours, theirs = envs.step(actions), twin.step(actions)
        for name, a, b in zip(("obs", "rewards", "terminated", "truncated"), ours[:4], theirs[:4], strict=True):
            assert same_bits(a, b), f"{name} differs from the twin's"
    report = compare_with_reference(envs.unwrapped, steps=5, seed=1)
    assert report.ok, "\n" + report.table()


def on_device(value, envs):
    return value.to(envs.device) if isinstance(value, torch.Tensor) else value


# -- actions: shape and dtype -------------------------------------------------------------------------------------

SHAPE = r"actions must have shape \(21, 2\) \(one per slot\) or \(3, 7, 2\) \(games, agents, components\), got "
DTYPE = r"actions must have an integer dtype \(MultiDiscrete indices\), got "
BAD_ACTIONS = [
    pytest.param(np.zeros(SLOTS, np.int64), ValueError, SHAPE + r"\(21,\)", id="no-components"),
    pytest.param(np.zeros((SLOTS, 3), np.int64), ValueError, SHAPE + r"\(21, 3\)", id="3-components"),
    pytest.param(np.zeros((SLOTS - 1, 2), np.int64), ValueError, SHAPE + r"\(20, 2\)", id="one-slot-short"),
    pytest.param(np.zeros((GAMES, 2), np.int64), ValueError, SHAPE + r"\(3, 2\)", id="one-per-game"),
    pytest.param(np.zeros((AGENTS, GAMES, 2), np.int64), ValueError, SHAPE + r"\(7, 3, 2\)", id="agents-by-games"),
    pytest.param(np.zeros((1, SLOTS, 2), np.int64), ValueError, SHAPE + r"\(1, 21, 2\)", id="leading-axis"),
    pytest.param(0, ValueError, SHAPE + r"\(\)", id="scalar"),
    pytest.param(torch.zeros((SLOTS, 2, 1), dtype=torch.int64), ValueError, SHAPE + r"\(21, 2, 1\)",
                 id="tensor-trailing-axis"),
    pytest.param(np.zeros((SLOTS, 2), np.float32), TypeError, DTYPE + r"float32 \(ndarray\)", id="float32"),
    pytest.param(np.ones((SLOTS, 2)), TypeError, DTYPE + r"float64 \(ndarray\)", id="whole-floats"),
    pytest.param(np.full((SLOTS, 2), np.nan), TypeError, DTYPE + r"float64 \(ndarray\)", id="nan"),
    pytest.param(np.full((SLOTS, 2), np.inf, np.float32), TypeError, DTYPE + r"float32 \(ndarray\)", id="inf"),
    pytest.param(torch.full((SLOTS, 2), float("nan")), TypeError, DTYPE + r"torch\.float32", id="nan-tensor"),
    pytest.param(torch.full((SLOTS, 2), float("-inf"), dtype=torch.float64), TypeError, DTYPE + r"torch\.float64",
                 id="inf-tensor"),
    pytest.param(torch.zeros((SLOTS, 2), dtype=torch.float16), TypeError, DTYPE + r"torch\.float16", id="float16"),
    pytest.param(torch.zeros((SLOTS, 2), dtype=torch.complex64), TypeError, DTYPE + r"torch\.complex64",
                 id="complex-tensor"),
    pytest.param(np.zeros((SLOTS, 2), bool), TypeError, DTYPE + r"bool \(ndarray\)", id="bool"),
    pytest.param(torch.zeros((SLOTS, 2), dtype=torch.bool), TypeError, DTYPE + r"torch\.bool", id="bool-tensor"),
    pytest.param([[0, 0.5]] * SLOTS, TypeError, DTYPE + r"float64 \(list\)", id="list-of-floats"),
    pytest.param([[0, "a"]] * SLOTS, TypeError, DTYPE + r"<U\d+ \(list\)", id="list-of-strings"),
    pytest.param(None, TypeError, DTYPE + r"object \(NoneType\)", id="none"),
]  # fmt: skip


@pytest.mark.parametrize("actions, error, message", BAD_ACTIONS)
def test_bad_actions_are_refused_before_stepping(pair, actions, error, message):
    envs, twin = pair
    with pytest.raises(error, match="WarpTag-v0: " + message):
        envs.step(on_device(actions, envs))
    assert_unharmed(envs, twin)


@pytest.mark.gpu
@pytest.mark.parametrize("env_device, actions_device", [("cuda", "cpu"), ("cpu", "cuda")])
def test_actions_on_another_device_are_refused(env_device, actions_device):
    envs, twin = make_pair(env_device)
    shown = "cuda:0" if env_device == "cuda" else "cpu"
    message = rf"actions are on {actions_device}(:0)? but the env is on {shown}; move them with \.to\('{shown}'\)"
    with pytest.raises(ValueError, match=message):
        envs.step(torch.zeros((SLOTS, 2), dtype=torch.int64, device=actions_device))
    assert_unharmed(envs, twin)


# -- actions: layouts that are accepted -------------------------------------------------------------------------


def _interleaved(base):
    wide = np.full((SLOTS, 4), -1, np.int64)  # the -1 columns are skipped by the stride
    wide[:, ::2] = base
    return torch.from_numpy(wide)[:, ::2]


# Each makes a non-contiguous (or otherwise unusual) array or tensor holding the values of ``base`` (SLOTS, 2).
LAYOUTS = {
    "tensor-transposed": lambda base: torch.from_numpy(base.T.copy()).T,
    "tensor-every-other-row": lambda base: torch.from_numpy(np.repeat(base, 2, axis=0))[::2],
    "tensor-every-other-column": _interleaved,
    "tensor-broadcast-row": lambda base: torch.from_numpy(base[:1].copy()).expand(SLOTS, 2),
    "tensor-games-agents-permuted": lambda base: torch.from_numpy(
        base.reshape(GAMES, AGENTS, 2).transpose(1, 0, 2).copy()
    ).permute(1, 0, 2),
    "tensor-int32": lambda base: torch.from_numpy(base.astype(np.int32)),
    "numpy-fortran-order": np.asfortranarray,
    "numpy-negative-strides": lambda base: base[::-1].copy()[::-1],
    "numpy-big-endian": lambda base: base.astype(">i8"),
    "numpy-uint8": lambda base: base.astype(np.uint8),
    "list": lambda base: base.tolist(),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_any_layout_of_integer_actions_steps_like_its_contiguous_copy(pair, layout):
    envs, twin = pair
    base = np.random.default_rng(1).integers(0, 21, size=(SLOTS, 2))
    given = LAYOUTS[layout](base)
    values = given.cpu().numpy() if torch.is_tensor(given) else given
    contiguous = torch.from_numpy(np.array(values, np.int64, order="C"))
    ours = envs.step(on_device(given, envs))
    theirs = twin.step(contiguous.to(twin.device))
    for a, b in zip(ours[:4], theirs[:4], strict=True):
        assert same_bits(a, b)
    assert_unharmed(envs, twin)


# -- actions: out-of-range indices --------------------------------------------------------------------------------

OUT_OF_RANGE = [
    pytest.param(1, 21, "21", id="one-past-the-end"),
    pytest.param(0, -1, "-1", id="negative"),
    pytest.param(1, 10**6, "1000000", id="large"),
    pytest.param(0, 2**40, "2147483647 or more", id="beyond-int32"),
    pytest.param(1, -(2**40), "-2147483648 or less", id="below-int32"),
]


@pytest.mark.parametrize("component, value, shown", OUT_OF_RANGE)
def test_out_of_range_action_is_a_no_op_reported_by_the_next_reset(pair, component, value, shown):
    envs, twin = pair
    actions = np.random.default_rng(2).integers(0, 21, size=(GAMES, AGENTS, 2))
    actions[1, 2, component] = value  # slot 9: game 1, agent 2
    as_no_op = actions.copy()
    as_no_op[1, 2, component] = 0
    ours, theirs = envs.step(actions), twin.step(as_no_op)  # no exception at the step itself
    for a, b in zip(ours[:4], theirs[:4], strict=True):
        assert same_bits(a, b)

    before = snapshot(envs)
    del before["action_error"]  # the record the failed reset reports and clears
    message = (
        rf"WarpTag-v0: action component {component} of slot 9 \(game 1, agent 2\) was {shown}, expected "
        r"0 <= value < 21; seen at an earlier step; 1 slot\(s\) had out-of-range actions, which acted as index 0\. "
        r"The env was not reset; call reset\(\) again to go on, or pass strict=True to raise at the step\."
    )
    with pytest.raises(ValueError, match=message):
        envs.reset(seed=4)
    assert_state_equals(envs, before)  # the failed reset reset nothing
    envs.reset(seed=4)  # reported once: the next reset goes on
    twin.reset(seed=4)
    assert_unharmed(envs, twin)


def test_out_of_range_actions_written_into_the_action_buffer_are_caught_as_any_others(device):
    envs, _ = make_pair(device)
    envs.unwrapped.action_buffer.zero_()
    envs.unwrapped.action_buffer[9, 1] = 21  # slot 9: game 1, agent 2
    envs.step(envs.unwrapped.action_buffer)
    with pytest.raises(ValueError, match=r"action component 1 of slot 9 \(game 1, agent 2\) was 21"):
        envs.reset(seed=4)

    strict, _ = make_pair(device, strict=True)
    strict.unwrapped.action_buffer[15, 0] = -1  # slot 15: game 2, agent 1
    with pytest.raises(ValueError, match=r"action component 0 of slot 15 \(game 2, agent 1\) was -1, .*nothing was"):
        strict.step(strict.unwrapped.action_buffer)


@pytest.mark.parametrize("component, value, shown", OUT_OF_RANGE)
def test_strict_mode_refuses_out_of_range_actions_before_stepping(device, component, value, shown):
    """strict=True checks the int64 values themselves, so the message shows the value as given."""
    envs, twin = make_pair(device, strict=True)
    actions = np.zeros((SLOTS, 2), np.int64)
    actions[15, component] = value  # slot 15: game 2, agent 1
    message = (
        rf"WarpTag-v0: action component {component} of slot 15 \(game 2, agent 1\) was {value}, "
        r"expected 0 <= value < 21; seen at this step \(strict=True\); nothing was stepped"
    )
    loaded = envs.unwrapped._actions.clone()
    with pytest.raises(ValueError, match=message):
        envs.step(actions)
    assert torch.equal(envs.unwrapped._actions, loaded)  # not even the action buffer took the refused actions
    assert_unharmed(envs, twin)
    envs.reset()  # nothing was recorded for a later reset to report


# -- lifecycle ----------------------------------------------------------------------------------------------------


def test_step_before_reset_raises_reset_needed_and_a_failed_reset_does_not_count(device):
    envs, twin = make(device), make(device)
    with pytest.raises(gym.error.ResetNeeded, match=r"WarpTag-v0: call reset\(\) before step\(\)"):
        envs.step(FIRST_ACTIONS)
    with pytest.raises(ValueError, match="initial_positions must have shape"):
        envs.reset(options={"initial_positions": np.zeros((2, 2))})
    with pytest.raises(gym.error.ResetNeeded):
        envs.step(FIRST_ACTIONS)
    for e in (envs, twin):
        e.reset(seed=0)
    assert_unharmed(envs, twin)


def test_a_closed_env_refuses_every_call_and_other_envs_go_on(pair):
    envs, twin = pair
    closed = make(envs.device)
    closed.reset(seed=0)
    closed.close()
    closed.close()  # closing twice is fine
    message = "WarpTag-v0: the env is closed; make a new one"
    with pytest.raises(RuntimeError, match=message):
        closed.step(FIRST_ACTIONS)
    with pytest.raises(RuntimeError, match=message):
        closed.reset(seed=0)
    with pytest.raises(RuntimeError, match=message):
        closed.state  # noqa: B018
    with pytest.raises(RuntimeError, match=message):
        closed.unwrapped.action_buffer  # noqa: B018
    assert_unharmed(envs, twin)


# -- reset arguments ----------------------------------------------------------------------------------------------

MASK_SHAPE = r"reset_mask must have shape \(21,\) or \(3,\), got "
MASK_DTYPE = r"reset_mask must be a bool array, got dtype "
BAD_MASKS = [
    pytest.param(np.ones(GAMES + 1, bool), ValueError, MASK_SHAPE + r"\(4,\)", id="wrong-length"),
    pytest.param(np.ones((1, GAMES), bool), ValueError, MASK_SHAPE + r"\(1, 3\)", id="2-d"),
    pytest.param(np.ones((GAMES, AGENTS), bool), ValueError, MASK_SHAPE + r"\(3, 7\)", id="games-by-agents"),
    pytest.param(np.bool_(True), ValueError, MASK_SHAPE + r"\(\)", id="scalar"),
    pytest.param(np.ones(GAMES, np.int64), TypeError, MASK_DTYPE + r"torch\.int64", id="int"),
    pytest.param(np.ones(GAMES, np.uint8), TypeError, MASK_DTYPE + r"torch\.uint8", id="uint8"),
    pytest.param(np.ones(SLOTS, np.float32), TypeError, MASK_DTYPE + r"torch\.float32", id="float"),
    pytest.param(torch.ones(GAMES, dtype=torch.int32), TypeError, MASK_DTYPE + r"torch\.int32", id="int-tensor"),
    pytest.param(np.arange(SLOTS) == 3, ValueError, r"reset_mask must be equal for all agents of a game",
                 id="one-agent-of-a-game"),
]  # fmt: skip

SEED_RANGE = r"seed must be in \[0, 2\*\*63 - num_games\], got "
SEED_TYPE = r"seed must be an int, a list of ints and Nones, or None, got "
SEED_LENGTH = r"a seed list needs one seed per game \(3\), or per slot \(21\); got "
SEED_ITEM = r"every seed must be an int in \[0, 2\*\*63\) or None, got "
BAD_SEEDS = [
    pytest.param(1.5, TypeError, SEED_TYPE + "float", id="float"),
    pytest.param(np.float64(2.0), TypeError, SEED_TYPE + "float64", id="numpy-float"),
    pytest.param("7", TypeError, SEED_TYPE + "str", id="str"),
    pytest.param({0: 1}, TypeError, SEED_TYPE + "dict", id="dict"),
    pytest.param(True, TypeError, SEED_TYPE + "True", id="bool"),
    pytest.param(-1, ValueError, SEED_RANGE + "-1", id="negative"),
    pytest.param(2**63 - 2, ValueError, SEED_RANGE + "9223372036854775806", id="too-large-for-3-games"),
    pytest.param([1, 2], ValueError, SEED_LENGTH + "2", id="list-too-short"),
    pytest.param([1, 2, 3, 4], ValueError, SEED_LENGTH + "4", id="list-too-long"),
    pytest.param(np.arange(5), ValueError, SEED_LENGTH + "5", id="array-wrong-length"),
    pytest.param([1, -2, 3], ValueError, SEED_ITEM + "-2", id="negative-in-list"),
    pytest.param([1, 2.5, 3], ValueError, SEED_ITEM + r"2\.5", id="float-in-list"),
    pytest.param([1, True, 3], ValueError, SEED_ITEM + "True", id="bool-in-list"),
    pytest.param([[1], [2], [3]], ValueError, SEED_ITEM + r"\[1\]", id="nested-list"),
    pytest.param([1, 2, 2**63], ValueError, SEED_ITEM + "9223372036854775808", id="too-large-in-list"),
    pytest.param(list(range(SLOTS)), ValueError,
                 r"a seed list of length num_envs must repeat one seed for all agents of a game",
                 id="per-slot-list-differing-within-a-game"),
]  # fmt: skip

POSITIONS_OUTSIDE = r"initial_positions must lie in the arena \[0, grid_length = 5\.0\] \(NaN: random\), got values "
BAD_OPTIONS = [
    pytest.param([("reset_mask", None)], TypeError, r"options must be a dict or None, got list", id="not-a-dict"),
    pytest.param("reset_mask", TypeError, r"options must be a dict or None, got str", id="a-string"),
    pytest.param({"mask": np.ones(GAMES, bool)}, ValueError,
                 r"unknown reset option\(s\) \['mask'\]; known: \['initial_directions', 'initial_positions', "
                 r"'reset_mask'\]", id="gymnasium-0.29-mask"),
    pytest.param({"initial_position": np.zeros((AGENTS, 2))}, ValueError,
                 r"unknown reset option\(s\) \['initial_position'\]", id="typo"),
    pytest.param({"initial_positions": np.zeros((AGENTS - 1, 2))}, ValueError,
                 r"initial_positions must have shape \(7, 2\), got \(6, 2\)", id="positions-shape"),
    pytest.param({"initial_positions": np.full((AGENTS, 2), -0.5)}, ValueError,
                 POSITIONS_OUTSIDE + r"from -0\.5 to -0\.5", id="positions-below-the-arena"),
    pytest.param({"initial_positions": np.array([[1.0, 5.5]] + [[np.nan, np.nan]] * (AGENTS - 1))}, ValueError,
                 POSITIONS_OUTSIDE + r"from 1\.0 to 5\.5", id="position-beyond-the-arena"),
    pytest.param({"initial_positions": np.full((AGENTS, 2), np.inf)}, ValueError,
                 POSITIONS_OUTSIDE + "from inf to inf", id="positions-inf"),
    pytest.param({"initial_directions": np.full(AGENTS, 7.0)}, ValueError,
                 r"initial_directions must lie in \[0, 2\*pi\)", id="direction-above-2pi"),
    pytest.param({"initial_directions": np.full(AGENTS, -np.inf)}, ValueError,
                 r"initial_directions must lie in \[0, 2\*pi\)", id="direction-minus-inf"),
    pytest.param({"initial_directions": np.zeros((AGENTS, 1))}, ValueError,
                 r"initial_directions must have shape \(7,\), got \(7, 1\)", id="directions-shape"),
]  # fmt: skip


@pytest.mark.parametrize(
    "seed, options, error, message",
    [pytest.param(None, {"reset_mask": p.values[0]}, *p.values[1:], id=f"mask-{p.id}") for p in BAD_MASKS]
    + [pytest.param(p.values[0], None, *p.values[1:], id=f"seed-{p.id}") for p in BAD_SEEDS]
    + [pytest.param(None, p.values[0], *p.values[1:], id=f"option-{p.id}") for p in BAD_OPTIONS],
)
def test_bad_reset_arguments_are_refused_before_resetting(pair, seed, options, error, message):
    envs, twin = pair
    if isinstance(options, dict):
        options = {k: on_device(v, envs) for k, v in options.items()}
    with pytest.raises(error, match=message):
        envs.reset(seed=seed, options=options)
    assert_unharmed(envs, twin)


@pytest.mark.parametrize("mask", [np.zeros(GAMES, bool), np.zeros(SLOTS, bool), torch.zeros(GAMES, dtype=torch.bool)],
                         ids=["per-game", "per-slot", "tensor"])  # fmt: skip
def test_an_all_false_reset_mask_is_accepted_and_resets_nothing(pair, mask):
    """Decided: an all-False mask is a valid, empty partial reset (a loop resetting "the finished games" may
    find none), not an error. It returns the current observations and changes no state; seeds go unused."""
    envs, twin = pair
    last_obs = envs.step(FIRST_ACTIONS)[0]
    twin.step(FIRST_ACTIONS)
    obs, infos = envs.reset(seed=123, options={"reset_mask": on_device(mask, envs)})
    assert same_bits(obs, last_obs)
    assert infos["active"].shape == (SLOTS,)
    assert_unharmed(envs, twin)


# -- construction -------------------------------------------------------------------------------------------------


def config_error(name, value):
    return re.escape(f"WarpTag: {name}={value!r} is invalid; expected")


GAMES_ERROR = r"WarpTag-v0: num_envs \(the number of games\) must be an integer >= 1, got "
BAD_CONSTRUCTIONS = [
    # unknown keys
    pytest.param(dict(num_runner=5), TypeError,
                 r"unknown parameter\(s\) \['num_runner'\]; valid parameters are .*'num_runners'.* and the env "
                 r"options .*'autoreset_mode'.*'device'", id="unknown-parameter"),
    pytest.param(dict(devcie="cpu"), TypeError, r"unknown parameter\(s\) \['devcie'\]", id="misspelt-option"),
    # impossible games
    pytest.param(dict(num_taggers=0), ValueError, config_error("num_taggers", 0) + " an integer >= 1",
                 id="no-taggers"),
    pytest.param(dict(num_runners=0), ValueError, config_error("num_runners", 0) + " an integer >= 1",
                 id="no-runners"),
    pytest.param(dict(num_taggers=2.0), ValueError, config_error("num_taggers", 2.0), id="float-count"),
    pytest.param(dict(num_runners=True), ValueError, config_error("num_runners", True), id="bool-count"),
    pytest.param(dict(num_other_agents_observed=7), ValueError,
                 config_error("num_other_agents_observed", 7) + r" an integer in \[1, num_agents - 1 = 6\]",
                 id="K-above-N-1"),
    pytest.param(dict(num_other_agents_observed=0), ValueError, config_error("num_other_agents_observed", 0),
                 id="K-zero"),
    pytest.param(dict(grid_length=0.0), ValueError, config_error("grid_length", 0.0) + " a finite number > 0",
                 id="grid-zero"),
    pytest.param(dict(grid_length=-5.0), ValueError, config_error("grid_length", -5.0), id="grid-negative"),
    pytest.param(dict(grid_length=float("inf")), ValueError, config_error("grid_length", float("inf")),
                 id="grid-inf"),
    pytest.param(dict(grid_length=True), ValueError, config_error("grid_length", True), id="bool-grid-length"),
    pytest.param(dict(max_speed=float("nan")), ValueError, config_error("max_speed", float("nan")), id="speed-nan"),
    pytest.param(dict(episode_length=0), ValueError, config_error("episode_length", 0) + " an integer >= 1",
                 id="episode-zero"),
    pytest.param(dict(episode_length=-3), ValueError, config_error("episode_length", -3), id="episode-negative"),
    pytest.param(dict(tag_reward_for_tagger=float("inf")), ValueError,
                 config_error("tag_reward_for_tagger", float("inf")) + " a finite number", id="reward-inf"),
    pytest.param(dict(tag_penalty_for_runner=10.0), ValueError,
                 config_error("tag_penalty_for_runner", 10.0) + " a finite penalty <= 0", id="runner-penalty-positive"),
    pytest.param(dict(step_penalty_for_tagger=0.1), ValueError,
                 config_error("step_penalty_for_tagger", 0.1) + " a finite penalty", id="step-penalty-positive"),
    pytest.param(dict(edge_hit_penalty=1.0), ValueError, config_error("edge_hit_penalty", 1.0) + " a finite penalty",
                 id="edge-penalty-positive"),
    pytest.param(dict(tagging_distance=-0.1), ValueError,
                 config_error("tagging_distance", -0.1) + r" a fraction of grid_length in \[0, 1\]",
                 id="tagging-distance-negative"),
    pytest.param(dict(tagging_distance=1.5), ValueError, config_error("tagging_distance", 1.5),
                 id="tagging-distance-above-1"),
    pytest.param(dict(tagging_distance=float("nan")), ValueError, config_error("tagging_distance", float("nan")),
                 id="tagging-distance-nan"),
    pytest.param(dict(tagging_distance=True), ValueError, config_error("tagging_distance", True),
                 id="bool-tagging-distance"),
    pytest.param(dict(tagger_ids=(0,)), ValueError,
                 config_error("tagger_ids", (0,)) + r" 2 distinct agent ids in \[0, 7\)", id="tagger-ids-too-few"),
    pytest.param(dict(tagger_ids=(1, 1)), ValueError, config_error("tagger_ids", (1, 1)), id="tagger-ids-repeated"),
    pytest.param(dict(tagger_ids=(0, 7)), ValueError, config_error("tagger_ids", (0, 7)),
                 id="tagger-ids-out-of-range"),
    pytest.param(dict(min_acceleration=0.2, max_acceleration=0.1), ValueError,
                 config_error("min_acceleration", 0.2) + r" <= max_acceleration \(0\.1\)", id="acceleration-range"),
    pytest.param(dict(min_turn=1.0, max_turn=-1.0), ValueError, config_error("min_turn", 1.0) + r" <= max_turn",
                 id="turn-range"),
    pytest.param(dict(num_acceleration_levels=0), ValueError, config_error("num_acceleration_levels", 0),
                 id="no-levels"),
    # env options
    pytest.param(dict(autoreset_mode="sometimes"), ValueError,
                 r"autoreset_mode must be an AutoresetMode or one of \['NextStep', 'SameStep', 'Disabled'\], "
                 r"got 'sometimes'", id="autoreset-mode"),
    pytest.param(dict(backend="tpu"), ValueError,
                 r"WarpTag-v0: backend must be 'auto', 'cuda', 'cpu' or 'reference', got 'tpu'", id="backend"),
    pytest.param(dict(backend="cuda"), ValueError,
                 r"backend='cuda' with device='cpu' runs only under the CUDA simulator \(NUMBA_ENABLE_CUDASIM=1\)",
                 id="cuda-backend-on-the-cpu"),
    pytest.param(dict(max_episode_steps=0), ValueError,
                 r"WarpTag-v0: max_episode_steps must be None or an integer >= 1, got 0", id="max-episode-steps-zero"),
    pytest.param(dict(max_episode_steps=2.5), ValueError,
                 r"max_episode_steps must be None or an integer >= 1, got 2\.5", id="max-episode-steps-float"),
    pytest.param(dict(max_episode_steps=True), ValueError, r"max_episode_steps .* got True",
                 id="max-episode-steps-bool"),
    pytest.param(dict(direct_write_bytes=-1), ValueError,
                 r"WarpTag-v0: direct_write_bytes must be None or an integer >= 0, got -1", id="direct-write-negative"),
    pytest.param(dict(direct_write_bytes=1.5), ValueError,
                 r"direct_write_bytes must be None or an integer >= 0, got 1\.5", id="direct-write-float"),
    pytest.param(dict(direct_write_bytes="64M"), ValueError,
                 r"direct_write_bytes must be None or an integer >= 0, got '64M'", id="direct-write-str"),
    pytest.param(dict(threads_per_block=0), ValueError,
                 r"WarpTag-v0: threads_per_block must be an integer in \[1, 1024\], got 0", id="threads-zero"),
    pytest.param(dict(threads_per_block=2048), ValueError,
                 r"threads_per_block must be an integer in \[1, 1024\], got 2048", id="threads-too-many"),
    pytest.param(dict(threads_per_block=64.0), ValueError,
                 r"threads_per_block must be an integer in \[1, 1024\], got 64\.0", id="threads-float"),
    pytest.param(dict(render_mode="human"), ValueError,
                 r"WarpTag-v0: render_mode must be None or 'rgb_array', got 'human'", id="render-mode"),
    pytest.param(dict(device="meta"), ValueError, r"device must be 'cpu' or 'cuda\[:N\]', got 'meta'", id="device"),
    pytest.param(dict(device="tpu"), ValueError, r"device must be 'cpu' or 'cuda\[:N\]', got 'tpu'",
                 id="device-unknown"),
    pytest.param(dict(device=7.5), ValueError, r"device must be 'cpu' or 'cuda\[:N\]', got 7\.5", id="device-float"),
    pytest.param(dict(num_envs=0), ValueError, GAMES_ERROR + "0", id="no-games"),
    pytest.param(dict(num_envs=-2), ValueError, GAMES_ERROR + "-2", id="negative-games"),
    pytest.param(dict(num_envs=2.5), ValueError, GAMES_ERROR + r"2\.5", id="float-games"),
    pytest.param(dict(num_envs="3"), ValueError, GAMES_ERROR + "'3'", id="str-games"),
    pytest.param(dict(num_envs=True), ValueError, GAMES_ERROR + "True", id="bool-games"),
    pytest.param(dict(num_envs=None), ValueError, GAMES_ERROR + "None", id="none-games"),
    pytest.param(dict(num_envs=10**9), MemoryError,
                 r"WarpTag-v0: 1000000000 games need about .* GiB \(\d+ bytes per game, with copy=True\) "
                 r"but only .* GiB is free on cpu", id="more-games-than-memory"),
]  # fmt: skip


@pytest.mark.parametrize("kwargs, error, message", BAD_CONSTRUCTIONS)
def test_bad_construction_is_refused_and_harms_no_live_env(kwargs, error, message):
    envs, twin = make_pair("cpu")
    params = {"num_envs": GAMES, "device": "cpu", **SMALL_TAG, **kwargs}
    if params["num_envs"] == 10**9:
        params = {k: v for k, v in params.items() if k not in SMALL_TAG}  # the default game: 110 agents
    with pytest.raises(error, match=message):
        gym.make_vec("WarpTag-v0", **params)
    assert_unharmed(envs, twin)


def free_memory_between_one_and_two_sets_of_outputs(monkeypatch, games):
    """Make the CPU's free memory, as the check reads it, hold ``games`` games with one set of outputs but not
    with two (0.9 of it halfway between); returns the bytes a game takes with one set, and one set's bytes."""
    probe = make(copy=False).unwrapped
    env_bytes = probe.memory_per_game() * games
    outputs = probe.num_agents * (4 * probe.definition.obs_dim + 8) * games
    pages = int((env_bytes + outputs / 2) / 0.9 / 4096)
    monkeypatch.setattr("gpu_vecenv.vector_env.os.sysconf", {"SC_AVPHYS_PAGES": pages, "SC_PAGE_SIZE": 4096}.get)
    return env_bytes // games, outputs // games


def test_the_memory_check_counts_the_fresh_outputs_of_copy_true(monkeypatch):
    """copy=True hands out a new set of outputs at every step, so it needs room for one more set."""
    per_game, outputs_per_game = free_memory_between_one_and_two_sets_of_outputs(monkeypatch, games=50)
    make(games=50, copy=False)
    with pytest.raises(MemoryError, match=rf"50 games need about .* \({per_game + outputs_per_game} "
                                          r"bytes per game, with copy=True\)"):  # fmt: skip
        make(games=50, copy=True)


def test_the_memory_check_counts_one_set_of_outputs_where_the_kernel_writes_them_into_fresh_tensors(monkeypatch):
    # Such an env keeps no output buffer of its own: it fits where copy=False does, and a copied copy=True
    # env does not.
    per_game, _ = free_memory_between_one_and_two_sets_of_outputs(monkeypatch, games=50)
    direct = make(games=50, copy=True, direct_write_bytes=0)
    assert direct.unwrapped.direct_write
    with pytest.raises(MemoryError, match="with copy=True"):
        make(games=50, copy=True)
    with pytest.raises(MemoryError, match=rf"100 games need about .* \({per_game} bytes per game, "):
        make(games=100, copy=True, direct_write_bytes=0)


def test_numpy_scalars_are_valid_parameters():
    envs = make(grid_length=np.float32(5.0), tagging_distance=np.float32(0.1), num_runners=np.int64(5))
    assert envs.unwrapped.definition.constants["grid_length"] == 5.0 and envs.num_agents == 7


@pytest.mark.skipif(HAS_GPU, reason="needs a machine without CUDA")
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_cuda_device_without_cuda_is_refused(device):
    with pytest.raises(ValueError, match=rf"device='{device}' was requested but torch sees no CUDA device"):
        make(device)


@pytest.mark.gpu
def test_gpu_construction_errors_allocate_nothing_and_harm_no_live_env():
    envs, twin = make_pair("cuda")
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_allocated()
    free, _ = torch.cuda.mem_get_info()
    too_many = 2 * free // envs.unwrapped.memory_per_game() + 1
    with pytest.raises(MemoryError, match=rf"{too_many} games need about .* GiB is free on cuda:0"):
        make("cuda", games=too_many)
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == allocated  # refused before allocating
    with pytest.raises(ValueError, match=r"threads_per_block must be an integer in \[1, 1024\], got 2048"):
        make("cuda", threads_per_block=2048)
    with pytest.raises(ValueError, match=r"threads_per_block must be an integer in \[1, 1024\], got 0"):
        make("cuda", threads_per_block=0)
    assert_unharmed(envs, twin)
