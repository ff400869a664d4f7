"""Generate, cache and load the one kernel that steps and resets an env.

From an :class:`~gpu_vecenv.definition.EnvDefinition` this module writes the
source of a Python module holding one function ``run`` with the signature::

    run(agent_f32, agent_f64, agent_i32, agent_i64, game_f32, game_f64,
        game_i32, game_i64, params_f32, params_i64, actions_in, obs, rewards,
        flags, final_obs, op)

for one of two targets: ``"cuda"`` (a ``numba.cuda.jit`` kernel, one block
per game, a stride loop over agents, ``cuda.syncthreads()`` between phases)
or ``"cpu"`` (a ``numba.njit(parallel=True)`` function, ``prange`` over
games, plain loops over agents). Both call the same phase functions. ``op`` is
:data:`OP_STEP` or :data:`OP_RESET`.

The ``"cuda"`` target has a second form, ``ring_games=G``, for an env of
``G`` games whose every launch writes a fresh set of outputs (``copy=True``): ``obs``,
``rewards``, ``flags`` and ``final_obs`` give way to ``ring`` and
``ring_missed`` (:data:`RING_KERNEL_ARGS`). Each launch makes its output
arrays at the address ``ring[1 + ring[0]]``, laid out as
:class:`~gpu_vecenv.outputs.OutputArena` lays out a slot; a launch that finds
no address there writes nothing and sets ``ring_missed[0]``. A kernel of one
thread launched after it (:func:`gpu_vecenv.slot_copy.advance_kernel`, a node
of the same CUDA graph) adds one to ``ring[0]``: by then every block has read
it, with no count of finished blocks (whose atomics, one a block, kept many
small blocks waiting). The arguments never change, so a CUDA graph of both
writes a new slot at each replay, where the host has written the slots'
addresses (:meth:`~gpu_vecenv.outputs.OutputArena.ring_slot`). The number of
games is a literal of that form (one compiled kernel per number of games).

The module is written once into a cache directory (``GPU_VECENV_CACHE_DIR``,
by default ``~/.cache/gpu_vecenv``) under a name that hashes the generated
text and the sources of the package and of the env's phase modules, then
imported; Numba's own on-disk cache then makes later processes skip
compilation. Editing any of those sources yields a new file name, so a stale
kernel is never loaded.

``GPU_VECENV_LINEINFO=1`` in the environment asks for line information
(``lineinfo=True``), so that a profile's instructions can be given their lines
of the generated module and of the phase functions it calls. Numba files the
inlined phases' lines under the generated module's name with their own modules'
numbers, so with line information the kernel's body starts at line
:data:`KERNEL_BODY_FIRST_LINE_WITH_LINEINFO`, past any phase module's last
line: a number below it is a phase module's line. (The driver that compiles
the PTX on a GPU keeps no line table, so ``benchmarks/ncu_sass_lines.py``
compiles the same module here and matches the instructions.) The generated
text differs, so such a kernel is cached apart from the plain one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from gpu_vecenv.definition import EnvDefinition, Phase
from gpu_vecenv.layout import BUFFERS, ParamLayout
from gpu_vecenv.shared import SIMULATOR, lineinfo_requested

OP_STEP = 0
OP_RESET = 1
# With GPU_VECENV_LINEINFO=1, the line the kernel's body starts at.
KERNEL_BODY_FIRST_LINE_WITH_LINEINFO = 10001


# Values of a game's pending_reset flag: set by a step that ended the game in NEXT_STEP mode (the next step
# resets it), or by reset() for the games of its mask (only an OP_RESET launch resets those).
PENDING_AUTORESET = 1
PENDING_RESET_CALL = 2
# Values of params_i64[1]; gymnasium's AutoresetMode maps onto them.
NEXT_STEP, SAME_STEP, DISABLED = 0, 1, 2

KERNEL_ARGS = ", ".join(BUFFERS) + ", params_f32, params_i64, actions_in, obs, rewards, flags, final_obs, op"
RING_KERNEL_ARGS = ", ".join(BUFFERS) + ", params_f32, params_i64, actions_in, ring, ring_missed, op"
_PACKAGE_DIR = Path(__file__).resolve().parent


class KernelCompileError(TypeError):
    """The phases of an env do not compile for a backend."""

    def __init__(self, definition: EnvDefinition, target: str, cause: BaseException) -> None:
        # Numba colours its messages for a terminal; in an exception's text the escape codes are noise.
        said = re.sub(r"\x1b\[[0-9;]*m", "", str(cause))
        super().__init__(
            f"env {definition.name!r}: its phases do not compile for the {target} backend. Numba said:\n{said}\n"
            "(Every function a phase calls must be decorated with @gpu_vecenv.shared, and phases may use only numpy "
            "scalars, math, array indexing, gpu_vecenv.paired_store and gpu_vecenv.distance_keys: no numba.cuda, no "
            "allocation, no Python objects. An agent array is indexed [g, a], a game array [g], and an array of "
            "length above 1 [k, g, a] or [k, g].)"
        )


class _Writer:
    def __init__(self, target: str, params: ParamLayout | None = None) -> None:
        self.target = target
        self.params = params  # needed by the CPU target's loop bounds
        self.lines: list[str] = []
        self.depth = 0

    def bound(self, key: str, value: int) -> str:
        """The loop bound ``value`` (``key`` of :attr:`ParamLayout.sizes`) as the kernel's source writes it."""
        # The CUDA kernel folds its loop bounds in as literals; the CPU one reads them, so that every size of
        # one kind of env shares one compiled function.
        if self.target == "cuda":
            return str(value)
        assert self.params is not None, "the CPU target reads its loop bounds from the parameter layout"
        return self.params.size_source(key)

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        self.line(header)
        self.depth += 1
        yield
        self.line("pass")
        self.depth -= 1

    @contextmanager
    def agents(self, order_bit: int | None = None) -> Iterator[None]:
        if self.target == "cuda":
            # a is uint32 in every loop of the CUDA kernel: an unsigned subscript needs no negative-index
            # wraparound (a compare and a select on 64 bits per subscript). uint32 mixed with int64 is int64.
            self.line("a = tid")
            with self.block("while a < num_agents:"):
                yield
                self.line("a = np.uint32(a + nthreads)")
        elif order_bit is None:
            with self.block("for a in range(num_agents):"):
                yield
        else:
            # Bit `order_bit` of agent_order runs this phase's agents last to first: a phase whose result
            # depends on that order reads or writes another agent's slot (see gpu_vecenv.check).
            with self.block("for _i in range(num_agents):"):
                self.line(f"a = num_agents - 1 - _i if (agent_order >> {order_bit}) & 1 else _i")
                yield

    def entries(self, body: str, obs_dim: int, order_bit: int | None = None, block: int | None = None) -> None:
        """The line ``body`` for every observation entry ``(a, i)`` of the game (``block``: see :class:`Phase`)."""
        if self.target != "cuda":
            with self.agents(order_bit):
                with self.block(f"for i in range({self.bound('obs_dim', obs_dim)}):"):
                    self.line(body)
            return
        if block is None or block >= obs_dim:
            block = obs_dim
        whole = obs_dim // block if block < obs_dim else 0
        if whole:
            # Thread tid takes entries tid, tid + nthreads, ... of the flat (block r, agent a, entry k of the
            # block) order, i = r * block + k; the triple is stepped with carries, not divided per entry.
            self.line(f"k = np.uint32(tid % {block})")
            self.line(f"a = np.uint32(tid // {block})")
            self.line("r = np.uint32(a // num_agents)")
            self.line("a = np.uint32(a - r * num_agents)")
            self.line(f"step_k = np.uint32(nthreads % {block})")
            self.line(f"step_a = np.uint32(nthreads // {block})")
            self.line("step_r = np.uint32(step_a // num_agents)")
            self.line("step_a = np.uint32(step_a - step_r * num_agents)")
            with self.block(f"while r < {whole}:"):
                self.line(f"i = np.uint32(r * {block} + k)")
                self.line(body)
                self.line("k = np.uint32(k + step_k)")
                self.line("a = np.uint32(a + step_a)")
                self.line("r = np.uint32(r + step_r)")
                with self.block(f"if k >= {block}:"):
                    self.line(f"k = np.uint32(k - {block})")
                    self.line("a = np.uint32(a + 1)")
                with self.block("if a >= num_agents:"):
                    self.line("a = np.uint32(a - num_agents)")
                    self.line("r = np.uint32(r + 1)")
        rest = obs_dim - whole * block
        if rest:
            self._per_agent(body, rest, "i", first=obs_dim - rest)

    def slots(self, body: str, count: int, order_bit: int) -> None:
        """The line ``body`` for every slot ``(a, slot)`` of the game, ``count`` slots an agent."""
        if self.target == "cuda":
            self._per_agent(body, count, "slot")
        else:
            # Reversed, the slots of each agent run last to first too: a slot phase whose result then
            # changes writes another slot's entries (on the GPU, a race between two threads).
            count_of = self.bound(f"slots{order_bit}", count)
            with self.agents(order_bit):
                with self.block(f"for _s in range({count_of}):"):
                    self.line(f"slot = {count_of} - 1 - _s if (agent_order >> {order_bit}) & 1 else _s")
                    self.line(body)

    def _per_agent(self, body: str, count: int, name: str, first: int = 0) -> None:
        # CUDA: every (agent a, k < count) pair of the game in (agent, k) order, with `name` = first + k:
        # thread tid takes pairs tid, tid + nthreads, ...; the pair is stepped by (nthreads // count,
        # nthreads % count) with one carry, not divided per pair (a 64-bit division costs more
        # instructions than an observation entry).
        self.line(f"a = np.uint32(tid // {count})")
        self.line(f"k = np.uint32(tid - a * {count})")
        self.line(f"step_a = np.uint32(nthreads // {count})")
        self.line(f"step_k = np.uint32(nthreads - step_a * {count})")
        with self.block("while a < num_agents:"):
            self.line(f"{name} = np.uint32(k + {first})" if first else f"{name} = k")
            self.line(body)
            self.line("k = np.uint32(k + step_k)")
            self.line("a = np.uint32(a + step_a)")
            with self.block(f"if k >= {count}:"):
                self.line(f"k = np.uint32(k - {count})")
                self.line("a = np.uint32(a + 1)")

    def stages(self, body: str, count: int, order_bit: int) -> None:
        """The line ``body`` for every agent at ``stage`` 0, then 1, ... ``count - 1``, a barrier after each."""
        with self.block(f"for _st in range({self.bound(f'stages{order_bit}', count)}):"):
            # uint32 on the GPU, as a: a subscript built from stage then needs no negative-index wraparound.
            self.line("stage = np.uint32(_st)" if self.target == "cuda" else "stage = _st")
            with self.agents(order_bit):
                self.line(body)
            self.barrier()

    @contextmanager
    def once(self) -> Iterator[None]:
        if self.target == "cuda":
            with self.block("if tid == 0:"):
                yield
        else:
            yield

    def barrier(self) -> None:
        if self.target == "cuda":
            self.line("cuda.syncthreads()")


