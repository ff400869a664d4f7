"""Gymnasium vector wrappers that keep everything on the env's device.

:class:`TorchEpisodeStatistics` is the torch counterpart of Gymnasium's
``gymnasium.wrappers.vector.RecordEpisodeStatistics`` (which keeps numpy
arrays and syncs with the host every step): per-slot episode returns and
lengths are accumulated on the device, the finished episodes are reported in
``infos["episode"]`` with the mask ``infos["_episode"]``, and the most recent
finished episodes are kept in a ring buffer on the device. No step ever
synchronizes the device.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper


class TorchEpisodeStatistics(VectorWrapper):
    """Record each slot's episode return, length and duration on the device.

    Args:
        env: a vector env returning torch tensors (e.g. a
            :class:`~gpu_vecenv.vector_env.GpuVectorEnv`) in any of the three
            autoreset modes, read from ``env.metadata["autoreset_mode"]``.
        buffer_length: how many of the most recent finished episodes
            :meth:`recent_returns`, :meth:`recent_lengths` and
            :meth:`recent_means` cover.
        stats_key: the info key of the statistics (``"episode"``).

    Every ``step`` adds to ``infos`` (``n = num_envs``, all on the env's device)::

        infos["episode"] = {"r": (n,) float64 return,  "l": (n,) int64 length,
                            "t": (n,) float64 seconds, rounded to microseconds}
        infos["_episode"] = (n,) bool: the slots whose episode ended at this step

    Entries of slots outside ``_episode`` are 0. Unlike Gymnasium's wrapper,
    the keys are present at every step, even when no episode ended: finding
    out whether one did would need a device-to-host sync.

    What an episode is follows the autoreset mode:

    - ``NEXT_STEP``: the step after an episode's end resets the slot; that
      step (reward 0) counts towards no episode.
    - ``SAME_STEP``: every step counts; the step that ends an episode closes
      it, and the next episode starts with the following step.
    - ``DISABLED``: an ended slot is frozen until ``reset(options={"reset_mask":
      ...})`` resets it; its episode is reported once, at the step it ended.

    ``reset()`` restarts every slot's episode, ``reset(options={"reset_mask":
    mask})`` those of ``mask`` (torch or numpy bool, ``(num_envs,)``, or
    ``(num_games,)`` for a :class:`~gpu_vecenv.vector_env.GpuVectorEnv`).
    """

    def __init__(self, env: VectorEnv, buffer_length: int = 100, stats_key: str = "episode") -> None:
        super().__init__(env)
        mode = env.metadata.get("autoreset_mode")
        if not isinstance(mode, AutoresetMode):
            raise TypeError(
                f"TorchEpisodeStatistics needs env.metadata['autoreset_mode'] to be an AutoresetMode, got {mode!r}"
            )
        if isinstance(buffer_length, bool) or not isinstance(buffer_length, int) or buffer_length < 1:
            raise ValueError(f"buffer_length must be an integer >= 1, got {buffer_length!r}")
        device = getattr(env.unwrapped, "device", None)
        if device is None:
            raise TypeError(
                "TorchEpisodeStatistics needs a torch env with a .device attribute (a GpuVectorEnv), "
                f"got {env.unwrapped}"
            )
        self.autoreset_mode = mode
        self.device = torch.device(device)
        self.buffer_length = buffer_length
        self._stats_key = stats_key
        n = self.num_envs
        self.episode_returns = torch.zeros(n, dtype=torch.float64, device=self.device)
        """Return of each slot's current episode, ``(num_envs,)`` float64."""
        self.episode_lengths = torch.zeros(n, dtype=torch.int64, device=self.device)
        """Steps of each slot's current episode, ``(num_envs,)`` int64."""
        self.episode_start_times = torch.zeros(n, dtype=torch.float64, device=self.device)
        self.episode_count = torch.zeros((), dtype=torch.int64, device=self.device)
        """Episodes finished since the wrapper was made, a 0-dim int64 tensor (reading it syncs)."""
        # NEXT_STEP: the slot ended at the previous step, so this step resets it.
        # DISABLED: the slot ended and is frozen until a masked reset.
        self._ended = torch.zeros(n, dtype=torch.bool, device=self.device)
        # Ring buffers of the latest finished episodes; the extra last entry takes the writes of unfinished slots.
        self._ring_returns = torch.zeros(buffer_length + 1, dtype=torch.float64, device=self.device)
        self._ring_lengths = torch.zeros(buffer_length + 1, dtype=torch.int64, device=self.device)

    # -- Gymnasium API ----------------------------------------------------------------------------------
    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        # gpu_vecenv envs also take a list of per-game seeds.
        obs, infos = self.env.reset(seed=seed, options=options)  # type: ignore[arg-type]
        mask = (options or {}).get("reset_mask")
        now = time.perf_counter()
        if mask is None:
            self.episode_returns.zero_()
            self.episode_lengths.zero_()
            self.episode_start_times.fill_(now)
            self._ended.zero_()
        else:
            restart = self._slot_mask(mask)
            self.episode_returns.masked_fill_(restart, 0.0)
            self.episode_lengths.masked_fill_(restart, 0)
            self.episode_start_times.masked_fill_(restart, now)
            self._ended.masked_fill_(restart, False)
        return obs, infos

    def step(self, actions: Any) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        if self._stats_key in infos or f"_{self._stats_key}" in infos:
            raise ValueError(
                f"TorchEpisodeStatistics: the env's infos already have the key {self._stats_key!r}; "
                "pass another stats_key"
            )
        now = time.perf_counter()
        done = terminated | truncated
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            counts = torch.ones_like(done)
            finished = done
        elif self.autoreset_mode is AutoresetMode.NEXT_STEP:
            # The step after an end is the reset step: it starts the next episode and counts towards none.
            self.episode_returns.masked_fill_(self._ended, 0.0)
            self.episode_lengths.masked_fill_(self._ended, 0)
            self.episode_start_times.masked_fill_(self._ended, now)
            counts = ~self._ended
            finished = done & counts
            self._ended = done
        else:  # DISABLED: an ended slot stays frozen (and keeps reporting done) until a masked reset.
            counts = ~self._ended
            finished = done & counts
            self._ended = self._ended | done
        self.episode_returns += torch.where(counts, rewards.to(torch.float64), 0.0)
        self.episode_lengths += counts.to(torch.int64)
        seconds = torch.round(now - self.episode_start_times, decimals=6)
        infos[self._stats_key] = {
            "r": torch.where(finished, self.episode_returns, 0.0),
            "l": torch.where(finished, self.episode_lengths, 0),
            "t": torch.where(finished, seconds, 0.0),
        }
        infos[f"_{self._stats_key}"] = finished
        self._record(finished)
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            # The finished slots were reset within this step: their next episode starts now.
            self.episode_returns.masked_fill_(finished, 0.0)
            self.episode_lengths.masked_fill_(finished, 0)
            self.episode_start_times.masked_fill_(finished, now)
        return obs, rewards, terminated, truncated, infos

    # -- recent episodes ----------------------------------------------------------------------------------
    def _record(self, finished: torch.Tensor) -> None:
        """Append the finished slots' returns and lengths to the ring buffers, in slot order, without a sync."""
        size = self.buffer_length
        rank = torch.cumsum(finished, 0)  # 1, 2, ... over the finished slots
        total = rank[-1]
        # Only the last `size` finishers fit; earlier ones (and unfinished slots) write the spare last entry.
        keep = finished & (rank > total - size)
        position = torch.where(keep, (self.episode_count + rank - 1) % size, size)
        self._ring_returns.scatter_(0, position, self.episode_returns)
        self._ring_lengths.scatter_(0, position, self.episode_lengths)
        self.episode_count += total

    def _filled(self) -> torch.Tensor:
        return torch.clamp(self.episode_count, max=self.buffer_length)

    def recent_means(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean return and mean length of the last ``buffer_length`` finished episodes, without a sync.

        Two 0-dim float64 tensors on the env's device; NaN before any episode has finished.
        """
        filled = self._filled().to(torch.float64)
        # Entries not yet written are 0, so the sums over the whole ring are the sums over the filled part.
        returns = self._ring_returns[: self.buffer_length].sum() / filled
        lengths = self._ring_lengths[: self.buffer_length].sum().to(torch.float64) / filled
        return returns, lengths

    def _recent(self, ring: torch.Tensor) -> torch.Tensor:
        count = int(self.episode_count)  # one sync: the caller asked for a tensor of data-dependent length
        size = self.buffer_length
        if count <= size:
            return ring[:count].clone()
        start = count % size
        return torch.cat([ring[start:size], ring[:start]])

    def recent_returns(self) -> torch.Tensor:
        """Returns of the last ``buffer_length`` finished episodes, oldest first (float64; syncs once)."""
        return self._recent(self._ring_returns)

    def recent_lengths(self) -> torch.Tensor:
        """Lengths of the last ``buffer_length`` finished episodes, oldest first (int64; syncs once)."""
        return self._recent(self._ring_lengths)

    # -- helpers ---------------------------------------------------------------------------------------------
    def _slot_mask(self, mask: Any) -> torch.Tensor:
        tensor = mask if isinstance(mask, torch.Tensor) else torch.from_numpy(np.asarray(mask))
        tensor = tensor.to(self.device)
        if tuple(tensor.shape) == (self.num_envs,):
            return tensor
        agents = int(getattr(self.env.unwrapped, "num_agents", 1))
        if agents > 1 and tuple(tensor.shape) == (self.num_envs // agents,):
            return tensor.repeat_interleave(agents)
        raise ValueError(f"reset_mask must have shape ({self.num_envs},), got {tuple(tensor.shape)}")
