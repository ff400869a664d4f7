"""Reference checks of the real CUDA kernel under Numba's CUDA simulator, at tiny sizes.

Run by tests/test_cuda_simulator.py in a process of its own (the simulator is
chosen at import time): ``NUMBA_ENABLE_CUDASIM=1 python tests/cudasim_scenarios.py [NAME ...]``.
Prints one report per scenario and exits non-zero if any disagrees with the reference.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import traceback

import gymnasium as gym
import numpy as np
import torch
from entry_phases import entry_tag_definition

import gpu_vecenv  # noqa: F401
from envs.tag_continuous.config import TagConfig
from envs.tag_continuous.env import tag_definition
from gpu_vecenv import GpuVectorEnv, outputs
from gpu_vecenv.codegen import load_kernel_module
from gpu_vecenv.oracle import compare_with_reference
from gpu_vecenv.shared import SIMULATOR

TINY = dict(num_taggers=2, num_runners=3, num_other_agents_observed=2, episode_length=5, grid_length=5.0,
            tagging_distance=0.1, threads_per_block=2)  # fmt: skip


def _cluster_options():
    positions = np.full((5, 2), np.nan, np.float32)
    positions[0], positions[1] = (2.5, 2.5), (0.2, 0.2)
    for i in range(3):
        angle = 2 * math.pi * i / 3
        positions[2 + i] = (2.5 + 0.3 * math.cos(angle), 2.5 + 0.3 * math.sin(angle))
    return {"initial_positions": positions}


def _edge_options():
    positions = np.full((5, 2), 0.05, np.float32)
    positions[:, 1] = np.linspace(0.5, 4.5, 5)
    return {"initial_positions": positions, "initial_directions": np.full(5, math.pi, np.float32)}


def _stacked_options():
    """16 agents on four points, two of them on the index's cell borders: exact ties."""
    points = np.array([(0.0, 0.0), (2.5, 2.5), (2.5, 1.0), (4.9, 4.9)], np.float32)
    return {"initial_positions": np.repeat(points, 4, axis=0)}


# name -> (make_vec overrides, steps, reset options); ENTRY_BLOCK and HAND_WRITTEN in the overrides: see
# make_envs.
ENTRY_BLOCK = "entry_block"
HAND_WRITTEN = "hand_written"
SCENARIOS = {
    "next_step": ({}, 12, None),
    "same_step": ({"autoreset_mode": "SameStep"}, 11, None),
    "disabled": ({"autoreset_mode": "Disabled"}, 11, None),
    # copy=True outputs written by the kernel into fresh, uninitialized tensors (no copy of the env's buffers).
    "same_step_direct_write": ({"autoreset_mode": "SameStep", "direct_write_bytes": 0}, 11, None),
    "full_observation": ({"use_full_observation": True}, 6, None),
    # Two observed agents a call by 8-byte stores, into rows of 7 * 6 + 1 entries: every other row starts
    # 4 bytes past an 8-byte boundary (the simulator's store_pair raises on a misaligned pair).
    "full_observation_odd_rows": ({"use_full_observation": True, "observe_own_type": False}, 4, None),
    # 5 others (an odd number): one observed agent a call.
    "full_observation_one_a_call": ({"use_full_observation": True, "num_runners": 4}, 3, None),
    "runners_stay": ({"runner_exits_game_after_tagged": False, "tagging_distance": 0.4}, 6, None),
    "all_tagged_early": ({"tagging_distance": 1.0}, 4, None),
    "one_tagger_many_tags": ({"tagging_distance": 0.2}, 3, _cluster_options()),
    "edge_hits": (
        {"edge_hit_penalty": -1.0, "tagging_distance": 0.0, "min_acceleration": 0.5, "max_acceleration": 0.5},
        3,
        _edge_options(),
    ),
    "k_above_alive": ({"num_other_agents_observed": 4, "tagging_distance": 0.4}, 6, None),
    "one_thread_per_block": ({"threads_per_block": 1}, 3, None),
    # The simulator has no register file: a capped env's kernel runs there without the cap.
    "register_cap": ({"use_full_observation": True, "max_registers": 32}, 3, None),
    # More threads than one agent's 15 entries: each thread's next entry is two agents on, with a carry.
    "block_wider_than_an_observation": ({"threads_per_block": 37}, 3, None),
    # The K-nearest search through the spatial index: 4 cells of 2.5, agents leaving the game.
    "spatial_index": (
        {"spatial_index": True, "num_runners": 14, "tagging_distance": 0.2, "threads_per_block": 4},
        4,
        None,
    ),
    # The index's sort and the count of runners left spread over the agents in stages, 4 threads for 16 agents.
    "staged_game_work": (
        {
            "spatial_index": True,
            "game_work": "staged",
            "num_runners": 14,
            "tagging_distance": 0.2,
            "threads_per_block": 4,
        },
        4,
        None,
    ),  # fmt: skip
    "staged_all_tagged_early": ({"game_work": "staged", "tagging_distance": 1.0}, 4, None),
    # The step's scratch in the buffers rather than in each block's shared memory; and split between the two.
    "no_block_local": ({"game_work": "staged", "block_scratch_bytes": 0}, 4, None),
    "some_block_local": (
        {"spatial_index": True, "game_work": "staged", "num_runners": 14, "block_scratch_bytes": 200},
        4,
        None,
    ),
    "spatial_index_ties": ({"spatial_index": True, "num_runners": 14, "tagging_distance": 0.0}, 2, _stacked_options()),
    # The full observation by an entry phase (tests/entry_phases.py): one call per entry, then runs of 4.
    "entry_phase": ({"use_full_observation": True, ENTRY_BLOCK: None}, 3, None),
    "entry_phase_blocks": ({"use_full_observation": True, ENTRY_BLOCK: 4, "threads_per_block": 8}, 3, None),
    # The generated kernel passed back as a hand-written one, which writes fresh outputs only when asked.
    "hand_written_direct_write": ({HAND_WRITTEN: True, "autoreset_mode": "SameStep", "direct_write_bytes": 0}, 6, None),
}


