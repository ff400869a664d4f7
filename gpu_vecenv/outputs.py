"""The output arena: every per-step output of an env in two buffers the kernel always writes.

``floats`` (1-D float32) holds ``obs`` ``(games, agents, obs_dim)``, then
``rewards`` ``(games, agents)``, then, in SAME_STEP mode, ``final_obs`` like
``obs``. ``flags`` (uint8, ``(5, games, agents)``) holds terminated,
truncated, active, done and (SAME_STEP) the final step's active.

Because the kernel writes the same memory at every launch, its views and its
launch (a CUDA graph) are made once. Returning fresh tensors (``copy=True``)
costs two device copies and a handful of view operations, no extra launch of
the env's kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class KernelOutputs:
    """The arena as the kernel sees it: per-game shapes."""

    obs: torch.Tensor
    rewards: torch.Tensor
    flags: torch.Tensor
    final_obs: torch.Tensor


@dataclass(frozen=True)
class SlotOutputs:
    """The arena (or a copy) as ``step`` returns it: slot-major shapes, ``num_envs = games * agents``.

    ``obs`` ``(num_envs, obs_dim)`` float32; ``rewards`` ``(num_envs,)``
    float32; ``terminated``, ``truncated``, ``active``, ``done``,
    ``final_active`` ``(num_envs,)`` bool; ``final_obs`` like ``obs`` in
    SAME_STEP mode, else ``None``.
    """

    obs: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    active: torch.Tensor
    done: torch.Tensor
    final_active: torch.Tensor
    final_obs: torch.Tensor | None


class OutputArena:
    """Output buffers of ``num_games`` games on ``device``."""

    def __init__(self, num_games: int, num_agents: int, obs_dim: int, final_obs: bool, device: torch.device) -> None:
        self.num_envs = num_games * num_agents
        self.obs_dim = obs_dim
        self._split = [self.num_envs * obs_dim, self.num_envs] + ([self.num_envs * obs_dim] if final_obs else [])
        self.floats = torch.empty(sum(self._split), dtype=torch.float32, device=device)
        self.flags = torch.zeros((5, num_games, num_agents), dtype=torch.uint8, device=device)
        parts = torch.split(self.floats, self._split)
        placeholder = torch.empty((1, 1, 1), dtype=torch.float32, device=device)
        self.kernel = KernelOutputs(
            obs=parts[0].view(num_games, num_agents, obs_dim),
            rewards=parts[1].view(num_games, num_agents),
            flags=self.flags,
            final_obs=parts[2].view(num_games, num_agents, obs_dim) if final_obs else placeholder,
        )
        self._own = self._slot_views(self.floats, self.flags)

    def _slot_views(self, floats: torch.Tensor, flags: torch.Tensor) -> SlotOutputs:
        parts = torch.split(floats, self._split)
        terminated, truncated, active, done, final_active = flags.view(torch.bool).view(5, self.num_envs).unbind(0)
        return SlotOutputs(
            obs=parts[0].view(self.num_envs, self.obs_dim),
            rewards=parts[1],
            terminated=terminated,
            truncated=truncated,
            active=active,
            done=done,
            final_active=final_active,
            final_obs=parts[2].view(self.num_envs, self.obs_dim) if len(parts) > 2 else None,
        )

    def results(self, copy: bool) -> SlotOutputs:
        """The latest outputs: a fresh copy (``copy=True``) or the arena itself, overwritten by the next launch."""
        return self._slot_views(self.floats.clone(), self.flags.clone()) if copy else self._own

    def nbytes(self) -> int:
        return self.floats.numel() * 4 + self.flags.numel()
