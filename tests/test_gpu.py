"""Real-GPU behaviour: zero-copy tensors, reference agreement, memory release. Skipped without a GPU.

Streams, several envs and the absence of host syncs in step() are in test_concurrency.py.
"""

from __future__ import annotations

import gc
import warnings

import gymnasium as gym
import pytest
import torch
from conftest import SMALL_TAG

import gpu_vecenv  # noqa: F401
from gpu_vecenv.backends import MultiprocessorLimits, _OutputLaunch, multiprocessor_limits
from gpu_vecenv.oracle import compare_with_reference

pytestmark = pytest.mark.gpu


def random_actions(envs):
    nvec = torch.as_tensor(envs.single_action_space.nvec, device=envs.device)
    return (torch.rand((envs.num_envs, len(nvec)), device=envs.device) * nvec).long()


def test_outputs_are_cuda_tensors_written_in_place():
    envs = gym.make_vec("WarpTag-v0", num_envs=8, device="cuda", copy=False, **SMALL_TAG)
    obs, _ = envs.reset(seed=0)
    obs2, rew, term, trunc, info = envs.step(random_actions(envs))
    for t in (obs2, rew, term, trunc, info["active"]):
        assert t.device.type == "cuda"
    # copy=False: the same buffer every step, which is the env's own output memory.
    assert obs2.data_ptr() == obs.data_ptr()
    shared = torch.from_dlpack(obs2)
    assert shared.data_ptr() == obs2.data_ptr() and torch.equal(shared, obs2)


def test_copy_true_gives_fresh_tensors_that_never_change():
    envs = gym.make_vec("WarpTag-v0", num_envs=8, device="cuda", **SMALL_TAG)
    envs.reset(seed=0)
    first = envs.step(random_actions(envs))[0]
    kept = first.clone()
    second = envs.step(random_actions(envs))[0]
    assert first.data_ptr() != second.data_ptr()
    assert torch.equal(first, kept)


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_fresh_outputs_written_by_the_kernel_in_a_graph_replay_match_the_copied_ones(mode):
    # 2000 games of 5+100 with the full observation: 613 MB of outputs a step (SameStep: 1.2 GB), one slot a
    # batch, which the kernel writes itself, launched with the slot's pointers (no graph, no ring to write
    # before every launch).
    params = dict(num_envs=2000, device="cuda", num_taggers=5, num_runners=100, use_full_observation=True,
                  episode_length=10, autoreset_mode=mode)  # fmt: skip
    direct = gym.make_vec("WarpTag-v0", **params)
    copied = gym.make_vec("WarpTag-v0", direct_write_bytes=1 << 62, **params)
    assert direct.unwrapped.direct_write and not copied.unwrapped.direct_write
    first = [direct.reset(seed=0)[0], copied.reset(seed=0)[0]]
    assert torch.equal(*first)
    kept = []
    for step in range(12):
        actions = random_actions(direct)
        outs = direct.step(actions), copied.step(actions)
        for now, then in zip(outs[0][:4], outs[1][:4], strict=True):
            assert torch.equal(now, then)
        assert outs[0][4].keys() == outs[1][4].keys()
        for key in outs[0][4]:
            now, then = outs[0][4][key], outs[1][4][key]
            if isinstance(now, dict):  # SameStep's final_info
                assert now.keys() == then.keys() and all(torch.equal(now[k], then[k]) for k in now)
            else:
                assert torch.equal(now, then)
        if step in (0, 5, 11):  # a few kept: each keeps its whole slot alive (up to 1.2 GB)
            kept.append((outs[0][0], outs[0][0].clone()))
    assert all(torch.equal(now, then) for now, then in kept)  # no later launch wrote an earlier step's tensors
    assert not direct.unwrapped._backend.writes_ring and direct.unwrapped._arena.slots_per_batch == 1
    assert copied.unwrapped._backend._copy_graphs
    assert torch.equal(first[0], first[1])


def test_the_ring_names_the_right_slot_for_every_block_over_many_batches():
    # 40000 games of 1+3 (40000 blocks, each of which reads the ring; a one-thread kernel moves it on), 100 steps
    # of small outputs: slots from two batches, each step's outputs equal to a copy=False twin's and kept.
    params = dict(num_envs=40_000, device="cuda", num_taggers=1, num_runners=3, use_full_observation=True,
                  episode_length=30)  # fmt: skip
    written, twin = gym.make_vec("WarpTag-v0", **params), gym.make_vec("WarpTag-v0", copy=False, **params)
    assert written.unwrapped._backend.writes_ring and written.unwrapped._arena._batch < 100
    assert torch.equal(written.reset(seed=5)[0], twin.reset(seed=5)[0])
    kept = []
    for _ in range(100):
        actions = random_actions(written)
        outputs = written.step(actions)[:4]
        expected = twin.step(actions)[:4]
        assert all(torch.equal(now, then) for now, then in zip(outputs, expected, strict=True))
        kept.append((outputs, [t.clone() for t in outputs]))
    assert all(torch.equal(a, b) for now, then in kept for a, b in zip(now, then, strict=True))
    assert len({outputs[0].data_ptr() for outputs, _ in kept}) == 100
    assert not written.unwrapped._backend.ring_missed()


