"""The output arena: every per-step output of an env in one byte buffer.

One ``uint8`` tensor holds, at 256-byte aligned offsets:

=============  ==============================  =======
section        shape                           dtype
=============  ==============================  =======
``obs``        ``(games, agents, obs_dim)``    float32
``rewards``    ``(games, agents)``             float32
``flags``      ``(4, games, agents)``          uint8: terminated, truncated, active, done
``final_obs``  like ``obs`` (SAME_STEP only)   float32
=============  ==============================  =======

The kernel always writes the same arena, so its views and launches are made
once. Returning fresh tensors (``copy=True``) costs one device copy of the
arena and no extra launch of the env's kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

_ALIGN = 256


@dataclass(frozen=True)
class OutputViews:
    """Typed views of one arena."""

    obs: torch.Tensor
    rewards: torch.Tensor
    flags: torch.Tensor
    final_obs: torch.Tensor


class OutputArena:
    """Allocates the arena of ``num_games`` games and carves typed views out of it (or out of a copy)."""

    def __init__(self, num_games: int, num_agents: int, obs_dim: int, final_obs: bool, device: torch.device) -> None:
        g, n, d = num_games, num_agents, obs_dim
        self._sections: list[tuple[str, int, tuple[int, ...], torch.dtype]] = []
        offset = 0
        for name, shape, dtype in (
            ("obs", (g, n, d), torch.float32),
            ("rewards", (g, n), torch.float32),
            ("flags", (4, g, n), torch.uint8),
            ("final_obs", (g, n, d) if final_obs else (1, 1, 1), torch.float32),
        ):
            self._sections.append((name, offset, shape, dtype))
            size = dtype.itemsize
            for s in shape:
                size *= s
            offset += -(-size // _ALIGN) * _ALIGN
        self.nbytes = offset
        self.buffer = torch.empty(offset, dtype=torch.uint8, device=device)
        self.views = self.carve(self.buffer)

    def carve(self, buffer: torch.Tensor) -> OutputViews:
        """Typed views into ``buffer`` (the arena itself or a clone of it)."""
        parts = {}
        for name, offset, shape, dtype in self._sections:
            count = 1
            for s in shape:
                count *= s
            raw = buffer[offset : offset + count * dtype.itemsize]
            parts[name] = raw.view(dtype).view(shape)
        return OutputViews(**parts)

    def fresh_copy(self) -> OutputViews:
        """Views of a new copy of the arena, which later launches never touch."""
        return self.carve(self.buffer.clone())
