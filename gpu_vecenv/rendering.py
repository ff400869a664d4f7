"""What ``GpuVectorEnv.render()`` needs besides the env's own drawing: the chosen games' state on the host, and tiling.

An env draws through the ``render`` hook of its :class:`~gpu_vecenv.definition.EnvDefinition`;
this module hands the hook numpy copies of the state of the games to draw
(one device-to-host transfer per call) and tiles the frames it returns into
one image.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from gpu_vecenv.arguments import is_integer
from gpu_vecenv.layout import StateLayout

TILE_GAP = 4
"""Pixels between neighbouring tiles of a multi-game frame."""
TILE_GAP_COLOR = (64, 64, 64)


def game_indices(games: int | Sequence[int], num_games: int, env_name: str) -> list[int]:
    """``games`` (one index or a non-empty sequence of them) checked against ``[0, num_games)``."""
    values = list(games) if isinstance(games, Sequence) else [games]
    if not values or any(not is_integer(g, 0, num_games - 1) for g in values):
        raise ValueError(
            f"{env_name}: render_games must be a game index or a non-empty list of game indices in "
            f"[0, {num_games}), got {games!r}"
        )
    return [int(g) for g in values]


def state_of_games(
    layout: StateLayout, buffers: Mapping[str, torch.Tensor], games: Sequence[int]
) -> dict[str, np.ndarray]:
    """Numpy copies of every named state array, restricted to ``games``, in one device-to-host transfer.

    The arrays are named and shaped as :attr:`GpuVectorEnv.state` names and
    shapes them, with the games axis holding ``len(games)`` entries in the
    order given: an agent array is ``(len(games), agents)`` (or ``(length,
    len(games), agents)``), a game array ``(len(games),)``.
    """
    names = sorted(buffers)
    device = buffers[names[0]].device
    index = torch.as_tensor(list(games), dtype=torch.int64, device=device)
    chosen = {name: buffers[name].index_select(1, index) for name in names}
    # All dtypes travel as the bytes of one tensor, so the copy to the host is a single transfer.
    host_bytes = torch.cat([chosen[name].reshape(-1).view(torch.uint8) for name in names]).cpu()
    parts = torch.split(host_bytes, [chosen[name].numel() * chosen[name].element_size() for name in names])
    host = {
        name: part.clone().view(chosen[name].dtype).view(chosen[name].shape)
        for name, part in zip(names, parts, strict=True)
    }
    return {name: view.numpy() for name, view in layout.views(host).items()}


def tile_frames(frames: np.ndarray, env_name: str) -> np.ndarray:
    """One uint8 image ``(H, W, 3)`` of ``frames`` ``(n, h, w, 3)``: a grid of ``ceil(sqrt(n))`` columns.

    Frame ``i`` sits in grid row ``i // columns``, column ``i % columns``, its
    top-left pixel at ``(row * (h + TILE_GAP), column * (w + TILE_GAP))``;
    the gaps and unused tiles are ``TILE_GAP_COLOR``. One frame is returned
    as it is.
    """
    if not (isinstance(frames, np.ndarray) and frames.dtype == np.uint8 and frames.ndim == 4 and frames.shape[3] == 3):
        described = f"{frames.dtype} array of shape {frames.shape}" if isinstance(frames, np.ndarray) else repr(frames)
        raise TypeError(f"{env_name}: the render hook must return uint8 frames (games, H, W, 3), got {described}")
    n, h, w, _ = frames.shape
    if n == 1:
        return frames[0]
    columns = math.ceil(math.sqrt(n))
    rows = math.ceil(n / columns)
    image = np.empty((rows * h + (rows - 1) * TILE_GAP, columns * w + (columns - 1) * TILE_GAP, 3), np.uint8)
    image[:] = TILE_GAP_COLOR
    for i in range(n):
        top, left = (i // columns) * (h + TILE_GAP), (i % columns) * (w + TILE_GAP)
        image[top : top + h, left : left + w] = frames[i]
    return image
