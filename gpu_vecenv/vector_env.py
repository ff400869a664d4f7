"""GpuVectorEnv: a Gymnasium 1.x ``VectorEnv`` over many multi-agent games stepped by one kernel.

Every agent of every game is one slot of the vector: slot ``g * num_agents + a``
is agent ``a`` of game ``g``, so ``num_envs == num_games * num_agents``. All
slots of a game end together. Observations, rewards and flags are torch
tensors on the env's device; ``step`` never copies to the host and never
synchronizes the device.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import error as gym_error
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from gpu_vecenv.arguments import is_integer
from gpu_vecenv.backends import CpuBackend, CudaBackend
from gpu_vecenv.codegen import DISABLED, NEXT_STEP, OP_RESET, OP_STEP, PENDING_RESET_CALL, SAME_STEP
from gpu_vecenv.definition import EnvDefinition
from gpu_vecenv.layout import ParamLayout, StateLayout
from gpu_vecenv.outputs import DIRECT_WRITE_BYTES, OutputArena, SlotOutputs, arena_bytes
from gpu_vecenv.reference_backend import ReferenceBackend
from gpu_vecenv.rendering import game_indices, state_of_games, tile_frames
from gpu_vecenv.shared import SIMULATOR
from gpu_vecenv.stream_ops import StreamOps

_MODE_CODE = {AutoresetMode.NEXT_STEP: NEXT_STEP, AutoresetMode.SAME_STEP: SAME_STEP, AutoresetMode.DISABLED: DISABLED}
_MAX_SEED = 2**63 - 1


def parse_autoreset_mode(value: AutoresetMode | str) -> AutoresetMode:
    """The mode ``value`` names: an ``AutoresetMode``, or its value or name in any case, with or without
    ``_``/``-`` (``"same_step"``, ``"SameStep"``)."""
    if isinstance(value, AutoresetMode):
        return value
    if isinstance(value, str):
        key = value.replace("_", "").replace("-", "").lower()
        for mode in AutoresetMode:
            if key in (mode.value.lower(), mode.name.replace("_", "").lower()):
                return mode
    raise ValueError(
        f"autoreset_mode must be an AutoresetMode or one of {[m.value for m in AutoresetMode]}, got {value!r}"
    )


def resolve_device(device: str | torch.device | None) -> torch.device:
    """The device an env asked for ``device`` runs on: ``None`` is the current CUDA device, else the CPU
    (with a warning); ``"cuda"`` gets its index. Raises ``ValueError`` for anything but a CPU or a visible
    CUDA device."""
    if device is None:
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        warnings.warn("gpu_vecenv: no CUDA device is available; using the CPU backend", stacklevel=4)
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be 'cpu' or 'cuda[:N]', got {device!r}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device={str(device)!r} was requested but torch sees no CUDA device")
        index = torch.cuda.current_device() if dev.index is None else dev.index
        if index >= torch.cuda.device_count():
            raise ValueError(f"device={str(device)!r}: only {torch.cuda.device_count()} CUDA device(s) are visible")
        return torch.device("cuda", index)
    if dev.type != "cpu":
        raise ValueError(f"device must be 'cpu' or 'cuda[:N]', got {str(device)!r}")
    return dev


def _host_tensor(array: np.ndarray) -> torch.Tensor:
    """A CPU tensor of ``array``'s values; copies only arrays torch cannot view (negative strides, big-endian)."""
    array = array.astype(array.dtype.newbyteorder("="), copy=False)
    return torch.from_numpy(array.copy() if any(step < 0 for step in array.strides) else array)


