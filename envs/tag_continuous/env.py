"""WarpTag-v0: continuous Tag described to gpu_vecenv, and its vector entry point."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import torch

from envs.tag_continuous import sim
from envs.tag_continuous.config import TagConfig
from envs.tag_continuous.reference import TagReference
from envs.tag_continuous.render import draw_games
from gpu_vecenv.arguments import is_integer
from gpu_vecenv.backends import (
    SM_90_LIMITS,
    MultiprocessorLimits,
    default_threads_per_block,
    multiprocessor_limits,
    resident_blocks_per_multiprocessor,
    round_up_to_warps,
)
from gpu_vecenv.definition import MAX_BLOCK_LOCAL_BYTES, EnvDefinition, Phase, StateArray, block_local_bytes
from gpu_vecenv.vector_env import GpuVectorEnv, resolve_device

RESET_OPTIONS = ("initial_positions", "initial_directions")


# From this many agents on, the K-nearest search uses the spatial index unless told otherwise: below it,
# scanning every agent costs no more than building and searching the index. Measured per backend: on an
# H200 they cost the same at about 450 agents (benchmarks/results/h200_2026-12-04c/sweep/); on a 2-core CPU
# the index's rollouts are faster from 100-300 agents on (cpu_2026-12-04/index/, single noisy windows).
SPATIAL_INDEX_MIN_AGENTS = {"cuda": 512, "cpu": 256}

# The register cap of the K-nearest kernels when none is asked for (max_registers="auto"). Uncapped, the
# scan took 80 registers a thread (6 blocks of 128 threads an SM) and the spatial index 115 (2 blocks of
# 256); capped at 48 they spilled 44 B (none since v43 keeps their scratch in shared memory) and 820 B to
# local memory yet held 10 and 5 blocks, and on an H200 the kernel went from 137 to 126 us at 10+100
# agents x 2000 games and from 3395 to 2219 us at 100+900 x 2000 (benchmarks/results/h200_2026-12-04g/).
# The full observation is left uncapped: it waits on loads, and a cap of 56, 48, 40 or 32 made it 4-17%
# slower.
K_NEAREST_MAX_REGISTERS = 48

# The cap pays only when the card cannot hold every game at once uncapped: then it buys more games an SM
# at the price of spills; when it can, the spills are all it adds. On an H100 (132 SMs, one lease,
# benchmarks/results/h100_2026-12-05f/cap/) the index kernel at 524 games of 1000 agents took 425 us
# capped and 510 uncapped, at 262 games of 2000 agents 449 and 417, at 128 of 4096 569 and 537; the scan
# at 100, 264 and 528 games of 110 agents 35.2 / 39.8 / 53.0 capped, 33.9 / 37.8 / 49.5 uncapped (at 2000
# games the cap won, 126 against 137 us on an H200). The uncapped kernels' registers (ptx_report.py, sm_90,
# 10+100 and 100+900 agents, game_work="staged"), keyed by the search and by whether the step's scratch is in
# shared memory (block_scratch_bytes > 0, v43): the scan 66 (80 in the buffers: 7 blocks of 128 threads an
# SM against 6), the index 104 (112; 2 blocks of 256 either way); resident games follow from them
# (resident_blocks_per_multiprocessor).
K_NEAREST_UNCAPPED_REGISTERS = {("scan", True): 66, ("scan", False): 80, ("index", True): 104, ("index", False): 112}


# The full observation's step is bound by writing the observation, each game's rows one long stream of
# stores. Larger blocks write faster there: fewer games are written at once on an SM (a store-only kernel
# went from 55% to 74% of the copy bandwidth at 4 games an SM instead of 16) and each game's stores are
# spread over more threads. Swept on an H100 (benchmarks/results/h100_2026-12-05e/): the best blocks had
# about 8 (observer, call) pairs a thread, and none above 384 threads was faster (5+100 agents x 2000 games:
# 128 threads 415 us, 384 333 us; 10+200 x 500: 224 threads 755 us, 384 457 us). Where that comes to
# fewer than two threads an agent, the default block (agents rounded up to whole warps) stays: 1+3 x 10000
# and 2+10 x 10000 were fastest at 32 threads, 5+20 x 2000 at 32 (29.6 us; 64 threads: 31.2). The
# K-nearest kernels keep the default: they are bound by the search, and 256 or 512 threads made
# 10+100 x 2000 slower (144 us at 128, 172 at 256, 300 at 512).
FULL_OBSERVATION_PAIRS_PER_THREAD = 8
FULL_OBSERVATION_MAX_THREADS = 384


def full_observation_threads(num_agents: int, calls_per_agent: int) -> int | None:
    """CUDA threads a game for the full observation of ``num_agents`` agents, or ``None`` for the default.

    ``calls_per_agent``: the observation phase's slots (calls) per observing agent.
    """
    threads = -(-num_agents * calls_per_agent // FULL_OBSERVATION_PAIRS_PER_THREAD)
    if threads < 2 * num_agents:
        return None
    return min(FULL_OBSERVATION_MAX_THREADS, round_up_to_warps(threads))


# Per-step scratch of the K-nearest search and of the count of runners left, which every launch writes before
# it reads: kept in each block's shared memory (StateArray.block_local) in this order while they fit in the
# budget. First the planes of the staged sorts and sums, each stage a read of what other agents wrote the stage
# before (a round trip to L2 in the buffers); then what the search reads of every candidate; the lists last.
# The index's search reads cell_start for every run of candidates, its build the prefix counts only to place
# the keys: cell_start goes first (at 1000 agents the 28 KiB hold the sort's planes, runners_left, the
# positions, cell_start and the list by cell; below the index's 512 agents the scan's counts and lists fit
# whatever the order).
BLOCK_LOCAL_ORDER = ("sort_key", "runners_left", "row_x", "row_y", "alive_list", "cell_start", "alive_count",
                     "cell_agents", "cell_of", "list_row", "nbr_id")  # fmt: skip
# Shared memory a game's block may take for them by default: 28 KiB leaves room on an SM (228 KiB) for the
# 5 blocks of 256 threads of the capped 1000-agent kernel, and for its L1 cache, which holds the spills. On
# an H100 the 100+900 rollout step took 0.875 ms with 24 KiB, 0.861 with 28 (the list by cell, read for
# every candidate, joins), 0.879 with 32 (the prefix counts join instead) and 0.940 with 40 (both, and L1
# down from 92 to 28 KiB); 10+100 agents take 7.5 KB of any of them
# (benchmarks/results/h100_2026-12-07i/README.md).
BLOCK_SCRATCH_BYTES = 28 * 1024


def block_local_state(state: list[StateArray], num_agents: int, budget: int) -> list[StateArray]:
    """``state`` with the arrays of ``BLOCK_LOCAL_ORDER`` marked block-local, in that order, each that fits in
    what ``budget`` (bytes a game) leaves."""
    chosen: set[str] = set()
    left = budget
    by_name = {arr.name: arr for arr in state}
    for name in BLOCK_LOCAL_ORDER:
        size = by_name[name].bytes_per_game(num_agents) if name in by_name else None
        if size is not None and size <= left:
            chosen.add(name)
            left -= size
    return [replace(arr, block_local=True) if arr.name in chosen else arr for arr in state]


def index_cells_per_side(num_agents: int, k: int) -> int:
    """Cells per side of the spatial index: about ``max(2, K / 2)`` agents per cell when spread evenly.

    Then the K nearest usually lie within the agent's cell and its eight
    neighbours. At most ``num_agents / 2`` cells, so that the cell starts fit in
    an agent-sized array.
    """
    return max(1, math.isqrt(num_agents // max(2, k // 2)))


GAME_WORK = ("serial", "staged")
# How the per-game work runs when none is asked for. On an H200 the staged form took the index kernel from
# 782 to 600 us at 1000 agents a game and from 2305 to 1511 us at 4096, 10+100 at 100 games from 37.2 to
# 31.7 us (benchmarks/results/h200_2026-12-05/); on a 2-core CPU its rollouts were 25-45% slower
# (cpu_2026-12-04_staged/): one core walks the agents one after another either way.
DEFAULT_GAME_WORK = {"cuda": "staged", "cpu": "serial"}


def stages_for(num_agents: int, radix: int = 2) -> int:
    """Stages of a merge sort (``radix`` 2) or of a tree sum or prefix count that combines ``radix`` slots a
    stage, over ``num_agents`` slots: ``ceil(log_radix(num_agents))``, at least 1."""
    stages, reach = 1, int(radix)  # int(): exact integer powers, whatever integer type came
    while reach < int(num_agents):
        stages, reach = stages + 1, reach * int(radix)
    return stages


def tag_definition(config: TagConfig, spatial_index: bool | None = None, backend: str | None = None,
                   max_registers: int | str | None = "auto",
                   game_work: str | None = None, num_games: int | None = None,
                   multiprocessors: int | None = None,
                   threads_per_block: int | None = None,
                   sm_limits: MultiprocessorLimits = SM_90_LIMITS,
                   block_scratch_bytes: int = BLOCK_SCRATCH_BYTES,
                   index_cells: int | None = None) -> EnvDefinition:  # fmt: skip
    """The :class:`EnvDefinition` of one Tag configuration.

    ``spatial_index``: find the K nearest agents through a grid of cells built
    every step (O(N) per game, then O(K) candidates per agent) instead of
    scanning all N agents; ``None`` chooses it from
    ``SPATIAL_INDEX_MIN_AGENTS[backend]`` agents on (``backend``: ``"cuda"`` or
    ``"cpu"``, the backend the env will run on; ``None``: ``"cuda"`` when torch
    sees a GPU, as for an env made without a device). The observations, tags
    and rewards are the same either way. Ignored with the full observation.
    ``max_registers``: a register cap for the CUDA kernel (see
    :class:`~gpu_vecenv.definition.EnvDefinition`); ``None``: the compiler's
    choice; ``"auto"``: the compiler's choice with the full observation; with
    the K-nearest one ``K_NEAREST_MAX_REGISTERS``, unless ``num_games`` and
    ``multiprocessors`` (the device's SMs) say that every game fits on the
    card at once uncapped (in blocks of ``threads_per_block`` threads, the
    block the env will launch; ``None``: the default block; each SM holding
    what ``sm_limits`` allow), where the cap would only add spills.
    ``game_work``: how the work done once per game runs (the index's sort by
    cell, the count of runners left). ``"serial"``: one thread of the game
    walks every agent. ``"staged"``: the game's agents share it in stages
    (:class:`~gpu_vecenv.definition.Phase`'s ``stages``): a merge sort of cell
    keys and a prefix count of the agents in the game in
    ``ceil(log2(num_agents))``, a tree sum of the runners left in
    ``ceil(log4(num_agents))`` (``sim.COUNT_RADIX``), more work in all but a
    dependent chain of logarithmic rather than ``num_agents`` steps.
    ``None``: ``DEFAULT_GAME_WORK[backend]`` (staged on a GPU, serial on a
    CPU). The results are the same either way. ``block_scratch_bytes``: the
    shared memory a game's CUDA block may take for the step's scratch arrays
    (``BLOCK_LOCAL_ORDER``), 0 to keep them all in the buffers; the results
    are the same either way. ``index_cells``: the spatial index's cells per
    side, at most ``isqrt(num_agents - 1)`` (the cell starts share an
    agent-sized array); ``None``: :func:`index_cells_per_side`. Finer cells
    mean fewer candidates a search but more cells to read; the results are the
    same either way, and it is ignored without the index.
    """
    n, k = config.num_agents, config.num_other_agents_observed
    if spatial_index is not None and not isinstance(spatial_index, (bool, np.bool_)):
        raise TypeError(f"WarpTag: spatial_index must be True, False or None, got {spatial_index!r}")
    if backend is None:
        backend = "cuda" if torch.cuda.is_available() else "cpu"
    if backend not in SPATIAL_INDEX_MIN_AGENTS:
        raise ValueError(f"WarpTag: backend must be one of {sorted(SPATIAL_INDEX_MIN_AGENTS)}, got {backend!r}")
    auto_registers = isinstance(max_registers, str) and max_registers == "auto"
    if auto_registers:
        max_registers = None if config.use_full_observation else K_NEAREST_MAX_REGISTERS
    elif max_registers is not None and not is_integer(max_registers, 16, 255):
        raise ValueError(
            f"WarpTag: max_registers must be 'auto', None or an integer in [16, 255], got {max_registers!r}"
        )
    if not is_integer(block_scratch_bytes, 0, MAX_BLOCK_LOCAL_BYTES):
        raise ValueError(
            f"WarpTag: block_scratch_bytes must be an integer in [0, {MAX_BLOCK_LOCAL_BYTES}], "
            f"got {block_scratch_bytes!r}"
        )
    if index_cells is not None and not is_integer(index_cells, 1, max(1, math.isqrt(n - 1))):
        raise ValueError(
            f"WarpTag: index_cells must be None or an integer in [1, {max(1, math.isqrt(n - 1))}] for {n} agents "
            f"(the cell starts share an agent-sized array), got {index_cells!r}"
        )
    cells = index_cells_per_side(n, k) if index_cells is None else int(index_cells)
    if game_work is None:
        game_work = DEFAULT_GAME_WORK[backend]
    if not isinstance(game_work, str) or game_work not in GAME_WORK:
        raise ValueError(f"WarpTag: game_work must be one of {GAME_WORK} or None, got {game_work!r}")
    staged = game_work == "staged"
    stages = stages_for(n)
    sum_stages = stages_for(n, sim.COUNT_RADIX)
    indexed = not config.use_full_observation and (
        n >= SPATIAL_INDEX_MIN_AGENTS[backend] if spatial_index is None else bool(spatial_index)
    )
    state = [
        StateArray("x", "float32"),
        StateArray("y", "float32"),
        StateArray("speed", "float32"),
        StateArray("direction", "float32"),
        StateArray("acceleration", "float32"),
        # Fixed starting values from reset options; NaN means "draw at random".
        StateArray("init_x", "float32"),
        StateArray("init_y", "float32"),
        StateArray("init_direction", "float32"),
        StateArray("alive", "int32"),
        StateArray("agent_type", "int32"),
        StateArray("tagged_by", "int32"),
    ]
    if config.use_full_observation:
        # One call per observed agent writes its seven features, loading its values once, side by side; the
        # first call also the entries after them. With an even number of others, two of them a call, each
        # feature's pair of entries by one 8-byte store: half the store requests (-10%, NOTES.md v31).
        if (n - 1) % 2 == 0:
            observe: tuple[Phase, ...] = (Phase(sim.observe_every_other_paired, "slot", slots=(n - 1) // 2 + 1),)
        else:
            observe = (Phase(sim.observe_every_other, "slot", slots=n - 1),)
        block_threads: int | None = full_observation_threads(n, observe[0].slots)
    else:
        # vector=True: indexed [k, g, a] even when K == 1. Row r of nbr_id is the list of the agent the search
        # handed to thread r: only agents in the game take a thread. The scan's observation finds an agent's
        # row through list_row; the index's observes the agents in the game by row.
        # out_when_observed: whether an agent's row of a kept observation (copy=False) already is that of an
        # agent out of the game, which the observation then leaves as it is (NOTES.md v64, v65).
        state += [StateArray("nbr_id", "int32", length=k, vector=True), StateArray("out_when_observed", "int32")]
        if not indexed:
            state += [StateArray("list_row", "int32")]
        # As the full observation, one call per listed agent (a patched copy doing so took 25% off the K=10
        # kernel, NOTES.md v15). Not two a call by 8-byte stores: that made the K=10 kernels slower (v31).
        listed = Phase(sim.observe_listed, "slot", slots=k)
        block_threads = None
        if indexed:
            # cell_start uses the first cells**2 + 1 slots of an agent-sized array (cells**2 + 1 <= agents).
            # row_x / row_y: the positions of the agents in the index's order, so that the search reads
            # them without looking the ids up.
            state += [StateArray("cell_start", "int32"), StateArray("cell_agents", "int32"),
                      StateArray("row_x", "float32"), StateArray("row_y", "float32")]  # fmt: skip
            if staged:
                # Keys cell * n + id of the merge sort, in two planes it merges back and forth between. Only
                # the agents in the game are sorted (a rollout's games hold about a fifth of their agents on
                # average): prefix counts of them place their keys first.
                wide = (cells**2 + 1) * n > np.iinfo(np.int32).max
                state += [StateArray("sort_key", "int64" if wide else "int32", length=2),
                          StateArray("alive_count", "int32", length=2, vector=True)]  # fmt: skip
                build: tuple[Phase, ...] = (
                    Phase(sim.count_alive_before, stages=stages),
                    Phase(sim.place_cell_key),
                    Phase(sim.merge_cell_runs, stages=stages),
                    Phase(sim.list_cells),
                )
            else:
                # Each agent's cell, for the one thread that lists the game's agents by cell.
                state += [StateArray("cell_of", "int32")]
                build = (Phase(sim.assign_cell), Phase(sim.build_index, "game"))
            # The agents in the game observed by their place in the index's list, whose row of nbr_id the search
            # wrote (no lookup of an agent's row by its id), and those out of the game by id, in one pass.
            observe = (*build, Phase(sim.find_nearest_indexed), Phase(sim.observe_indexed, "slot", slots=k),
                       Phase(sim.note_out_of_game))  # fmt: skip
        else:
            # Prefix counts of the agents in the game (two planes when staged), their ids in a list
            # and their positions copied in that order, so that the scan reads them without a lookup.
            state += [StateArray("alive_count", "int32", length=2 if staged else 1, vector=True),
                      StateArray("alive_list", "int32"), StateArray("row_x", "float32"),
                      StateArray("row_y", "float32")]  # fmt: skip
            count = (Phase(sim.count_alive_before, stages=stages),) if staged else (Phase(sim.count_alive, "game"),)
            observe = (*count, Phase(sim.list_alive), Phase(sim.find_nearest), listed, Phase(sim.note_out_of_game))
    constants: dict[str, Any] = {
        "grid_length": float(np.float32(config.grid_length)),
        "tagger_max_speed": float(np.float32(config.max_speed * config.skill_level_tagger)),
        "runner_max_speed": float(np.float32(config.max_speed * config.skill_level_runner)),
        "pos_scale": float(np.float32(1.0 / (math.sqrt(2.0) * config.grid_length))),
        "speed_scale": float(np.float32(1.0 / (config.max_speed + 1e-10))),
        "dir_scale": float(np.float32(1.0 / (2.0 * math.pi))),
        "tag_radius": float(np.float32(config.tagging_distance * config.grid_length)),
        "tag_reward_for_tagger": float(config.tag_reward_for_tagger),
        "tag_penalty_for_runner": float(config.tag_penalty_for_runner),
        "step_penalty_for_tagger": float(config.step_penalty_for_tagger),
        "step_reward_for_runner": float(config.step_reward_for_runner),
        "edge_hit_penalty": float(config.edge_hit_penalty),
        "end_of_game_reward_for_runner": float(config.end_of_game_reward_for_runner),
        "acc_table": [float(v) for v in config.acceleration_table()],
        "turn_table": [float(v) for v in config.turn_table()],
        "episode_length": int(config.episode_length),
        "num_observed": int(config.num_observed),
        "tail_entries": int(config.obs_dim - 7 * config.num_observed),
        "tagger_ids": sorted(config.taggers),
        "runner_exits_game_after_tagged": int(config.runner_exits_game_after_tagged),
    }
    if not config.use_full_observation and (staged or not indexed):
        constants["count_plane"] = (stages - 1) % 2 if staged else 0  # the plane holding the finished counts
    if indexed:
        cell_size = np.float32(config.grid_length / cells)
        constants.update(
            index_cells=cells,
            cell_size=float(cell_size),
            inv_cell_size=float(np.float32(cells / config.grid_length)),
            # Float32 rounding can put an agent a hair outside the cell it is counted in.
            index_margin=float(np.float32(1e-3) * cell_size),
        )
        if staged:
            constants["sorted_plane"] = stages % 2  # the plane merge_cell_runs's last stage writes
    if staged:
        state += [StateArray("runners_left", "int32")]
        end_phases: tuple[Phase, ...] = (
            Phase(sim.count_runners_left, stages=sum_stages),
            Phase(sim.end_game_counted, "game"),
        )
    else:
        end_phases = (Phase(sim.end_game, "game"),)
    state = block_local_state(state, n, int(block_scratch_bytes))
    if auto_registers and max_registers is not None and is_integer(num_games, 1) and is_integer(multiprocessors, 1):
        shared = block_local_bytes(state, n)
        registers = K_NEAREST_UNCAPPED_REGISTERS["index" if indexed else "scan", shared > 0]
        # A bad block is refused by the backend; until then it leaves the default's choice.
        block = threads_per_block if is_integer(threads_per_block, 1, 1024) else default_threads_per_block(n)
        if num_games <= multiprocessors * resident_blocks_per_multiprocessor(registers, block, sm_limits, shared):
            max_registers = None
    taggers = config.taggers

    def setup(views: Mapping[str, torch.Tensor]) -> None:
        agent_type = torch.zeros(n, dtype=torch.int32)
        agent_type[list(taggers)] = 1
        views["agent_type"].copy_(agent_type.to(views["agent_type"].device).expand_as(views["agent_type"]))
        for name in ("init_x", "init_y", "init_direction"):
            views[name].fill_(float("nan"))

    return EnvDefinition(
        name="WarpTag-v0",
        num_agents=n,
        action_nvec=(config.num_acceleration_levels + 1, config.num_turn_levels + 1),
        obs_dim=config.obs_dim,
        state=tuple(state),
        constants=constants,
        update_phases=(Phase(sim.move),),
        observe_phases=observe,
        reward_phases=(
            (Phase(sim.tag_runners_indexed), Phase(sim.reward_taggers_and_survivors_indexed))
            if indexed
            else (Phase(sim.tag_runners), Phase(sim.reward_taggers_and_survivors))
        )
        + end_phases,
        reset_phases=(Phase(sim.place_agent),),
        active="alive",
        roles={"tagger": tuple(taggers), "runner": config.runners},
        reset_option_names=RESET_OPTIONS,
        reset_options=_apply_reset_options(n, float(np.float32(config.grid_length))),
        setup=setup,
        # The running top-K list of the K-nearest search; only its ids are kept (nbr_id), for the observation.
        # The index's search keeps (distance, id) keys, as its candidates come out of id order (sim.insert_key).
        scratch=()
        if config.use_full_observation
        else (StateArray("near_key", "int64", length=k),)
        if indexed
        else (StateArray("near_d2", "float32", length=k), StateArray("near_id", "int32", length=k)),
        reference=partial(TagReference, config),
        render=partial(draw_games, grid_length=config.grid_length, episode_length=config.episode_length),
        max_registers=max_registers,
        threads_per_block=block_threads,
    )


def _apply_reset_options(num_agents: int, grid_length: float):
    def apply(views: Mapping[str, torch.Tensor], options: Mapping[str, Any], game_mask: torch.Tensor) -> None:
        """Fix (or, when absent, free) the starting positions and headings of the reset games.

        ``initial_positions``: ``(num_agents, 2)``; ``initial_directions``:
        ``(num_agents,)``; NaN entries stay random. Positions must lie in the arena
        ``[0, grid_length]``, directions in ``[0, 2*pi)``. They apply to every reset
        game and to its later autoresets, until a reset without them.
        """
        fixed = {
            "init_x": None,
            "init_y": None,
            "init_direction": None,
        }
        if options.get("initial_positions") is not None:
            pos = torch.as_tensor(np.asarray(options["initial_positions"], np.float32))
            if pos.shape != (num_agents, 2):
                raise ValueError(
                    f"WarpTag: reset option initial_positions must have shape ({num_agents}, 2), got {tuple(pos.shape)}"
                )
            given = pos[~torch.isnan(pos)]
            if bool(((given < 0) | (given > grid_length)).any()):
                raise ValueError(
                    f"WarpTag: reset option initial_positions must lie in the arena [0, grid_length = {grid_length}] "
                    f"(NaN: random), got values from {float(given.min())} to {float(given.max())}"
                )
            fixed["init_x"], fixed["init_y"] = pos[:, 0], pos[:, 1]
        if options.get("initial_directions") is not None:
            dirs = torch.as_tensor(np.asarray(options["initial_directions"], np.float32))
            if dirs.shape != (num_agents,):
                raise ValueError(
                    f"WarpTag: reset option initial_directions must have shape ({num_agents},), got {tuple(dirs.shape)}"
                )
            if torch.any((dirs < 0) | (dirs >= 2 * math.pi)):
                raise ValueError("WarpTag: reset option initial_directions must lie in [0, 2*pi)")
            fixed["init_direction"] = dirs
        for name, values in fixed.items():
            view = views[name]
            new = torch.full((num_agents,), float("nan")) if values is None else values
            new = new.to(view.device).expand_as(view)
            view.copy_(torch.where(game_mask.view(-1, 1), new, view))

    return apply


def make_warp_tag(num_envs: int = 1, **kwargs: Any) -> GpuVectorEnv:
    """Vector entry point of ``WarpTag-v0``: ``num_envs`` games of Tag.

    Keyword arguments are Tag parameters (see :class:`TagConfig`), the options
    of :class:`~gpu_vecenv.vector_env.GpuVectorEnv` (``device``,
    ``autoreset_mode``, ``copy``, ...), ``spatial_index``, ``max_registers``,
    ``game_work``, ``block_scratch_bytes`` and ``index_cells`` (see :func:`tag_definition`).
    """
    env_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in GpuVectorEnv.OPTIONS}
    spatial_index = kwargs.pop("spatial_index", None)
    max_registers = kwargs.pop("max_registers", "auto")
    game_work = kwargs.pop("game_work", None)
    block_scratch_bytes = kwargs.pop("block_scratch_bytes", BLOCK_SCRATCH_BYTES)
    index_cells = kwargs.pop("index_cells", None)
    config = TagConfig.from_kwargs(
        options=GpuVectorEnv.OPTIONS
        | {"spatial_index", "max_registers", "game_work", "block_scratch_bytes", "index_cells"},
        **kwargs,
    )
    # The device decides the default search and register cap, so it is resolved (or refused) before the
    # definition is made.
    device = env_kwargs["device"] = resolve_device(env_kwargs.get("device"))
    multiprocessors = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else None
    sm_limits = multiprocessor_limits(device.index or 0) if device.type == "cuda" else SM_90_LIMITS
    definition = tag_definition(
        config,
        spatial_index,
        backend=device.type,
        max_registers=max_registers,
        game_work=game_work,
        num_games=num_envs,
        multiprocessors=multiprocessors,
        threads_per_block=env_kwargs.get("threads_per_block"),
        sm_limits=sm_limits,
        block_scratch_bytes=block_scratch_bytes,
        index_cells=index_cells,
    )
    return GpuVectorEnv(definition, num_games=num_envs, **env_kwargs)
