"""Packing named state arrays into the few buffers a kernel takes.

Eight packed buffers, one per scope and dtype, hold the whole state of all
games: ``agent_f32``, ``agent_f64``, ``agent_i32``, ``agent_i64`` of shape
``(rows, games, agents)`` and ``game_f32``, ``game_f64``, ``game_i32``,
``game_i64`` of shape ``(rows, games)``.

An array of length ``L`` takes ``L`` consecutive rows. Every buffer has at
least one row, so kernels always take the same arguments.
"""

from __future__ import annotations

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
    """Where one named array lives: its buffer, first row and length; ``vector``: it keeps its leading axis."""

    buffer: str
    row: int
    length: int
    vector: bool

    @property
    def index(self) -> str:
        """The buffer index that selects this array, as source text: ``"3"`` or ``"3:5"``."""
        return f"{self.row}:{self.row + self.length}" if self.vector else str(self.row)


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
    """Row assignment of every state array of one definition."""

    def __init__(self, definition: EnvDefinition) -> None:
        self.definition = definition
        self.slots: dict[str, Slot] = {}
        self.rows = dict.fromkeys(BUFFERS, 0)
        for arr in framework_arrays(definition) + tuple(definition.state):
            buffer = _BUFFER_OF[(arr.per, arr.dtype)]
            self.slots[arr.name] = Slot(buffer, self.rows[buffer], arr.length, arr.vector or arr.length > 1)
            self.rows[buffer] += arr.length

    def allocate(self, num_games: int, device: torch.device) -> dict[str, torch.Tensor]:
        """Zeroed packed buffers for ``num_games`` games on ``device``."""
        n = self.definition.num_agents
        out = {}
        for name in BUFFERS:
            rows = max(1, self.rows[name])
            shape = (rows, num_games, n) if name.startswith("agent") else (rows, num_games)
            out[name] = torch.zeros(shape, dtype=_TORCH_DTYPE[name], device=device)
        return out

    def views(self, buffers: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Named torch views into ``buffers``: ``(games, agents)`` or ``(length, games, agents)`` and alike."""
        out = {}
        for name, slot in self.slots.items():
            buf = buffers[slot.buffer]
            out[name] = buf[slot.row : slot.row + slot.length] if slot.vector else buf[slot.row]
        return out

    def bytes_per_game(self) -> int:
        """State bytes one game takes (outputs not counted)."""
        n = self.definition.num_agents
        total = 0
        for name in BUFFERS:
            per_row = (n if name.startswith("agent") else 1) * _TORCH_DTYPE[name].itemsize
            total += max(1, self.rows[name]) * per_row
        return total


class ParamLayout:
    """Where each constant sits in the two parameter arrays a kernel takes.

    ``params_i64`` starts with the framework's integers (``num_agents``, the
    autoreset mode, ``max_episode_steps`` and the action sizes ``nvec0...``),
    then the env's integer constants; ``params_f32`` holds the env's float
    constants. A constant given as a sequence becomes a 1-D array view.
    """

    FRAMEWORK = ("num_agents", "autoreset_mode", "max_episode_steps", "agent_order")

    def __init__(self, definition: EnvDefinition) -> None:
        self.definition = definition
        i64 = list(self.FRAMEWORK) + [f"nvec{k}" for k in range(len(definition.action_nvec))]
        f32: list[str] = []
        # name -> (array, first index, length or 0 for a scalar)
        self.slots: dict[str, tuple[str, int, int]] = {name: ("params_i64", i, 0) for i, name in enumerate(i64)}
        self._f32_values: list[float] = []
        self._i64_extra: list[str] = []
        for name, value in definition.constants.items():
            values = np.asarray(value)
            is_float = values.dtype.kind == "f"
            length = 0 if values.ndim == 0 else values.size
            if is_float:
                self.slots[name] = ("params_f32", len(f32), length)
                f32.extend([name] * max(1, length))
            else:
                self.slots[name] = ("params_i64", len(i64), length)
                i64.extend([name] * max(1, length))
        self.i64_names = tuple(i64)
        self.f32_names = tuple(f32)

    def pack(
        self, autoreset_mode: int, max_episode_steps: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``(params_f32, params_i64)`` tensors for one env instance."""
        d = self.definition
        values: dict[str, object] = dict(d.constants)
        values.update(num_agents=d.num_agents, autoreset_mode=autoreset_mode, max_episode_steps=max_episode_steps,
                      agent_order=0)  # fmt: skip
        values.update({f"nvec{k}": int(n) for k, n in enumerate(d.action_nvec)})
        f32 = np.zeros(max(1, len(self.f32_names)), np.float32)
        i64 = np.zeros(len(self.i64_names), np.int64)
        for name, (array, start, length) in self.slots.items():
            target = f32 if array == "params_f32" else i64
            target[start : start + max(1, length)] = np.ravel(np.asarray(values[name]))
        return torch.from_numpy(f32).to(device), torch.from_numpy(i64).to(device)

    def source_lines(self) -> list[str]:
        """Kernel statements that bind every constant to its name."""
        lines = []
        for name, (array, start, length) in self.slots.items():
            index = str(start) if length == 0 else f"{start}:{start + length}"
            lines.append(f"{name} = {array}[{index}]")
        return lines