def _alias(index: int) -> str:
    return f"_phase{index}"


def _phase_imports(definition: EnvDefinition) -> tuple[list[str], dict[int, str]]:
    lines, aliases = [], {}
    for i, phase in enumerate(definition.all_phases):
        key = id(phase.fn)
        if key in aliases:
            continue
        aliases[key] = _alias(i)
        lines.append(f"from {phase.fn.__module__} import {phase.fn.__qualname__} as {aliases[key]}")
    return lines, aliases


def _run_phases(w: _Writer, phases: tuple[Phase, ...], aliases: dict[int, str], order: list[Phase],
                obs_dim: int) -> None:  # fmt: skip
    for phase in phases:
        call = f"{aliases[id(phase.fn)]}({', '.join(phase.parameters)})"
        if phase.per == "entry":
            w.entries(call, obs_dim, order.index(phase), phase.entry_block)
        elif phase.per == "slot":
            assert phase.slots is not None  # EnvDefinition.validate
            w.slots(call, phase.slots, order.index(phase))
        elif phase.per == "agent" and phase.stages is not None:
            w.stages(call, phase.stages, order.index(phase))
            continue  # the last stage ends with the phase's barrier
        elif phase.per == "agent":
            with w.agents(order.index(phase)):
                w.line(call)
        else:
            with w.once():
                w.line(call)
        w.barrier()