def make_envs(params: dict) -> GpuVectorEnv:
    """Two games of WarpTag-v0 on the CUDA kernel; with ENTRY_BLOCK, the entry-phase observation's; with
    HAND_WRITTEN, the generated kernel given as the definition's ``cuda_kernel``."""
    if params.pop(HAND_WRITTEN, False):
        env_options = {k: params.pop(k) for k in ("autoreset_mode", "direct_write_bytes", "threads_per_block")}
        definition = tag_definition(TagConfig(**params), backend="cuda", max_registers=None)
        kernel = load_kernel_module(definition, "cuda").run
        hand_written = dataclasses.replace(definition, cuda_kernel=kernel)
        default = outputs.DIRECT_WRITE_BYTES["cpu"]
        outputs.DIRECT_WRITE_BYTES["cpu"] = 0  # a generated kernel's outputs of any size would be written directly
        try:
            if GpuVectorEnv(hand_written, num_games=2, device="cpu", backend="cuda").direct_write:
                raise AssertionError("a hand-written kernel wrote fresh outputs directly without direct_write_bytes")
        finally:
            outputs.DIRECT_WRITE_BYTES["cpu"] = default
        return GpuVectorEnv(hand_written, num_games=2, device="cpu", backend="cuda", **env_options)
    if ENTRY_BLOCK not in params:
        envs = gym.make_vec("WarpTag-v0", num_envs=2, device="cpu", backend="cuda", **params)
        if envs.unwrapped.direct_write and not envs.unwrapped._backend.writes_ring:
            raise AssertionError("a generated kernel wrote fresh outputs without the ring")
        return envs
    params = dict(params)
    block, threads = params.pop(ENTRY_BLOCK), params.pop("threads_per_block")
    definition = entry_tag_definition(TagConfig(**params), block)
    return GpuVectorEnv(definition, num_games=2, device="cpu", backend="cuda", threads_per_block=threads)


def ring_names_no_slot() -> str:
    """A ``copy=True`` launch that finds no slot named in its ring writes nothing and steps no game; the next
    reset says so, and the env goes on after it."""
    envs = make_envs(dict(TINY, direct_write_bytes=0))
    env = envs.unwrapped
    envs.reset(seed=7)
    state = [b.clone() for b in env._buffers.values()]  # compared bytewise below: some entries are NaN
    env._arena.ring()[0] = -1  # what a launch that failed half-way could leave
    envs.step(np.zeros(envs.action_space.shape, dtype=np.int64))
    if int(env._arena.ring()[0]) != -1:  # moved on, the next launch would write a slot already handed out
        return f"the ring was moved on to {int(env._arena.ring()[0])} after a launch that found no slot\nFAILED"
    if not all(
        torch.equal(b.view(torch.uint8), s.view(torch.uint8)) for b, s in zip(env._buffers.values(), state, strict=True)
    ):
        return "a launch that found no slot changed the games' state\nFAILED"
    try:
        envs.reset(seed=7)
    except RuntimeError as exc:
        if "no fresh output slot" not in str(exc):
            return f"the reset raised another error: {exc}\nFAILED"
    else:
        return "the reset after a launch that found no slot did not raise\nFAILED"
    return compare_with_reference(envs, 4, seed=7).table()


def block_local_arrays_take_no_device_memory() -> str:
    """The CUDA kernel keeps the block-local arrays in shared memory: its env has no rows and no views of
    them, so a game takes their bytes less than in buffers that hold them (the reference backend's), and
    its games are still the reference's."""
    params = dict(TINY, spatial_index=True, game_work="staged", num_runners=14, block_scratch_bytes=200)
    envs = make_envs(dict(params))
    on_cpu = gym.make_vec("WarpTag-v0", num_envs=2, device="cpu", backend="reference", **params).unwrapped
    definition = envs.unwrapped.definition
    local = {arr.name for arr in definition.state if arr.block_local}
    if not local or local & set(envs.unwrapped.state) or not local <= set(on_cpu.state):
        return f"block-local arrays {sorted(local)}, views on the CUDA kernel {sorted(envs.unwrapped.state)}\nFAILED"
    saved = on_cpu.memory_per_game() - envs.unwrapped.memory_per_game()
    if saved != definition.block_local_bytes:
        return f"a game takes {saved} bytes less, expected {definition.block_local_bytes}\nFAILED"
    return compare_with_reference(envs, 4, seed=7).table()


# name -> a check that makes its own env and returns its report, ending "OK" where it holds.
CHECKS = {
    "ring_names_no_slot": ring_names_no_slot,
    "block_local_takes_no_memory": block_local_arrays_take_no_device_memory,
}


def main(names: list[str]) -> int:
    if not SIMULATOR:
        print("run with NUMBA_ENABLE_CUDASIM=1")
        return 2
    failures = 0
    for name in names or [*SCENARIOS, *CHECKS]:
        try:
            if name in CHECKS:
                table = CHECKS[name]()
            else:
                overrides, steps, options = SCENARIOS[name]
                table = compare_with_reference(
                    make_envs(dict(TINY, **overrides)), steps, seed=7, options=options
                ).table()
        except Exception:  # report and go on with the other scenarios
            print(f"== {name}\n{traceback.format_exc()}\nERROR\n", flush=True)
            failures += 1
            continue
        print(f"== {name}\n{table}\n", flush=True)
        failures += not table.rstrip().endswith("OK")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
