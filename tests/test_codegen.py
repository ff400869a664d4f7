"""The kernel gpu_vecenv generates: which threads take which observation entries, and which names it binds.

Entry phases (``Phase(fn, "entry", entry_block=B)``) and slot phases (``Phase(fn, "slot", slots=S)``)
hand the ``(agent, entry)`` or ``(agent, slot)`` pairs of a game to the block's threads by stride loops
that step their counters with carries instead of dividing; these tests run those loops as plain Python
for every thread and check that each pair is visited exactly once, in the documented order. A slot
phase that writes another slot's entry is named by the order check. The generated kernel also binds
names of its own (loop counters, flags, output views); an env naming a state array or constant so would
be overwritten inside the kernel, so the definition refuses such names.
"""

from __future__ import annotations

import ast
import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import SMALL_TAG
from entry_phases import entry_tag_definition
from faulty_phases import observe_listed_and_overwrite_the_time

from envs.tag_continuous.config import TagConfig
from envs.tag_continuous.env import BLOCK_SCRATCH_BYTES, K_NEAREST_MAX_REGISTERS, tag_definition
from gpu_vecenv import GpuVectorEnv, backends, shared
from gpu_vecenv.backends import MultiprocessorLimits, resident_blocks_per_multiprocessor
from gpu_vecenv.check import check_agent_order
from gpu_vecenv.codegen import KERNEL_BODY_FIRST_LINE_WITH_LINEINFO, _Writer, generate_source
from gpu_vecenv.definition import FRAMEWORK_NAMES, KERNEL_NAMES, MAX_BLOCK_LOCAL_BYTES, Phase, StateArray
from gpu_vecenv.layout import StateLayout
from gpu_vecenv.oracle import compare_with_reference


def visits_of_every_thread(w, num_agents, nthreads):
    """``visits[tid]``: what thread ``tid`` appended, running the lines ``w`` wrote as the kernel would."""
    source = "def thread(tid, nthreads, num_agents, visits):\n" + "\n".join("    " + line for line in w.lines)
    scope = {"np": np}
    exec(source, scope)  # noqa: S102  (the text the kernel would hold)
    taken = []
    for tid in range(nthreads):
        visits = []
        scope["thread"](np.uint32(tid), np.uint32(nthreads), num_agents, visits)
        taken.append(visits)
    return taken


def entries_taken(num_agents, obs_dim, block, nthreads):
    """``taken[tid]``: the ``(a, i)`` pairs thread ``tid`` visits, in order, as the generated CUDA loops do."""
    w = _Writer("cuda")
    w.entries("visits.append((int(a), int(i)))", obs_dim, block=block)
    return visits_of_every_thread(w, num_agents, nthreads)


def documented_order(num_agents, obs_dim, block):
    """The flat order of :class:`Phase`: whole blocks (block r of every agent, then r + 1), then the rest by agent."""
    whole = 0 if block is None or block >= obs_dim else obs_dim // block
    order = [(a, r * block + k) for r in range(whole) for a in range(num_agents) for k in range(block)]
    first = whole * block if whole else 0
    return order + [(a, i) for a in range(num_agents) for i in range(first, obs_dim)]


@pytest.mark.parametrize(
    "num_agents, obs_dim, block, nthreads",
    [
        (110, 72, 10, 128),  # WarpTag's default: 7 blocks of 10 features, then the 2 tail entries
        (110, 72, None, 128),  # agent after agent
        (4, 23, 3, 32),  # 1+3 full observation
        (105, 730, 104, 128),  # 5+100 full observation
        (5, 12, 12, 3),  # a block of obs_dim is agent order
        (7, 9, 1, 5),  # blocks of one entry: entry i of every agent, then i + 1
        (3, 10, 4, 64),  # more threads than entries
        (1, 8, 3, 2),
        (33, 16, 8, 1024),
        (300, 20, 6, 7),  # a step that carries agents and blocks at once
    ],
)
def test_every_entry_is_taken_once_in_the_documented_order(num_agents, obs_dim, block, nthreads):
    taken = entries_taken(num_agents, obs_dim, block, nthreads)
    order = documented_order(num_agents, obs_dim, block)
    assert sorted(pair for visits in taken for pair in visits) == sorted(order)
    assert len(order) == num_agents * obs_dim and len(set(order)) == len(order)
    # thread tid takes the flat positions tid, tid + nthreads, ... of each part of the order
    whole = 0 if block is None or block >= obs_dim else obs_dim // block
    split = whole * (block or 0) * num_agents
    parts = [order[:split], order[split:]]
    for tid, visits in enumerate(taken):
        assert visits == [pair for part in parts for pair in part[tid::nthreads]]


