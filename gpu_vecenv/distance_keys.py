"""A squared distance and an agent id packed into one int64 whose order is (distance, id), for phases of either
backend.

A K-nearest search that keeps its list sorted by distance, ties to the lower
id, compares a candidate with each place twice over (the distances, then, on
a tie, the ids), and moves two values a place. With both in one key the
comparison is one integer comparison and the move one value: ``key =
bits(d2) << 32 | uint32(id)``. The bits of a float32 that is not negative
(``+inf`` included) order as its values do, so keys order as (distance, id)
pairs; ``d2`` must not be negative or NaN (a squared distance is neither),
and ids must not be negative, except that :func:`distance_key` of id ``-1``
makes the key of an empty place, which sorts after every agent at that
distance.

The three functions are Numba intrinsics, so that a ``@gpu_vecenv.shared``
phase calls them from one source on both targets; under Numba's CUDA simulator
they are plain Python with the same results.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import types
from numba.core.errors import TypingError
from numba.extending import intrinsic

from gpu_vecenv.shared import SIMULATOR

__all__ = ["distance_key", "key_distance", "key_id"]

_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_HIGH = ir.Constant(_I64, 32)


@intrinsic
def _distance_key(typingctx: Any, d2: types.Type, j: types.Type) -> Any:
    if d2 != types.float32 or not isinstance(j, types.Integer):
        raise TypingError(f"distance_key takes a float32 squared distance and an integer id, got {d2} and {j}")

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        bits = builder.zext(builder.bitcast(args[0], _I32), _I64)
        ident = context.cast(builder, args[1], sig.args[1], types.int32)
        return builder.or_(builder.shl(bits, _HIGH), builder.zext(ident, _I64))

    return types.int64(d2, j), codegen


@intrinsic
def _key_distance(typingctx: Any, key: types.Type) -> Any:
    if key != types.int64:
        raise TypingError(f"key_distance takes an int64 key, got {key}")

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.bitcast(builder.trunc(builder.lshr(args[0], _HIGH), _I32), ir.FloatType())

    return types.float32(key), codegen


@intrinsic
def _key_id(typingctx: Any, key: types.Type) -> Any:
    if key != types.int64:
        raise TypingError(f"key_id takes an int64 key, got {key}")

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.trunc(args[0], _I32)

    return types.int32(key), codegen


def _distance_key_python(d2: float, j: int) -> np.int64:
    bits = int(np.array(d2, np.float32).view(np.uint32))
    return np.int64((bits << 32) | (int(j) & 0xFFFFFFFF))


def _key_distance_python(key: int) -> np.float32:
    return np.float32(np.array([(int(key) >> 32) & 0xFFFFFFFF], np.uint32).view(np.float32)[0])


def _key_id_python(key: int) -> np.int32:
    return np.int32(np.array([int(key) & 0xFFFFFFFF], np.uint32).view(np.int32)[0])


if SIMULATOR:
    distance_key: Any = _distance_key_python
    key_distance: Any = _key_distance_python
    key_id: Any = _key_id_python
else:
    distance_key = _distance_key
    key_distance = _key_distance
    key_id = _key_id

distance_key.__doc__ = """The int64 key of agent ``j`` at squared distance ``d2`` (float32, not negative)."""
key_distance.__doc__ = """The squared distance (float32) of a key made by :func:`distance_key`."""
key_id.__doc__ = """The id (int32; -1 for an empty place) of a key made by :func:`distance_key`."""
