"""Backends: launch an env's generated kernel over torch-owned buffers.

Both backends take the same packed buffers (torch tensors) and run the same
phases. :class:`CudaBackend` launches the ``numba.cuda`` kernel, one block per
game, on torch's current CUDA stream; :class:`CpuBackend` calls the
``numba.njit(parallel=True)`` function. Neither copies or synchronizes: the
kernel reads and writes the tensors in place through views made once.

Since every argument of every launch is fixed at construction (state, params,
the env's action buffer, the output arena or, for ``copy=True`` on the GPU,
the ring that names each launch's fresh outputs) and only ``op`` varies, the
CUDA backend captures one CUDA graph per ``op`` right after the first, eager,
launch (inside the first ``reset``, since capturing synchronizes the device);
a ``step`` is then one graph replay on the current stream. For ``copy=True``
without the ring (a hand-written kernel, or an env told to copy by its
``direct_write_bytes``) it also captures, per ``op``, a graph that then
copies the outputs into the env's next fresh slot (:mod:`gpu_vecenv.slot_copy`,
:meth:`CudaBackend.launch_copying`), so that a copying step is one replay too.

``launch_into`` runs one launch with other output buffers than those fixed at
construction (the env's fresh outputs, for a kernel that cannot find them
through a ring): an eager launch, whose new arguments cost host time instead
of a device copy.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import warnings
from dataclasses import dataclass
from typing import Any

import torch
from numba import cuda
from numba.core.errors import NumbaError, NumbaPerformanceWarning

from gpu_vecenv.codegen import KernelCompileError, load_kernel_module
from gpu_vecenv.definition import EnvDefinition
from gpu_vecenv.layout import BUFFERS
from gpu_vecenv.outputs import KernelOutputs, OutputArena, SlotOutputs
from gpu_vecenv.shared import SIMULATOR
from gpu_vecenv.slot_copy import SlotCopy, advance_kernel
from gpu_vecenv.stream_ops import StreamOps


def round_up_to_warps(threads: int) -> int:
    """``threads`` rounded up to a whole number of 32-thread warps."""
    return 32 * -(-threads // 32)


def default_threads_per_block(num_agents: int) -> int:
    """The block of a definition that names none: its agents rounded up to whole warps, at most 256."""
    return min(256, round_up_to_warps(num_agents))


@dataclass(frozen=True)
class MultiprocessorLimits:
    """What one SM holds at once: 32-bit registers, warps, blocks and bytes of shared memory, of which the
    system reserves ``reserved_shared_bytes`` for each block; by default sm_90's."""

    registers: int = 65536
    warps: int = 64
    blocks: int = 32
    shared_bytes: int = 233472  # 228 KiB
    reserved_shared_bytes: int = 1024


SM_90_LIMITS = MultiprocessorLimits()


