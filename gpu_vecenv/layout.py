"""Packing named state arrays into the few buffers a kernel takes.

Eight packed buffers, one per scope and dtype, hold the whole state of all
games: ``agent_f32``, ``agent_f64``, ``agent_i32``, ``agent_i64`` of shape
``(rows, games, agents)`` and ``game_f32``, ``game_f64``, ``game_i32``,
``game_i64`` of shape ``(rows, games)``.

An array of length ``L`` takes ``L`` consecutive rows. Every buffer has at
least one row, so kernels always take the same arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from gpu_vecenv.definition import FRAMEWORK_GAME_ARRAYS, EnvDefinition, StateArray

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int32": torch.int32, "int64": torch.int64}
_SHORT = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64"}
BUFFERS = tuple(f"{scope}_{_SHORT[dtype]}" for scope in ("agent", "game") for dtype in DTYPES)
_BUFFER_OF = {(scope, dtype): f"{scope}_{_SHORT[dtype]}" for scope in ("agent", "game") for dtype in DTYPES}
_TORCH_DTYPE = {f"{scope}_{_SHORT[dtype]}": t for scope in ("agent", "game") for dtype, t in DTYPES.items()}


@dataclass(frozen=True)
class Slot:
    """Where one named array lives: its buffer, first row and length; ``vector``: it keeps its leading axis;
    ``block_local``: a CUDA kernel keeps it in the block's shared memory instead (see :class:`StateArray`)."""

    buffer: str
    row: int
    length: int
    vector: bool
    block_local: bool = False


def framework_arrays(definition: EnvDefinition) -> tuple[StateArray, ...]:
    """The arrays every env has, besides its own."""
    game = tuple(StateArray(name, "int64", "game") for name in FRAMEWORK_GAME_ARRAYS)
    agent = (
        StateArray("action", "int32", "agent", len(definition.action_nvec), vector=True),
        # (component + 1, value) of the first out-of-range action seen for a slot.
        StateArray("action_error", "int32", "agent", 2),
    )
    return game + agent


