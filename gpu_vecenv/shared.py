"""The decorator for simulation code that both backends compile from one source.

A function decorated with :func:`shared` is compiled with ``numba.njit``: the
CPU backend calls it from its ``prange`` loop over games, and the GPU backend
calls it from its CUDA kernel, where Numba compiles it again as a device
function. Such functions may use numpy scalar types, ``math`` and array
indexing, but not ``numba.cuda`` (no shared memory, atomics or warp
operations), so that one source serves both targets.

Under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the kernel runs as
Python and hands simulator arrays to the functions it calls, which compiled
functions cannot take; there the decorator returns the plain Python function,
and only the ``cuda`` backend is available in that process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numba
from numba import cuda

F = TypeVar("F", bound=Callable[..., object])

SIMULATOR = bool(cuda.config.ENABLE_CUDASIM)  # type: ignore[attr-defined]


def shared(fn: F) -> F:
    """Compile ``fn`` for the CPU and make it callable from CUDA kernels."""
    if SIMULATOR:
        return fn
    try:
        return numba.njit(cache=True, inline="always")(fn)  # type: ignore[return-value]
    except RuntimeError:  # no file to cache next to (a notebook cell, exec'd code): compile per process
        return numba.njit(fn)  # type: ignore[return-value]
