"""Backends: launch an env's generated kernel over torch-owned buffers.

Both backends take the same packed buffers (torch tensors) and run the same
phases. :class:`CudaBackend` launches the ``numba.cuda`` kernel, one block per
game, on torch's current CUDA stream; :class:`CpuBackend` calls the
``numba.njit(parallel=True)`` function. Neither copies or synchronizes: the
kernel reads and writes the tensors in place through views made once.

Since every argument of every launch is fixed at construction (state, params,
the env's action buffer, the output arena) and only ``op`` varies, the CUDA
backend captures one CUDA graph per ``op`` right after the first, eager,
launch (inside the first ``reset``, since capturing synchronizes the device);
a ``step`` is then one graph replay on the current stream.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from numba import cuda
from numba.core.errors import NumbaError, NumbaPerformanceWarning

from gpu_vecenv.arguments import is_integer
from gpu_vecenv.codegen import KernelCompileError, load_kernel_module
from gpu_vecenv.definition import EnvDefinition
from gpu_vecenv.layout import BUFFERS
from gpu_vecenv.outputs import KernelOutputs
from gpu_vecenv.shared import SIMULATOR


def round_up_to_warps(threads: int) -> int:
    """``threads`` rounded up to a whole number of 32-thread warps."""
    return 32 * -(-threads // 32)


def default_threads_per_block(num_agents: int) -> int:
    """The block of a definition that names none: its agents rounded up to whole warps, at most 256."""
    return min(256, round_up_to_warps(num_agents))


def resident_blocks_per_multiprocessor(registers: int, threads: int) -> int:
    """Blocks of ``threads`` threads at ``registers`` registers a thread that one SM holds at once (sm_90:
    64 K registers allocated per warp in units of 256, at most 64 warps and 32 blocks)."""
    warps = round_up_to_warps(threads) // 32
    register_warps = 65536 // (-(-registers * 32 // 256) * 256)
    return min(register_warps // warps, 64 // warps, 32)


def _threads_per_block(definition: EnvDefinition, requested: int | None) -> int:
    if requested is not None:
        if not is_integer(requested, 1, 1024):
            raise ValueError(f"threads_per_block must be an integer in [1, 1024], got {requested!r}")
        return int(requested)
    if SIMULATOR:
        return min(definition.num_agents, 32)  # one Python thread per CUDA thread there
    if definition.threads_per_block is not None:
        return definition.threads_per_block
    return default_threads_per_block(definition.num_agents)


def _kernel_tensors(buffers: dict[str, torch.Tensor], params: tuple[torch.Tensor, ...], actions: torch.Tensor,
                    out: KernelOutputs) -> tuple[torch.Tensor, ...]:  # fmt: skip
    """The kernel's array arguments, in its signature's order (``op`` follows)."""
    return (
        tuple(buffers[name] for name in BUFFERS)
        + tuple(params)
        + (actions, out.obs, out.rewards, out.flags, out.final_obs)
    )


class CpuBackend:
    """Runs the env's ``numba.njit(parallel=True)`` function, ``prange`` over games."""

    name = "cpu"

    def __init__(self, definition: EnvDefinition, buffers: dict[str, torch.Tensor], params: tuple[torch.Tensor, ...],
                 actions: torch.Tensor, out: KernelOutputs) -> None:  # fmt: skip
        if SIMULATOR:
            raise RuntimeError(
                "the CPU backend is not available while NUMBA_ENABLE_CUDASIM=1; use backend='cuda' "
                "(simulated) in that process, or unset the variable"
            )
        self._definition = definition
        self._run = load_kernel_module(definition, "cpu").run
        self._args = tuple(t.numpy() for t in _kernel_tensors(buffers, params, actions, out))

    def launch(self, op: int) -> None:
        try:
            self._run(*self._args, op)
        except NumbaError as exc:  # raised by the first call, which compiles
            raise KernelCompileError(self._definition, "cpu", exc) from exc

    def capture(self, ops: tuple[int, ...]) -> None:
        """Nothing to capture on the CPU."""


