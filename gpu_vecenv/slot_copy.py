"""The copy of a step's outputs into fresh tensors, made part of the step's CUDA graph.

With ``copy=True`` a step returns tensors that no later step writes. A
generated kernel writes them itself, into a never-used slot of a batch of
slots made ahead (:class:`gpu_vecenv.outputs.OutputArena`). A kernel that
cannot (a hand-written one), or an env told to copy (``direct_write_bytes``
above its outputs), writes the env's output arena, and the outputs are
copied out of it into such a slot. Called
from the host, that copy costs 7-9 µs of host time a step on an H100 host,
through torch's ``copy_`` or the driver alike: a third of a small env's
``step`` (benchmarks/results/h100_2026-12-06e/). Here it is one more kernel
in the step's graph, after the step kernel: :func:`copy_kernel` copies
the arena into the slot whose device address is entry ``1 + ring[0]`` of a
small int64 device array, the ring, and the last of its blocks to finish adds
one to ``ring[0]``, so that the next replay writes the next slot (a second,
one-thread kernel for that addition cost 0.8 µs of device time a step,
benchmarks/results/h100_2026-12-06f/). The host writes a batch's slot addresses and the index of the
next slot into the ring once a batch (:meth:`OutputArena.ring_slot`, an
asynchronous copy from pageable memory on the current stream), so that a step
is one graph replay and no copy call. The arena and every slot are whole
8-byte words, copied a word a thread.

A generated kernel that writes the slot itself takes that ring too, and
:func:`advance_kernel` moves it on after the kernel: one node more, but no
count of finished blocks, whose atomic (one a block) kept thousands of small
blocks waiting (benchmarks/results/h100_2026-12-06g/).

The copy kernel writes through an array it makes at the slot's address
(:func:`gpu_vecenv.device_arrays.array_at`). Only a real GPU captures it (the
CUDA simulator runs no graphs); where it cannot be compiled or captured, the
backend says so and the step copies from the host as before.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch
from numba import cuda

from gpu_vecenv.device_arrays import array_at

# Threads a block of the copy kernel; its blocks are capped at this many a multiprocessor (a grid-stride loop).
_COPY_THREADS = 256
_COPY_BLOCKS_PER_SM = 4


# Kernel bodies are Numba's, not Python's: left unannotated, so that mypy does not read them.
@cuda.jit(device=True)
def slot_address(ring):
    """The device address of the slot ``ring`` (int64) names, entry ``1 + ring[0]``; 0 where ``ring[0]`` is
    outside the ring or that entry is not yet written. The one test of a ring that every kernel writing or
    moving it (the generated ring kernel, :func:`copy_kernel`, :func:`advance_kernel`) makes."""
    slot = ring[0]
    if slot >= 0 and slot < ring.size - 1:
        return ring[1 + slot]
    return 0


@functools.cache
def copy_kernel() -> Any:
    """``copy_to_slot(words, ring, finished)``, compiled at its first launch.

    Copies ``words`` (int64, the arena's bytes) to the address ``ring[1 + ring[0]]``, and then the last block
    to finish adds one to ``ring[0]``; ``finished`` (int32, two entries) counts the blocks done in entry 0
    (0 between launches). Nothing is copied or advanced where ``ring[0]`` is outside the ring or the address
    is 0 (a ring not yet written): entry 1 is then set to 1, and stays so until the host clears it.
    """

    @cuda.jit
    def copy_to_slot(words, ring, finished):
        slot = ring[0]
        address = slot_address(ring)
        if address == 0:  # the same for every block: none waits for the others below
            if cuda.grid(1) == 0:
                finished[1] = 1
            return
        target = array_at(address, (words.size,), np.int64)
        for i in range(cuda.grid(1), words.size, cuda.gridsize(1)):
            target[i] = words[i]
        # Every block has read ring[0] before it counts itself, so the last one counted may advance it.
        cuda.syncthreads()
        if cuda.threadIdx.x == 0:
            cuda.threadfence()
            if cuda.atomic.add(finished, 0, 1) == cuda.gridDim.x - 1:
                ring[0] = slot + 1
                finished[0] = 0

    return copy_to_slot


@functools.cache
def advance_kernel() -> Any:
    """``advance_ring(ring)``, compiled at its first launch: one thread that adds one to ``ring[0]`` where it
    names a slot (an index inside the ring whose address is not 0). Launched after a kernel that wrote the
    slot itself, on its stream: every block of that kernel has read ``ring[0]`` by then. A ring that names no
    slot is left so (the kernel wrote nothing and said so)."""

    @cuda.jit
    def advance_ring(ring):
        if slot_address(ring) != 0:
            ring[0] += 1

    return advance_ring


class SlotCopy:
    """The launch that copies ``buffer`` (an arena's ``(nbytes,)`` uint8 bytes, ``nbytes`` a multiple of 8)
    into the slot ``ring`` (int64, on the same GPU) names, on a given Numba stream: to be captured in a graph."""

    def __init__(self, buffer: torch.Tensor, ring: torch.Tensor) -> None:
        words = buffer.view(torch.int64)
        self._words = cuda.as_cuda_array(words)
        self._ring = cuda.as_cuda_array(ring)
        # Kept alive for the view; entry 1 says that a launch found no slot (see copy_kernel).
        self.finished = torch.zeros(2, dtype=torch.int32, device=ring.device)
        self._finished = cuda.as_cuda_array(self.finished)
        multiprocessors = torch.cuda.get_device_properties(buffer.device).multi_processor_count
        self._blocks = max(1, min(-(-words.numel() // _COPY_THREADS), _COPY_BLOCKS_PER_SM * multiprocessors))

    def launch(self, stream: Any) -> None:
        copy_kernel()[self._blocks, _COPY_THREADS, stream](self._words, self._ring, self._finished)
