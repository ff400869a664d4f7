"""The decorator for simulation code that both backends compile from one source.

A function decorated with :func:`shared` is compiled with ``numba.njit``: the
CPU backend calls it from its ``prange`` loop over games, and the GPU backend
calls it from its CUDA kernel, where Numba compiles it again as a device
function. Such functions may use numpy scalar types, ``math``, array
indexing, :mod:`gpu_vecenv.paired_store` and :mod:`gpu_vecenv.distance_keys`,
but not ``numba.cuda`` (no shared memory, atomics or warp operations), so that
one source serves both targets.

Under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the kernel runs as
Python and hands simulator arrays to the functions it calls, which compiled
functions cannot take; there the decorator returns the plain Python function,
and only the ``cuda`` backend is available in that process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Literal, TypeVar, cast, overload

import numba
from numba import cuda

F = TypeVar("F", bound=Callable[..., object])

SIMULATOR = bool(cuda.config.ENABLE_CUDASIM)  # type: ignore[attr-defined]


def lineinfo_requested() -> bool:
    """Whether a profile's line information is asked for (``GPU_VECENV_LINEINFO=1``, read at each call): the
    CUDA kernel is then compiled with it (:mod:`gpu_vecenv.codegen`) and every :func:`shared` function
    decorated afterwards is inlined at Numba IR level. Never under the simulator, which runs Python."""
    return os.environ.get("GPU_VECENV_LINEINFO") == "1" and not SIMULATOR


@overload
def shared(fn: F, *, inline: bool = True) -> F: ...
@overload
def shared(fn: None = None, *, inline: bool = True) -> Callable[[F], F]: ...
def shared(fn: F | None = None, *, inline: bool = True) -> F | Callable[[F], F]:
    """Compile ``fn`` for the CPU and make it callable from CUDA kernels.

    ``@shared`` inlines the function into its callers at Numba IR level on the
    CPU: a call that passes arrays pays their reference counting, which
    dominates a small function called per agent or per observation entry.
    ``@shared(inline=False)`` keeps a real call, for a function whose own work
    dwarfs that (a search over many agents): inlining such a function into
    every branch of the kernel multiplies its compile time. On the GPU, NVVM
    inlines device functions either way. With ``GPU_VECENV_LINEINFO=1`` in the
    environment when the function is decorated, every function is inlined at
    Numba IR level, so that a profile's line information names the lines
    inside it (see :mod:`gpu_vecenv.codegen`) rather than only the call.
    """
    if fn is None:
        return lambda f: shared(f, inline=inline)
    if SIMULATOR:
        return fn
    mode: Literal["always", "never"] = "always" if inline or lineinfo_requested() else "never"
    # A Numba dispatcher is called like the function it compiles; it is typed as that function.
    try:
        return cast(F, numba.njit(cache=True, inline=mode)(fn))
    except RuntimeError:  # no file to cache next to (a notebook cell, exec'd code): compile per process
        return cast(F, numba.njit(inline=mode)(fn))
