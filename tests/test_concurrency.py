"""Several envs in one process, torch streams, explicit devices, and no host sync in ``step()``.

Every env keeps its own buffers and its own captured launches, so envs in one
process never see each other; on the GPU each launch goes to torch's current
stream, like any torch operation, so an env stepped under
``with torch.cuda.stream(s)`` is ordered with the rest of the work on ``s``
(as with any torch tensor, an env made on one stream and used on another
needs ``s.wait_stream(...)`` first).
``step()`` never waits for the device: proven with torch's sync debug mode
(any synchronizing torch call raises) and with a stream kept busy by a sleep
kernel while the host steps on.
"""

from __future__ import annotations

import time

import gymnasium as gym
import pytest
import torch
from conftest import SMALL_TAG
from test_determinism import BUSY_TAG, DigestRun, run_digest

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from gpu_vecenv.oracle import compare_with_reference


def random_actions(envs, generator=None):
    """Random valid actions drawn on the env's device (no host round trip)."""
    nvec = torch.as_tensor(envs.single_action_space.nvec, device=envs.device)
    return (torch.rand((envs.num_envs, len(nvec)), device=envs.device, generator=generator) * nvec).long()


# -- two envs in one process --------------------------------------------------------------------------------------

# Two different envs: another size, mode and seed, so that any state shared between them would show.
FIRST = dict(games=4, mode="NextStep", seed=11)
SECOND = dict(games=3, mode="SameStep", seed=12, num_runners=6)


def _make(device, games, mode, seed, **kwargs):
    return gym.make_vec("WarpTag-v0", num_envs=games, device=device, autoreset_mode=mode,
                        **{**BUSY_TAG, **kwargs}), seed  # fmt: skip


def test_two_envs_stepped_in_turn_give_what_each_gives_alone(device):
    steps = 30
    alone = [run_digest(device, steps=steps, **params) for params in (FIRST, SECOND)]
    runs = [DigestRun(*_make(device, **params)) for params in (FIRST, SECOND)]
    for _ in range(steps):
        for run in runs:
            run.step()
    assert [run.hexdigest() for run in runs] == alone


@pytest.mark.gpu
def test_two_envs_on_two_streams_at_once_give_what_each_gives_alone():
    steps = 30

    def start(params, stream):
        envs, seed = _make("cuda", **params)
        stream.wait_stream(torch.cuda.current_stream())  # the env was made on the default stream
        with torch.cuda.stream(stream):
            envs.reset(seed=seed)
        return envs, torch.Generator(device="cuda").manual_seed(seed)

    def step(envs, generator, stream, outputs):
        with torch.cuda.stream(stream):
            outputs.append(envs.step(random_actions(envs, generator))[:4])

    alone = []  # one env after the other, on the default stream
    for params in (FIRST, SECOND):
        envs, generator = start(params, torch.cuda.current_stream())
        alone.append([])
        for _ in range(steps):
            step(envs, generator, torch.cuda.current_stream(), alone[-1])
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    pairs = [start(params, stream) for params, stream in zip((FIRST, SECOND), streams, strict=True)]
    together: list[list] = [[], []]  # both at once, each on its own stream; no host sync until the end
    for _ in range(steps):
        for (envs, generator), stream, outputs in zip(pairs, streams, together, strict=True):
            step(envs, generator, stream, outputs)
    torch.cuda.synchronize()
    for one, other in zip(alone, together, strict=True):
        for step_a, step_b in zip(one, other, strict=True):
            for a, b in zip(step_a, step_b, strict=True):
                assert torch.equal(a, b)


# -- torch streams ------------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_an_env_follows_the_current_torch_stream():
    def rollout(stream):
        envs = gym.make_vec("WarpTag-v0", num_envs=16, device="cuda", **SMALL_TAG)
        gen = torch.Generator(device="cuda").manual_seed(0)
        stream.wait_stream(torch.cuda.current_stream())  # the env was made on the default stream
        with torch.cuda.stream(stream):
            envs.reset(seed=3)
            outs = [envs.step(random_actions(envs, gen))[0] for _ in range(30)]
            result = torch.stack(outs)
        torch.cuda.synchronize()
        return result

    assert torch.equal(rollout(torch.cuda.current_stream()), rollout(torch.cuda.Stream()))


@pytest.mark.gpu
@pytest.mark.parametrize(
    "options",
    [dict(copy=True), dict(copy=False), dict(copy=True, direct_write_bytes=0)],
    ids=["copy", "no-copy", "copy-written-directly"],
)
def test_an_env_used_only_from_a_side_stream_agrees_with_its_reference(options):
    envs = gym.make_vec("WarpTag-v0", num_envs=6, device="cuda", **options, **BUSY_TAG)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())  # the env was made on the default stream
    with torch.cuda.stream(side):
        report = compare_with_reference(envs.unwrapped, steps=30, seed=4)
    assert report.ok, "\n" + report.table()
    assert report.game_ends > 0


# -- devices ------------------------------------------------------------------------------------------------------


