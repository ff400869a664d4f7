"""Counter-based random numbers shared by every backend.

A draw is a pure function of ``(seed, episode, draw)``: the game's seed, the
number of resets the game has had since it was seeded, and the index of the
draw within that reset. The same draw therefore gives the same bits on the GPU,
on the CPU and in the numpy reference, for any number of games and in any
order of evaluation.

All arithmetic is on 32-bit values held in ``uint64``, so no product or sum
overflows: the functions run unchanged as compiled code, as plain Python under
the CUDA simulator, and on numpy scalars, without overflow warnings.
"""

from __future__ import annotations

import numpy as np

from gpu_vecenv.shared import shared

_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT15 = np.uint64(15)
_SHIFT16 = np.uint64(16)
_SHIFT32 = np.uint64(32)
_MUL1 = np.uint64(0x7FEB352D)
_MUL2 = np.uint64(0x846CA68B)
_GOLDEN = np.uint64(0x9E3779B9)
_SHIFT8 = np.uint64(8)
_INV_2_24 = np.float32(1.0 / 16777216.0)


@shared
def hash32(x):
    """Mix a 32-bit value (held in a uint64) into a well-spread 32-bit value."""
    x = x & _MASK32
    x = x ^ (x >> _SHIFT16)
    x = (x * _MUL1) & _MASK32
    x = x ^ (x >> _SHIFT15)
    x = (x * _MUL2) & _MASK32
    return x ^ (x >> _SHIFT16)


@shared
def random_bits(seed, episode, draw):
    """32 random bits (in a uint64) for draw ``draw`` of reset ``episode`` of a game seeded ``seed``.

    ``seed`` is a non-negative integer below 2**63; ``episode`` and ``draw``
    are non-negative integers below 2**32.
    """
    s = np.uint64(seed)
    h = hash32(((np.uint64(draw) & _MASK32) + _GOLDEN) & _MASK32)
    h = hash32(h ^ (np.uint64(episode) & _MASK32))
    h = hash32(h ^ (s >> _SHIFT32))
    return hash32(h ^ (s & _MASK32))


@shared
def uniform01(seed, episode, draw):
    """A float32 uniform on [0, 1) with 24 random bits; never returns 1.0."""
    return np.float32(random_bits(seed, episode, draw) >> _SHIFT8) * _INV_2_24


@shared
def randint(seed, episode, draw, n):
    """An integer uniform on ``[0, n)`` for ``0 < n < 2**16`` (int64)."""
    return np.int64((random_bits(seed, episode, draw) * np.uint64(n)) >> _SHIFT32)
