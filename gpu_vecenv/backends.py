"""Backends: launch an env's generated kernel over torch-owned buffers.

Both backends take the same packed buffers (torch tensors) and run the same
phases. :class:`CudaBackend` launches the ``numba.cuda`` kernel, one block per
game, on torch's current CUDA stream; :class:`CpuBackend` calls the
``numba.njit(parallel=True)`` function. Neither copies or synchronizes: the
kernel reads and writes the tensors in place through views made once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from numba import cuda

from gpu_vecenv.codegen import load_kernel_module
from gpu_vecenv.definition import EnvDefinition
from gpu_vecenv.layout import BUFFERS
from gpu_vecenv.shared import SIMULATOR


@dataclass
class Outputs:
    """One set of output tensors of a launch and the kernel's views of them.

    ``obs``: ``(games, agents, obs_dim)`` float32; ``rewards``: ``(games,
    agents)`` float32; ``flags``: ``(4, games, agents)`` uint8 holding
    terminated, truncated, active and done; ``final_obs``: like ``obs`` in
    SAME_STEP mode, else a 1-element placeholder.
    """

    obs: torch.Tensor
    rewards: torch.Tensor
    flags: torch.Tensor
    final_obs: torch.Tensor
    kernel_args: tuple[Any, ...] = ()


def _threads_per_block(num_agents: int, requested: int | None) -> int:
    if requested is not None:
        if not 1 <= requested <= 1024:
            raise ValueError(f"threads_per_block must be in [1, 1024], got {requested}")
        return requested
    if SIMULATOR:
        return min(num_agents, 32)  # one Python thread per CUDA thread there
    return min(256, 32 * ((num_agents + 31) // 32))


class CpuBackend:
    """Runs the env's ``numba.njit(parallel=True)`` function, ``prange`` over games."""

    name = "cpu"

    def __init__(self, definition: EnvDefinition, buffers: dict[str, torch.Tensor], params: tuple[torch.Tensor, ...],
                 actions: torch.Tensor) -> None:  # fmt: skip
        if SIMULATOR:
            raise RuntimeError(
                "the CPU backend is not available while NUMBA_ENABLE_CUDASIM=1; use backend='cuda' "
                "(simulated) in that process, or unset the variable"
            )
        self._run = load_kernel_module(definition, "cpu").run
        self._inputs = tuple(buffers[name].numpy() for name in BUFFERS) + tuple(p.numpy() for p in params)
        self._actions = actions.numpy()

    def output_args(self, out: Outputs) -> tuple[Any, ...]:
        return (out.obs.numpy(), out.rewards.numpy(), out.flags.numpy(), out.final_obs.numpy())

    def launch(self, out: Outputs, op: int) -> None:
        self._run(*self._inputs, self._actions, *out.kernel_args, op)


class CudaBackend:
    """Launches the env's CUDA kernel: one block per game, a stride loop over agents.

    On a real GPU the kernel sees ``numba.cuda.as_cuda_array`` views of the
    torch tensors, made once, and runs on torch's current stream of the env's
    device. Under the CUDA simulator it sees numpy views of CPU tensors.
    """

    name = "cuda"

    def __init__(self, definition: EnvDefinition, buffers: dict[str, torch.Tensor], params: tuple[torch.Tensor, ...],
                 actions: torch.Tensor, num_games: int, threads_per_block: int | None = None) -> None:  # fmt: skip
        self._kernel = load_kernel_module(definition, "cuda").run
        self.device = actions.device
        self.grid = num_games
        self.block = _threads_per_block(definition.num_agents, threads_per_block)
        self._inputs = tuple(self._view(buffers[name]) for name in BUFFERS) + tuple(self._view(p) for p in params)
        self._actions = self._view(actions)
        self._stream_handle: int | None = None
        self._launcher: Any = None
        self._gpu_index = self.device.index if self.device.index is not None else 0

    def _view(self, tensor: torch.Tensor) -> Any:
        if SIMULATOR:
            return tensor.numpy()
        with cuda.gpus[self._device_index(tensor)]:
            return cuda.as_cuda_array(tensor)

    @staticmethod
    def _device_index(tensor: torch.Tensor) -> int:
        return tensor.device.index if tensor.device.index is not None else torch.cuda.current_device()

    def output_args(self, out: Outputs) -> tuple[Any, ...]:
        return tuple(self._view(t) for t in (out.obs, out.rewards, out.flags, out.final_obs))

    def _configured(self) -> Any:
        if SIMULATOR:
            return self._kernel[self.grid, self.block]
        handle = torch.cuda.current_stream(self.device).cuda_stream
        if handle != self._stream_handle:
            # Rebuilt only when the caller switched torch streams.
            with cuda.gpus[self._gpu_index]:
                stream = cuda.external_stream(handle)
            self._launcher = self._kernel[self.grid, self.block, stream]
            self._stream_handle = handle
        return self._launcher

    def launch(self, out: Outputs, op: int) -> None:
        launcher = self._configured()
        if SIMULATOR or self._gpu_index == 0:
            launcher(*self._inputs, self._actions, *out.kernel_args, op)
        else:
            with cuda.gpus[self._gpu_index]:
                launcher(*self._inputs, self._actions, *out.kernel_args, op)