def generate_source(definition: EnvDefinition, target: str, ring_games: int | None = None,
                    bounds_checked: bool = False) -> str:  # fmt: skip
    """The text of the kernel module for ``target`` (``"cuda"`` or ``"cpu"``). ``ring_games``: the CUDA
    kernel that writes the outputs of that many games into the slot a ring names (see the module's
    docstring); ``None``: the kernel that takes its outputs as arguments. ``bounds_checked``: a CPU function
    that raises ``IndexError`` at any index outside its array (Numba's ``boundscheck``; the games one after
    another, since an exception raised inside a parallel loop does not come out as itself), for
    :func:`gpu_vecenv.check.check_bounds`."""
    if target not in ("cuda", "cpu"):
        raise ValueError(f"target must be 'cuda' or 'cpu', got {target!r}")
    if bounds_checked and target != "cpu":
        raise ValueError("only the cpu target is compiled with bounds checks")
    ring_outputs = ring_games is not None
    if ring_outputs and target != "cuda":
        raise ValueError("only the cuda target writes its outputs into the slot a ring names")
    if ring_outputs and not (isinstance(ring_games, int) and ring_games >= 1):
        raise ValueError(f"ring_games must be a number of games >= 1, got {ring_games!r}")
    params = ParamLayout(definition)
    imports, aliases = _phase_imports(definition)
    w = _Writer(target, params)
    w.line(f'"""Generated by gpu_vecenv for env {definition.name!r} ({target}); do not edit."""')
    w.line("import numpy as np")
    w.line("import numba")
    w.line("from numba import cuda")
    for text in imports:
        w.line(text)
    if ring_outputs:
        w.line("from gpu_vecenv.device_arrays import array_at")
        w.line("from gpu_vecenv.slot_copy import slot_address")
    if target == "cuda" and any(arr.block_local for arr in definition.state):
        w.line("from gpu_vecenv.device_arrays import with_game_axis")
    if target == "cuda":
        for text in params.module_lines():
            w.line(text)
    w.line("")
    if target == "cuda":
        # The simulator's jit takes no register cap, and there is no register file to cap.
        cap = "" if definition.max_registers is None or SIMULATOR else f", max_registers={definition.max_registers}"
        lines = ", lineinfo=True" if lineinfo_requested() else ""
        w.line(f"@cuda.jit(cache=True{cap}{lines})")
    else:
        w.line(
            "@numba.njit(cache=True, boundscheck=True)" if bounds_checked else "@numba.njit(parallel=True, cache=True)"
        )
    with w.block(f"def run({RING_KERNEL_ARGS if ring_outputs else KERNEL_ARGS}):"):
        if target == "cuda" and lineinfo_requested():
            # Numba numbers the inlined phases' lines as in their own modules, under this module's name, and
            # moves any line above the kernel's def to the def: so the def comes early and the body starts
            # past every phase module's last line, where no number can be both.
            w.lines.extend([""] * (KERNEL_BODY_FIRST_LINE_WITH_LINEINFO - 1 - len(w.lines)))
        for text in params.source_lines(literal=target == "cuda", shared_memory=target == "cuda"):
            w.line(text)
        if ring_games is not None:
            _ring_outputs(w, definition, ring_games)
        for i, name in enumerate(("term_out", "trunc_out", "active_out", "done_out", "final_active_out")):
            w.line(f"{name} = flags[{i}]")
        if target == "cuda":
            for arr in definition.scratch:
                w.line(f"{arr.name} = cuda.local.array({arr.length}, numba.{arr.dtype})")
            # numba-cuda types the thread and block indices int32; as uint32 every g, a and i below is unsigned.
            w.line("g = np.uint32(cuda.blockIdx.x)")
            w.line("tid = np.uint32(cuda.threadIdx.x)")
            w.line("nthreads = np.uint32(cuda.blockDim.x)")
            _game_body(w, definition, aliases)
        else:
            with w.block("for g in numba.prange(game_i64.shape[1]):"):
                for j, arr in enumerate(definition.scratch):
                    w.line(f"{arr.name} = np.empty({w.bound(f'scratch{j}', arr.length)}, np.{arr.dtype})")
                _game_body(w, definition, aliases)
    return "\n".join(w.lines) + "\n"


