"""Two adjacent float32 entries written by one 8-byte store, for phases of either backend.

A GPU kernel that writes a large observation with one 4-byte store per entry
issues one store request per 32 entries; :func:`store_pair` halves that for a
phase that can write its entries two at a time (on an H100 it took 10% off
the step of 5 + 100 agents with the full observation, ``benchmarks/NOTES.md``
v31).

Both functions are Numba intrinsics, so that a ``@gpu_vecenv.shared`` phase
calls them from one source on both targets (the CPU gets the same vector
store). An 8-byte store needs an 8-byte aligned address: check with
:func:`pair_aligned` first; a misaligned one is a CUDA error. Under Numba's
CUDA simulator both are plain Python, and :func:`store_pair` checks the
alignment itself, so that the simulator's tests catch a phase that gets it
wrong.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

from gpu_vecenv.shared import SIMULATOR

__all__ = ["pair_aligned", "store_pair"]


def _check_array(arr: types.Type, caller: str) -> None:
    if not isinstance(arr, types.Array) or arr.dtype != types.float32 or arr.ndim != 3:
        raise TypingError(f"{caller} takes a 3-D float32 array, got {arr}")


def _item_pointer(context: Any, builder: Any, arrty: types.Array, array: Any, indices: list[Any],
                  index_types: tuple[types.Type, ...]) -> Any:  # fmt: skip
    ary = context.make_array(arrty)(context, builder, array)
    inds = [context.cast(builder, v, t, types.intp) for v, t in zip(indices, index_types, strict=True)]
    return cgutils.get_item_pointer(context, builder, arrty, ary, inds, wraparound=False)


@intrinsic
def _pair_aligned(typingctx: Any, arr: types.Type, g: types.Type, a: types.Type, i: types.Type) -> Any:
    _check_array(arr, "pair_aligned")

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        ptr = _item_pointer(context, builder, sig.args[0], args[0], list(args[1:]), sig.args[1:])
        address = builder.ptrtoint(ptr, ir.IntType(64))
        low = builder.and_(address, ir.Constant(ir.IntType(64), 7))
        return builder.icmp_unsigned("==", low, ir.Constant(ir.IntType(64), 0))

    return types.boolean(arr, g, a, i), codegen


@intrinsic
def _store_pair(typingctx: Any, arr: types.Type, g: types.Type, a: types.Type, i: types.Type, first: types.Type,
                second: types.Type) -> Any:  # fmt: skip
    _check_array(arr, "store_pair")

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        ptr = _item_pointer(context, builder, sig.args[0], args[0], list(args[1:4]), sig.args[1:4])
        pair_type = ir.VectorType(ir.FloatType(), 2)
        pair = ir.Constant(pair_type, ir.Undefined)
        for k, (value, value_type) in enumerate(zip(args[4:], sig.args[4:], strict=True)):
            value = context.cast(builder, value, value_type, types.float32)
            pair = builder.insert_element(pair, value, ir.Constant(ir.IntType(32), k))
        builder.store(pair, builder.bitcast(ptr, pair_type.as_pointer()), align=8)
        return context.get_dummy_value()

    return types.none(arr, g, a, i, first, second), codegen


def _address(arr: Any, g: int, a: int, i: int) -> int:
    # The simulator hands a kernel a wrapper of a wrapper of a numpy array; its address is the numpy array's.
    # (object.__getattribute__: the wrapper's own __getattr__ would look the name up as a record field.)
    try:
        wrapped = object.__getattribute__(arr, "_item")
    except AttributeError:
        wrapped = arr
    ary = getattr(wrapped, "_ary", wrapped)
    return int(ary.ctypes.data) + g * ary.strides[0] + a * ary.strides[1] + i * ary.strides[2]


def _pair_aligned_python(arr: Any, g: int, a: int, i: int) -> bool:
    return _address(arr, int(g), int(a), int(i)) % 8 == 0


def _store_pair_python(arr: Any, g: int, a: int, i: int, first: float, second: float) -> None:
    if not _pair_aligned_python(arr, g, a, i):
        raise ValueError(f"store_pair: entry ({g}, {a}, {i}) is not 8-byte aligned (check with pair_aligned first)")
    arr[g, a, i] = first
    arr[g, a, i + 1] = second


if SIMULATOR:
    pair_aligned: Any = _pair_aligned_python
    store_pair: Any = _store_pair_python
else:
    pair_aligned = _pair_aligned
    store_pair = _store_pair

pair_aligned.__doc__ = """Whether entry ``arr[g, a, i]`` of a 3-D float32 array starts an 8-byte aligned pair."""
store_pair.__doc__ = """``arr[g, a, i] = first`` and ``arr[g, a, i + 1] = second`` as one 8-byte store.

The entry must be 8-byte aligned (:func:`pair_aligned`) and ``i + 1`` inside
the array's last axis; neither is checked on the GPU or the CPU."""
