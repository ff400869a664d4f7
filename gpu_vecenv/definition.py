"""How an environment is described to gpu_vecenv: named state arrays, constants and phases.

An :class:`EnvDefinition` is everything the backends need to build a kernel:

* ``state``: the per-game arrays, each :class:`StateArray` named, typed and
  scoped. An agent array of length 1 is indexed ``name[g, a]``; of length
  ``L > 1``, ``name[k, g, a]``. A game array is ``name[g]`` or ``name[k, g]``.
  Arrays are stored structure-of-arrays, so that neighbouring agents (threads)
  touch neighbouring addresses.
* ``constants``: named scalars or 1-D sequences (floats become float32,
  integers and booleans int64), read by the phases under their names; a
  sequence is seen as a 1-D array.
* the phases of a step and of a reset, each a function decorated with
  :func:`gpu_vecenv.shared`. A phase's parameters are *names*: the kernel
  passes each parameter the array or constant of that name, plus ``g`` (game
  index) and, for agent phases, ``a`` (agent index). An agent phase runs once
  for every agent of every game and may write only slot ``[..., g, a]`` of
  agent arrays; a game phase runs once per game. Phases run in order, with a
  barrier between consecutive phases, so a phase sees everything the phases
  before it wrote, for every agent of its game.
* an observation phase may also run once per observation entry
  (``Phase(fn, per="entry")``, parameters ``g``, ``a`` and ``i``), writing only
  ``obs[g, a, i]``. On the GPU consecutive threads then write consecutive
  addresses (coalesced stores), where a phase per agent writes its own row
  (``obs_dim`` floats apart from its neighbour's). ``entry_block`` orders the
  entries so that a warp takes the same entries of neighbouring agents
  (see :class:`Phase`).
* an observation phase may instead run once per *slot* of each agent
  (``Phase(fn, per="slot", slots=S)``, parameters ``g``, ``a`` and ``slot``,
  ``0 <= slot < S``), writing the observation entries that belong to that slot
  and no others, such as every feature of the ``slot``-th listed agent. One
  call then loads what its entries share once and writes them side by side;
  on the GPU consecutive threads take consecutive slots of an agent.
* an agent phase may run in *stages* (``Phase(fn, stages=S)``, parameter
  ``stage``): ``fn`` runs for every agent with ``stage = 0``, then, after a
  barrier, for every agent with ``stage = 1``, and so on to ``S - 1``. Each
  stage sees what the stages before it wrote, so work that one thread would
  otherwise do for the whole game (a sort, a sum over the agents) can be
  spread over the agents in about ``log2(num_agents)`` stages. Within a
  stage an agent writes only its own slots and reads no slot that another
  agent writes in that stage (a sort keeps its keys in two planes and writes
  one while it reads the other).

A step runs ``update_phases``, then ``observe_phases``, then
``reward_phases``; a reset runs ``reset_phases``, then ``observe_phases``.
The observe phases write every entry ``obs[g, a, i]`` of every agent at every
reset and step where ``obs_kept`` is 0: what ``obs`` held before is undefined
there (large ``copy=True`` outputs are written into fresh, uninitialized
memory; :func:`gpu_vecenv.check.check_outputs_written` checks an env for it).
Where ``obs_kept`` is 1, ``obs`` is the env's own buffer and holds what the
previous launch wrote into it, so a phase may leave the entries it knows to be
unchanged since then (a row that stays the same for many steps), if the state
it decides that by was written by the previous launch itself
(:func:`gpu_vecenv.check.check_kept_outputs` checks that the outputs are the
same either way).

Names the framework provides to every phase:

========================  =====================================================
``g``, ``a``              game index, agent index (int)
``i``                     observation entry index (int; entry phases only)
``slot``                  observation slot index (int; slot phases only)
``stage``                 stage index, ``0 <= stage < stages`` (int; staged
                          phases only)
``num_agents``            agents per game (int64)
``t``                     per-game step counter, ``t[g]`` (int64); the step
                          increments it before ``update_phases`` run
``terminated``            per-game flag ``terminated[g]`` (int64) that reward
                          phases set to 1 when the game is over
``truncated``             per-game flag (int64), set by ``max_episode_steps``
``seed``, ``episode``     per-game seed and reset count (int64), the key of
                          :func:`gpu_vecenv.counter_rng.uniform01`
``action``                validated actions, ``action[k, g, a]`` (int32); an
                          out-of-range entry is replaced by 0 and reported
``obs``                   observations, ``obs[g, a, i]`` (float32)
``obs_kept``              1 where ``obs`` holds what the previous launch
                          wrote there (``copy=False``, or outputs copied out of
                          the env's buffer), 0 where each launch writes fresh
                          memory (int64, the same for every launch of an env)
``rewards``               rewards, ``rewards[g, a]`` (float32), zeroed by the
                          framework before each step
========================  =====================================================
"""