def _ring_outputs(w: _Writer, definition: EnvDefinition, num_games: int) -> None:
    """The output arrays at the slot ``ring`` names, as :meth:`OutputArena.kernel_pointers` places them: obs,
    rewards, then in SAME_STEP mode final_obs (float32), then the five flag planes (uint8)."""
    # A ring that names no slot (an index outside it, or an address not yet written) launches nothing and
    # says so in ring_missed, which the env reads at its next reset: every thread reads the same entries, so
    # every thread of every block returns, and none waits for the others.
    w.line("ring_base = slot_address(ring)")
    with w.block("if ring_base == 0:"):
        with w.block("if cuda.blockIdx.x == 0 and cuda.threadIdx.x == 0:"):
            w.line("ring_missed[0] = 1")
        w.line("return")
    # The number of games as a literal: every output's offset from the slot's address is then a constant, and
    # only that address is held in registers (read from game_i64's shape, the four pointers and strides were:
    # 16 more registers a thread uncapped, benchmarks/ptx_report.py --ring-outputs).
    w.line(f"ring_games = {int(num_games)}")
    w.line("ring_envs = ring_games * num_agents")
    d = definition.obs_dim
    w.line(f"obs = array_at(ring_base, (ring_games, num_agents, {d}), np.float32)")
    w.line(f"rewards = array_at(ring_base + 4 * ring_envs * {d}, (ring_games, num_agents), np.float32)")
    w.line(f"ring_same_step = autoreset_mode == {SAME_STEP}")
    # Outside SAME_STEP mode the slot holds no final_obs and the kernel never writes one: any address will do.
    w.line(f"final_obs = array_at(ring_base + 4 * (ring_envs * {d} + ring_envs) if ring_same_step else ring_base, "
           f"(ring_games, num_agents, {d}), np.float32)")  # fmt: skip
    w.line(f"ring_float_bytes = 4 * (ring_envs * {d} * (2 if ring_same_step else 1) + ring_envs)")
    w.line("flags = array_at(ring_base + ring_float_bytes, (5, ring_games, num_agents), np.uint8)")


