"""Arrays over device memory named by an address, made inside a kernel.

A CUDA graph replays its kernels with the arguments they were captured with.
For a kernel to write somewhere else at each replay, it reads the address from
device memory the host writes between replays, and makes its arrays there
(:mod:`gpu_vecenv.codegen`'s kernel that writes its outputs into the slot a
ring names, :mod:`gpu_vecenv.slot_copy`'s copy kernel). Numba's array model
has no word for "the array at this address" in a kernel (``numba.carray``
is not available there), so :func:`array_at` builds the array's structure
itself: data pointer, shape, C-order strides, no owner.

Under Numba's CUDA simulator kernels run as Python and "device" memory is
host memory: :func:`array_at` is then a numpy array over those bytes, so that
the simulator runs the same kernels.
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

__all__ = ["array_at"]


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