from __future__ import annotations

import inspect
import keyword
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from gpu_vecenv.arguments import is_integer

AgentDType = Literal["float32", "int32"]
Scope = Literal["agent", "game"]
PhaseScope = Literal["agent", "game", "entry", "slot"]

FRAMEWORK_GAME_ARRAYS = ("seed", "episode", "t", "terminated", "truncated", "pending_reset")
FRAMEWORK_AGENT_ARRAYS = ("action", "action_error")
FRAMEWORK_NAMES = frozenset(
    {"g", "a", "num_agents", "obs", "obs_kept", "rewards"} | set(FRAMEWORK_GAME_ARRAYS) | set(FRAMEWORK_AGENT_ARRAYS)
)
# Names the generated kernel binds for itself: module globals, its arguments (the packed buffers, the
# outputs, op), the runtime parameters, views of the outputs and its local variables. An env's name among
# them would be overwritten inside the kernel, so validate() refuses it (so are nvec0, nvec1, ...,
# _phase0, _phase1, ... and _NAME for every constant NAME, the module global holding an array constant).
KERNEL_NAMES = frozenset(
    {"np", "numba", "cuda", "run", "op", "actions_in", "flags", "final_obs", "params_f32", "params_i64"}
    | {f"{scope}_{dtype}" for scope in ("agent", "game") for dtype in ("f32", "f64", "i32", "i64")}
    | {"autoreset_mode", "max_episode_steps", "agent_order", "obs_kept"}
    | {"term_out", "trunc_out", "active_out", "done_out", "final_active_out"}
    | {"tid", "nthreads", "i", "slot", "stage", "k", "r", "step_a", "step_k", "step_r", "v", "_i", "_s", "_st"}
    | {"pending", "resetting", "was_term", "was_trunc", "is_term", "is_trunc", "is_done"}
    | {"with_game_axis"}
)
# ... and _local_NAME, the shared array of a block-local state array NAME.
_KERNEL_NAME_PATTERN = re.compile(r"nvec\d+|_phase\d+|_local_\w+")
_DTYPES = ("float32", "float64", "int32", "int64")
# The static shared memory a CUDA block may declare (48 KiB on every card since sm_20; more takes a
# dynamic allocation and an opt-in per kernel).
MAX_BLOCK_LOCAL_BYTES = 48 * 1024
# A staged phase's stage count: log2 of any agent count a game can hold is far below it.
MAX_STAGES = 64
_ALLOWED_DTYPES: dict[str, tuple[str, ...]] = {"agent": _DTYPES, "game": _DTYPES}


def _refuse_kernel_name(where: str, what: str, name: str) -> None:
    if name in KERNEL_NAMES or _KERNEL_NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"{where}: {what} {name!r} has a name the generated kernel uses for itself; rename it "
            "(reserved: gpu_vecenv.definition.KERNEL_NAMES, nvec0, nvec1, ..., _phase0, _phase1, ... and _local_*)"
        )