class CudaBackend:
    """Launches the env's CUDA kernel: one block per game, a stride loop over agents.

    On a real GPU the kernel sees ``numba.cuda.as_cuda_array`` views of the
    torch tensors, made once, and runs on torch's current stream of the env's
    device, by CUDA-graph replay when ``cuda_graphs`` is on. Under the CUDA
    simulator it sees numpy views of CPU tensors.
    """

    name = "cuda"

    def __init__(self, definition: EnvDefinition, buffers: dict[str, torch.Tensor], params: tuple[torch.Tensor, ...],
                 actions: torch.Tensor, out: KernelOutputs, threads_per_block: int | None = None,
                 cuda_graphs: bool = True) -> None:  # fmt: skip
        self._definition = definition
        self._kernel = definition.cuda_kernel or load_kernel_module(definition, "cuda").run
        self.device = actions.device
        self.grid = int(buffers["game_i64"].shape[1])
        self.block = _threads_per_block(definition, threads_per_block)
        self.cuda_graphs = bool(cuda_graphs) and not SIMULATOR
        self._gpu_index = self.device.index if self.device.index is not None else 0
        tensors = _kernel_tensors(buffers, params, actions, out)
        if SIMULATOR:
            self._args = tuple(t.numpy() for t in tensors)
        else:
            with cuda.gpus[self._gpu_index]:
                self._args = tuple(cuda.as_cuda_array(t) for t in tensors)
        self._stream_handle: int | None = None
        self._launcher: Any = None
        self._graphs: dict[int, torch.cuda.CUDAGraph] = {}

    def _configured(self) -> Any:
        if SIMULATOR:
            return self._kernel[self.grid, self.block]
        handle = torch.cuda.current_stream(self.device).cuda_stream
        if handle != self._stream_handle:
            # Rebuilt only when the caller switched torch streams (or a graph is being captured).
            with cuda.gpus[self._gpu_index]:
                stream = cuda.external_stream(handle)
            self._launcher = self._kernel[self.grid, self.block, stream]
            self._stream_handle = handle
        return self._launcher

    def _launch_eager(self, op: int) -> None:
        try:
            with warnings.catch_warnings():
                # One block per game makes small grids normal here; Numba's low-occupancy warning is noise.
                warnings.simplefilter("ignore", NumbaPerformanceWarning)
                self._launch_on_device(op)
        except NumbaError as exc:  # raised by the first launch, which compiles
            raise KernelCompileError(self._definition, "cuda", exc) from exc

    def _launch_on_device(self, op: int) -> None:
        if SIMULATOR or self._gpu_index == 0:
            self._configured()(*self._args, op)
        else:
            with cuda.gpus[self._gpu_index]:
                self._configured()(*self._args, op)

    def launch(self, op: int) -> None:
        """Run ``op`` on the current stream: a graph replay once captured, else an eager launch."""
        graph = self._graphs.get(op)
        if graph is not None:
            graph.replay()
        else:
            self._launch_eager(op)

    def capture(self, ops: tuple[int, ...]) -> None:
        """Capture a CUDA graph of each of ``ops`` (once); needs the kernel compiled, i.e. one launch done.

        Capturing synchronizes the device, so the env calls this from ``reset``, never from ``step``.
        """
        for op in ops:
            if not self.cuda_graphs or op in self._graphs:
                continue
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.device(self.device), torch.cuda.graph(graph):
                    self._launch_eager(op)  # recorded on the capture stream, not run
            except Exception as exc:  # noqa: BLE001  (any capture failure: fall back to eager launches)
                warnings.warn(f"gpu_vecenv: CUDA graph capture failed ({exc}); launching eagerly", stacklevel=3)
                self.cuda_graphs = False
                return
            self._graphs[op] = graph

    def close(self) -> None:
        self._graphs.clear()
        self._args = ()
