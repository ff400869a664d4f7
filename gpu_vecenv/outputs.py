"""The output arena: every per-step output of an env in one byte buffer the kernel always writes.

The buffer holds, as float32, ``obs`` ``(games, agents, obs_dim)``, then
``rewards`` ``(games, agents)``, then, in SAME_STEP mode, ``final_obs`` like
``obs``; then, as uint8, the flags ``(5, games, agents)``: terminated,
truncated, active, done and (SAME_STEP) the final step's active.

Because the kernel writes the same memory at every launch, its views and its
launch (a CUDA graph) are made once. Fresh tensors (``copy=True``) are slots
of batches made ahead (one allocation and one ``unbind`` per output for a
batch), since each torch view operation costs microseconds of host time per
step. On a GPU a generated kernel writes each launch's outputs into the next
fresh slot itself: the host writes a batch's slot addresses into a small
device array, :meth:`OutputArena.ring`, and the kernel, launched with the same
arguments every time (a graph replay), finds its slot there
(:mod:`gpu_vecenv.codegen`); the arena then has no buffer of its own.
Elsewhere the kernel writes the arena, and a fresh slot is either a device
copy of it (:meth:`OutputArena.results`; on a GPU inside the step's graph,
:mod:`gpu_vecenv.slot_copy`, for a hand-written kernel) or, for large
outputs, written by a launch given the slot's arrays
(:meth:`OutputArena.fresh_for_kernel`). A kernel that writes fresh slots
must write every output entry at every launch, which
``python -m gpu_vecenv.check`` checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from gpu_vecenv.stream_ops import StreamOps


@dataclass(frozen=True)
class KernelOutputs:
    """The arena as the kernel sees it: per-game shapes. ``stand_ins``: arrays over one element each for an
    arena without a buffer of its own (``OutputArena(own_buffer=False)``), which no launch may write."""

    obs: torch.Tensor
    rewards: torch.Tensor
    flags: torch.Tensor
    final_obs: torch.Tensor
    stand_ins: bool = False

    def arrays(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(obs, rewards, flags, final_obs)``: the kernel's last four array arguments, in its order."""
        return self.obs, self.rewards, self.flags, self.final_obs


class SlotOutputs(NamedTuple):
    """The arena (or a copy) as ``step`` returns it: slot-major shapes, ``num_envs = games * agents``.

    ``obs`` ``(num_envs, obs_dim)`` float32; ``rewards`` ``(num_envs,)``
    float32; ``terminated``, ``truncated``, ``active`` ``(num_envs,)`` bool;
    in SAME_STEP mode ``final_obs`` like ``obs`` and ``done``,
    ``final_active`` ``(num_envs,)`` bool, else ``None`` (a tuple, not a
    dataclass: one is made per step, and each view costs host time).
    """

    obs: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    active: torch.Tensor
    done: torch.Tensor | None
    final_active: torch.Tensor | None
    final_obs: torch.Tensor | None


# Fresh copies are made ahead in batches of at most this many slots, and this many bytes: a tensor kept
# from a batch keeps the whole batch's memory alive. Making a batch and its views costs about 20 us of host
# time, so small batches cost a host-bound GPU step: at 100 games of 110 agents (3.2 MB a step) batches
# of 2 (8 MB) took 13.7-14.0 us of host a step and batches of 20 (64 MB) 4.4-4.6 us, timed on torch's meta
# device (benchmarks/arena_views.py). On the CPU, batches over glibc's 32 MiB mmap threshold come back
# as fresh pages every time and the copies into them fault (`arena_views.py --device cpu`), so the CPU
# keeps 8 MB.
_BATCH_SLOTS = 64
# With copy=True, the kernel writes the fresh outputs itself from this many bytes a launch on, by device type
# (the env's direct_write_bytes option). On a GPU always: a generated kernel writes them into the slot a device
# ring names (gpu_vecenv.codegen), a graph replay with no new arguments, where a copy costs device time (about 5
# us at 3.2 MB, more with size: benchmarks/results/h100_2026-12-06f/); at one slot a batch, through an eager
# launch given the slot (GpuVectorEnv's _writes_ring says why). Before that kernel, a direct write was an
# eager launch with new pointers (12-30 us of host time) and paid from 48 MiB on. On the CPU (2 cores,
# benchmarks/results/cpu_2026-12-06_direct_write/) faster at 19 and 77 MB (fresh pages fault either way, and the
# direct write saves reading the env's buffer), no clear difference at 65 MB of 10+100, where the kernel is most
# of the step.
DIRECT_WRITE_BYTES = {"cuda": 0, "cpu": 16 << 20}
_BATCH_BYTES_GPU = 64 << 20
_BATCH_BYTES_CPU = 8 << 20