class GpuVectorEnv(VectorEnv):
    """A vector env of ``num_games`` games of ``definition``, every agent a slot.

    Args:
        definition: what to simulate (see :mod:`gpu_vecenv.definition`).
        num_games: number of independent games.
        device: ``"cuda"``, ``"cuda:N"`` or ``"cpu"``; default: CUDA when
            available, else the CPU with a notice.
        backend: ``"auto"`` (``cuda`` on a CUDA device; on the CPU ``cpu``, or
            ``reference`` for an env with a hand-written CUDA kernel),
            ``"cuda"``, ``"cpu"`` or ``"reference"`` (the numpy reference, one
            game at a time: slow, for tests). ``backend="cuda"`` with
            ``device="cpu"`` runs the CUDA kernel under Numba's simulator
            (``NUMBA_ENABLE_CUDASIM=1``; tiny sizes only).
        autoreset_mode: an :class:`AutoresetMode` (or its value string);
            ``NEXT_STEP`` by default.
        copy: ``True`` (default): every returned tensor is fresh and never
            changes afterwards (a device copy of the outputs, on a GPU made
            inside the step's CUDA graph). ``False``: ``step``/``reset`` return
            views of the env's output buffers, overwritten by the next call;
            read-only: entries the env knows to be unchanged since the call
            before may be left as they are (``obs_kept`` in
            :mod:`gpu_vecenv.definition`), so a value written into them can
            persist.
        strict: check action ranges at every ``step`` and raise before the
            launch; costs one device-to-host sync per step. Otherwise an
            out-of-range action index acts as index 0 (WarpTag-v0's no-op)
            and is reported by the next explicit ``reset`` (autoresets do not
            report it).
        max_episode_steps: truncate games after this many steps (``None``:
            no truncation besides the env's own end).
        render_mode: ``None`` or ``"rgb_array"``.
        threads_per_block: CUDA threads per game (default: the definition's
            ``threads_per_block``, else agents rounded up to a warp, at most
            256); extra agents are covered by a stride loop.
        cuda_graphs: replay each launch from a captured CUDA graph (default
            ``True``; the graph launches on the current stream, like the kernel).
        direct_write_bytes: with ``copy=True``, outputs of at least this many
            bytes a launch (every game's ``obs``, ``rewards``, flags and, in
            SAME_STEP mode, ``final_obs``) are written by the kernel straight
            into the fresh tensors, instead of into the env's buffers and then
            copied: no device copy, and no output buffer of the env's own. On
            the ``cuda`` backend a generated kernel finds each launch's fresh
            tensors through a small device array the host writes once a batch
            of them, so the launch keeps its arguments (a CUDA graph replay),
            where a batch holds several; outputs that fill a batch alone, a
            hand-written ``cuda_kernel`` and the CPU backend take them as new
            arguments of an eager launch. Every launch must then write every
            output entry (``python -m gpu_vecenv.check`` checks a generated
            kernel for it). ``None``: the device's default
            (:data:`gpu_vecenv.outputs.DIRECT_WRITE_BYTES`: always on a GPU),
            or never for a hand-written ``cuda_kernel``; ``0``: always. Not
            used by the reference backend.
    """

    OPTIONS = frozenset(
        {"device", "backend", "autoreset_mode", "copy", "strict", "max_episode_steps", "render_mode",
         "threads_per_block", "cuda_graphs", "direct_write_bytes"}
    )  # fmt: skip

    def __init__(
        self,
        definition: EnvDefinition,
        num_games: int,
        *,
        device: str | torch.device | None = None,
        backend: str = "auto",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        copy: bool = True,
        strict: bool = False,
        max_episode_steps: int | None = None,
        render_mode: str | None = None,
        threads_per_block: int | None = None,
        cuda_graphs: bool = True,
        direct_write_bytes: int | None = None,
    ) -> None:
        name = definition.name
        if not is_integer(num_games, 1):
            raise ValueError(f"{name}: num_envs (the number of games) must be an integer >= 1, got {num_games!r}")
        if max_episode_steps is not None and not is_integer(max_episode_steps, 1):
            raise ValueError(f"{name}: max_episode_steps must be None or an integer >= 1, got {max_episode_steps!r}")
        if direct_write_bytes is not None and not is_integer(direct_write_bytes, 0):
            raise ValueError(f"{name}: direct_write_bytes must be None or an integer >= 0, got {direct_write_bytes!r}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"{name}: render_mode must be None or 'rgb_array', got {render_mode!r}")
        # Checked on every backend, though only the CUDA kernel uses it: a bad value is a bug wherever it runs.
        if threads_per_block is not None and not is_integer(threads_per_block, 1, 1024):
            raise ValueError(f"{name}: threads_per_block must be an integer in [1, 1024], got {threads_per_block!r}")
        self.definition = definition
        self.device = resolve_device(device)
        self.backend = self._resolve_backend(backend)
        mode = parse_autoreset_mode(autoreset_mode)
        self.metadata = {"autoreset_mode": mode, "render_modes": ["rgb_array"]}
        self.autoreset_mode = mode
        self.render_mode = render_mode
        self.render_games: int | list[int] = [0]  # the games render() draws, tiled; see render()
        self.render_options: dict[str, Any] = {}  # keyword arguments of the env's render hook
        self.copy = bool(copy)
        self.strict = bool(strict)
        self.max_episode_steps = max_episode_steps

        self.num_games = int(num_games)
        self.num_agents = definition.num_agents
        self.num_envs = self.num_games * self.num_agents
        self.single_observation_space = definition.observation_space or spaces.Box(
            -np.inf, np.inf, (definition.obs_dim,), np.float32
        )
        if definition.discrete_actions:
            self.single_action_space: spaces.Space = spaces.Discrete(int(definition.action_nvec[0]))
        else:
            self.single_action_space = spaces.MultiDiscrete(np.asarray(definition.action_nvec, np.int64))
        self._batched_spaces: dict[str, spaces.Space] = {}

        # Whether each launch writes a fresh set of outputs itself (see the direct_write_bytes option). Not by
        # default for a hand-written kernel: that every launch writes every output cannot be checked on the CPU.
        if direct_write_bytes is None:
            direct_write_bytes = DIRECT_WRITE_BYTES[self.device.type] if definition.cuda_kernel is None else None
        self._direct_write = (
            self.copy
            and self.backend != "reference"
            and direct_write_bytes is not None
            and arena_bytes(self.num_games, self.num_agents, definition.obs_dim, mode is AutoresetMode.SAME_STEP)
            >= direct_write_bytes
        )
        # A generated CUDA kernel keeps the block-local arrays in shared memory: their rows would be dead weight.
        self._layout = StateLayout(
            definition, block_local_rows=not (self.backend == "cuda" and definition.cuda_kernel is None)
        )
        self._check_memory()
        self._buffers = self._layout.allocate(self.num_games, self.device)
        self._views = self._layout.views(self._buffers)
        if definition.setup is not None:
            definition.setup(self._views)
        # Without direct writes every launch writes the env's own output buffer (copy=True copies it out).
        self._params = ParamLayout(definition).pack(_MODE_CODE[mode], int(max_episode_steps or 0),
                                                    not self._direct_write, self.device)  # fmt: skip
        self._nvec = torch.as_tensor(definition.action_nvec, dtype=torch.int64, device=self.device)
        num_actions = len(definition.action_nvec)
        self._actions = torch.zeros((self.num_games, self.num_agents, num_actions), dtype=torch.int64,
                                    device=self.device)  # fmt: skip
        # The accepted action shapes, slot-major first, each with its view of the buffer, made once: a view
        # costs microseconds of host time, and step() is host-bound on small envs.
        if definition.discrete_actions:
            shapes = [(self.num_envs,), (self.num_games, self.num_agents)]
        else:
            shapes = [(self.num_envs, num_actions), (self.num_games, self.num_agents, num_actions)]
        self._action_views = {shape: self._actions.view(shape) for shape in shapes}
        self._actions_address = self._actions.data_ptr()
        self._stream_ops = StreamOps(self.device)
        same_step = mode is AutoresetMode.SAME_STEP
        # Such an env's arena has no buffer of its own: it would be as large as a step's outputs, never written.
        self._arena = OutputArena(self.num_games, self.num_agents, definition.obs_dim, same_step, self.device,
                                  own_buffer=not self._direct_write)  # fmt: skip
        # A generated CUDA kernel writes fresh outputs into the slot a device ring names (its second form,
        # gpu_vecenv.codegen), so that each launch takes the same arguments: a graph replay, no host arguments.
        # Not at one slot a batch (large outputs): the host would write the ring before every launch, which cost
        # 5-7 us of device time a step at 2000 games of 10+100 (benchmarks/results/h100_2026-12-06h/), more
        # than the launch with the slot's pointers costs there (host time, hidden behind the large step's kernel).
        self._writes_ring = (
            self._direct_write
            and self.backend == "cuda"
            and definition.cuda_kernel is None
            and self._arena.slots_per_batch > 1
        )
        if self.backend == "cuda":
            self._backend: CpuBackend | CudaBackend | ReferenceBackend = CudaBackend(
                definition,
                self._buffers,
                self._params,
                self._actions,
                self._arena.kernel,
                threads_per_block,
                cuda_graphs,
                ring=self._arena.ring() if self._writes_ring else None,
            )
        elif self.backend == "reference":
            self._backend = ReferenceBackend(
                definition,
                self._views,
                self._actions,
                self._arena.kernel,
                _MODE_CODE[mode],
                int(max_episode_steps or 0),
            )
        else:
            self._backend = CpuBackend(definition, self._buffers, self._params, self._actions, self._arena.kernel)
        self._all_true = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self.roles = {role: torch.as_tensor(ids, dtype=torch.int64, device=self.device)
                      for role, ids in definition.roles.items()}  # fmt: skip
        self._seed_games(self._fresh_entropy(), torch.ones(self.num_games, dtype=torch.bool, device=self.device))
        self._needs_reset = True

    @property
    def action_buffer(self) -> torch.Tensor:
        """The env's own actions, ``(num_envs, components)`` int64 (``(num_envs,)`` for ``Discrete`` actions) on
        the env's device, which every launch reads.

        ``step`` copies the actions it is given into this tensor. Actions written into it in place (a sampler's
        ``out=``, ``copy_``, ``random_``) and then passed to ``step`` as this tensor, or as its
        ``(num_games, num_agents, ...)`` view, are not copied: one device copy less a step, and its host time,
        as WarpDrive's policies write their actions into its data manager's arrays. Values are checked as any
        others (out-of-range ones are reported at the next ``reset``, or refused at once with ``strict=True``).
        Written on another stream than the env's, it needs the same ordering as any tensor: a step reads it on
        the current stream.
        """
        self._check_open()
        return self._action_views[next(iter(self._action_views))]

    @property
    def direct_write(self) -> bool:
        """Whether each launch writes a fresh set of outputs itself (``copy=True`` and outputs of at least
        ``direct_write_bytes``); fixed when the env is made, since the env then keeps no output buffer."""
        return self._direct_write

    # Gymnasium's batched Box stores bounds for every slot (gigabytes for millions of agents), so the batched
    # spaces are made on first use only.
    @property
    def observation_space(self) -> spaces.Space:
        """``Box`` of shape ``(num_envs, obs_dim)``, made on first access."""
        if "obs" not in self._batched_spaces:
            self._batched_spaces["obs"] = batch_space(self.single_observation_space, self.num_envs)
        return self._batched_spaces["obs"]

    @observation_space.setter
    def observation_space(self, space: spaces.Space) -> None:
        self._batched_spaces["obs"] = space

    @property
    def action_space(self) -> spaces.Space:
        """The per-slot action space batched over ``num_envs``, made on first access."""
        if "action" not in self._batched_spaces:
            self._batched_spaces["action"] = batch_space(self.single_action_space, self.num_envs)
        return self._batched_spaces["action"]

    @action_space.setter
    def action_space(self, space: spaces.Space) -> None:
        self._batched_spaces["action"] = space

    # -- construction helpers -------------------------------------------------
    def _resolve_backend(self, backend: str) -> str:
        name = self.definition.name
        hand_written = self.definition.cuda_kernel is not None
        if backend == "auto":
            if SIMULATOR:
                return "cuda"
            if self.device.type == "cuda":
                return "cuda"
            return "reference" if hand_written else "cpu"
        if backend in ("cpu", "reference"):
            if self.device.type != "cpu":
                raise ValueError(f"{name}: backend={backend!r} needs device='cpu', got device={str(self.device)!r}")
            if backend == "cpu" and hand_written:
                raise ValueError(
                    f"{name}: this env has a hand-written CUDA kernel and no CPU kernel; "
                    "use backend='reference' (its numpy reference) on the CPU"
                )
            return backend
        if backend == "cuda":
            if self.device.type == "cpu" and not SIMULATOR:
                raise ValueError(
                    f"{name}: backend='cuda' with device='cpu' runs only under the CUDA simulator "
                    "(NUMBA_ENABLE_CUDASIM=1); use device='cuda' or backend='cpu'"
                )
            if self.device.type == "cuda" and SIMULATOR:
                raise ValueError(f"{name}: under the CUDA simulator, use device='cpu' with backend='cuda'")
            return backend
        raise ValueError(f"{name}: backend must be 'auto', 'cuda', 'cpu' or 'reference', got {backend!r}")

    def _output_bytes_per_game(self) -> int:
        d = self.definition
        per_agent_out = 4 * d.obs_dim * (2 if self.autoreset_mode is AutoresetMode.SAME_STEP else 1) + 4 + 4
        return d.num_agents * per_agent_out

    def memory_per_game(self) -> int:
        """Bytes of device memory one game takes: state, actions and one set of outputs (the env's own; where
        the kernel writes each step's fresh outputs itself, ``direct_write``, the set it writes)."""
        d = self.definition
        return self._layout.bytes_per_game() + self._output_bytes_per_game() + d.num_agents * 8 * len(d.action_nvec)

    def _check_memory(self) -> None:
        # With copy=True every step hands out a fresh set of outputs: room for one is needed besides the env's,
        # unless the kernel writes the fresh set itself and the env keeps none of its own.
        extra_outputs = self.copy and not self._direct_write
        per_game = self.memory_per_game() + (self._output_bytes_per_game() if extra_outputs else 0)
        need = per_game * self.num_games
        if self.device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(self.device)
        else:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        if need > 0.9 * free:
            raise MemoryError(
                f"{self.definition.name}: {self.num_games} games need about {need / 2**30:.2f} GiB "
                f"({per_game} bytes per game{', with copy=True' if self.copy else ''}) but only "
                f"{free / 2**30:.2f} GiB is free on {self.device}"
            )

    # -- seeding ----------------------------------------------------------------
    @staticmethod
    def _fresh_entropy() -> int:
        entropy = np.random.SeedSequence().entropy
        assert isinstance(entropy, int)
        return entropy % (2**62)

    def _seeds_for(self, seed: int | Sequence[int | None]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(seeds, seeded)``: int64 ``(num_games,)`` seeds on the host, and bool ``(num_games,)``, False for a
        game whose entry of a seed list is None (it keeps its stream, as Gymnasium's sub-envs do)."""
        name, g = self.definition.name, self.num_games
        if isinstance(seed, (bool, np.bool_)):
            raise TypeError(f"{name}: seed must be an int, a list of ints and Nones, or None, got {seed!r}")
        if isinstance(seed, (int, np.integer)):
            if not 0 <= int(seed) <= _MAX_SEED - (g - 1):
                raise ValueError(f"{name}: seed must be in [0, 2**63 - num_games], got {seed}")
            return int(seed) + torch.arange(g, dtype=torch.int64), torch.ones(g, dtype=torch.bool)
        if isinstance(seed, (list, tuple, np.ndarray)):
            values = list(seed)
            if len(values) == self.num_envs and self.num_envs != g:
                per_game = [values[i * self.num_agents : (i + 1) * self.num_agents] for i in range(g)]
                if any(len(set(p)) != 1 for p in per_game):
                    raise ValueError(
                        f"{name}: a seed list of length num_envs must repeat one seed for all agents of a game"
                    )
                values = [p[0] for p in per_game]
            if len(values) != g:
                raise ValueError(
                    f"{name}: a seed list needs one seed per game ({g}), or per slot ({self.num_envs}); "
                    f"got {len(values)}"
                )
            for v in values:
                if v is not None and not is_integer(v, 0, _MAX_SEED):
                    raise ValueError(f"{name}: every seed must be an int in [0, 2**63) or None, got {v!r}")
            seeds = torch.tensor([0 if v is None else int(v) for v in values], dtype=torch.int64)
            return seeds, torch.tensor([v is not None for v in values], dtype=torch.bool)
        raise TypeError(f"{name}: seed must be an int, a list of ints and Nones, or None, got {type(seed).__name__}")

    def _seed_games(self, seeds: int | torch.Tensor, game_mask: torch.Tensor) -> None:
        if isinstance(seeds, int):
            seeds = seeds + torch.arange(self.num_games, dtype=torch.int64)
        seeds = seeds.to(self.device)
        self._views["seed"].copy_(torch.where(game_mask, seeds, self._views["seed"]))
        # The reset kernel counts resets from -1, so the first reset after seeding is episode 0.
        self._views["episode"].masked_fill_(game_mask, -1)

    # -- actions ------------------------------------------------------------------
    def _load_actions(self, actions: Any) -> None:
        name = self.definition.name
        if isinstance(actions, torch.Tensor):
            if actions.device != self.device:
                raise ValueError(
                    f"{name}: actions are on {actions.device} but the env is on {self.device}; "
                    f"move them with .to({str(self.device)!r}) (numpy arrays are copied automatically)"
                )
            tensor, on_device = actions, True
        else:
            array = np.asarray(actions)
            if array.dtype.kind not in "iu":
                raise TypeError(
                    f"{name}: actions must have an integer dtype (MultiDiscrete indices), got {array.dtype} "
                    f"({type(actions).__name__})"
                )
            tensor, on_device = _host_tensor(array), False
        if tensor.dtype == torch.bool or tensor.is_floating_point() or tensor.is_complex():
            raise TypeError(f"{name}: actions must have an integer dtype (MultiDiscrete indices), got {tensor.dtype}")
        target = self._action_views.get(tensor.shape)
        if target is None:
            layout = "(games, agents)" if self.definition.discrete_actions else "(games, agents, components)"
            expected = list(self._action_views)
            raise ValueError(
                f"{name}: actions must have shape {expected[0]} (one per slot) or {expected[1]} "
                f"{layout}, got {tuple(tensor.shape)}"
            )
        if self.strict:
            # Checked before the buffer is written: a refused step leaves every buffer as it was.
            values = tensor.to(self.device, torch.int64).reshape(self._actions.shape)
            self._raise_if_out_of_range(values)
            self._actions.copy_(values)
        elif on_device and tensor.dtype == torch.int64 and tensor.is_contiguous():
            # Actions written into action_buffer in place are there already (the same bytes: the same address,
            # one of its shapes, contiguous); else the common case, actions drawn on the env's device, a plain
            # byte copy, cheaper in host time.
            if tensor.data_ptr() != self._actions_address:
                self._stream_ops.copy(target, tensor)
        else:
            target.copy_(tensor)

    def _raise_if_out_of_range(self, values: torch.Tensor) -> None:
        bad = (values < 0) | (values >= self._nvec)
        if bool(bad.any()):
            g, a, k = (int(i) for i in bad.nonzero()[0])
            value = int(values[g, a, k])
            raise ValueError(self._range_message(g, a, k, value, "this step (strict=True); nothing was stepped"))

    def _range_message(self, g: int, a: int, k: int, value: int | str, when: str) -> str:
        return (
            f"{self.definition.name}: action component {k} of slot {g * self.num_agents + a} "
            f"(game {g}, agent {a}) was {value}, expected 0 <= value < {self.definition.action_nvec[k]}; "
            f"seen at {when}"
        )

    def _raise_pending_action_errors(self) -> None:
        errors = self._views["action_error"]
        flagged = errors[0] != 0
        if bool(flagged.any()):
            g, a = (int(i) for i in flagged.nonzero()[0])
            k, value, count = int(errors[0, g, a]) - 1, int(errors[1, g, a]), int(flagged.sum())
            errors.zero_()
            # The kernel records values clamped to int32.
            shown = {2**31 - 1: f"{value} or more", -(2**31): f"{value} or less"}.get(value, value)
            raise ValueError(
                self._range_message(g, a, k, shown, "an earlier step")
                + f"; {count} slot(s) had out-of-range actions, which acted as index 0. "
                "The env was not reset; call reset() again to go on, or pass strict=True to raise at the step."
            )

    def _raise_if_ring_missed(self) -> None:
        if not (self.copy and isinstance(self._backend, CudaBackend) and self._backend.ring_missed()):
            return
        self._arena.forget_ring()  # written again at the next launch
        raise RuntimeError(
            f"{self.definition.name}: a launch since the last reset found no fresh output slot named in the "
            "device ring that copy=True steps write through, and wrote nothing: the outputs it returned are "
            "uninitialized memory, and the games were not stepped. This is a bug of gpu_vecenv; please report "
            "it. The env was not reset; call reset() again to go on."
        )

    # -- Gymnasium API ------------------------------------------------------------
    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"{self.definition.name}: the env is closed; make a new one")

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset all games (or those of ``options["reset_mask"]``) and return ``(obs, infos)``.

        ``seed``: an int ``s`` seeds game ``g`` with ``s + g`` (and, as Gymnasium's
        ``VectorEnv.reset`` does, :attr:`np_random` with ``s``); a list gives one
        seed per game (or per slot, equal within a game), where ``None`` keeps
        that game's stream going; ``None`` keeps every game's stream going. Env
        specific options (e.g. Tag's ``initial_positions``) go in ``options``.
        ``reset_mask``: bool of shape ``(num_envs,)`` (equal within a game) or
        ``(num_games,)``; games outside it keep their state, and
        ``infos["_active"]`` is True only for the slots of the games reset.
        """
        self._check_open()
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(f"{self.definition.name}: options must be a dict or None, got {type(options).__name__}")
        options = dict(options or {})
        masked = options.get("reset_mask") is not None
        game_mask = self._game_mask(options.pop("reset_mask", None))
        seeds = self._seeds_for(seed) if seed is not None else None
        unknown = set(options) - set(self.definition.reset_option_names)
        if unknown:
            raise ValueError(
                f"{self.definition.name}: unknown reset option(s) {sorted(unknown)}; "
                f"known: {sorted({'reset_mask', *self.definition.reset_option_names})}"
            )
        self._raise_pending_action_errors()
        self._raise_if_ring_missed()
        if self.definition.reset_options is not None:
            self.definition.reset_options(self._views, options, game_mask)
        if isinstance(self._backend, ReferenceBackend):
            self._backend.set_reset_options(options, game_mask)
        if seeds is not None:
            game_seeds, seeded = seeds
            self._seed_games(game_seeds, game_mask & seeded.to(self.device))
        if isinstance(seed, (int, np.integer)):  # bools were refused by _seeds_for
            self._np_random, self._np_random_seed = seeding.np_random(int(seed))
        self._views["pending_reset"].masked_fill_(game_mask, PENDING_RESET_CALL)
        out = self._launch(OP_RESET)
        self._needs_reset = False
        reset_slots = game_mask.repeat_interleave(self.num_agents) if masked else self._all_true
        return out.obs, {"active": out.active, "_active": reset_slots}

    def _launch(self, op: int) -> SlotOutputs:
        """Run ``op`` on every game and return its outputs (fresh ones with ``copy=True``)."""
        if self._writes_ring:
            out = self._arena.ring_slot()
            try:
                self._backend.launch(op)
            except BaseException:
                self._arena.forget_ring()  # the launch may or may not have moved the ring on
                raise
            if op == OP_RESET:
                self._backend.capture((OP_STEP, OP_RESET))
            return out
        if self.direct_write:
            assert not isinstance(self._backend, ReferenceBackend)  # direct_write is off there
            out, row = self._arena.fresh_for_kernel()
            self._backend.launch_into(op, self._arena, row)
            return out
        if self.copy:
            # On a GPU, once captured: one graph replay that also copies the outputs into a fresh slot.
            copied = self._backend.launch_copying(op, self._arena)
            if copied is not None:
                return copied
        self._backend.launch(op)
        if op == OP_RESET:
            self._backend.capture((OP_STEP, OP_RESET), self._arena if self.copy else None)
        return self._arena.results(self.copy)

    def _game_mask(self, mask: Any) -> torch.Tensor:
        name = self.definition.name
        if mask is None:
            return torch.ones(self.num_games, dtype=torch.bool, device=self.device)
        tensor = mask if isinstance(mask, torch.Tensor) else _host_tensor(np.asarray(mask))
        if tensor.dtype != torch.bool:
            raise TypeError(f"{name}: reset_mask must be a bool array, got dtype {tensor.dtype}")
        tensor = tensor.to(self.device)
        if tuple(tensor.shape) == (self.num_envs,):
            per_game = tensor.view(self.num_games, self.num_agents)
            if bool((per_game != per_game[:, :1]).any()):
                raise ValueError(f"{name}: reset_mask must be equal for all agents of a game (games reset whole)")
            tensor = per_game[:, 0]
        elif tuple(tensor.shape) != (self.num_games,):
            raise ValueError(
                f"{name}: reset_mask must have shape ({self.num_envs},) or ({self.num_games},), "
                f"got {tuple(tensor.shape)}"
            )
        # Unlike SyncVectorEnv, an all-False mask is an empty reset, not an error: a loop that resets "the games
        # that ended" may find none, and telling would cost a GPU mask a host sync.
        return tensor.clone()

    def step(self, actions: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step every game once; returns ``(obs, rewards, terminated, truncated, infos)``.

        ``actions``: integer tensor on the env's device or numpy array, shape
        ``(num_envs, components)`` or ``(num_games, num_agents, components)``.
        Returns ``obs (num_envs, obs_dim) float32``, ``rewards (num_envs,)
        float32``, ``terminated``/``truncated (num_envs,) bool``, all on the
        env's device, and ``infos["active"] (num_envs,) bool``: whether the
        slot's agent was in its game during this step.
        """
        self._check_open()
        if self._needs_reset:
            raise gym_error.ResetNeeded(f"{self.definition.name}: call reset() before step()")
        self._load_actions(actions)
        out = self._launch(OP_STEP)
        infos: dict[str, Any] = {"active": out.active, "_active": self._all_true}
        if out.final_obs is not None:
            infos["final_obs"] = out.final_obs
            infos["_final_obs"] = out.done
            infos["final_info"] = {"active": out.final_active, "_active": out.done}
            infos["_final_info"] = out.done
        return out.obs, out.rewards, out.terminated, out.truncated, infos

    # Gymnasium's VectorEnv.render returns a tuple of frames, one per sub-env; with thousands of agent
    # slots per env that is not useful, so this returns one image of the chosen games (what a
    # video recorder expects from a single env).
    def render(self) -> np.ndarray | None:  # type: ignore[override]
        """With ``render_mode="rgb_array"``, one uint8 image ``(H, W, 3)`` of the games in ``render_games``.

        ``render_games`` (default ``[0]``) is a game index or a list of them;
        several games are tiled row by row in a grid of ``ceil(sqrt(n))``
        columns (:func:`gpu_vecenv.rendering.tile_frames`). The env's
        ``render`` hook draws each game from a host copy of its state (one
        device-to-host transfer per call), with ``render_options`` as keyword
        arguments. Returns ``None`` when ``render_mode`` is ``None``.
        """
        if self.render_mode is None:
            return None
        self._check_open()
        name = self.definition.name
        if self.definition.render is None:
            raise NotImplementedError(f"{name}: this env's definition has no render hook; it cannot draw frames")
        games = game_indices(self.render_games, self.num_games, name)
        state = state_of_games(self._layout, self._buffers, games)
        return tile_frames(self.definition.render(state, **self.render_options), name)

    def close_extras(self, **kwargs: Any) -> None:
        """Release every buffer; the memory returns to torch's allocator."""
        if hasattr(self, "_backend") and isinstance(self._backend, CudaBackend):
            self._backend.close()
        for attr in ("_buffers", "_views", "_params", "_actions", "_action_views", "_backend", "_arena", "_all_true"):
            if hasattr(self, attr):
                delattr(self, attr)

    # -- multi-agent view -----------------------------------------------------------
    def per_game(self, tensor: torch.Tensor) -> torch.Tensor:
        """View a slot-major tensor ``(num_envs, ...)`` as ``(num_games, num_agents, ...)`` (no copy)."""
        return tensor.view(self.num_games, self.num_agents, *tensor.shape[1:])

    @property
    def state(self) -> dict[str, torch.Tensor]:
        """Live named views of the state: ``x`` is ``(games, agents)``; writing them changes the games.

        On the CUDA backend the block-local arrays (scratch of one launch, kept
        in the block's shared memory) have no views."""
        self._check_open()
        return self._views

    def __repr__(self) -> str:
        return (
            f"GpuVectorEnv({self.definition.name}, num_games={self.num_games}, num_agents={self.num_agents}, "
            f"device={self.device}, backend={self.backend}, autoreset_mode={self.autoreset_mode.value})"
        )