def test_a_hand_written_kernel_writes_fresh_outputs_through_a_prepared_launch():
    # A hand-written kernel takes its outputs as arguments: a direct write is an eager launch with new ones.
    import dataclasses

    from envs.tag_continuous.config import TagConfig
    from envs.tag_continuous.env import tag_definition
    from gpu_vecenv import GpuVectorEnv
    from gpu_vecenv.codegen import load_kernel_module

    definition = tag_definition(TagConfig(**SMALL_TAG), backend="cuda", max_registers=None)
    hand_written = dataclasses.replace(definition, cuda_kernel=load_kernel_module(definition, "cuda").run)
    direct = GpuVectorEnv(hand_written, num_games=8, device="cuda", direct_write_bytes=0)
    generated = GpuVectorEnv(definition, num_games=8, device="cuda", copy=False)
    assert direct.direct_write and not direct._backend.writes_ring
    assert torch.equal(direct.reset(seed=3)[0], generated.reset(seed=3)[0])
    for _ in range(6):
        actions = random_actions(direct)
        assert torch.equal(direct.step(actions)[0], generated.step(actions)[0])
    assert not direct._backend._graphs
    assert isinstance(direct._backend._output_launch, _OutputLaunch)


def test_an_env_writing_fresh_outputs_directly_allocates_no_output_buffer_of_its_own():
    params = dict(num_envs=2000, device="cuda", num_taggers=5, num_runners=100, use_full_observation=True)
    torch.cuda.synchronize()
    start = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    direct = gym.make_vec("WarpTag-v0", **params)
    direct_bytes = torch.cuda.memory_allocated() - start
    direct_peak = torch.cuda.max_memory_allocated() - start  # not even for a moment while it was made
    copied = gym.make_vec("WarpTag-v0", direct_write_bytes=1 << 62, **params)
    copied_bytes = torch.cuda.memory_allocated() - start - direct_bytes
    nbytes = copied.unwrapped._arena.nbytes  # a step's outputs: 615 MB
    assert direct.unwrapped.direct_write
    assert copied_bytes >= nbytes > 10 * direct_bytes  # the games' state is about 21 MB
    assert direct_peak < nbytes
    direct.reset(seed=0)
    direct.step(random_actions(direct))  # and steps without one
    direct.close()
    copied.close()


def test_gpu_matches_reference_at_training_size():
    envs = gym.make_vec("WarpTag-v0", num_envs=4, device="cuda", episode_length=30)
    report = compare_with_reference(envs, steps=65, seed=21)
    assert report.ok, "\n" + report.table()


@pytest.mark.parametrize(
    "params",
    [dict(num_envs=2000, num_taggers=10, num_runners=100), dict(num_envs=64, num_taggers=20, num_runners=600)],
    ids=["scan", "index"],
)
def test_the_steps_scratch_in_shared_memory_gives_the_buffers_game_bit_for_bit(params):
    shared = gym.make_vec("WarpTag-v0", device="cuda", episode_length=20, **params)
    buffers = gym.make_vec("WarpTag-v0", device="cuda", episode_length=20, block_scratch_bytes=0, **params)
    local_bytes = shared.unwrapped.definition.block_local_bytes
    assert local_bytes > 0 == buffers.unwrapped.definition.block_local_bytes
    assert shared.unwrapped.memory_per_game() == buffers.unwrapped.memory_per_game() - local_bytes  # no rows for them
    assert torch.equal(shared.reset(seed=3)[0], buffers.reset(seed=3)[0])
    for _ in range(45):  # two episodes and more: autoresets, runners tagged and gone
        actions = random_actions(shared)
        for now, then in zip(shared.step(actions)[:4], buffers.step(actions)[:4], strict=True):
            assert torch.equal(now, then)
    for name in ("x", "y", "alive", "t"):
        assert torch.equal(shared.unwrapped.state[name], buffers.unwrapped.state[name]), name
    shared.close()
    buffers.close()


def test_close_frees_gpu_memory():
    # Envs an earlier test in this process left unreferenced are freed first: collected during this one,
    # they would make its memory look freed (or not).
    gc.collect()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    envs = gym.make_vec("WarpTag-v0", num_envs=2000, device="cuda")
    envs.reset(seed=0)
    envs.step(random_actions(envs))
    assert torch.cuda.memory_allocated() > before
    envs.close()
    gc.collect()
    assert torch.cuda.memory_allocated() - before < 1 << 20
    with pytest.raises(RuntimeError, match="closed"):
        envs.step(random_actions(envs))