def test_a_warp_takes_one_feature_of_neighbouring_agents_in_the_default_tag_kernel():
    config = TagConfig()
    taken = entries_taken(config.num_agents, config.obs_dim, config.num_observed, 128)
    first_entries = [visits[0][1] for visits in taken[:32]]
    assert {i // config.num_observed for i in first_entries} == {0}
    assert [visits[0][0] for visits in taken[:32]] == [tid // config.num_observed for tid in range(32)]


@pytest.mark.parametrize("params", [{}, {"use_full_observation": True}, {"num_runners": 600}])
@pytest.mark.parametrize("target", ["cuda", "cpu"])
def test_the_kernel_binds_only_the_envs_names_and_its_reserved_ones(params, target):
    definition = tag_definition(TagConfig(**params), backend="cuda")
    tree = ast.parse(generate_source(definition, target))
    (run,) = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "run"]
    bound = {node.id for node in ast.walk(run) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    declared = {s.name for s in definition.state} | set(definition.constants) | {s.name for s in definition.scratch}
    action_sizes = {f"nvec{k}" for k in range(len(definition.action_nvec))}
    shared_arrays = {f"_local_{s.name}" for s in definition.state if s.block_local} if target == "cuda" else set()
    assert bound - declared - FRAMEWORK_NAMES - KERNEL_NAMES - action_sizes - shared_arrays == set()
    module_globals = {alias.asname or alias.name for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
                      for alias in node.names}  # fmt: skip
    module_globals |= {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets}
    phases = {f"_phase{k}" for k in range(len(definition.all_phases))}
    constant_globals = {f"_{name}" for name in definition.constants}
    assert module_globals - KERNEL_NAMES - phases - constant_globals == set()


@pytest.mark.parametrize(
    "name",
    ["tid", "i", "slot", "pending", "step_a", "nvec0", "_phase3", "np", "agent_f32", "_acc_table", "_local_x",
     "with_game_axis"],
)  # fmt: skip
@pytest.mark.parametrize("kind", ["state", "constant"])
def test_an_env_name_the_kernel_uses_for_itself_is_refused(name, kind):
    definition = tag_definition(TagConfig(), backend="cpu")
    with pytest.raises(ValueError, match=f"{name!r} has a name the generated kernel uses for itself"):
        if kind == "state":
            dataclasses.replace(definition, state=definition.state + (StateArray(name, "float32"),))
        else:
            dataclasses.replace(definition, constants={**definition.constants, name: 1.0})


@pytest.mark.parametrize(
    "phase, message",
    [
        (Phase(lambda g, a: None, "agent", entry_block=2), "which only entry phases"),
        (Phase(lambda g, a, i: None, "entry", entry_block=0), r"integer in \[1, obs_dim=72\], got 0"),
        (Phase(lambda g, a, i: None, "entry", entry_block=73), r"integer in \[1, obs_dim=72\], got 73"),
        (Phase(lambda g, a, i: None, "entry", entry_block=2.0), r"integer in \[1, obs_dim=72\], got 2.0"),
        (Phase(lambda g, a, i: None, "entry", entry_block=True), r"integer in \[1, obs_dim=72\], got True"),
    ],
)
def test_a_bad_entry_block_is_refused(phase, message):
    definition = tag_definition(TagConfig(), backend="cpu")
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(definition, observe_phases=definition.observe_phases + (phase,))


def slots_taken(num_agents, count, nthreads):
    """``taken[tid]``: the ``(a, slot)`` pairs thread ``tid`` visits, in order, as the generated CUDA loop does."""
    w = _Writer("cuda")
    w.slots("visits.append((int(a), int(slot)))", count, order_bit=0)
    return visits_of_every_thread(w, num_agents, nthreads)


@pytest.mark.parametrize(
    "num_agents, count, nthreads",
    [(110, 11, 128), (1000, 11, 256), (4, 4, 32), (7, 1, 5), (3, 10, 64), (300, 6, 7), (1, 3, 2)],
)
def test_every_slot_is_taken_once_consecutive_threads_taking_consecutive_slots(num_agents, count, nthreads):
    taken = slots_taken(num_agents, count, nthreads)
    order = [(a, s) for a in range(num_agents) for s in range(count)]
    for tid, visits in enumerate(taken):
        assert visits == order[tid::nthreads]


def test_a_slot_phase_writing_another_slots_entry_is_named_by_the_order_check():
    config = TagConfig.from_kwargs(**SMALL_TAG)
    definition = tag_definition(config, spatial_index=False, backend="cpu")
    assert check_agent_order(definition, num_games=2, steps=5) == []
    faulty = Phase(observe_listed_and_overwrite_the_time, "slot", slots=config.num_observed)
    phases = tuple(faulty if p.fn.__name__ == "observe_listed" else p for p in definition.observe_phases)
    broken = dataclasses.replace(definition, observe_phases=phases)
    assert check_agent_order(broken, num_games=2, steps=5) == [faulty.name]


@pytest.mark.parametrize(
    "phase, message",
    [
        (Phase(lambda g, a, slot: None, "slot"), "a slot phase needs slots"),
        (Phase(lambda g, a: None, "agent", slots=3), "only a slot phase may have it"),
        (Phase(lambda g, a, slot: None, "slot", slots=0), r"integer in \[1, obs_dim=72\], got 0"),
        (Phase(lambda g, a, slot: None, "slot", slots=73), r"integer in \[1, obs_dim=72\], got 73"),
        (Phase(lambda g, a, slot: None, "slot", slots=2.0), r"integer in \[1, obs_dim=72\], got 2.0"),
    ],
)
def test_a_bad_slot_phase_is_refused(phase, message):
    definition = tag_definition(TagConfig(), backend="cpu")
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(definition, observe_phases=definition.observe_phases + (phase,))


def test_a_slot_phase_outside_the_observe_phases_is_refused():
    definition = tag_definition(TagConfig(), backend="cpu")
    slot_phase = Phase(lambda g, a, slot: None, "slot", slots=3)
    with pytest.raises(ValueError, match="has per='slot', which only observe phases may have"):
        dataclasses.replace(definition, reward_phases=definition.reward_phases + (slot_phase,))


@pytest.mark.parametrize("where", ["update_phases", "reward_phases", "reset_phases"])
def test_the_observation_slot_phase_outside_the_observe_phases_is_refused(where):
    definition = tag_definition(TagConfig(), backend="cpu")
    (listed,) = [p for p in definition.observe_phases if p.per == "slot"]
    with pytest.raises(ValueError, match="has per='slot', which only observe phases may have"):
        dataclasses.replace(definition, **{where: getattr(definition, where) + (listed,)})


@pytest.mark.parametrize("kind", [{}, {"use_full_observation": True}, {"spatial_index": True}, {"game_work": "serial"}])
def test_configurations_that_differ_in_sizes_share_one_cpu_kernel(kind):
    # Agents, K, slots, stages and scratch lengths are read at run time on the CPU, so a new size compiles
    # nothing; the CUDA kernel has them as literals and is compiled per configuration.
    def sources(taggers, runners, k):
        config = TagConfig(**{**SMALL_TAG, "num_taggers": taggers, "num_runners": runners,
                              "num_other_agents_observed": k,
                              "use_full_observation": kind.get("use_full_observation", False)})  # fmt: skip
        options = {key: value for key, value in kind.items() if key != "use_full_observation"}
        definition = tag_definition(config, backend="cpu", **options)
        return generate_source(definition, "cpu"), generate_source(definition, "cuda")

    small, large = sources(2, 5, 3), sources(7, 60, 10)  # 6 others (two a call) and 66 (two a call)
    assert small[0] == large[0]
    assert small[1] != large[1]
    five_others = sources(2, 4, 3)[0]
    if kind.get("use_full_observation"):
        assert five_others != small[0]  # an odd number of others: one a call, another phase
    else:
        assert five_others == small[0]


def test_block_local_arrays_are_the_blocks_shared_memory_in_the_cuda_kernel_only():
    definition = tag_definition(TagConfig(num_taggers=10, num_runners=100), backend="cuda", game_work="staged")
    local = [s.name for s in definition.state if s.block_local]
    assert local == ["nbr_id", "list_row", "alive_count", "alive_list", "row_x", "row_y", "runners_left"]
    assert definition.block_local_bytes == 110 * 4 * (10 + 1 + 2 + 1 + 1 + 1 + 1)
    cuda_source = generate_source(definition, "cuda")
    assert "_local_nbr_id = cuda.shared.array((10, 110), numba.int32)" in cuda_source
    assert "nbr_id = with_game_axis(_local_nbr_id, game_i64.shape[1], 1)" in cuda_source
    assert "row_x = with_game_axis(_local_row_x, game_i64.shape[1], 0)" in cuda_source
    assert "x = agent_f32[0]" in cuda_source  # the game's own state stays in the buffers
    assert "shared" not in generate_source(definition, "cpu")
    in_buffers = tag_definition(TagConfig(num_taggers=10, num_runners=100), backend="cuda", block_scratch_bytes=0)
    assert in_buffers.block_local_bytes == 0 and "cuda.shared" not in generate_source(in_buffers, "cuda")


def test_buffers_for_the_cuda_kernel_leave_out_the_block_local_rows_and_keep_every_other_row():
    definition = tag_definition(TagConfig(num_taggers=10, num_runners=100), backend="cuda", game_work="staged")
    every_row, kernel_rows = StateLayout(definition), StateLayout(definition, block_local_rows=False)
    local = {s.name for s in definition.state if s.block_local}
    for name, slot in every_row.slots.items():
        assert kernel_rows.slots[name] == slot
        if not slot.block_local:  # the block-local rows come after every other row of their buffer
            assert all(slot.row < other.row for other in every_row.slots.values()
                       if other.block_local and other.buffer == slot.buffer)  # fmt: skip
    buffers = kernel_rows.allocate(3, torch.device("cpu"))
    assert set(kernel_rows.views(buffers)) == set(every_row.slots) - local
    assert set(every_row.views(every_row.allocate(3, torch.device("cpu")))) == set(every_row.slots)
    assert every_row.bytes_per_game() - kernel_rows.bytes_per_game() == definition.block_local_bytes
    assert kernel_rows.bytes_per_game() == sum(b[:, 0].numel() * b.element_size() for b in buffers.values())


def test_warp_tag_keeps_what_fits_of_its_scratch_in_shared_memory_in_order():
    def local(budget, **params):
        config = TagConfig(**params)
        definition = tag_definition(config, backend="cuda", game_work="staged", block_scratch_bytes=budget)
        return [s.name for s in definition.state if s.block_local], definition.block_local_bytes

    # 1000 agents: the sort's two planes (8 KB), the runners' sum (4 KB) and the positions the search reads
    # (8 KB) fill 20 of the 28 KiB and the cell starts 4 KB more; the prefix counts' two planes (8 KB) do not
    # fit in the 4.7 KB left, the list by cell (4 KB) does; the rest stays in the buffers.
    names, used = local(BLOCK_SCRATCH_BYTES, num_taggers=100, num_runners=900)
    assert names == ["cell_start", "cell_agents", "row_x", "row_y", "sort_key", "runners_left"] and used == 28000
    assert local(24 * 1024, num_taggers=100, num_runners=900)[1] == 24000
    assert local(0, num_taggers=100, num_runners=900) == ([], 0)
    # A budget that misses one array still takes the smaller ones after it: at 610 agents, 28 B an agent take
    # the 24 B of the sort's planes, the runners' sum, the positions and the cell starts, then not the prefix
    # counts' two planes (8 B) but the list of agents by cell (4 B).
    names, used = local(610 * 28, num_taggers=10, num_runners=600)
    assert names == ["cell_start", "cell_agents", "row_x", "row_y", "sort_key", "runners_left"] and used == 610 * 28
    full = local(MAX_BLOCK_LOCAL_BYTES, num_taggers=1, num_runners=3, use_full_observation=True)
    assert full == (["runners_left"], 16)
    for bad in (-1, MAX_BLOCK_LOCAL_BYTES + 1, 1.5, "24k", None):
        with pytest.raises(ValueError, match=rf"block_scratch_bytes must be an integer in \[0, 49152\], got {bad!r}"):
            tag_definition(TagConfig(), backend="cuda", block_scratch_bytes=bad)


def test_block_local_arrays_must_be_agent_arrays_within_a_blocks_static_shared_memory():
    definition = tag_definition(TagConfig(), backend="cpu")
    with pytest.raises(ValueError, match="state array 'total' is block_local; only agent arrays may be"):
        dataclasses.replace(definition, state=(*definition.state, StateArray("total", "int32", "game",
                                                                            block_local=True)))  # fmt: skip
    big = StateArray("table", "float64", length=60, block_local=True)  # 60 x 110 x 8 B and the env's own
    with pytest.raises(ValueError, match=r"take 5\d{4} bytes a game; expected at most 49152"):
        dataclasses.replace(definition, state=(*definition.state, big))


def test_a_register_cap_reaches_the_cuda_kernel_only():
    capped = tag_definition(TagConfig(**SMALL_TAG), backend="cuda", max_registers=40)
    assert "@cuda.jit(cache=True, max_registers=40)" in generate_source(capped, "cuda")
    assert "max_registers" not in generate_source(capped, "cpu")
    plain = tag_definition(TagConfig(**SMALL_TAG), backend="cuda", max_registers=None)
    assert "@cuda.jit(cache=True)\n" in generate_source(plain, "cuda")


def test_line_information_for_a_profiler_is_asked_for_by_the_environment(monkeypatch):
    definition = tag_definition(TagConfig(**SMALL_TAG), backend="cuda", max_registers=40)
    assert "lineinfo" not in generate_source(definition, "cuda")
    monkeypatch.setenv("GPU_VECENV_LINEINFO", "1")
    source = generate_source(definition, "cuda")
    assert "@cuda.jit(cache=True, max_registers=40, lineinfo=True)" in source
    # The body past every phase module's lines, which the inlined phases' line information numbers as their own.
    lines = source.splitlines()
    assert lines[KERNEL_BODY_FIRST_LINE_WITH_LINEINFO - 2].strip() == ""
    assert lines[KERNEL_BODY_FIRST_LINE_WITH_LINEINFO - 1].strip() != ""
    assert lines.index(next(line for line in lines if line.startswith("def run("))) < 100
    assert "lineinfo" not in generate_source(definition, "cpu")


def test_with_line_information_every_shared_function_is_inlined_so_its_lines_are_named(monkeypatch):
    def search(x):
        return x + 1

    assert shared(search, inline=False).targetoptions["inline"] == "never"
    monkeypatch.setenv("GPU_VECENV_LINEINFO", "1")
    assert shared(search, inline=False).targetoptions["inline"] == "always"


def test_warp_tag_caps_its_k_nearest_kernels_and_not_the_full_observation_by_default():
    for spatial_index in (False, True):
        definition = tag_definition(TagConfig(**SMALL_TAG), spatial_index, backend="cuda")
        assert definition.max_registers == K_NEAREST_MAX_REGISTERS == 48
    assert tag_definition(TagConfig(**SMALL_TAG, use_full_observation=True), backend="cuda").max_registers is None
    assert tag_definition(TagConfig(**SMALL_TAG), backend="cuda", max_registers=None).max_registers is None
    envs = gym.make_vec("WarpTag-v0", num_envs=2, device="cpu", **SMALL_TAG)
    assert envs.unwrapped.definition.max_registers == K_NEAREST_MAX_REGISTERS
    uncapped = gym.make_vec("WarpTag-v0", num_envs=2, device="cpu", max_registers=None, **SMALL_TAG)
    assert uncapped.unwrapped.definition.max_registers is None
    assert "@cuda.jit(cache=True)\n" in generate_source(uncapped.unwrapped.definition, "cuda")
    with pytest.raises(ValueError, match=r"max_registers must be 'auto', None or an integer in \[16, 255\], got '40'"):
        tag_definition(TagConfig(**SMALL_TAG), backend="cuda", max_registers="40")


def test_the_k_nearest_cap_is_dropped_where_every_game_fits_on_the_card_uncapped():
    def cap(num_games, multiprocessors=132, max_registers="auto", threads_per_block=None,
            block_scratch_bytes=BLOCK_SCRATCH_BYTES, **params):  # fmt: skip
        config = TagConfig(**{**SMALL_TAG, **params})
        definition = tag_definition(config, backend="cuda", max_registers=max_registers, num_games=num_games,
                                    multiprocessors=multiprocessors, threads_per_block=threads_per_block,
                                    block_scratch_bytes=block_scratch_bytes)  # fmt: skip
        return definition.max_registers

    # sm_90: 76 registers and 128 threads (the scan at 10+100) hold 6 blocks an SM, 116 and 256 (the index at
    # 1000 agents) 2, 48 and 128 10, 48 and 256 5; small blocks stop at 32 an SM.
    assert [resident_blocks_per_multiprocessor(r, t) for r, t in [(76, 128), (116, 256), (48, 128), (48, 256)]] == [
        6, 2, 10, 5]  # fmt: skip
    assert resident_blocks_per_multiprocessor(16, 32) == 32
    # The scan's scratch in shared memory (the default): 66 registers, 7 blocks of 128 threads an SM.
    scan = {"num_taggers": 10, "num_runners": 100, "num_other_agents_observed": 10}
    assert cap(100, **scan) is None
    assert cap(7 * 132, **scan) is None
    assert cap(7 * 132 + 1, **scan) == K_NEAREST_MAX_REGISTERS
    assert cap(2000, **scan) == K_NEAREST_MAX_REGISTERS
    assert cap(7 * 66, multiprocessors=66, **scan) is None
    assert cap(7 * 66 + 1, multiprocessors=66, **scan) == K_NEAREST_MAX_REGISTERS
    # In the buffers: 80 registers, 6 blocks.
    assert cap(6 * 132, block_scratch_bytes=0, **scan) is None
    assert cap(6 * 132 + 1, block_scratch_bytes=0, **scan) == K_NEAREST_MAX_REGISTERS
    index = {"num_taggers": 90, "num_runners": 910, "num_other_agents_observed": 10}
    assert cap(264, **index) is None
    assert cap(265, **index) == K_NEAREST_MAX_REGISTERS
    # The block the env launches counts: 66 registers and 512 threads hold 1 block an SM, 64 threads 14.
    assert cap(7 * 132, threads_per_block=512, **scan) == K_NEAREST_MAX_REGISTERS
    assert cap(132, threads_per_block=512, **scan) is None
    assert cap(14 * 132, threads_per_block=64, **scan) is None
    assert cap(7 * 132, threads_per_block=0, **scan) is None  # the backend refuses the block; the default's choice
    # Asked for, a cap stays; unknown games or SMs (or a bad number, which the vector env refuses) keep it.
    assert cap(100, max_registers=40, **scan) == 40
    assert cap(None, **scan) == K_NEAREST_MAX_REGISTERS
    assert cap(100, multiprocessors=None, **scan) == K_NEAREST_MAX_REGISTERS
    assert cap(0, **scan) == K_NEAREST_MAX_REGISTERS
    assert cap(True, **scan) == K_NEAREST_MAX_REGISTERS
    assert cap(2000, use_full_observation=True) is None


def test_the_cards_own_limits_decide_how_many_games_fit_uncapped():
    # An sm_86/sm_89 card holds 48 warps and 16 blocks an SM, where sm_90 holds 64 and 32.
    sm_89 = MultiprocessorLimits(registers=65536, warps=48, blocks=16, shared_bytes=102400)
    assert resident_blocks_per_multiprocessor(80, 128, sm_89) == 6  # registers bind, as on sm_90
    assert resident_blocks_per_multiprocessor(80, 32) == 25
    assert resident_blocks_per_multiprocessor(80, 32, sm_89) == 16  # the blocks bind
    assert resident_blocks_per_multiprocessor(16, 512, sm_89) == 3  # the warps bind (4 on sm_90)

    def cap(num_games, limits):
        definition = tag_definition(TagConfig(**SMALL_TAG), backend="cuda", num_games=num_games, multiprocessors=132,
                                    sm_limits=limits)  # fmt: skip
        return definition.max_registers

    # 2+5 agents: the scan kernel in blocks of 32 threads.
    assert cap(25 * 132, MultiprocessorLimits()) is None
    assert cap(16 * 132, sm_89) is None
    assert cap(16 * 132 + 1, sm_89) == K_NEAREST_MAX_REGISTERS


def test_the_blocks_shared_memory_limits_how_many_games_fit_uncapped():
    # Each block takes its static shared memory and 1 KiB the system reserves: 228 KiB hold 4 blocks of 48 KiB.
    assert resident_blocks_per_multiprocessor(66, 128, shared_bytes=48 * 1024) == 4  # 7 by registers
    assert resident_blocks_per_multiprocessor(66, 128, shared_bytes=0) == 7
    assert resident_blocks_per_multiprocessor(66, 128, MultiprocessorLimits(shared_bytes=102400), 24000) == 4

    def cap(num_games, budget):
        definition = tag_definition(TagConfig(num_taggers=10, num_runners=100, num_other_agents_observed=100),
                                    backend="cuda", num_games=num_games, multiprocessors=132,
                                    block_scratch_bytes=budget)  # fmt: skip
        return definition.max_registers, definition.block_local_bytes

    # K = 100 at 10+100: the search's lists alone take 44 000 B a game, so 4 blocks an SM where registers hold 7.
    assert cap(4 * 132, MAX_BLOCK_LOCAL_BYTES) == (None, 47080)
    assert cap(4 * 132 + 1, MAX_BLOCK_LOCAL_BYTES) == (K_NEAREST_MAX_REGISTERS, 47080)
    # Within the default 28 KiB the lists stay in the buffers, and the registers hold 7 blocks.
    assert cap(7 * 132, BLOCK_SCRATCH_BYTES)[0] is None
    assert cap(7 * 132 + 1, BLOCK_SCRATCH_BYTES)[0] == K_NEAREST_MAX_REGISTERS


@pytest.mark.parametrize("cap", [8, 256, 40.0, True, np.int64(300), "AUTO", "None", b"auto"])
def test_a_bad_register_cap_is_refused(cap):
    with pytest.raises(ValueError, match=r"WarpTag: max_registers must be 'auto', None or an integer in \[16, 255\]"):
        tag_definition(TagConfig(**SMALL_TAG), backend="cuda", max_registers=cap)
    definition = tag_definition(TagConfig(**SMALL_TAG), backend="cuda")
    with pytest.raises(ValueError, match=r"max_registers must be None or an integer in \[16, 255\], got"):
        dataclasses.replace(definition, max_registers=cap)


def test_warp_tag_widens_the_block_of_a_large_full_observation_only():
    def block(**params):
        return tag_definition(TagConfig(**{**SMALL_TAG, **params}), backend="cuda").threads_per_block

    # About 8 (observer, call) pairs a thread, at most 384 threads; the default block below two threads an agent.
    assert block(use_full_observation=True, num_taggers=5, num_runners=100) == 384  # 105 x 53 calls
    assert block(use_full_observation=True, num_taggers=5, num_runners=60) == 288  # 65 x 33 calls
    assert block(use_full_observation=True, num_taggers=1, num_runners=3) is None  # 4 x 3 calls
    assert block(use_full_observation=True, num_taggers=5, num_runners=20) is None  # 25 x 13 calls: 41 threads
    assert block(num_taggers=5, num_runners=100) is None  # K nearest
    envs = gym.make_vec("WarpTag-v0", num_envs=2, device="cpu", **{**SMALL_TAG, "num_runners": 30},
                        use_full_observation=True)  # fmt: skip
    assert envs.unwrapped.definition.threads_per_block == 128  # 32 x 31 calls (31 others: one a call) / 8
    definition = envs.unwrapped.definition
    same = generate_source(dataclasses.replace(definition, threads_per_block=None), "cuda")
    assert generate_source(definition, "cuda") == same  # a launch setting: the same kernel


@pytest.mark.parametrize("threads", [0, 1025, True, 64.0, "128"])
def test_a_bad_default_block_size_is_refused(threads):
    definition = tag_definition(TagConfig(**SMALL_TAG), backend="cuda")
    with pytest.raises(ValueError, match=r"threads_per_block must be None or an integer in \[1, 1024\], got"):
        dataclasses.replace(definition, threads_per_block=threads)
    given_by_numpy = dataclasses.replace(definition, threads_per_block=np.int64(96)).threads_per_block
    assert type(given_by_numpy) is int and given_by_numpy == 96


def test_a_register_cap_with_a_hand_written_kernel_is_refused():
    definition = tag_definition(TagConfig(**SMALL_TAG), backend="cuda")
    with pytest.raises(ValueError, match="max_registers=40 caps the generated kernel; .* pass max_registers=None"):
        dataclasses.replace(definition, cuda_kernel=object(), max_registers=40)


def test_the_cpu_backend_takes_a_register_cap_and_steps_the_same_game():
    def rollout(**extra):
        envs = gym.make_vec("WarpTag-v0", num_envs=3, device="cpu", use_full_observation=True, **SMALL_TAG, **extra)
        obs, _ = envs.reset(seed=4)
        actions = torch.ones((envs.num_envs, 2), dtype=torch.int64)
        return [obs.clone()] + [envs.step(actions)[0].clone() for _ in range(5)]

    # The CPU kernel has no cap (so both rollouts run one module); the CUDA kernel of the same env has it.
    capped_env = gym.make_vec("WarpTag-v0", num_envs=3, device="cpu", max_registers=np.int64(32), **SMALL_TAG)
    assert capped_env.unwrapped.definition.max_registers == 32
    assert "max_registers=32)" in generate_source(capped_env.unwrapped.definition, "cuda")
    for capped, plain in zip(rollout(max_registers=32), rollout(), strict=True):
        assert torch.equal(capped, plain)


@pytest.mark.parametrize("entry_block", [None, 4])
def test_an_entry_phase_observation_steps_the_reference_game_in_any_agent_order(entry_block):
    # WarpTag-v0 now writes its full observation by slots; this keeps an entry phase running end to end.
    definition = entry_tag_definition(TagConfig(**SMALL_TAG, use_full_observation=True), entry_block)
    assert definition.observe_phases[0].per == "entry"
    report = compare_with_reference(GpuVectorEnv(definition, num_games=3, device="cpu"), steps=40, seed=3)
    assert report.ok, "\n" + report.table()
    assert check_agent_order(definition, num_games=2, steps=5) == []


class _Card:
    """A stand-in for Numba's device, with the attributes an sm_89 card's driver reports."""

    MAX_REGISTERS_PER_MULTIPROCESSOR = 65536
    MAX_THREADS_PER_MULTIPROCESSOR = 1536
    MAX_BLOCKS_PER_MULTIPROCESSOR = 16
    MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 102400
    RESERVED_SHARED_MEMORY_PER_BLOCK = 1024


class _OldDriver:
    """A device whose driver does not know the attributes."""


def test_the_multiprocessor_limits_come_from_the_driver_or_are_sm_90s(monkeypatch):
    monkeypatch.setattr(backends, "SIMULATOR", False)
    monkeypatch.setattr(backends.cuda, "gpus", [_OldDriver(), _Card()])
    sm_89 = MultiprocessorLimits(registers=65536, warps=48, blocks=16, shared_bytes=102400, reserved_shared_bytes=1024)
    assert backends.multiprocessor_limits(1) == sm_89
    assert backends.multiprocessor_limits(0) == backends.SM_90_LIMITS
