"""Drawing CartPole games as RGB frames (pure numpy): the ``render`` hook of ``WarpCartPole-v1``.

Geometry (exact). A frame is ``(H, W, 3)`` uint8 with ``H = 2 * W // 3``; the
visible track spans ``x`` in ``[-2.4, 2.4]`` (the termination bounds), so one
metre is ``W / 4.8`` pixels. The track is row ``TRACK_ROW = round(0.75 * H)``;
the cart of a game at position ``x`` is centred on column

    column = floor(W / 2 + x * W / 4.8 + 0.5)

and row ``TRACK_ROW``. The pole (1 m long, twice the half-length of the
dynamics) is drawn from the pivot, ``CART_HEIGHT / 4`` pixels above the cart's
centre, towards ``(sin theta, cos theta)`` in (right, up) coordinates, so a
positive ``theta`` leans it to the right.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from envs.cartpole.sim import LENGTH, X_THRESHOLD
from gpu_vecenv.arguments import is_integer

BACKGROUND_COLOR = (255, 255, 255)
TRACK_COLOR = (0, 0, 0)
CART_COLOR = (0, 0, 0)
POLE_COLOR = (202, 152, 101)
AXLE_COLOR = (129, 132, 203)
WIDTH = 300


def frame_shape(width: int = WIDTH) -> tuple[int, int]:
    """``(height, width)`` of one game's frame."""
    return 2 * width // 3, width


def pixels_per_metre(width: int = WIDTH) -> float:
    return width / (2 * float(X_THRESHOLD))


def cart_column(x: float, width: int = WIDTH) -> int:
    """Column of the centre of a cart at position ``x`` (see the module docstring)."""
    return int(np.floor(width / 2 + float(x) * pixels_per_metre(width) + 0.5))


def _fill(frame: np.ndarray, rows: np.ndarray, columns: np.ndarray, color: tuple[int, int, int]) -> None:
    inside = (rows >= 0) & (rows < frame.shape[0]) & (columns >= 0) & (columns < frame.shape[1])
    frame[rows[inside], columns[inside]] = color


def draw_games(state: Mapping[str, np.ndarray], *, width: int = WIDTH) -> np.ndarray:
    """Frames ``(games, H, W, 3)`` uint8 of the carts in ``state`` (``x``, ``theta``: ``(games, 1)``).

    ``width`` (an env's ``render_options`` may set it) is the frame's width in pixels, at least 60.
    """
    if not is_integer(width, 60):
        raise ValueError(f"WarpCartPole render: width must be an integer >= 60, got {width!r}")
    height, _ = frame_shape(width)
    scale = pixels_per_metre(width)
    cart_w, cart_h = round(50 / 600 * width), round(30 / 600 * width)
    pole_half_w = max(1, round(5 / 600 * width))
    track_row = round(0.75 * height)
    games = state["x"].shape[0]
    frames = np.empty((games, height, width, 3), np.uint8)
    for g in range(games):
        frame = frames[g]
        frame[:] = BACKGROUND_COLOR
        frame[track_row, :] = TRACK_COLOR
        column = cart_column(state["x"][g, 0], width)
        rows, columns = np.mgrid[-(cart_h // 2) : cart_h - cart_h // 2, -(cart_w // 2) : cart_w - cart_w // 2]
        _fill(frame, track_row + rows.ravel(), column + columns.ravel(), CART_COLOR)
        # The pole: discs along the segment from the pivot, one every half pixel.
        pivot_row, theta = track_row - cart_h // 4, float(state["theta"][g, 0])
        length = 2 * float(LENGTH) * scale
        along = np.arange(0.0, length + 0.5, 0.5)
        d = np.arange(-pole_half_w, pole_half_w + 1)
        dy, dx = (a.ravel() for a in np.meshgrid(d, d, indexing="ij"))
        round_disc = dy * dy + dx * dx <= pole_half_w * pole_half_w
        pole_rows = np.floor(pivot_row - along * np.cos(theta) + 0.5).astype(np.int64)[:, None] + dy[round_disc]
        pole_columns = np.floor(column + along * np.sin(theta) + 0.5).astype(np.int64)[:, None] + dx[round_disc]
        _fill(frame, pole_rows.ravel(), pole_columns.ravel(), POLE_COLOR)
        _fill(frame, pivot_row + dy[round_disc], column + dx[round_disc], AXLE_COLOR)
    return frames