def _write_outputs(w: _Writer, definition: EnvDefinition, term: str, trunc: str, zero_rewards: bool) -> None:
    active = f"{definition.active}[g, a] != 0" if definition.active else "True"
    with w.agents():
        if zero_rewards:
            w.line("rewards[g, a] = np.float32(0.0)")
        w.line(f"term_out[g, a] = {term}")
        w.line(f"trunc_out[g, a] = {trunc}")
        w.line(f"done_out[g, a] = ({term}) or ({trunc})")
        w.line(f"active_out[g, a] = {active}")


def _reset_body(w: _Writer, definition: EnvDefinition, aliases: dict[int, str]) -> None:
    with w.once():
        w.line("episode[g] += 1")
        w.line("t[g] = 0")
        w.line("terminated[g] = 0")
        w.line("truncated[g] = 0")
        w.line("pending_reset[g] = 0")
    w.barrier()
    _run_phases(w, definition.reset_phases, aliases, list(definition.all_phases), definition.obs_dim)


def _reset_if_asked(w: _Writer, definition: EnvDefinition, aliases: dict[int, str], autoreset: str) -> None:
    # A reset() call resets the games of its mask only; one waiting for its autoreset waits on.
    called = f"op == {OP_RESET} and pending == {PENDING_RESET_CALL}"
    with w.block(f"if ({called}) or (op == {OP_STEP} and {autoreset}):"):
        _reset_body(w, definition, aliases)