def multiprocessor_limits(index: int) -> MultiprocessorLimits:
    """The limits of CUDA device ``index`` as its driver reports them (an sm_86 or sm_89 card holds 48 warps
    and 16 blocks an SM, not 64 and 32); sm_90's under the CUDA simulator, which has no driver to ask."""
    if SIMULATOR:
        return SM_90_LIMITS
    from numba.cuda.cudadrv.error import CudaDriverError  # noqa: PLC0415  (the real driver's; the simulator has none)

    device = cuda.gpus[index]
    try:
        # Numba's Device reads CU_DEVICE_ATTRIBUTE_<name> from the driver on first access.
        return MultiprocessorLimits(
            registers=int(device.MAX_REGISTERS_PER_MULTIPROCESSOR),
            warps=int(device.MAX_THREADS_PER_MULTIPROCESSOR) // 32,
            blocks=int(device.MAX_BLOCKS_PER_MULTIPROCESSOR),
            shared_bytes=int(device.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
            reserved_shared_bytes=int(device.RESERVED_SHARED_MEMORY_PER_BLOCK),
        )
    except (AttributeError, CudaDriverError):  # a driver or binding without the attribute: sm_90's, as before
        return SM_90_LIMITS


def resident_blocks_per_multiprocessor(
    registers: int, threads: int, limits: MultiprocessorLimits = SM_90_LIMITS, shared_bytes: int = 0
) -> int:
    """Blocks of ``threads`` threads at ``registers`` registers a thread, each taking ``shared_bytes`` of
    static shared memory, that one SM holds at once; registers allocated a warp at a time in units of 256
    (as on every card from sm_50 to sm_90)."""
    warps = round_up_to_warps(threads) // 32
    register_warps = limits.registers // (-(-registers * 32 // 256) * 256)
    shared_blocks = limits.shared_bytes // (shared_bytes + limits.reserved_shared_bytes)
    return min(register_warps // warps, limits.warps // warps, limits.blocks, shared_blocks)


def _threads_per_block(definition: EnvDefinition, requested: int | None) -> int:
    """The block size: ``requested`` (checked by the vector env, on every backend), else the defaults."""
    if requested is not None:
        return int(requested)
    if SIMULATOR:
        return min(definition.num_agents, 32)  # one Python thread per CUDA thread there
    if definition.threads_per_block is not None:
        return definition.threads_per_block
    return default_threads_per_block(definition.num_agents)


def _kernel_tensors(buffers: dict[str, torch.Tensor], params: tuple[torch.Tensor, ...], actions: torch.Tensor,
                    out: KernelOutputs) -> tuple[torch.Tensor, ...]:  # fmt: skip
    """The kernel's array arguments, in its signature's order (``op`` follows)."""
    return tuple(buffers[name] for name in BUFFERS) + tuple(params) + (actions,) + out.arrays()


# The number of output arrays at the end of the kernel's arguments (before op).
_OUTPUT_ARRAYS = 4


def _refuse_stand_in_outputs(stand_ins: bool) -> None:
    if stand_ins:
        # Stand-ins of one element: a launch would run the game and write every output into it.
        raise RuntimeError("the env has no output buffer of its own: each launch writes a fresh slot (launch_into)")


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
        self._stand_in_outputs = out.stand_ins

    def launch(self, op: int) -> None:
        """Run ``op`` with the outputs written to the env's own buffer."""
        _refuse_stand_in_outputs(self._stand_in_outputs)
        self._call(self._args, op)

    def launch_into(self, op: int, arena: OutputArena, row: torch.Tensor) -> None:
        """Run ``op`` with its outputs written to ``row``, a fresh slot of ``arena``, instead of the arena."""
        out = arena.kernel_views(row)
        self._call(self._args[:-_OUTPUT_ARRAYS] + tuple(t.numpy() for t in out.arrays()), op)

    def _call(self, args: tuple[Any, ...], op: int) -> None:
        try:
            self._run(*args, op)
        except NumbaError as exc:  # raised by the first call, which compiles
            raise KernelCompileError(self._definition, "cpu", exc) from exc

    def capture(self, ops: tuple[int, ...], copy_into: OutputArena | None = None) -> None:
        """Nothing to capture on the CPU."""

    def launch_copying(self, op: int, arena: OutputArena) -> SlotOutputs | None:
        """``None``: on the CPU the env copies the outputs itself."""
        return None


class _OutputLaunch:
    """Launches of one compiled CUDA kernel that change only the outputs' memory and ``op``.

    numba-cuda turns each array argument of a launch into launch parameters in
    Python (a Numba view of the tensor, then its size, item size, data
    pointer, shape and strides): with a new set of output tensors every
    launch, 400-700 µs of host time a step on an H100 host. Here the
    parameters are made once, from an eager launch's own arguments, into one
    buffer of 8-byte values with the array of pointers ``cuLaunchKernel``
    takes; a launch writes the four outputs' data pointers and ``op`` into it
    and calls the driver: 12-22 µs of host time a launch on an H100 host,
    against 16-30 through cuda.core's ``launch``, which packs the parameters
    again each time (benchmarks/results/h100_2026-12-06d/host_parts/). A
    fresh set of outputs has the arena's shapes and strides. This relies on
    numba-cuda's launch internals of the version ``pyproject.toml`` pins and
    checks them against the compiled kernel's parameter sizes:
    :meth:`prepare` returns ``None`` where they are not as expected, and the
    backend then launches through Numba.
    """

    def __init__(self, kernel: Any, values: list[int], pointer_slots: tuple[int, ...], op_slot: int,
                 grid: int, block: int) -> None:  # fmt: skip
        from cuda.bindings import driver

        self._driver = driver
        self._kernel = kernel  # owns the handle below
        # cuLaunchKernel takes a CUkernel (cuda.core's handle) where it takes a CUfunction.
        self._function = driver.CUfunction(int(kernel.handle))
        self._values = (ctypes.c_uint64 * len(values))(*(v & 0xFFFF_FFFF_FFFF_FFFF for v in values))
        base = ctypes.addressof(self._values)
        self._pointers = (ctypes.c_void_p * len(values))(*(base + 8 * i for i in range(len(values))))
        self._pointer_slots = pointer_slots
        self._op_slot = op_slot
        self._grid = grid
        self._block = block

    @classmethod
    def prepare(cls, dispatcher: Any, launcher: Any, args: tuple[Any, ...], op: int, grid: int,
                block: int) -> _OutputLaunch | None:  # fmt: skip
        """From a launch of ``dispatcher`` configured as ``launcher`` (``grid`` blocks of ``block`` threads)
        with ``(*args, op)`` that has run once (so that it is compiled); ``None`` if numba-cuda's internals
        differ from what this relies on."""
        try:
            numba_types: Any = importlib.import_module("numba.cuda.types")
            compiled = dispatcher.overloads[tuple(dispatcher.typeof_pyval(a) for a in (*args, op))]
            # What Numba's own launch does besides passing the parameters is not done here.
            special = getattr(compiled, "launch_config_sensitive", False) or launcher.pre_launch_callbacks
            if compiled.debug or compiled.extensions or compiled.cooperative or special or launcher.sharedmem:
                return None
            params: list[Any] = []
            copied_back: list[Any] = []  # host arrays Numba would copy to the device for one launch: none here
            slots = []
            for i, (kind, value) in enumerate(zip(compiled.argument_types, (*args, op), strict=True)):
                start = len(params)
                compiled._prepare_args(kind, value, launcher.stream, copied_back, params)
                if len(args) - _OUTPUT_ARRAYS <= i < len(args):
                    # An array's parameters: meminfo, parent, size, itemsize, then the data pointer.
                    pointer = value.__cuda_array_interface__["data"][0]
                    if not isinstance(kind, numba_types.Array) or params[start + 4] != pointer:
                        return None
                    slots.append(start + 4)
            if copied_back or not isinstance(compiled.argument_types[-1], numba_types.Integer):
                return None
            if len(params) != start + 1:
                return None
            kernel = compiled._codelibrary.get_cufunc().kernel
            # Every parameter must be one 8-byte value, where the compiled kernel says so too.
            values = [p.value if isinstance(p, (ctypes.c_int64, ctypes.c_uint64)) else p for p in params]
            sizes = [info.size for info in kernel.arguments_info]
            if not all(isinstance(v, int) for v in values) or sizes != [8] * len(values):
                return None
            return cls(kernel, values, tuple(slots), start, grid, block)
        except Exception:  # noqa: BLE001  (whatever differs, Numba's own launch still works)
            return None

    def launch(self, stream_handle: int, pointers: tuple[int, ...], op: int) -> None:
        """``op`` with its outputs at ``pointers`` (``KernelOutputs`` order), on the CUDA stream ``stream_handle``."""
        values = self._values
        for slot, pointer in zip(self._pointer_slots, pointers, strict=True):
            values[slot] = pointer
        values[self._op_slot] = op
        # The driver copies the parameters at the call: the buffer is free again when it returns.
        (err,) = self._driver.cuLaunchKernel(self._function, self._grid, 1, 1, self._block, 1, 1, 0,
                                            self._driver.CUstream(stream_handle),
                                            ctypes.addressof(self._pointers), 0)  # fmt: skip
        if err != self._driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"launching the step kernel failed: {err!r}")


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
                 cuda_graphs: bool = True, ring: torch.Tensor | None = None) -> None:  # fmt: skip
        """``ring``: launch the kernel that writes each launch's outputs into the fresh slot this ring names
        (:meth:`OutputArena.ring`; ``out`` is then unused), a generated kernel's second form
        (:mod:`gpu_vecenv.codegen`)."""
        self._definition = definition
        self.writes_ring = ring is not None
        if ring is not None and definition.cuda_kernel is not None:
            raise ValueError(f"env {definition.name!r}: a hand-written cuda_kernel takes its outputs as arguments; "
                             "it cannot write them into the slot a ring names")  # fmt: skip
        if ring is not None:
            self._kernel = load_kernel_module(definition, "cuda", ring_games=int(buffers["game_i64"].shape[1])).run
        else:
            self._kernel = definition.cuda_kernel or load_kernel_module(definition, "cuda").run
        self.device = actions.device
        self.grid = int(buffers["game_i64"].shape[1])
        self.block = _threads_per_block(definition, threads_per_block)
        self.cuda_graphs = bool(cuda_graphs) and not SIMULATOR
        self._gpu_index = self.device.index if self.device.index is not None else 0
        tensors = _kernel_tensors(buffers, params, actions, out)
        if ring is not None:
            # The ring kernel's flag of a launch that found no slot (codegen); its address is in every graph.
            self._ring_missed = torch.zeros(1, dtype=torch.int32, device=ring.device)
            tensors = tensors[:-_OUTPUT_ARRAYS] + (ring, self._ring_missed)
        if SIMULATOR:
            self._args = tuple(t.numpy() for t in tensors)
        else:
            with cuda.gpus[self._gpu_index]:
                self._args = tuple(cuda.as_cuda_array(t) for t in tensors)
        # The ring's view, which advance_kernel moves on after each launch of the ring kernel.
        self._ring_view = self._args[-2] if ring is not None else None
        self._stand_in_outputs = out.stand_ins
        self._stream_ops = StreamOps(self.device)
        self._stream_handle: int | None = None
        self._launcher: Any = None
        # advance_kernel configured for the launcher's stream, where the kernel writes through a ring.
        self._advance_launcher: Any = None
        self._graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self._copy_graphs: dict[int, torch.cuda.CUDAGraph] = {}
        # Owns the copy kernel's block counter, whose address the copying graphs keep: alive as long as they are.
        self._slot_copy: SlotCopy | None = None
        self._copy_capture_failed = False
        # launch_into's fast path, made after its first launch (None: not made yet, False: not available).
        self._output_launch: _OutputLaunch | bool | None = None

    def _configured(self) -> Any:
        if SIMULATOR:
            if self._ring_view is not None:
                self._advance_launcher = advance_kernel()[1, 1]
            return self._kernel[self.grid, self.block]
        handle = self._stream_ops.stream_handle()
        if handle != self._stream_handle:
            # Rebuilt only when the caller switched torch streams (or a graph is being captured).
            with cuda.gpus[self._gpu_index]:
                stream = cuda.external_stream(handle)
            self._launcher = self._kernel[self.grid, self.block, stream]
            if self._ring_view is not None:
                self._advance_launcher = advance_kernel()[1, 1, stream]
            self._stream_handle = handle
        return self._launcher

    def _on_device(self) -> Any:
        """A context that makes the env's GPU Numba's current one: none for the first GPU (current unless the
        caller made another one current, as for every launch here), since entering one costs host time."""
        return contextlib.nullcontext() if SIMULATOR or self._gpu_index == 0 else cuda.gpus[self._gpu_index]

    def _launch_eager(self, op: int, args: tuple[Any, ...] | None = None) -> None:
        with warnings.catch_warnings():
            # One block per game makes small grids normal here; Numba's low-occupancy warning is noise.
            warnings.simplefilter("ignore", NumbaPerformanceWarning)
            with self._on_device():
                try:
                    self._configured()(*(args or self._args), op)
                except NumbaError as exc:  # raised by the first launch, which compiles
                    raise KernelCompileError(self._definition, "cuda", exc) from exc
                if self._ring_view is not None:
                    # The package's own kernel: a failure to compile it is not the env definition's.
                    self._advance_launcher(self._ring_view)

    def launch(self, op: int) -> None:
        """Run ``op`` on the current stream: a graph replay once captured, else an eager launch. With a ring
        (``writes_ring``), the outputs go to the slot the ring names, which the caller has written."""
        if not self.writes_ring:
            _refuse_stand_in_outputs(self._stand_in_outputs)
        graph = self._graphs.get(op)
        if graph is not None:
            graph.replay()
        else:
            self._launch_eager(op)

    def launch_into(self, op: int, arena: OutputArena, row: torch.Tensor) -> None:
        """Run ``op`` eagerly on the current stream with its outputs written to ``row``, a fresh slot of
        ``arena``, instead of the arena; no graph is replayed. Once prepared, a launch takes the slot's data
        pointers, not views of it."""
        if self.writes_ring:
            raise RuntimeError("this backend's kernel writes the slot its ring names: name it (ring_slot), launch")
        if isinstance(self._output_launch, _OutputLaunch):
            try:
                self._configured()  # follows the current torch stream
                assert self._stream_handle is not None
                with self._on_device():
                    self._output_launch.launch(self._stream_handle, arena.kernel_pointers(row), op)
                return
            except Exception as exc:  # noqa: BLE001  (then Numba launches, as before the fast path was made)
                warnings.warn(f"gpu_vecenv: the prepared launch failed ({exc}); launching through Numba",
                              stacklevel=3)  # fmt: skip
                self._output_launch = False
        outputs = arena.kernel_views(row).arrays()
        if SIMULATOR:
            self._launch_eager(op, self._args[:-_OUTPUT_ARRAYS] + tuple(t.numpy() for t in outputs))
            return
        with cuda.gpus[self._gpu_index]:
            args = self._args[:-_OUTPUT_ARRAYS] + tuple(cuda.as_cuda_array(t) for t in outputs)
        self._launch_eager(op, args)  # compiles on the first launch
        if self._output_launch is None:
            with cuda.gpus[self._gpu_index]:
                prepared = _OutputLaunch.prepare(self._kernel, self._configured(), args, op, self.grid, self.block)
            self._output_launch = prepared or False

    def capture(self, ops: tuple[int, ...], copy_into: OutputArena | None = None) -> None:
        """Capture a CUDA graph of each of ``ops`` (once); needs the kernel compiled, i.e. one launch done.
        With ``copy_into`` (the env's arena, for ``copy=True``), also a graph of each that then copies the
        outputs into the arena's next fresh slot (:mod:`gpu_vecenv.slot_copy`), for :meth:`launch_copying`.

        Capturing synchronizes the device, so the env calls this from ``reset``, never from ``step``.
        """
        if not self.writes_ring:
            _refuse_stand_in_outputs(self._stand_in_outputs)
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
        copying = copy_into is not None and not self.writes_ring
        if copying and self.cuda_graphs and not self._copy_graphs and not self._copy_capture_failed:
            assert copy_into is not None
            self._capture_copying(ops, copy_into)

    def _capture_copying(self, ops: tuple[int, ...], arena: OutputArena) -> None:
        try:
            slot_copy = SlotCopy(arena.buffer, arena.ring())
            with torch.cuda.device(self.device):
                # Compiles both kernels outside the capture; the ring names no slot yet, so nothing is copied
                # (and the copy says so: cleared below).
                slot_copy.launch(self._configured().stream)
                slot_copy.finished.zero_()
                graphs = {}
                for op in ops:
                    graph = graphs[op] = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        self._launch_eager(op)
                        slot_copy.launch(self._configured().stream)
        except Exception as exc:  # noqa: BLE001  (the step then copies from the host, as without this graph)
            warnings.warn(f"gpu_vecenv: capturing the outputs' copy failed ({exc}); copying from the host",
                          stacklevel=4)  # fmt: skip
            self._copy_capture_failed = True  # not tried again at every reset
            return
        arena.forget_ring()  # the ring may have been written before; the next step writes it again
        self._copy_graphs = graphs
        self._slot_copy = slot_copy

    def launch_copying(self, op: int, arena: OutputArena) -> SlotOutputs | None:
        """Replay ``op``'s graph that also copies the outputs into ``arena``'s next fresh slot, and return that
        slot's outputs; ``None`` (nothing launched) where no such graph was captured."""
        graph = self._copy_graphs.get(op)
        if graph is None:
            return None
        out = arena.ring_slot()
        try:
            graph.replay()
        except BaseException:
            arena.forget_ring()
            raise
        return out

    def ring_missed(self) -> bool:
        """Whether a launch through a ring (the ring kernel's, or the copying graph's) found no slot named
        there since the last call, and so wrote no outputs; the flag is then cleared. Reads the device's
        flag: a synchronization, for ``reset``."""
        if self.writes_ring:
            flag = self._ring_missed[0:1]
        elif self._slot_copy is not None:
            flag = self._slot_copy.finished[1:2]
        else:
            return False
        if not bool(flag[0]):
            return False
        flag.zero_()
        return True

    def close(self) -> None:
        self._graphs.clear()
        self._copy_graphs.clear()
        self._slot_copy = None
        self._args = ()
