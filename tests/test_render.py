"""render_mode="rgb_array": frames of chosen games, with taggers, runners and tagged runners at the right pixels.

WarpCartPole-v1's frames are checked at the end, against the geometry of ``envs/cartpole/render.py``.

The pixel mapping is documented in ``envs/tag_continuous/render.py``: with a
5 x 5 arena drawn on 101 pixels there are exactly 20 pixels per unit, the
arena's top-left pixel is (8, 8), and x grows to the right, y upwards. The
expected pixels below are written out from that rule.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import gpu_vecenv  # noqa: F401  (registers the envs)
from envs.cartpole.render import BACKGROUND_COLOR as CART_BACKGROUND
from envs.cartpole.render import CART_COLOR, POLE_COLOR, TRACK_COLOR
from envs.tag_continuous.render import (
    ARENA_COLOR,
    BACKGROUND_COLOR,
    BORDER_COLOR,
    MARGIN,
    RUNNER_COLOR,
    TAGGED_COLOR,
    TAGGER_COLOR,
    TIME_BAR_COLOR,
    world_to_pixel,
)
from gpu_vecenv.rendering import TILE_GAP, TILE_GAP_COLOR

# Two taggers and five runners on a 5 x 5 arena; tag radius 0.1 * 5 = 0.5 units (10 pixels).
TAG = dict(num_taggers=2, num_runners=5, num_other_agents_observed=3, episode_length=15, grid_length=5.0,
           tagging_distance=0.1)  # fmt: skip
ARENA_PIXELS = 101  # (101 - 1) / 5 = 20 pixels per unit
SIDE = ARENA_PIXELS + 2 * MARGIN  # 117

# Agent ids 0, 1 are the taggers. Runner 2 starts 0.3 units (6 pixels) right of tagger 0, inside the tag radius,
# so the first step tags it; the other runners are far from both taggers.
POSITIONS = np.array([[1.0, 4.0], [4.0, 1.0], [1.3, 4.0], [2.5, 2.5], [4.0, 4.0], [0.0, 0.0], [1.0, 1.0]], np.float32)
# (row, column) of each agent's centre: column = 8 + 20 x, row = 8 + 20 (5 - y).
PIXELS = [(28, 28), (88, 88), (28, 34), (58, 58), (28, 88), (108, 8), (88, 28)]
NO_OP = np.zeros((1, 7, 2), np.int64)  # speed stays 0: nobody moves


def make(device="cpu", games=1, **kwargs):
    envs = gym.make_vec("WarpTag-v0", num_envs=games, device=device, render_mode="rgb_array", **TAG, **kwargs)
    envs.render_options = {"arena_pixels": ARENA_PIXELS}
    envs.reset(seed=3, options={"initial_positions": POSITIONS, "initial_directions": np.zeros(7, np.float32)})
    return envs


def color(frame, pixel):
    return tuple(int(v) for v in frame[pixel])


def test_frame_is_a_uint8_rgb_image_of_the_documented_size():
    frame = make().render()
    assert isinstance(frame, np.ndarray)
    assert frame.dtype == np.uint8
    assert frame.shape == (SIDE, SIDE, 3)


def test_taggers_and_runners_are_drawn_at_their_pixels():
    frame = make().render()
    assert [color(frame, p) for p in PIXELS[:2]] == [TAGGER_COLOR] * 2
    assert [color(frame, p) for p in PIXELS[2:]] == [RUNNER_COLOR] * 5
    # Corners of the arena, the frame outside it and the border between them.
    assert color(frame, (8 + 50, 8 + 70)) == ARENA_COLOR  # (3.5, 2.5): nobody there
    assert color(frame, (0, 0)) == BACKGROUND_COLOR
    assert color(frame, (MARGIN - 1, 60)) == BORDER_COLOR
    assert color(frame, (MARGIN + ARENA_PIXELS, 60)) == BORDER_COLOR


def test_pixel_mapping_of_the_arena_corners():
    rows, columns = world_to_pixel(np.array([0.0, 5.0, 2.5]), np.array([5.0, 0.0, 2.5]), 5.0, ARENA_PIXELS)
    assert rows.tolist() == [8, 108, 58]
    assert columns.tolist() == [8, 108, 58]


def test_a_tagged_runner_is_drawn_differently():
    envs = make()
    _, rewards, *_ = envs.step(NO_OP)
    assert rewards[2] == -10.0, "runner 2 starts within the tag radius of tagger 0"
    frame = envs.render()
    assert color(frame, PIXELS[2]) == TAGGED_COLOR
    assert color(frame, PIXELS[0]) == TAGGER_COLOR
    assert [color(frame, p) for p in PIXELS[3:]] == [RUNNER_COLOR] * 4


def test_time_bar_grows_with_the_step_counter():
    envs = make()
    bar_row = MARGIN + ARENA_PIXELS + 2
    assert color(envs.render(), (bar_row, MARGIN + 19)) == BACKGROUND_COLOR  # t = 0
    for _ in range(3):
        envs.step(NO_OP)
    frame = envs.render()  # t = 3 of 15: round(101 * 3 / 15) = 20 pixels of bar
    assert color(frame, (bar_row, MARGIN + 19)) == TIME_BAR_COLOR
    assert color(frame, (bar_row, MARGIN + 20)) == BACKGROUND_COLOR


def test_several_games_are_tiled_row_by_row():
    envs = make(games=3)
    envs.render_games = [2, 0, 1]
    frame = envs.render()
    assert frame.shape == (2 * SIDE + TILE_GAP, 2 * SIDE + TILE_GAP, 3)  # 2 x 2 grid, the last tile unused
    tiles = [(0, 0), (0, SIDE + TILE_GAP), (SIDE + TILE_GAP, 0)]
    for top, left in tiles:
        assert color(frame, (top + 28, left + 28)) == TAGGER_COLOR
        assert color(frame, (top + 58, left + 58)) == RUNNER_COLOR
    assert color(frame, (SIDE + TILE_GAP + 5, SIDE + TILE_GAP + 5)) == TILE_GAP_COLOR
    assert color(frame, (SIDE + 1, 5)) == TILE_GAP_COLOR


def test_render_draws_the_chosen_game():
    envs = make(games=2)
    envs.step(np.zeros((2, 7, 2), np.int64))  # tags runner 2 in both games
    # Game 1 starts again from the same positions: runner 2 is back in play.
    envs.reset(options={"reset_mask": np.array([False, True]), "initial_positions": POSITIONS})
    envs.render_games = 0
    assert color(envs.render(), PIXELS[2]) == TAGGED_COLOR
    envs.render_games = [1]
    assert color(envs.render(), PIXELS[2]) == RUNNER_COLOR


def test_rendering_leaves_the_games_unchanged():
    envs = make()
    before = {name: view.clone() for name, view in envs.state.items()}
    first = envs.render()
    assert np.array_equal(first, envs.render())
    assert all(torch.equal(before[name], view) for name, view in envs.state.items())


def test_render_without_render_mode_returns_none():
    envs = gym.make_vec("WarpTag-v0", num_envs=1, device="cpu", **TAG)
    envs.reset(seed=0)
    assert envs.render() is None


@pytest.mark.parametrize("games", [[], [1], [-1], 0.5, [True]])
def test_bad_render_games_are_rejected(games):
    envs = make()
    envs.render_games = games
    with pytest.raises(ValueError, match=r"render_games must be .* in \[0, 1\)"):
        envs.render()


def test_bad_arena_pixels_are_rejected():
    envs = make()
    envs.render_options = {"arena_pixels": 1}
    with pytest.raises(ValueError, match="arena_pixels must be an integer >= 2, got 1"):
        envs.render()


@pytest.mark.gpu
def test_gpu_frame_equals_cpu_frame():
    cpu, gpu = make("cpu"), make("cuda")
    for envs in (cpu, gpu):
        envs.step(NO_OP)
    assert np.array_equal(cpu.render(), gpu.render())


# WarpCartPole-v1: a 300 x 200 frame, 62.5 pixels per metre, the track on row 150, the pivot on row 147.
def cartpole_frame(x: float, theta: float) -> np.ndarray:
    envs = gym.make_vec("WarpCartPole-v1", num_envs=1, device="cpu", render_mode="rgb_array")
    envs.reset(seed=0)
    envs.state["x"].fill_(x)  # the state views are live: writing them moves the cart
    envs.state["theta"].fill_(theta)
    return envs.render()


def test_cartpole_cart_and_pole_are_drawn_where_the_state_says():
    frame = cartpole_frame(1.2, 0.0)
    assert frame.shape == (200, 300, 3) and frame.dtype == np.uint8
    assert color(frame, (150, 225)) == CART_COLOR  # column 150 + 1.2 * 62.5
    assert color(frame, (150, 150)) == TRACK_COLOR
    assert color(frame, (100, 225)) == POLE_COLOR  # 47 pixels up the upright pole
    assert color(frame, (100, 150)) == CART_BACKGROUND


def test_cartpole_pole_leans_right_for_positive_theta():
    frame = cartpole_frame(0.0, 0.2)
    assert color(frame, (98, 160)) == POLE_COLOR  # 50 pixels along: row 147 - 50 cos 0.2, column 150 + 50 sin 0.2
    assert color(frame, (98, 150)) == CART_BACKGROUND
