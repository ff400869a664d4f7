"""Drawing Tag games as RGB frames (pure numpy, no display): the ``render`` hook of ``WarpTag-v0``.

Pixel mapping (exact). A frame is ``(S, S, 3)`` uint8 with ``S = arena_pixels
+ 2 * MARGIN``. The arena ``[0, L]²`` (``L = grid_length``) fills the square
of pixels ``[MARGIN, MARGIN + arena_pixels)`` in both axes; x grows to the
right and y grows upwards. An agent at ``(x, y)`` is centred on

    column = MARGIN + floor(x * (arena_pixels - 1) / L + 0.5)
    row    = MARGIN + floor((L - y) * (arena_pixels - 1) / L + 0.5)

(computed in float64), so ``(0, L)`` is the arena's top-left pixel and
``(L, 0)`` its bottom-right one. Agents are filled discs around that pixel:
runners out of the game (tagged) first, then runners in the game, then
taggers on top, each in its own colour and radius. A one-pixel border
surrounds the arena, and a bar in the bottom margin shows the game's
time ``t / episode_length``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gpu_vecenv.arguments import is_integer

MARGIN = 8
ARENA_PIXELS = 256

BACKGROUND_COLOR = (210, 210, 210)
ARENA_COLOR = (250, 250, 245)
BORDER_COLOR = (40, 40, 40)
TIME_BAR_COLOR = (90, 90, 90)
TAGGER_COLOR = (220, 40, 40)
RUNNER_COLOR = (30, 90, 220)
TAGGED_COLOR = (150, 150, 150)

TAGGER_RADIUS = 4
RUNNER_RADIUS = 3
TAGGED_RADIUS = 2
TIME_BAR_ROWS = 3


def frame_size(arena_pixels: int = ARENA_PIXELS) -> int:
    """Side in pixels of one game's square frame."""
    return arena_pixels + 2 * MARGIN


def world_to_pixel(
    x: np.ndarray, y: np.ndarray, grid_length: float, arena_pixels: int = ARENA_PIXELS
) -> tuple[np.ndarray, np.ndarray]:
    """``(row, column)`` int64 pixel indices of arena points ``(x, y)`` (see the module docstring)."""
    scale = (arena_pixels - 1) / float(grid_length)
    column = MARGIN + np.floor(np.asarray(x, np.float64) * scale + 0.5)
    row = MARGIN + np.floor((float(grid_length) - np.asarray(y, np.float64)) * scale + 0.5)
    return row.astype(np.int64), column.astype(np.int64)


def _disc_offsets(radius: int) -> tuple[np.ndarray, np.ndarray]:
    d = np.arange(-radius, radius + 1)
    dy, dx = np.meshgrid(d, d, indexing="ij")
    inside = dy * dy + dx * dx <= radius * radius + radius  # a rounder disc than <= r^2 at small radii
    return dy[inside], dx[inside]


def _draw_discs(
    frame: np.ndarray, rows: np.ndarray, columns: np.ndarray, radius: int, color: tuple[int, int, int]
) -> None:
    dy, dx = _disc_offsets(radius)
    r = np.clip(rows[:, None] + dy[None, :], 0, frame.shape[0] - 1)
    c = np.clip(columns[:, None] + dx[None, :], 0, frame.shape[1] - 1)
    frame[r.ravel(), c.ravel()] = color


def draw_games(
    state: Mapping[str, np.ndarray], *, grid_length: float, episode_length: int, arena_pixels: int = ARENA_PIXELS
) -> np.ndarray:
    """Frames ``(games, S, S, 3)`` uint8 of the games in ``state``.

    Args:
        state: numpy state arrays of the games to draw, as
            :func:`gpu_vecenv.rendering.state_of_games` gives them: ``x``,
            ``y``, ``alive``, ``agent_type`` ``(games, agents)`` and ``t``
            ``(games,)``.
        grid_length, episode_length: the game's parameters.
        arena_pixels: pixels across the arena (an env's ``render_options``
            may set it); the frame side is ``arena_pixels + 2 * MARGIN``.
    """
    if not is_integer(arena_pixels, 2):
        raise ValueError(f"WarpTag render: arena_pixels must be an integer >= 2, got {arena_pixels!r}")
    games = state["x"].shape[0]
    size = frame_size(arena_pixels)
    frames = np.empty((games, size, size, 3), np.uint8)
    end = MARGIN + arena_pixels
    for g in range(games):
        frame = frames[g]
        frame[:] = BACKGROUND_COLOR
        frame[MARGIN - 1 : end + 1, MARGIN - 1 : end + 1] = BORDER_COLOR
        frame[MARGIN:end, MARGIN:end] = ARENA_COLOR
        filled = int(np.floor(arena_pixels * min(max(float(state["t"][g]) / episode_length, 0.0), 1.0) + 0.5))
        frame[end + 2 : end + 2 + TIME_BAR_ROWS, MARGIN : MARGIN + filled] = TIME_BAR_COLOR
        rows, columns = world_to_pixel(state["x"][g], state["y"][g], grid_length, arena_pixels)
        tagger = state["agent_type"][g] == 1
        alive = state["alive"][g] != 0
        for chosen, radius, color in (
            (~tagger & ~alive, TAGGED_RADIUS, TAGGED_COLOR),
            (~tagger & alive, RUNNER_RADIUS, RUNNER_COLOR),
            (tagger, TAGGER_RADIUS, TAGGER_COLOR),
        ):
            _draw_discs(frame, rows[chosen], columns[chosen], radius, color)
    return frames
