"""Arrays made inside a kernel over memory Numba's array model cannot name.

A CUDA graph replays its kernels with the arguments they were captured with.
For a kernel to write somewhere else at each replay, it reads the address from
device memory the host writes between replays, and makes its arrays there
(:mod:`gpu_vecenv.codegen`'s kernel that writes its outputs into the slot a
ring names, :mod:`gpu_vecenv.slot_copy`'s copy kernel). Numba's array model
has no word for "the array at this address" in a kernel (``numba.carray``
is not available there), so :func:`array_at` builds the array's structure
itself: data pointer, shape, C-order strides, no owner.

A state array that lives in a block's shared memory rather than in the
packed buffers (:class:`gpu_vecenv.definition.StateArray`'s ``block_local``)
is still indexed with the game, ``name[g, a]``, by phases written for the
buffers: :func:`with_game_axis` gives the block's array a game axis of stride
0, so that every ``g`` lands on it.

Under Numba's CUDA simulator kernels run as Python and "device" memory is
host memory: :func:`array_at` is then a numpy array over those bytes, and
:func:`with_game_axis` a numpy view, so that the simulator runs the same
kernels.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.cuda.extending import intrinsic

from gpu_vecenv.shared import SIMULATOR

__all__ = ["array_at", "with_game_axis"]


def _integer_tuple(shape: Any) -> bool:
    if not isinstance(shape, types.BaseTuple):
        return False
    members: Any = shape  # a numba tuple type iterates over its members' types
    return len(members) > 0 and all(isinstance(t, types.Integer) for t in members)


@intrinsic
def _array_at(typingctx: Any, address: Any, shape: Any, dtype: Any) -> Any:
    if not isinstance(address, types.Integer):
        raise TypingError(f"array_at: the address must be an integer, got {address}")
    if not _integer_tuple(shape):
        raise TypingError(f"array_at: the shape must be a tuple of integers, got {shape}")
    if not isinstance(dtype, types.NumberClass):
        raise TypingError(f"array_at: the dtype must be a numpy scalar type such as np.float32, got {dtype}")
    element = dtype.instance_type
    array_type: Any = types.Array(element, len(shape), "C")

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        from numba.cuda.np.arrayobj import make_array, populate_array

        address_value, shape_value, _ = args
        intp = types.intp
        dims = [
            context.cast(builder, builder.extract_value(shape_value, i), sig.args[1][i], intp)
            for i in range(len(sig.args[1]))
        ]
        itemsize = context.get_abi_sizeof(context.get_data_type(element))
        strides = []
        stride = context.get_constant(intp, itemsize)
        for dim in reversed(dims):
            strides.append(stride)
            stride = builder.mul(stride, dim)
        strides.reverse()
        address_int = context.cast(builder, address_value, sig.args[0], types.int64)
        # A pointer into the global address space, then made generic as Numba's arrays hold it: the compiler
        # then knows every access through it is global (st.global rather than a generic st).
        element_type = context.get_data_type(element)
        global_data = builder.inttoptr(address_int, element_type.as_pointer(addrspace=1))
        data = builder.addrspacecast(global_data, element_type.as_pointer())
        array = make_array(array_type)(context, builder)
        populate_array(
            array,
            data=data,
            shape=cgutils.pack_array(builder, dims),
            strides=cgutils.pack_array(builder, strides),
            itemsize=context.get_constant(intp, itemsize),
            meminfo=None,
        )
        return array._getvalue()

    return array_type(address, shape, dtype), codegen


def _array_at_python(address: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    dtype = np.dtype(dtype)
    shape = tuple(int(n) for n in shape)
    count = int(np.prod(shape))
    memory = (ctypes.c_byte * (count * dtype.itemsize)).from_address(int(address))
    return np.frombuffer(memory, dtype=dtype, count=count).reshape(shape)


if SIMULATOR:
    array_at: Any = _array_at_python
else:
    array_at = _array_at

array_at.__doc__ = """The C-contiguous array of ``dtype`` (a numpy scalar type) and ``shape`` (a tuple of integers)
at device address ``address``: a view, which the caller keeps inside memory it owns. Nothing is checked."""


@intrinsic
def _with_game_axis(typingctx: Any, array: Any, games: Any, axis: Any) -> Any:
    if not isinstance(array, types.Array):
        raise TypingError(f"with_game_axis: expected an array, got {array}")
    if not isinstance(games, types.Integer):
        raise TypingError(f"with_game_axis: the number of games must be an integer, got {games}")
    if not isinstance(axis, types.IntegerLiteral) or not 0 <= axis.literal_value <= array.ndim:
        raise TypingError(f"with_game_axis: the axis must be a literal integer in [0, {array.ndim}], got {axis}")
    where = axis.literal_value
    # Layout "A": indexing then reads the strides, where "C" would derive them from the shape.
    view_type: Any = types.Array(array.dtype, array.ndim + 1, "A")

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        from numba.cuda.np.arrayobj import make_array, populate_array

        source_type = sig.args[0]
        source = make_array(source_type)(context, builder, value=args[0])
        shape = cgutils.unpack_tuple(builder, source.shape, source_type.ndim)
        strides = cgutils.unpack_tuple(builder, source.strides, source_type.ndim)
        shape.insert(where, context.cast(builder, args[1], sig.args[1], types.intp))
        strides.insert(where, context.get_constant(types.intp, 0))
        view = make_array(view_type)(context, builder)
        populate_array(
            view,
            data=source.data,
            shape=cgutils.pack_array(builder, shape),
            strides=cgutils.pack_array(builder, strides),
            itemsize=source.itemsize,
            meminfo=None,
        )
        return view._getvalue()

    return view_type(array, games, axis), codegen


def _with_game_axis_python(array: np.ndarray, games: int, axis: int) -> np.ndarray:
    shape = (*array.shape[:axis], int(games), *array.shape[axis:])
    strides = (*array.strides[:axis], 0, *array.strides[axis:])
    return np.lib.stride_tricks.as_strided(array, shape=shape, strides=strides)


if SIMULATOR:
    with_game_axis: Any = _with_game_axis_python
else:
    with_game_axis = _with_game_axis

with_game_axis.__doc__ = """``array`` with an axis of ``games`` entries and stride 0 inserted before axis ``axis`` (a
literal integer): every game's entry is ``array`` itself. A view; nothing is copied or checked."""