def _game_body(w: _Writer, definition: EnvDefinition, aliases: dict[int, str]) -> None:
    num_actions = len(definition.action_nvec)
    # Every thread reads the game's control flags before any thread may change them.
    w.line("pending = pending_reset[g]")
    w.line("was_term = terminated[g] != 0")
    w.line("was_trunc = truncated[g] != 0")
    w.barrier()
    autoreset = f"pending == {PENDING_AUTORESET} and autoreset_mode == {NEXT_STEP}"
    resetting = f"op == {OP_RESET} or ({autoreset})"
    # A finished game that was not reset stays frozen: same state, zero reward.
    frozen = f"(was_term or was_trunc) and autoreset_mode == {DISABLED}"
    if w.target == "cuda":
        with w.block(f"if {resetting}:"):
            _reset_if_asked(w, definition, aliases, autoreset)
            _run_phases(w, definition.observe_phases, aliases, list(definition.all_phases), definition.obs_dim)
            _write_outputs(w, definition, "False", "False", zero_rewards=True)
        with w.block(f"elif {frozen}:"):
            _run_phases(w, definition.observe_phases, aliases, list(definition.all_phases), definition.obs_dim)
            _write_outputs(w, definition, "was_term", "was_trunc", zero_rewards=True)
    else:
        # The CPU function: a reset and a frozen end share one copy of the observe phases, each copy being
        # compiled on its own (most of the function's compile time); the step's copy stays in the step.
        w.line(f"resetting = {resetting}")
        with w.block(f"if resetting or ({frozen}):"):
            with w.block("if resetting:"):
                _reset_if_asked(w, definition, aliases, autoreset)
            _run_phases(w, definition.observe_phases, aliases, list(definition.all_phases), definition.obs_dim)
            with w.block("if resetting:"):
                _write_outputs(w, definition, "False", "False", zero_rewards=True)
            with w.block("else:"):
                _write_outputs(w, definition, "was_term", "was_trunc", zero_rewards=True)
    with w.block("else:"):
        with w.agents():
            w.line("rewards[g, a] = np.float32(0.0)")
            for k in range(num_actions):
                w.line(f"v = actions_in[g, a, {k}]")
                with w.block(f"if v < 0 or v >= nvec{k}:"):
                    with w.block("if action_error[0, g, a] == 0:"):
                        w.line(f"action_error[0, g, a] = {k + 1}")
                        w.line("action_error[1, g, a] = max(min(v, 2147483647), -2147483648)")
                    w.line("v = 0")
                w.line(f"action[{k}, g, a] = v")
            active = f"{definition.active}[g, a] != 0" if definition.active else "True"
            w.line(f"active_out[g, a] = {active}")
        with w.once():
            w.line("t[g] += 1")
        w.barrier()
        _run_phases(w, definition.update_phases, aliases, list(definition.all_phases), definition.obs_dim)
        _run_phases(w, definition.observe_phases, aliases, list(definition.all_phases), definition.obs_dim)
        _run_phases(w, definition.reward_phases, aliases, list(definition.all_phases), definition.obs_dim)
        with w.once():
            with w.block("if max_episode_steps > 0 and t[g] >= max_episode_steps:"):
                w.line("truncated[g] = 1")
        w.barrier()
        w.line("is_term = terminated[g] != 0")
        w.line("is_trunc = truncated[g] != 0")
        w.line("is_done = is_term or is_trunc")
        with w.agents():
            w.line("term_out[g, a] = is_term")
            w.line("trunc_out[g, a] = is_trunc")
            w.line("done_out[g, a] = is_done")
            with w.block(f"if autoreset_mode == {SAME_STEP}:"):
                w.line("final_active_out[g, a] = active_out[g, a] and is_done")
        with w.block(f"if autoreset_mode == {SAME_STEP}:"):
            w.entries("final_obs[g, a, i] = obs[g, a, i] if is_done else np.float32(0.0)", definition.obs_dim)
        with w.block("if is_done:"):
            with w.block(f"if autoreset_mode == {NEXT_STEP}:"):
                with w.once():
                    w.line(f"pending_reset[g] = {PENDING_AUTORESET}")
            with w.block(f"elif autoreset_mode == {SAME_STEP}:"):
                w.barrier()
                _reset_body(w, definition, aliases)
                _run_phases(w, definition.observe_phases, aliases, list(definition.all_phases), definition.obs_dim)
                # Gymnasium: the infos of a game reset within the step are its reset infos.
                with w.agents():
                    active = f"{definition.active}[g, a] != 0" if definition.active else "True"
                    w.line(f"active_out[g, a] = {active}")


def cache_dir() -> Path:
    """Where generated kernel modules (and Numba's caches of them) are kept."""
    root = os.environ.get("GPU_VECENV_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "gpu_vecenv")
    return Path(root) / "kernels"


def _sources_digest(definition: EnvDefinition) -> str:
    files = set(_PACKAGE_DIR.glob("*.py"))
    for phase in definition.all_phases:
        module = sys.modules.get(phase.fn.__module__)
        path = getattr(module, "__file__", None)
        if path:
            files.update(Path(path).resolve().parent.glob("*.py"))
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(str(path.name).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def load_kernel_module(definition: EnvDefinition, target: str, ring_games: int | None = None,
                       bounds_checked: bool = False) -> ModuleType:  # fmt: skip
    """Generate (once), write (once) and import the kernel module of ``definition`` for ``target``
    (``ring_games``, ``bounds_checked``: see :func:`generate_source`)."""
    source = generate_source(definition, target, ring_games, bounds_checked)
    digest = hashlib.sha256((source + _sources_digest(definition)).encode()).hexdigest()[:20]
    safe = "".join(c if c.isalnum() else "_" for c in definition.name)
    form = f"{target}_ring{ring_games}" if ring_games is not None else f"{target}_bounds" if bounds_checked else target
    module_name = f"gpu_vecenv_kernel_{safe}_{form}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{module_name}.py"
    if not path.exists() or path.read_text() != source:
        # Written under a temporary name and renamed, so that a concurrent process never imports half a file.
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            fh.write(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[module_name]
        raise
    return module