def test_a_second_gpu_that_is_not_there_is_refused_by_name(monkeypatch):
    """What a one-GPU machine answers to ``device="cuda:1"`` (simulated here, so that it runs without a GPU)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ValueError, match=r"device='cuda:1': only 1 CUDA device\(s\) are visible"):
        gym.make_vec("WarpTag-v0", num_envs=1, device="cuda:1", **SMALL_TAG)
    with pytest.raises(ValueError, match=r"device=.cuda:3.: only 1 CUDA device\(s\) are visible"):
        gym.make_vec("WarpTag-v0", num_envs=1, device=torch.device("cuda", 3), **SMALL_TAG)


@pytest.mark.gpu
@pytest.mark.parametrize("device", ["cuda:0", torch.device("cuda", 0)], ids=["str", "torch.device"])
def test_explicit_first_gpu(device):
    envs = gym.make_vec("WarpTag-v0", num_envs=4, device=device, **BUSY_TAG)
    assert envs.unwrapped.device == torch.device("cuda", 0)
    envs.reset(seed=0)
    obs, rewards, *_ = envs.step(random_actions(envs))
    assert obs.device == rewards.device == torch.device("cuda", 0)
    report = compare_with_reference(envs.unwrapped, steps=20, seed=2)
    assert report.ok, "\n" + report.table()


@pytest.mark.gpu
def test_cuda_1_runs_on_a_second_gpu_or_is_refused_clearly():
    if torch.cuda.device_count() < 2:
        with pytest.raises(ValueError, match=r"device='cuda:1': only 1 CUDA device\(s\) are visible"):
            gym.make_vec("WarpTag-v0", num_envs=4, device="cuda:1", **BUSY_TAG)
        return
    envs = gym.make_vec("WarpTag-v0", num_envs=4, device="cuda:1", **BUSY_TAG)
    assert torch.cuda.current_device() == 0
    envs.reset(seed=0)
    obs = envs.step(random_actions(envs))[0]
    assert obs.device == torch.device("cuda", 1)
    report = compare_with_reference(envs.unwrapped, steps=20, seed=2)
    assert report.ok, "\n" + report.table()
    assert run_digest("cuda:1") == run_digest("cuda:0")


# -- no host sync in step() -------------------------------------------------------------------------------------

STEP_OPTIONS = [
    # 2000 games of 10+100: 65 MB of outputs, one slot a batch, written by a launch given the slot.
    pytest.param(dict(copy=True), id="copy"),
    # 2000 games of 1+3: small outputs, written by the kernel into the slot a device ring names (a graph replay).
    pytest.param(
        dict(copy=True, num_taggers=1, num_runners=3, num_other_agents_observed=3), id="copy-through-the-ring"
    ),
    # Copied inside the step's graph whatever the size, the slots' ring written anew every batch of one or two.
    pytest.param(dict(copy=True, direct_write_bytes=1 << 40), id="copy-in-the-graph"),
    pytest.param(dict(copy=False), id="no-copy"),
    pytest.param(dict(copy=True, cuda_graphs=False), id="copy-direct-launch"),
    pytest.param(dict(copy=False, cuda_graphs=False), id="no-copy-direct-launch"),
    pytest.param(dict(copy=True, autoreset_mode="SameStep"), id="copy-same-step"),
    pytest.param(dict(copy=True, direct_write_bytes=0), id="copy-written-directly"),
    pytest.param(dict(copy=True, direct_write_bytes=0, autoreset_mode="SameStep"), id="direct-same-step"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("options", STEP_OPTIONS)
def test_step_never_synchronizes(options):
    envs = gym.make_vec("WarpTag-v0", num_envs=2000, device="cuda", episode_length=20, **options)
    envs.reset(seed=0)
    actions = [random_actions(envs) for _ in range(45)]  # two autoresets on the way
    envs.step(actions[0])
    torch.cuda.synchronize()
    torch.cuda._sleep(2_000_000_000)  # keep the stream busy for about a second
    done = torch.cuda.Event()
    torch.cuda.set_sync_debug_mode("error")  # any synchronizing torch call now raises
    try:
        start = time.perf_counter()
        for a in actions:
            envs.step(a)
        host_s = time.perf_counter() - start
    finally:
        torch.cuda.set_sync_debug_mode("default")
    done.record()
    # Had step() waited for the device (through torch, Numba or the driver), the sleep would have run out.
    assert not done.query()
    assert host_s < 0.5
    torch.cuda.synchronize()


@pytest.mark.gpu
def test_the_sync_detector_catches_strict_mode_which_does_synchronize():
    envs = gym.make_vec("WarpTag-v0", num_envs=8, device="cuda", strict=True, **SMALL_TAG)
    envs.reset(seed=0)
    torch.cuda.set_sync_debug_mode("error")
    try:
        with pytest.raises(RuntimeError, match="synchroniz"):
            envs.step(random_actions(envs))
    finally:
        torch.cuda.set_sync_debug_mode("default")
