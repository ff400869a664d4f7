"""The driver's copies that stand in for torch's in ``step``: on torch's current stream, as torch's own would be,
and torch's own wherever the driver is not used."""

from __future__ import annotations

import threading

import gymnasium as gym
import pytest
import torch
from conftest import SMALL_TAG

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from gpu_vecenv.stream_ops import StreamOps


def test_on_the_cpu_a_copy_is_torchs_own():
    ops = StreamOps(torch.device("cpu"))
    assert not ops.through_driver
    src, dst = torch.arange(12, dtype=torch.int64).view(3, 4), torch.zeros(3, 4, dtype=torch.int64)
    ops.copy(dst, src)
    assert torch.equal(dst, src)


@pytest.mark.gpu
def test_a_copy_waits_for_the_work_before_it_on_the_current_stream():
    ops = StreamOps(torch.device("cuda"))
    assert ops.through_driver
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        assert ops.stream_handle() == side.cuda_stream
        src = torch.zeros(1 << 20, dtype=torch.int64, device="cuda")
        torch.cuda._sleep(100_000_000)  # holds the side stream for tens of ms: a copy not behind it reads zeros
        src.add_(7)
        dst = torch.empty_like(src)
        ops.copy(dst, src)
        got = dst.clone()
    side.synchronize()
    assert bool((got == 7).all())


@pytest.mark.gpu
@pytest.mark.parametrize("copy", [True, False])
def test_an_env_stepped_from_a_new_thread_gives_what_the_main_thread_gets(copy):
    # A new thread has no current CUDA context until it makes a runtime call; the driver's calls then fail
    # and torch's own are made instead, with the same results.
    def rollout(in_thread):
        envs = gym.make_vec("WarpTag-v0", num_envs=8, device="cuda", copy=copy, **SMALL_TAG)
        envs.reset(seed=5)
        nvec = envs.single_action_space.nvec
        gen = torch.Generator(device="cuda").manual_seed(1)
        actions = [(torch.rand((envs.num_envs, len(nvec)), device="cuda", generator=gen)
                    * torch.as_tensor(nvec, device="cuda")).long() for _ in range(20)]  # fmt: skip
        torch.cuda.synchronize()
        outs: list[torch.Tensor] = []

        def run():
            outs.extend(envs.step(a)[0].clone() for a in actions)
            torch.cuda.synchronize()

        if in_thread:
            thread = threading.Thread(target=run)
            thread.start()
            thread.join()
        else:
            run()
        envs.close()
        return torch.stack(outs)

    assert torch.equal(rollout(in_thread=True), rollout(in_thread=False))
