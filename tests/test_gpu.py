"""Real-GPU behaviour: zero-copy tensors, no host sync in step(), torch streams. Skipped without a GPU."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import SMALL_TAG

import gpu_vecenv  # noqa: F401
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


def test_step_never_waits_for_the_device():
    envs = gym.make_vec("WarpTag-v0", num_envs=2000, device="cuda")
    envs.reset(seed=0)
    actions = [random_actions(envs) for _ in range(20)]
    envs.step(actions[0])
    torch.cuda.synchronize()
    torch.cuda._sleep(2_000_000_000)  # keep the stream busy for about a second
    done = torch.cuda.Event()
    torch.cuda.set_sync_debug_mode("error")
    try:
        start = time.perf_counter()
        for a in actions:
            envs.step(a)
        host_s = time.perf_counter() - start
    finally:
        torch.cuda.set_sync_debug_mode("default")
    done.record()
    # Had step() synchronized, the host would have waited for the sleeping stream.
    assert not done.query()
    assert host_s < 0.5
    torch.cuda.synchronize()


def test_env_follows_the_current_torch_stream():
    def rollout(stream):
        envs = gym.make_vec("WarpTag-v0", num_envs=16, device="cuda", **SMALL_TAG)
        gen = torch.Generator(device="cuda").manual_seed(0)
        nvec = torch.as_tensor(envs.single_action_space.nvec, device="cuda")
        with torch.cuda.stream(stream):
            envs.reset(seed=3)
            outs = []
            for _ in range(30):
                a = (torch.rand((envs.num_envs, 2), device="cuda", generator=gen) * nvec).long()
                outs.append(envs.step(a)[0])
            result = torch.stack(outs)
        torch.cuda.synchronize()
        return result

    side = torch.cuda.Stream()
    assert torch.equal(rollout(torch.cuda.current_stream()), rollout(side))


def test_gpu_matches_reference_at_training_size():
    envs = gym.make_vec("WarpTag-v0", num_envs=4, device="cuda", episode_length=30)
    report = compare_with_reference(envs, steps=65, seed=21)
    assert report.ok, "\n" + report.table()


def test_gpu_initial_states_equal_cpu_bit_for_bit():
    gpu = gym.make_vec("WarpTag-v0", num_envs=50, device="cuda")
    cpu = gym.make_vec("WarpTag-v0", num_envs=50, device="cpu")
    gpu.reset(seed=123)
    cpu.reset(seed=123)
    for key in ("x", "y", "direction", "alive"):
        assert np.array_equal(gpu.state[key].cpu().numpy(), cpu.state[key].numpy()), key


def test_close_frees_gpu_memory():
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    envs = gym.make_vec("WarpTag-v0", num_envs=2000, device="cuda")
    envs.reset(seed=0)
    envs.step(random_actions(envs))
    assert torch.cuda.memory_allocated() > before
    envs.close()
    import gc

    gc.collect()
    assert torch.cuda.memory_allocated() - before < 1 << 20
    with pytest.raises(RuntimeError, match="closed"):
        envs.step(random_actions(envs))