def arena_bytes(num_games: int, num_agents: int, obs_dim: int, final_obs: bool) -> int:
    """The bytes of one set of outputs (an arena's buffer, or one fresh slot): float32 ``obs``, ``rewards``
    and (``final_obs``) ``final_obs``, then five flag bytes a slot, rounded up to whole 8-byte words, so that
    a slot can be viewed as float32 as a whole and a step's graph copies it in 8-byte words into slots that
    each start on one (gpu_vecenv/slot_copy.py)."""
    envs = int(num_games) * int(num_agents)
    floats = envs * int(obs_dim) * (2 if final_obs else 1) + envs
    return 8 * -(-(4 * floats + 5 * envs) // 8)


class OutputArena:
    """Output buffers of ``num_games`` games on ``device``."""

    def __init__(
        self,
        num_games: int,
        num_agents: int,
        obs_dim: int,
        final_obs: bool,
        device: torch.device,
        batch_bytes: int | None = None,
        own_buffer: bool = True,
    ) -> None:
        """``batch_bytes``: the byte cap of a batch of fresh slots (``None``: the device's default).

        ``own_buffer=False``: for an env whose every launch writes a fresh slot itself
        (:meth:`fresh_for_kernel`), no buffer of the arena's own, which would be as large as a step's
        outputs and never written. :attr:`kernel` then holds stand-ins of the same shapes and dtypes over
        one element each, marked ``stand_ins``: the backends take them but never launch with them (``launch``
        refuses; ``launch_into`` passes each step's fresh slot instead), and :meth:`results` is not
        available.
        """
        # Python ints: torch's split takes no numpy integers, which an env's sizes may be.
        num_games, num_agents, obs_dim = int(num_games), int(num_agents), int(obs_dim)
        self.num_envs = num_games * num_agents
        self.obs_dim = obs_dim
        self._split = [self.num_envs * obs_dim, self.num_envs] + ([self.num_envs * obs_dim] if final_obs else [])
        self._float_bytes = 4 * sum(self._split)
        self.nbytes = arena_bytes(num_games, num_agents, obs_dim, final_obs)
        self._device = device
        self._stream_ops = StreamOps(device)
        self._games, self._agents = num_games, num_agents
        # final_obs outside SAME_STEP mode: the kernel takes an array there, and never writes it.
        self._no_final_obs = torch.empty((1, 1, 1), dtype=torch.float32, device=device)
        self._own: SlotOutputs | None
        if own_buffer:
            self.buffer = torch.zeros(self.nbytes, dtype=torch.uint8, device=device)
            self.kernel = self.kernel_views(self.buffer)
            self._own = self._row_views(self.buffer)
        else:
            self.buffer, self.kernel = self._stand_ins()
            self._own = None
        if batch_bytes is None:
            batch_bytes = _BATCH_BYTES_GPU if device.type == "cuda" else _BATCH_BYTES_CPU
        self._batch = max(1, min(_BATCH_SLOTS, batch_bytes // self.nbytes))
        # The current batch's bytes: (slots, nbytes) uint8, or (nbytes,) where a batch is one slot. Its rows
        # are not unbound ahead: the ring needs only their addresses, and a view costs about 1 us of host time.
        self._fresh_memory = torch.empty(0, dtype=torch.uint8, device=device)
        self._fresh: list[SlotOutputs] = []
        self._next = 0
        self._batches_made = 0
        self._ring: torch.Tensor | None = None
        # (batch, slot) that the ring's entry 0 names as the host last left it; None: not known.
        self._ring_next: tuple[int, int] | None = None

    @property
    def slots_per_batch(self) -> int:
        """The fresh slots made at once; 1 where one set of outputs fills a batch's bytes."""
        return self._batch

    def _stand_ins(self) -> tuple[torch.Tensor, KernelOutputs]:
        """An empty buffer, and the kernel's arrays over one element each (see ``own_buffer``)."""
        g, a, d = self._games, self._agents, self.obs_dim
        word = torch.empty(1, dtype=torch.float32, device=self._device)
        byte = torch.empty(1, dtype=torch.uint8, device=self._device)
        kernel = KernelOutputs(
            obs=word.expand(g, a, d),
            rewards=word.expand(g, a),
            flags=byte.expand(5, g, a),
            final_obs=word.expand(g, a, d) if len(self._split) == 3 else self._no_final_obs,
            stand_ins=True,
        )
        return byte[:0], kernel

    def kernel_pointers(self, row: torch.Tensor) -> tuple[int, int, int, int]:
        """The data pointers of :meth:`kernel_views` ``(row)``'s arrays, without making the views (each costs
        microseconds of host time)."""
        base, n, d = row.data_ptr(), self.num_envs, self.obs_dim
        final_obs = base + 4 * (n * d + n) if len(self._split) == 3 else self._no_final_obs.data_ptr()
        return base, base + 4 * n * d, base + self._float_bytes, final_obs

    def kernel_views(self, row: torch.Tensor) -> KernelOutputs:
        """The kernel's views of ``row`` (``(nbytes,)`` uint8): per-game shapes."""
        g, a, d = self._games, self._agents, self.obs_dim
        flag_bytes = 5 * self.num_envs
        floats = row[: self._float_bytes].view(torch.float32)
        parts = torch.split(floats, self._split)
        return KernelOutputs(
            obs=parts[0].view(g, a, d),
            rewards=parts[1].view(g, a),
            flags=row[self._float_bytes : self._float_bytes + flag_bytes].view(5, g, a),
            final_obs=parts[2].view(g, a, d) if len(parts) == 3 else self._no_final_obs,
        )

    def _row_views(self, row: torch.Tensor) -> SlotOutputs:
        """The outputs of one row (``(nbytes,)`` uint8), made with one ``split`` for the floats and one for the
        flags: fewer torch operations than :meth:`_slot_views` takes for a batch of one row, which large
        outputs (one slot a batch) take every step (benchmarks/results/cpu_2026-12-06_row_views/)."""
        n, d = self.num_envs, self.obs_dim
        parts = row[: self._float_bytes].view(torch.float32).split_with_sizes(self._split)
        flags = row[self._float_bytes : self._float_bytes + 5 * n].view(torch.bool).split(n)
        obs = parts[0].view(n, d)
        if len(parts) == 2:
            return SlotOutputs(obs, parts[1], flags[0], flags[1], flags[2], None, None, None)
        return SlotOutputs(obs, parts[1], flags[0], flags[1], flags[2], flags[3], flags[4], parts[2].view(n, d))

    def _slot_views(self, rows: torch.Tensor) -> list[SlotOutputs]:
        """The outputs of every row of ``rows`` (``(count, nbytes)`` uint8), made with one ``unbind`` each."""
        count, n, d = rows.shape[0], self.num_envs, self.obs_dim
        floats = rows.view(torch.float32)
        flags = rows[:, self._float_bytes :].view(torch.bool)
        obs = floats[:, : n * d].view(count, n, d).unbind(0)
        rewards = floats[:, n * d : n * d + n].unbind(0)
        terminated, truncated, active = (flags[:, k * n : (k + 1) * n].unbind(0) for k in range(3))
        if len(self._split) == 2:
            return [
                SlotOutputs(obs[i], rewards[i], terminated[i], truncated[i], active[i], None, None, None)
                for i in range(count)
            ]
        done, final_active = (flags[:, k * n : (k + 1) * n].unbind(0) for k in (3, 4))
        final_obs = floats[:, n * d + n : 2 * n * d + n].view(count, n, d).unbind(0)
        return [
            SlotOutputs(
                obs[i], rewards[i], terminated[i], truncated[i], active[i], done[i], final_active[i], final_obs[i]
            )  # fmt: skip
            for i in range(count)
        ]

    def _take_fresh(self) -> int:
        """The index of the next never-used slot of the current batch, making a batch when it is used up."""
        if self._next == len(self._fresh):
            if self._batch == 1:  # large outputs, a slot every step: no batch dimension to take apart
                row = torch.empty(self.nbytes, dtype=torch.uint8, device=self._device)
                self._fresh_memory, self._fresh = row, [self._row_views(row)]
            else:
                rows = torch.empty((self._batch, self.nbytes), dtype=torch.uint8, device=self._device)
                self._fresh_memory, self._fresh = rows, self._slot_views(rows)
            self._next = 0
            self._batches_made += 1
        self._next += 1
        return self._next - 1

    def _fresh_row(self, i: int) -> torch.Tensor:
        """The bytes ``(nbytes,)`` uint8 of slot ``i`` of the current batch."""
        return self._fresh_memory if self._fresh_memory.dim() == 1 else self._fresh_memory[i]

    def results(self, copy: bool) -> SlotOutputs:
        """The latest outputs: a fresh copy (``copy=True``) or the arena itself, overwritten by the next launch."""
        if self._own is None:
            raise RuntimeError("the output arena has no buffer of its own: every launch writes a fresh slot itself")
        if not copy:
            return self._own
        i = self._take_fresh()
        self._stream_ops.copy(self._fresh_row(i), self.buffer)
        return self._fresh[i]

    def ring(self) -> torch.Tensor:
        """``(1 + slots,)`` int64 on the device, through which a launch writes fresh outputs: a generated
        kernel that writes them itself (:mod:`gpu_vecenv.codegen`) or a step's graph that copies them
        (:mod:`gpu_vecenv.slot_copy`). Entry 0 is the index of the slot the next launch writes, entry ``1 + i``
        the device address of slot ``i`` of the current batch of fresh slots (0 past the batch's end)."""
        if self._ring is None:
            self._ring = torch.zeros(1 + _BATCH_SLOTS, dtype=torch.int64, device=self._device)
        return self._ring

    def ring_slot(self) -> SlotOutputs:
        """The fresh outputs that the next launch through :meth:`ring` writes, on the current stream: the next
        never-used slot. When it starts a batch (or the ring was left otherwise, see :meth:`forget_ring`), the
        batch's slot addresses and the slot's index are written into the ring first, on the current stream,
        once a batch: an asynchronous copy from pageable memory, which CUDA stages before the call returns
        (no device sync, and nothing to keep alive afterwards), or for a batch of one slot two words written
        by the stream (:meth:`StreamOps.write_words`)."""
        i = self._take_fresh()
        if self._ring_next != (self._batches_made, i):
            base, slots = self._fresh_memory.data_ptr(), len(self._fresh)
            addresses = [base + k * self.nbytes for k in range(slots)]
            if len(addresses) == 1:
                # Large outputs, a batch (and a ring write) every step: two words written by the stream itself,
                # where a copy from pageable memory cost device time every step.
                self._stream_ops.write_words(self.ring(), (i, addresses[0]))
            else:
                values = [i, *addresses] + [0] * (_BATCH_SLOTS - len(addresses))
                self.ring().copy_(torch.tensor(values, dtype=torch.int64), non_blocking=True)
        self._ring_next = (self._batches_made, i + 1)
        return self._fresh[i]

    def forget_ring(self) -> None:
        """Say that the ring's entry 0 may not be where :meth:`ring_slot` left it (a launch that was to
        advance it failed): the next :meth:`ring_slot` writes the ring again."""
        self._ring_next = None

    def fresh_for_kernel(self) -> tuple[SlotOutputs, torch.Tensor]:
        """A never-used slot for the next launch to write instead of the arena: the outputs as ``step``
        returns them, and the slot's bytes ``(nbytes,)`` uint8 (uninitialized until the launch), whose
        views or data pointers :meth:`kernel_views` and :meth:`kernel_pointers` give the kernel."""
        i = self._take_fresh()
        return self._fresh[i], self._fresh_row(i)