@dataclass(frozen=True)
class StateArray:
    """One named per-game state array.

    Args:
        name: a Python identifier, the parameter name phases use.
        dtype: ``"float32"``, ``"float64"``, ``"int32"`` or ``"int64"``.
        per: ``"agent"`` (one value per agent of each game) or ``"game"``.
        length: values per agent (or game); above 1 the array gains a leading
            axis of this length.
        vector: give the array its leading axis even at length 1 (the
            framework's ``action[k, g, a]`` is always indexed so).
        block_local: the promise that the array is scratch of one launch
            (every launch writes each entry before any phase reads it, and
            only phases read it: a list built for a search, the planes of a
            sort or a sum), so that a CUDA kernel may keep it in the block's
            shared memory, on the SM, rather than in the packed buffers, whose
            stores go through to L2: a phase that reads what other agents
            wrote in the phase before then waits on the SM's memory, not on
            a round trip to L2. Agent arrays only; at most
            ``MAX_BLOCK_LOCAL_BYTES`` of them a game. The CPU backend keeps
            them in the buffers; on the CUDA backend they take no device
            memory and ``GpuVectorEnv.state`` has no views of them.
            :func:`gpu_vecenv.check.check_block_local_rewritten` tests the
            promise.
    """

    name: str
    dtype: str
    per: Scope = "agent"
    length: int = 1
    vector: bool = False
    block_local: bool = False

    def __post_init__(self) -> None:
        # numpy's and torch's dtypes name the same types: np.float32 and torch.float32 stand for "float32".
        if not isinstance(self.dtype, str):
            name = getattr(self.dtype, "__name__", None) or str(self.dtype)  # np.float32, np.dtype, torch.float32
            object.__setattr__(self, "dtype", name.removeprefix("torch."))

    @property
    def leading_axis(self) -> bool:
        """Whether the array's views have the leading axis ``k`` (``[k, g, a]``, ``[k, g]``)."""
        return self.length > 1 or self.vector

    def bytes_per_game(self, num_agents: int) -> int:
        """Bytes the array takes for one game of ``num_agents`` agents."""
        values = self.length * (num_agents if self.per == "agent" else 1)
        return values * getattr(torch, self.dtype).itemsize


def block_local_bytes(state: Iterable[StateArray], num_agents: int) -> int:
    """Bytes a game's block-local arrays among ``state`` take: the shared memory of each block of a CUDA kernel."""
    return sum(arr.bytes_per_game(num_agents) for arr in state if arr.block_local)


@dataclass(frozen=True)
class Phase:
    """A shared function run once per agent (``per="agent"``), once per game, or once per observation entry or slot.

    Args:
        fn: the phase, decorated with :func:`gpu_vecenv.shared`.
        per: ``"agent"``, ``"game"``, ``"entry"`` or ``"slot"``.
        entry_block: for an entry phase, how the GPU hands the entries to
            threads. ``None`` (the default): each agent's ``obs_dim`` entries
            in a row, agent after agent. An integer ``B``: the entries in
            blocks of ``B`` consecutive entries of one agent, block ``r`` of
            every agent before block ``r + 1`` of any (the entries after the
            last whole block come last, agent after agent), so that the
            threads of a warp compute the same entries of neighbouring
            agents. Give the length of a run of entries that take the same
            branches in ``fn``, such as the agents listed per feature of a
            feature-major observation: a warp then takes one branch, where
            in agent order it would take each run's branch in turn. The
            stores stay in runs of ``B`` consecutive floats. Results do not
            depend on it; the CPU backend ignores it.
        slots: for a slot phase (and only there), the number of slots of
            each agent, ``1 <= slots <= obs_dim``: ``fn`` runs for ``slot``
            ``0 .. slots - 1`` of every agent and writes only the entries of
            that slot, which no other slot may write (two calls writing one
            entry would race on the GPU).
        stages: for an agent phase (and only there), run it in this many
            stages, ``1 <= stages <= 64``, with a barrier after each: ``fn``
            takes ``stage`` and runs for every agent at stage 0, then for
            every agent at stage 1, and so on. ``None``: one plain run.
    """

    fn: Callable[..., Any]
    per: PhaseScope = "agent"
    entry_block: int | None = None
    slots: int | None = None
    stages: int | None = None

    def __post_init__(self) -> None:
        for name in ("entry_block", "slots", "stages"):
            value = getattr(self, name)
            if is_integer(value):
                object.__setattr__(self, name, int(value))  # a numpy integer is taken as the int it holds

    @property
    def name(self) -> str:
        return getattr(self.fn, "__name__", repr(self.fn))

    @property
    def parameters(self) -> tuple[str, ...]:
        py_func = getattr(self.fn, "py_func", self.fn)
        return tuple(inspect.signature(py_func).parameters)