def test_the_k_nearest_cap_follows_the_number_of_games_the_card_holds_at_once():
    # 7 agents: blocks of one warp, at most 28 an SM uncapped (66 registers), so 33 an SM are more than fit.
    multiprocessors = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    few = gym.make_vec("WarpTag-v0", num_envs=8, device="cuda", **SMALL_TAG)
    assert few.unwrapped.definition.max_registers is None
    many = gym.make_vec("WarpTag-v0", num_envs=33 * multiprocessors, device="cuda", **SMALL_TAG)
    assert many.unwrapped.definition.max_registers == 48
    # The kernel that many games get, on a few games: the same game as the reference's.
    capped = gym.make_vec("WarpTag-v0", num_envs=8, device="cuda", max_registers=48, **SMALL_TAG)
    report = compare_with_reference(capped, steps=40, seed=5)
    for envs in (few, many, capped):
        envs.close()
    assert report.ok, "\n" + report.table()


def test_a_register_capped_kernel_matches_the_reference():
    # 32 registers spill a few bytes in the full-observation kernel (ptx_report.py): still the same game.
    envs = gym.make_vec("WarpTag-v0", num_envs=4, device="cuda", max_registers=32, use_full_observation=True,
                        **SMALL_TAG)  # fmt: skip
    assert envs.unwrapped.definition.max_registers == 32
    report = compare_with_reference(envs, steps=40, seed=5)
    assert report.ok, "\n" + report.table()


def test_a_copy_that_cannot_be_captured_falls_back_to_the_host_copy_and_says_so_once(monkeypatch):
    import gpu_vecenv.backends as backends

    def refuse(*args, **kwargs):
        raise RuntimeError("no copy kernel here")

    monkeypatch.setattr(backends, "SlotCopy", refuse)
    # Told to copy: without direct_write_bytes the kernel would write the fresh outputs itself.
    envs = gym.make_vec("WarpTag-v0", num_envs=8, device="cuda", direct_write_bytes=1 << 62, **SMALL_TAG)
    with pytest.warns(UserWarning, match="capturing the outputs' copy failed"):
        envs.reset(seed=0)
    assert not envs.unwrapped._backend._copy_graphs
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not tried, nor said, again
        envs.reset(seed=1)
        first = envs.step(random_actions(envs))[0]
        kept = first.clone()
        envs.step(random_actions(envs))
    assert torch.equal(first, kept)  # still fresh tensors, copied from the host


def test_the_slot_copy_writes_the_slot_the_ring_names_and_its_last_block_advances_the_ring_once():
    from numba import cuda

    from gpu_vecenv.slot_copy import SlotCopy

    words = 300_000  # more words than the grid has threads: every block loops
    arena = torch.arange(words, dtype=torch.int64, device="cuda").view(torch.uint8)
    slots = torch.full((4, words), -1, dtype=torch.int64, device="cuda")
    ring = torch.tensor([0, *(row.data_ptr() for row in slots), 0], dtype=torch.int64, device="cuda")
    slot_copy = SlotCopy(arena, ring)
    assert slot_copy._blocks > 1
    stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
    for launch in range(3):
        arena.view(torch.int64).add_(launch)
        slot_copy.launch(stream)
    torch.cuda.synchronize()
    assert int(ring[0]) == 3 and int(slot_copy.finished[0]) == 0
    expected = torch.arange(words, dtype=torch.int64, device="cuda")
    for i, total in enumerate((0, 1, 3)):
        assert torch.equal(slots[i], expected + total)
    assert slots[3].eq(-1).all()
    ring[0] = 4  # entry 1 + 4 is 0: a ring not yet written there; nothing copied, nothing advanced
    slot_copy.launch(stream)
    torch.cuda.synchronize()
    assert int(ring[0]) == 4 and slots[3].eq(-1).all()


@pytest.mark.gpu
def test_the_multiprocessor_limits_are_the_cards_own():
    limits = multiprocessor_limits(0)
    properties = torch.cuda.get_device_properties(0)
    assert limits.warps == properties.max_threads_per_multi_processor // 32
    assert limits.registers == getattr(properties, "regs_per_multiprocessor", limits.registers)
    assert limits.shared_bytes == getattr(properties, "shared_memory_per_multiprocessor", limits.shared_bytes)
    assert limits.reserved_shared_bytes in (0, 1024)
    assert 16 <= limits.blocks <= 32
    if properties.major == 9:
        assert limits == MultiprocessorLimits()
