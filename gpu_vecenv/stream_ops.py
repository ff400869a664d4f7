"""Device copies on torch's current CUDA stream through the CUDA driver, where torch's ``copy_`` costs more host time.

A small env's ``step`` is host-bound, and two of its parts are a device copy
each: the actions into the env's buffer and, with ``copy=True`` where the
step's graph does not copy itself, the outputs into a fresh slot. torch's
``copy_`` passes through its dispatcher and a ``TensorIterator`` before it
calls ``cudaMemcpyAsync``; here the copy is one ``cuMemcpyDtoDAsync`` on the
stream torch would have used, so that it is ordered with the rest of torch's
work exactly as ``copy_``'s would be. Each saved 0.3-1.3 µs of host time on
an H100 host, and the stream handle read from torch's current-stream slot
1.5-3 µs against ``torch.cuda.current_stream()``; whole steps took 2-15 µs
less host time in all twelve comparisons of one A/B
(benchmarks/results/h100_2026-12-06e/). A graph launch through the driver
instead of ``CUDAGraph.replay`` saved nothing there, and is not made here.

Off a real GPU (the CPU, the CUDA simulator), without ``cuda.bindings``, or
where the driver refuses a call (a thread with no current CUDA context, for
one), the copy is torch's own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

import torch

from gpu_vecenv.shared import SIMULATOR

# cuStreamWriteValue64's flags: CU_STREAM_WRITE_VALUE_DEFAULT.
_WRITE_VALUE_DEFAULT = 0


def _driver() -> Any:
    try:
        return importlib.import_module("cuda.bindings.driver")
    except ImportError:
        return None


class StreamOps:
    """Device copies on torch's current stream of ``device`` (a CUDA or CPU device)."""

    def __init__(self, device: torch.device) -> None:
        self._index = 0 if device.index is None else int(device.index)
        on_gpu = device.type == "cuda" and not SIMULATOR
        # torch's current-stream slot, read without making a Stream object (absent from CPU builds of torch).
        self._raw_stream: Callable[[int], int] | None = (
            getattr(torch._C, "_cuda_getCurrentRawStream", None) if on_gpu else None
        )
        self._driver = _driver() if self._raw_stream is not None else None
        self._success = None if self._driver is None else self._driver.CUresult.CUDA_SUCCESS
        # A device without 64-bit stream memory operations refuses every write (some virtualized GPUs): remembered,
        # so that a step does not pay a refused call before torch's copy each time. Other refusals (no current
        # context in this thread, for one) are the call's, not the device's, and are not remembered.
        self._not_supported = None if self._driver is None else self._driver.CUresult.CUDA_ERROR_NOT_SUPPORTED
        self._no_stream_writes = False

    @property
    def through_driver(self) -> bool:
        """Whether the calls go to the CUDA driver (else they are torch's own)."""
        return self._driver is not None

    def stream_handle(self) -> int:
        """The handle of torch's current stream of the device (``cudaStream_t`` as an int; 0 off a GPU)."""
        if self._raw_stream is not None:
            return self._raw_stream(self._index)
        if torch.cuda.is_available() and not SIMULATOR:
            return int(torch.cuda.current_stream(self._index).cuda_stream)
        return 0

    def copy(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        """``dst.copy_(src)`` for two contiguous tensors of the same dtype and number of elements on the device.

        The caller guarantees those conditions (they are not checked here: each check costs host time on
        every step); the copy is then a plain byte copy.
        """
        driver, raw_stream = self._driver, self._raw_stream
        if driver is not None and raw_stream is not None:  # the second follows from the first; for mypy
            stream = raw_stream(self._index)
            nbytes = src.numel() * src.element_size()
            (err,) = driver.cuMemcpyDtoDAsync(dst.data_ptr(), src.data_ptr(), nbytes, stream)
            if err == self._success:
                return
        dst.copy_(src)

    def write_words(self, dst: torch.Tensor, values: Sequence[int]) -> None:
        """``dst[:len(values)] = values`` from the host, on the current stream, for ``dst`` a contiguous int64
        tensor on the device: each value one ``cuStreamWriteValue64``, a write the stream makes itself (no
        host memory staged, no copy engine), for a few values; else torch's non-blocking copy of a host
        tensor (from pageable memory, which CUDA stages before the call returns)."""
        driver, raw_stream = self._driver, self._raw_stream
        if driver is not None and raw_stream is not None and not self._no_stream_writes:
            stream, base = raw_stream(self._index), dst.data_ptr()
            try:
                for k, value in enumerate(values):
                    # CU_STREAM_WRITE_VALUE_DEFAULT: the write waits for the stream's earlier work and its memory
                    # writes (the kernel that advanced the ring, for one); NO_MEMORY_BARRIER would not.
                    (err,) = driver.cuStreamWriteValue64(stream, base + 8 * k, value, _WRITE_VALUE_DEFAULT)
                    if err != self._success:
                        self._no_stream_writes = err == self._not_supported
                        break  # torch writes them all below, in stream order after those written
                else:
                    return
            except (TypeError, ValueError, OverflowError):  # a binding that takes other types: torch from now on
                self._no_stream_writes = True
        dst[: len(values)].copy_(torch.tensor(values, dtype=torch.int64), non_blocking=True)
