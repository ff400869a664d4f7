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


class _Driver:
    """A stand-in for ``cuda.bindings.driver`` that records copies and answers with ``result``."""

    class CUresult:
        CUDA_SUCCESS = 0
        CUDA_ERROR_NOT_SUPPORTED = 801

    def __init__(self, result, *later_results):
        self.results, self.calls = [result, *later_results], []

    @property
    def result(self):
        return self.results[min(len(self.calls) - 1, len(self.results) - 1)]

    def cuMemcpyDtoDAsync(self, dst, src, nbytes, stream):  # noqa: N802  (the driver's name)
        self.calls.append((dst, src, nbytes, stream))
        return (self.result,)

    def cuStreamWriteValue64(self, stream, address, value, flags):  # noqa: N802  (the driver's name)
        self.calls.append((stream, address, value, flags))
        return (self.result,)


def _through(driver):
    ops = StreamOps(torch.device("cpu"))
    ops._driver, ops._raw_stream = driver, lambda index: 7
    ops._success, ops._not_supported = driver.CUresult.CUDA_SUCCESS, driver.CUresult.CUDA_ERROR_NOT_SUPPORTED
    return ops


def test_a_copy_hands_the_driver_both_addresses_the_byte_count_and_the_current_stream():
    driver = _Driver(result=0)
    src, dst = torch.arange(6, dtype=torch.int64), torch.zeros(6, dtype=torch.int64)
    _through(driver).copy(dst, src)
    assert driver.calls == [(dst.data_ptr(), src.data_ptr(), 48, 7)]
    assert not dst.any()  # the driver did it (here: nothing), not torch


def test_a_copy_the_driver_refuses_is_made_by_torch():
    driver = _Driver(result=201)  # CUDA_ERROR_INVALID_CONTEXT, as in a thread without a current context
    src, dst = torch.arange(6, dtype=torch.int64), torch.zeros(6, dtype=torch.int64)
    _through(driver).copy(dst, src)
    assert len(driver.calls) == 1 and torch.equal(dst, src)


def test_words_written_from_the_host_go_to_the_driver_one_each_at_their_addresses_on_the_current_stream():
    driver = _Driver(result=0)
    dst = torch.zeros(4, dtype=torch.int64)
    _through(driver).write_words(dst, (3, 1 << 40))
    assert driver.calls == [(7, dst.data_ptr(), 3, 0), (7, dst.data_ptr() + 8, 1 << 40, 0)]
    assert not dst.any()  # the driver did it (here: nothing), not torch


def test_words_the_driver_refuses_are_written_by_torch_and_a_device_without_stream_writes_is_not_asked_again():
    driver = _Driver(801)  # CUDA_ERROR_NOT_SUPPORTED, as where 64-bit stream memory operations are off
    ops, dst = _through(driver), torch.zeros(4, dtype=torch.int64)
    ops.write_words(dst, (3, 1 << 40))
    assert len(driver.calls) == 1 and dst.tolist() == [3, 1 << 40, 0, 0]
    ops.write_words(dst, (5, 6))
    assert len(driver.calls) == 1 and dst.tolist() == [5, 6, 0, 0]


def test_a_refusal_of_one_call_is_not_remembered_and_words_after_an_accepted_one_are_all_written_by_torch():
    driver = _Driver(0, 201)  # the second word refused: CUDA_ERROR_INVALID_CONTEXT, a thread without a context
    ops, dst = _through(driver), torch.zeros(4, dtype=torch.int64)
    ops.write_words(dst, (3, 1 << 40))
    assert len(driver.calls) == 2 and dst.tolist() == [3, 1 << 40, 0, 0]  # both, in stream order after the first
    driver.results = [0]
    ops.write_words(dst, (5, 6))
    assert len(driver.calls) == 4 and dst.tolist() == [3, 1 << 40, 0, 0]  # the driver's again (here: nothing)


def test_a_binding_that_takes_other_types_is_not_asked_again():
    class OtherBinding(_Driver):
        def cuStreamWriteValue64(self, stream, address, value, flags):  # noqa: N802  (the driver's name)
            self.calls.append((stream, address, value, flags))
            raise TypeError("an argument of another type was expected")

    driver = OtherBinding(0)
    ops, dst = _through(driver), torch.zeros(4, dtype=torch.int64)
    ops.write_words(dst, (3, 4))
    ops.write_words(dst, (5, 6))
    assert len(driver.calls) == 1 and dst.tolist() == [5, 6, 0, 0]


def test_off_a_gpu_words_are_written_by_torch():
    dst = torch.zeros(4, dtype=torch.int64)
    StreamOps(torch.device("cpu")).write_words(dst, (5, 1 << 40))
    assert dst.tolist() == [5, 1 << 40, 0, 0]


class _RecordingDriver:
    """The real driver module, with each ``cuStreamWriteValue64``'s result recorded."""

    def __init__(self, driver):
        self._driver, self.results = driver, []

    def __getattr__(self, name):
        return getattr(self._driver, name)

    def cuStreamWriteValue64(self, *args):  # noqa: N802  (the driver's name)
        result = self._driver.cuStreamWriteValue64(*args)
        self.results.append(result[0])
        return result


@pytest.mark.gpu
def test_words_written_from_the_host_wait_for_the_work_before_them_on_the_current_stream():
    ops = StreamOps(torch.device("cuda"))
    assert ops.through_driver
    ops._driver = recording = _RecordingDriver(ops._driver)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        dst = torch.zeros(3, dtype=torch.int64, device="cuda")
        torch.cuda._sleep(100_000_000)  # tens of ms: the words must land after the fill below, not before it
        dst.fill_(-1)
        ops.write_words(dst, (11, 1 << 40))
        got = dst.clone()
    side.synchronize()
    assert got.tolist() == [11, 1 << 40, -1]
    # Written by the stream itself, not by torch's copy after a refusal (which is stream-ordered as well).
    assert recording.results == [ops._success] * 2 and not ops._no_stream_writes


def test_a_replay_that_fails_leaves_the_ring_to_be_written_again():
    from gpu_vecenv import outputs
    from gpu_vecenv.backends import CudaBackend

    class FailingGraph:
        def replay(self):
            raise RuntimeError("launch failed")

    backend = type("Backend", (), {"_copy_graphs": {0: FailingGraph()}})()
    arena = outputs.OutputArena(2, 3, 4, False, torch.device("cpu"))
    with pytest.raises(RuntimeError, match="launch failed"):
        CudaBackend.launch_copying(backend, 0, arena)
    assert arena._ring_next is None  # the next ring_slot writes the ring, with its slot's index
    arena.ring()[0] = 5
    out = arena.ring_slot()
    assert int(arena.ring()[0]) == 1 and out.obs.data_ptr() == int(arena.ring()[2])
    assert CudaBackend.launch_copying(type("Backend", (), {"_copy_graphs": {}})(), 0, arena) is None