ResetOptionsHook = Callable[[Mapping[str, torch.Tensor], Mapping[str, Any], torch.Tensor], None]


@dataclass(frozen=True)
class EnvDefinition:
    """A complete, concrete description of one environment configuration.

    Args:
        name: the environment's name, used in messages and kernel file names.
        num_agents: agents per game (threads per game on the GPU).
        action_nvec: per-agent ``MultiDiscrete`` sizes.
        obs_dim: length of one agent's observation vector.
        state: the env's own state arrays (framework arrays are added).
        constants: named constants (scalars or 1-D sequences) read by phases.
        update_phases, observe_phases, reward_phases, reset_phases: see the
            module docstring.
        active: name of an int32 agent array that is non-zero while the agent
            is in the game; reported as ``infos["active"]``. ``None``: always.
        observation_space: the per-agent observation space, a float32
            ``gymnasium.spaces.Box`` of shape ``(obs_dim,)``; by default
            unbounded.
        discrete_actions: use ``Discrete(action_nvec[0])`` as the per-agent
            action space (one component; actions shaped ``(num_envs,)``)
            instead of ``MultiDiscrete(action_nvec)``.
        roles: named groups of agent ids, e.g. ``{"tagger": (0, 1)}``, for the
            multi-agent view.
        reset_option_names: the ``reset(options=...)`` keys the env accepts
            (besides the framework's ``reset_mask``).
        reset_options: a hook ``(state, options, game_mask) -> None`` that
            checks those options and applies them to the state tensors of the
            games in ``game_mask`` before the reset kernel runs; it must raise
            before writing anything if an option is invalid.
            What it writes holds for those games' later autoresets too, until
            a reset that gives other options (or none), as in Gymnasium's own
            vector CartPole.
        setup: a hook ``(state) -> None`` that fills static state arrays (ones
            no reset phase writes, such as agent roles) once at construction.
        reference: a factory of the numpy reference of one game, for checks,
            tests and the reference backend: an object with
            ``reset(seed, episode, options) -> obs``, ``step(actions) -> (obs,
            rewards, game_over)``, ``observe() -> obs``, ``get_state()`` and
            ``set_state(state)`` over arrays named as the state arrays (plus
            ``t``), one entry per agent.
        render: a hook ``(state, **render_options) -> frames`` that draws
            ``render_mode="rgb_array"`` frames. ``state`` holds numpy copies
            of the named state arrays (as ``GpuVectorEnv.state`` names them)
            of the games to draw, the games axis having one entry per drawn
            game; it returns uint8 frames ``(games, H, W, 3)``. ``None``: the
            env cannot render.
        scratch: per-call scratch arrays, each 1-D of ``length`` values of
            ``dtype`` and indexed ``name[k]``, private to one call of an
            agent phase: what a call finds there when it starts is undefined.
            On the GPU they live in the thread's local memory (write-back
            cached), unlike state arrays, whose stores go through to L2, so a
            phase that rereads what it just wrote (a sorted insertion, say)
            keeps that work in the cache. Sizes are fixed per configuration.
        cuda_kernel: the expert's escape hatch: a hand-written
            ``numba.cuda.jit`` kernel used instead of the generated one. It
            takes the generated kernel's arguments
            (:data:`gpu_vecenv.codegen.KERNEL_ARGS`) and must implement the same
            contract; ``python -m gpu_vecenv.show_kernel ENV_ID`` prints the
            generated kernel to start from. The CPU then runs the reference.
        max_registers: a cap on the registers per thread of the generated
            CUDA kernel (numba-cuda's ``max_registers``, an integer in
            ``[16, 255]``), or ``None`` for the compiler's choice. Registers
            set how many blocks an SM holds at once, so a cap pays when a
            step has more games than the card holds at once without it; it
            costs where every game is resident anyway, and below what the
            kernel needs it spills to local memory
            (``benchmarks/ptx_report.py --max-registers N`` reports the
            spills without a GPU). Time it: on an H200 a cap of 48 sped up
            WarpTag-v0's K-nearest kernels and slowed its full observation's
            (``benchmarks/NOTES.md``, v18). Ignored on the CPU and under the
            CUDA simulator.
        threads_per_block: the CUDA threads a game's block has when the user
            asks for none (the vector env's ``threads_per_block`` option wins),
            an integer in ``[1, 1024]``; ``None``: the agents rounded up to
            whole warps, at most 256. A step that writes a large observation
            per game can gain from larger blocks: fewer games are written at
            once on an SM, and each one's stores are spread over more threads
            (WarpTag-v0's full observation, ``benchmarks/NOTES.md``, v32).
            Ignored on the CPU and under the CUDA simulator.
    """

    name: str
    num_agents: int
    action_nvec: tuple[int, ...]
    obs_dim: int
    state: tuple[StateArray, ...]
    constants: Mapping[str, Any]
    update_phases: tuple[Phase, ...]
    observe_phases: tuple[Phase, ...]
    reward_phases: tuple[Phase, ...]
    reset_phases: tuple[Phase, ...]
    active: str | None = None
    observation_space: Any = None
    discrete_actions: bool = False
    roles: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    reset_option_names: tuple[str, ...] = ()
    reset_options: ResetOptionsHook | None = None
    setup: Callable[[Mapping[str, torch.Tensor]], None] | None = None
    reference: Any = None
    render: Callable[..., Any] | None = None
    cuda_kernel: Any = None
    scratch: tuple[StateArray, ...] = ()
    max_registers: int | None = None
    threads_per_block: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_registers", "threads_per_block"):
            value = getattr(self, name)
            if is_integer(value):
                object.__setattr__(self, name, int(value))  # a numpy integer is taken as the int it holds
        self.validate()

    @property
    def all_phases(self) -> tuple[Phase, ...]:
        return self.update_phases + self.observe_phases + self.reward_phases + self.reset_phases

    @property
    def block_local_bytes(self) -> int:
        """Bytes a game's block-local arrays take: the shared memory of each block of a CUDA kernel."""
        return block_local_bytes(self.state, self.num_agents)

    def game_entries(self, views: Mapping[str, torch.Tensor], name: str, g: int) -> torch.Tensor:
        """Game ``g``'s entries of state array ``name`` among ``views`` (an env's state): ``(agents,)`` or a
        scalar, with the array's leading axis first where it has one (``(length, agents)``, ``(length,)``)."""
        leading = any(arr.name == name and arr.leading_axis for arr in self.state)
        return views[name][:, g] if leading else views[name][g]

    def validate(self) -> None:
        """Raise ``ValueError`` naming the env and the offending item if the definition is inconsistent."""
        where = f"env {self.name!r}"
        if not is_integer(self.num_agents, 1):
            raise ValueError(f"{where}: num_agents must be an integer >= 1, got {self.num_agents!r}")
        if not self.action_nvec or not all(is_integer(n, 1) for n in self.action_nvec):
            raise ValueError(f"{where}: action_nvec must be non-empty positive sizes, got {self.action_nvec}")
        if self.discrete_actions and len(self.action_nvec) != 1:
            raise ValueError(f"{where}: discrete_actions needs exactly one action component, got {self.action_nvec}")
        if not is_integer(self.obs_dim, 1):
            raise ValueError(f"{where}: obs_dim must be an integer >= 1, got {self.obs_dim!r}")
        cap = self.max_registers
        if cap is not None and not is_integer(cap, 16, 255):
            raise ValueError(f"{where}: max_registers must be None or an integer in [16, 255], got {cap!r}")
        if cap is not None and self.cuda_kernel is not None:
            raise ValueError(
                f"{where}: max_registers={cap} caps the generated kernel; it has no effect with cuda_kernel:"
                " pass max_registers=None with it"
            )
        block = self.threads_per_block
        if block is not None and not is_integer(block, 1, 1024):
            raise ValueError(f"{where}: threads_per_block must be None or an integer in [1, 1024], got {block!r}")
        space = self.observation_space
        if space is not None and (
            getattr(space, "shape", None) != (self.obs_dim,) or str(getattr(space, "dtype", "")) != "float32"
        ):
            raise ValueError(
                f"{where}: observation_space must be a float32 Box of shape ({self.obs_dim},), got {space!r}"
            )
        seen: set[str] = set()
        for arr in self.state:
            if not arr.name.isidentifier() or keyword.iskeyword(arr.name):
                raise ValueError(f"{where}: state array name {arr.name!r} is not a Python identifier")
            if arr.name in FRAMEWORK_NAMES:
                raise ValueError(f"{where}: state array {arr.name!r} shadows a framework name; rename it")
            _refuse_kernel_name(where, "state array", arr.name)
            if arr.name in seen:
                raise ValueError(f"{where}: state array {arr.name!r} is declared twice")
            seen.add(arr.name)
            if arr.per not in _ALLOWED_DTYPES:
                raise ValueError(f"{where}: state array {arr.name!r} has per={arr.per!r}; expected 'agent' or 'game'")
            if arr.dtype not in _ALLOWED_DTYPES[arr.per]:
                raise ValueError(
                    f"{where}: state array {arr.name!r} ({arr.per} scope) has dtype {arr.dtype!r}; "
                    f"expected one of {_ALLOWED_DTYPES[arr.per]}"
                )
            if not is_integer(arr.length, 1):
                raise ValueError(
                    f"{where}: state array {arr.name!r} has length {arr.length!r}; expected an integer >= 1"
                )
            if arr.block_local and arr.per != "agent":
                raise ValueError(f"{where}: state array {arr.name!r} is block_local; only agent arrays may be")
        if self.block_local_bytes > MAX_BLOCK_LOCAL_BYTES:
            names = [arr.name for arr in self.state if arr.block_local]
            raise ValueError(
                f"{where}: the block-local arrays {names} take {self.block_local_bytes} bytes a game; expected at "
                f"most {MAX_BLOCK_LOCAL_BYTES} (a CUDA block's static shared memory): keep some in the buffers"
            )
        for cname in self.constants:
            if cname in seen or cname in FRAMEWORK_NAMES:
                raise ValueError(f"{where}: constant {cname!r} clashes with a state array or framework name")
            _refuse_kernel_name(where, "constant", cname)
        if self.active is not None:
            match = [a for a in self.state if a.name == self.active]
            if not match or match[0].per != "agent" or match[0].dtype != "int32" or match[0].length != 1:
                raise ValueError(f"{where}: active={self.active!r} must name an int32 agent array of length 1")
        for arr in self.scratch:
            if not arr.name.isidentifier() or arr.name in seen or arr.name in self.constants \
                    or arr.name in FRAMEWORK_NAMES:  # fmt: skip
                raise ValueError(f"{where}: scratch array {arr.name!r} is no identifier or clashes with another name")
            _refuse_kernel_name(where, "scratch array", arr.name)
            if arr.dtype not in _DTYPES or arr.length < 1:
                raise ValueError(
                    f"{where}: scratch array {arr.name!r} needs a dtype of {_DTYPES} and length >= 1, "
                    f"got {arr.dtype!r} and {arr.length}"
                )
            seen.add(arr.name)
        known = seen | set(self.constants) | FRAMEWORK_NAMES
        clashes = sorted((seen | set(self.constants)) & {f"_{cname}" for cname in self.constants})
        if clashes:
            raise ValueError(
                f"{where}: {clashes[0]!r} has a name the generated kernel uses for itself, the module global "
                f"holding constant {clashes[0][1:]!r}; rename it"
            )
        for phase in self.update_phases + self.reward_phases + self.reset_phases:
            if phase.per in ("entry", "slot"):
                raise ValueError(
                    f"{where}: phase {phase.name!r} has per={phase.per!r}, which only observe phases may have"
                )
        for phase in self.all_phases:
            if phase.per not in ("agent", "game", "entry", "slot"):
                raise ValueError(
                    f"{where}: phase {phase.name!r} has per={phase.per!r}; expected 'agent', 'game', 'entry' or 'slot'"
                )
            if (phase.per == "slot") != (phase.slots is not None):
                raise ValueError(
                    f"{where}: phase {phase.name!r} has per={phase.per!r} and slots={phase.slots!r}; a slot phase "
                    "needs slots, and only a slot phase may have it"
                )
            if phase.slots is not None:
                if not is_integer(phase.slots, 1, self.obs_dim):
                    raise ValueError(
                        f"{where}: phase {phase.name!r} needs slots to be an integer in [1, obs_dim={self.obs_dim}], "
                        f"got {phase.slots!r}"
                    )
            if phase.stages is not None and (phase.per != "agent" or not is_integer(phase.stages, 1, MAX_STAGES)):
                raise ValueError(
                    f"{where}: phase {phase.name!r} has per={phase.per!r} and stages={phase.stages!r}; stages must "
                    f"be None or an integer in [1, {MAX_STAGES}], and only an agent phase may have them"
                )
            if phase.entry_block is not None:
                if phase.per != "entry":
                    raise ValueError(
                        f"{where}: phase {phase.name!r} has entry_block={phase.entry_block!r}, which only entry "
                        f"phases (per='entry') may have; it has per={phase.per!r}"
                    )
                if not is_integer(phase.entry_block, 1, self.obs_dim):
                    raise ValueError(
                        f"{where}: phase {phase.name!r} needs entry_block to be None or an integer in "
                        f"[1, obs_dim={self.obs_dim}], got {phase.entry_block!r}"
                    )
            module = getattr(phase.fn, "__module__", None)
            qualname = getattr(phase.fn, "__qualname__", "")
            if not module or "<locals>" in qualname:
                raise ValueError(
                    f"{where}: phase {phase.name!r} must be a module-level function (the kernel imports it by name)"
                )
            for p in phase.parameters:
                if (
                    p not in known
                    and not (p == "i" and phase.per == "entry")
                    and not (p == "slot" and phase.per == "slot")
                    and not (p == "stage" and phase.stages is not None)
                ):
                    raise ValueError(
                        f"{where}: phase {phase.name!r} takes parameter {p!r}, which is no state array, "
                        f"constant or framework name; known names: {sorted(known)}"
                    )
            if phase.per == "game" and "a" in phase.parameters:
                raise ValueError(f"{where}: game phase {phase.name!r} takes 'a'; game phases run once per game")
        if self.cuda_kernel is not None and not hasattr(self.cuda_kernel, "__getitem__"):
            raise ValueError(
                f"{where}: cuda_kernel must be a numba.cuda.jit kernel, got {type(self.cuda_kernel).__name__}"
            )
        for role, ids in self.roles.items():
            if any(not 0 <= i < self.num_agents for i in ids):
                raise ValueError(f"{where}: role {role!r} names agent ids outside [0, {self.num_agents}): {ids}")