class StateLayout:
    """Row assignment of every state array of one definition.

    Each buffer lists its block-local arrays' rows after all its other rows, so
    that ``block_local_rows=False`` (for a generated CUDA kernel, which keeps
    those arrays in the block's shared memory and never reads their rows) cuts
    the buffers short: every other array keeps its row, and the block-local
    arrays have no views.
    """

    def __init__(self, definition: EnvDefinition, block_local_rows: bool = True) -> None:
        self.definition = definition
        self.block_local_rows = block_local_rows
        slots: dict[str, Slot] = {}
        rows = dict.fromkeys(BUFFERS, 0)
        left_out = dict.fromkeys(BUFFERS, 0)
        arrays = framework_arrays(definition) + tuple(definition.state)
        for arr in sorted(arrays, key=lambda a: a.block_local):  # stable: the definition's order within each
            buffer = _BUFFER_OF[(arr.per, arr.dtype)]
            slots[arr.name] = Slot(buffer, rows[buffer], arr.length, arr.vector or arr.length > 1, arr.block_local)
            rows[buffer] += arr.length
            if arr.block_local and not block_local_rows:
                left_out[buffer] += arr.length
        self.slots = {arr.name: slots[arr.name] for arr in arrays}
        # Every buffer has a row at least: kernels always take all of them.
        self.allocated_rows = {name: max(1, rows[name] - left_out[name]) for name in BUFFERS}

    def allocate(self, num_games: int, device: torch.device) -> dict[str, torch.Tensor]:
        """Zeroed packed buffers for ``num_games`` games on ``device``."""
        n = self.definition.num_agents
        out = {}
        for name, rows in self.allocated_rows.items():
            shape = (rows, num_games, n) if name.startswith("agent") else (rows, num_games)
            out[name] = torch.zeros(shape, dtype=_TORCH_DTYPE[name], device=device)
        return out

    def views(self, buffers: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Named torch views into ``buffers``: ``(games, agents)`` or ``(length, games, agents)`` and alike
        (the block-local arrays only with ``block_local_rows``)."""
        out = {}
        for name, slot in self.slots.items():
            if slot.block_local and not self.block_local_rows:
                continue
            buf = buffers[slot.buffer]
            out[name] = buf[slot.row : slot.row + slot.length] if slot.vector else buf[slot.row]
        return out

    def bytes_per_game(self) -> int:
        """State bytes one game takes in the buffers :meth:`allocate` makes (outputs not counted)."""
        n = self.definition.num_agents
        total = 0
        for name, rows in self.allocated_rows.items():
            total += rows * (n if name.startswith("agent") else 1) * _TORCH_DTYPE[name].itemsize
        return total


class ParamLayout:
    """Where each constant, and each state array's rows, sit in the two parameter arrays a kernel takes.

    ``params_i64`` starts with a header of fixed positions: the framework's
    integers (``num_agents``, the autoreset mode, ``max_episode_steps``,
    ``agent_order``, ``obs_kept``, the action sizes ``nvec0...``), the env's integer scalar
    constants, then the first row (and, for vectors, the length) of every state
    array and the start and length of every array constant; array constants'
    values follow. ``params_f32`` holds the float scalar constants, then the
    float array constants.

    The CPU kernel reads rows, starts, lengths and loop bounds (:attr:`sizes`:
    observation entries, slots, stages, scratch lengths) at run time, so its
    source depends on the names and kinds of arrays, constants and phases only:
    configurations that differ in sizes (agents, ``K``, table lengths) share one
    compiled function. The CUDA kernel has them as literals
    (:meth:`source_lines` with ``literal=True``): the compiler then folds the
    addresses and loop bounds, which frees registers (146 -> see
    ``benchmarks/NOTES.md``), at one compilation per configuration.
    """

    FRAMEWORK = ("num_agents", "autoreset_mode", "max_episode_steps", "agent_order", "obs_kept")
    # Per-instance settings: read at run time even by a kernel specialized to its configuration.
    RUNTIME = ("autoreset_mode", "max_episode_steps", "agent_order", "obs_kept")

    def __init__(self, definition: EnvDefinition) -> None:
        self.definition = definition
        self.state = StateLayout(definition)
        header = list(self.FRAMEWORK) + [f"nvec{k}" for k in range(len(definition.action_nvec))]
        self._arrays: dict[str, np.ndarray] = {}
        self._float_scalars: list[str] = []
        for name, value in definition.constants.items():
            values = np.asarray(value)
            if values.ndim == 0 and values.dtype.kind == "f":
                self._float_scalars.append(name)
            elif values.ndim == 0:
                header.append(name)
            else:
                self._arrays[name] = values.ravel()
        for name, slot in self.state.slots.items():
            header += [f"row:{name}"] + ([f"len:{name}"] if slot.vector else [])
        for name in self._arrays:
            header += [f"start:{name}", f"len:{name}"]
        # The loop bounds the generated code takes from the definition: entries an agent, calls of each
        # slot phase, stages of each staged phase (keyed by the phase's place in all_phases), scratch lengths.
        self.sizes: dict[str, int] = {"obs_dim": definition.obs_dim}
        for i, phase in enumerate(definition.all_phases):
            if phase.slots is not None:
                self.sizes[f"slots{i}"] = phase.slots
            if phase.stages is not None:
                self.sizes[f"stages{i}"] = phase.stages
        for j, arr in enumerate(definition.scratch):
            self.sizes[f"scratch{j}"] = arr.length
        header += [f"size:{key}" for key in self.sizes]
        self.index = {key: i for i, key in enumerate(header)}

    def _values(self, autoreset_mode: int, max_episode_steps: int, obs_kept: bool) -> dict[str, int]:
        """The value of every integer header entry except the array constants' starts and lengths."""
        d = self.definition
        values: dict[str, int] = {
            "num_agents": d.num_agents,
            "autoreset_mode": autoreset_mode,
            "max_episode_steps": max_episode_steps,
            "agent_order": 0,
            "obs_kept": int(obs_kept),
        }
        values.update({f"nvec{k}": int(n) for k, n in enumerate(d.action_nvec)})
        for name, slot in self.state.slots.items():
            values[f"row:{name}"] = slot.row
            values[f"len:{name}"] = slot.length
        values.update({f"size:{key}": size for key, size in self.sizes.items()})
        for key in self.index:
            if key not in values and ":" not in key:
                values[key] = int(d.constants[key])
        return values

    def pack(
        self, autoreset_mode: int, max_episode_steps: int, obs_kept: bool, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``(params_f32, params_i64)`` tensors for one env instance (``obs_kept``: see
        :mod:`gpu_vecenv.definition`'s framework names)."""
        d = self.definition
        i64: list[int] = [0] * len(self.index)
        values = self._values(autoreset_mode, max_episode_steps, obs_kept)
        f32: list[float] = [float(d.constants[name]) for name in self._float_scalars]
        for name, array in self._arrays.items():
            target: list = f32 if array.dtype.kind == "f" else i64
            values[f"start:{name}"] = len(target)
            values[f"len:{name}"] = array.size
            target.extend(array.tolist())
        for key, i in self.index.items():
            i64[i] = int(values[key])
        f32_tensor = torch.tensor(f32 or [0.0], dtype=torch.float32)
        return f32_tensor.to(device), torch.tensor(i64, dtype=torch.int64).to(device)

    def size_source(self, key: str) -> str:
        """The read of the loop bound ``key`` of :attr:`sizes` from ``params_i64``, for a kernel's source."""
        return f"params_i64[{self.index['size:' + key]}]"

    def source_lines(self, literal: bool = False, shared_memory: bool = False) -> list[str]:
        """Kernel statements that bind every state array and constant to its name.

        ``literal=False``: rows, sizes and constants are read from the two
        parameter arrays at run time (one compiled kernel per env kind).
        ``literal=True``: they are written into the source as literals (array
        constants as module-level arrays, see :meth:`module_lines`), so the
        compiler folds them; only the per-instance framework integers
        (autoreset mode, ``max_episode_steps``, ``agent_order``, ``obs_kept``) are still read
        at run time. One compiled kernel per configuration. ``shared_memory``
        (with ``literal=True``, a CUDA kernel's): the block-local arrays are
        the block's shared arrays, given a game axis of stride 0
        (:func:`gpu_vecenv.device_arrays.with_game_axis`), not rows of the buffers.
        """
        if not literal:
            return self._runtime_source_lines()
        values = self._values(autoreset_mode=0, max_episode_steps=0, obs_kept=False)
        lines = []
        for name, slot in self.state.slots.items():
            if slot.block_local and shared_memory:
                lines += self._shared_lines(name, slot)
            elif slot.vector:
                lines.append(f"{name} = {slot.buffer}[{slot.row} : {slot.row + slot.length}]")
            else:
                lines.append(f"{name} = {slot.buffer}[{slot.row}]")
        for key, i in self.index.items():
            if ":" in key:
                continue
            if key in self.RUNTIME:
                lines.append(f"{key} = params_i64[{i}]")
            else:
                lines.append(f"{key} = {values[key]}")
        for name in self._float_scalars:
            lines.append(f"{name} = np.float32({float(np.float32(self.definition.constants[name]))!r})")
        for name in self._arrays:
            lines.append(f"{name} = _{name}")
        return lines

    def _shared_lines(self, name: str, slot: Slot) -> list[str]:
        """The block's shared array of agent array ``name`` (on a line of its own, which the CUDA simulator
        needs to tell shared arrays apart) and its view indexed as the buffers' rows are, ``[g, a]`` or
        ``[k, g, a]``, every ``g`` the block's one game."""
        shape = ([slot.length] if slot.vector else []) + [self.definition.num_agents]
        numba_dtype = str(_TORCH_DTYPE[slot.buffer]).removeprefix("torch.")
        # game_i64 holds the framework's game arrays, so that every kernel has it.
        view = f"with_game_axis(_local_{name}, game_i64.shape[1], {len(shape) - 1})"
        return [f"_local_{name} = cuda.shared.array({tuple(shape)!r}, numba.{numba_dtype})", f"{name} = {view}"]

    def module_lines(self) -> list[str]:
        """Module-level statements defining the array constants, for :meth:`source_lines` with ``literal=True``.

        Numba freezes module-level numpy arrays into the compiled kernel as constants.
        """
        lines = []
        for name, array in self._arrays.items():
            dtype = "np.float32" if array.dtype.kind == "f" else "np.int64"
            values = [float(np.float32(v)) for v in array] if array.dtype.kind == "f" else [int(v) for v in array]
            lines.append(f"_{name} = np.array({values!r}, dtype={dtype})")
        return lines

    def _runtime_source_lines(self) -> list[str]:
        lines = []
        for name, slot in self.state.slots.items():
            r = self.index[f"row:{name}"]
            if slot.vector:
                n = self.index[f"len:{name}"]
                lines.append(f"{name} = {slot.buffer}[params_i64[{r}] : params_i64[{r}] + params_i64[{n}]]")
            else:
                lines.append(f"{name} = {slot.buffer}[params_i64[{r}]]")
        for key, i in self.index.items():
            if ":" not in key:
                lines.append(f"{key} = params_i64[{i}]")
        for i, name in enumerate(self._float_scalars):
            lines.append(f"{name} = params_f32[{i}]")
        for name, array in self._arrays.items():
            source = "params_f32" if array.dtype.kind == "f" else "params_i64"
            s, n = self.index[f"start:{name}"], self.index[f"len:{name}"]
            lines.append(f"{name} = {source}[params_i64[{s}] : params_i64[{s}] + params_i64[{n}]]")
        return lines
