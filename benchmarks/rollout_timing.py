"""Timing of rollouts, shared by ``bench_step.py`` and its peer workers.

On a GPU the device time of a region is read from two CUDA events on torch's
current stream; on the CPU, where every call is synchronous, from the wall
clock. Host time per call is the wall time of the call alone, taken in short
bursts that the device's launch queue absorbs, so that it is not the device's
pace that is measured.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from gpu_vecenv.codegen import OP_STEP


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_region(fn: Callable[[], object], repeats: int, device: torch.device) -> float:
    """Seconds that ``repeats`` calls of ``fn`` take on ``device`` (CUDA events on a GPU, else the wall clock)."""
    synchronize(device)
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    return time.perf_counter() - t0


def time_rollout(
    step: Callable[[], object],
    device: torch.device,
    *,
    warmup: int,
    min_steps: int,
    max_steps: int,
    budget_s: float,
    windows: int = 1,
) -> dict[str, float]:
    """Time ``step`` (one rollout step: draw actions, step, reset what must be reset).

    After ``warmup`` calls, one step and then a probe of up to 10 steps
    estimate the step time; the timed run takes ``budget_s / estimate`` steps,
    clamped to ``[min_steps, max_steps]``, but never more than three budgets'
    worth. A single step that alone exceeds the budget is the measurement (for
    peers that take seconds per step). With ``windows > 1`` the timed run is
    repeated: ``ms_per_step`` is the median window and ``ms_per_step_best``
    the fastest (on a shared machine, the one least disturbed by others).

    Returns ``steps`` (per window), ``seconds`` (of the median window), ``ms_per_step`` and
    ``ms_per_step_best``.
    """
    for _ in range(warmup):
        step()
    one_s = time_region(step, 1, device)
    if one_s >= budget_s:
        return {"steps": 1, "seconds": one_s, "ms_per_step": 1e3 * one_s, "ms_per_step_best": 1e3 * one_s}
    probe_steps = int(min(10, max(1, 0.1 * budget_s / max(one_s, 1e-9))))
    estimate = time_region(step, probe_steps, device) / probe_steps
    steps = int(min(max_steps, max(min_steps, budget_s / max(estimate, 1e-9))))
    steps = max(1, min(steps, int(3 * budget_s / max(estimate, 1e-9))))
    times = sorted(time_region(step, steps, device) for _ in range(max(1, windows)))
    seconds = statistics.median(times)
    return {"steps": steps, "seconds": seconds, "ms_per_step": 1e3 * seconds / steps,
            "ms_per_step_best": 1e3 * times[0] / steps}  # fmt: skip


def in_place_draw(actions: torch.Tensor, nvec: Sequence[int]) -> Callable[[], torch.Tensor]:
    """A function that refills ``actions`` (any shape ending in ``len(nvec)``) with random actions and returns it.

    Component ``k`` is drawn uniformly from ``[0, nvec[k])`` on the tensor's
    device, in place: no allocation, and as few tensor operations as can be
    (each costs host time, 7-8 µs on an H100 host): one ``random_`` for the
    whole tensor where every component has the same number of levels (WarpTag's
    and WarpDrive's Tag, 21 × 21), else one a component.
    """
    if actions.shape[-1] != len(nvec):
        raise ValueError(f"actions must end in {len(nvec)} components (one per nvec entry), got {tuple(actions.shape)}")
    levels = [int(n) for n in nvec]
    if len(set(levels)) == 1:
        columns = [(actions, levels[0])]
    else:
        columns = list(zip(actions.unbind(-1), levels, strict=True))

    def draw() -> torch.Tensor:
        for column, n in columns:
            column.random_(0, n)
        return actions

    return draw


def host_us_per_call(
    prepare: Callable[[], object], call: Callable[[object], object], device: torch.device, calls: int, burst: int = 50
) -> float:
    """Median over bursts of the wall time of ``call(prepare())``, the ``prepare`` part not counted, in µs.

    The device is synchronized before each burst of ``burst`` calls only, so on a
    GPU the calls queue work without waiting for it.
    """
    burst = max(1, min(burst, calls))
    per_call = []
    for _ in range(max(1, calls // burst)):
        synchronize(device)
        total = 0.0
        for _ in range(burst):
            arg = prepare()
            t0 = time.perf_counter()
            call(arg)
            total += time.perf_counter() - t0
        per_call.append(total / burst)
    synchronize(device)
    return 1e6 * statistics.median(per_call)


class StepLaunch:
    """One launch of a step kernel, callable; ``prepare()`` is the host's work before it that is not the
    launch (naming the slot a ring-writing kernel writes), done by a call too, and outside the events of
    :func:`device_us_per_launch`."""

    def __init__(self, launch: Callable[[], None], prepare: Callable[[], object] | None = None) -> None:
        self.launch = launch
        self.prepare = prepare if prepare is not None else (lambda: None)

    def __call__(self) -> None:
        self.prepare()
        self.launch()


def step_kernel_launch(env: Any) -> StepLaunch:
    """One launch of a ``GpuVectorEnv``'s step kernel as ``step`` makes it, on the state and actions the env
    holds: a graph replay or eager launch into the env's outputs, or, where the kernel writes each step's
    fresh outputs itself (``env.direct_write``: the env then has no output buffer of its own), a launch into
    a fresh slot: the next one the ring names (named by ``prepare``), or one taken here for a kernel given
    its outputs."""
    backend = env._backend
    arena = getattr(env, "_arena", None)
    if getattr(backend, "writes_ring", False):
        # The kernel writes the slot the ring names and moves the ring on: a slot named before each launch.
        return StepLaunch(lambda: backend.launch(OP_STEP), prepare=arena.ring_slot)
    if getattr(env, "direct_write", False):
        _, slot = arena.fresh_for_kernel()
        return StepLaunch(lambda: backend.launch_into(OP_STEP, arena, slot))
    return StepLaunch(lambda: backend.launch(OP_STEP))


def device_us_per_launch(launch: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Median device time of one ``launch()`` in µs.

    On a GPU each launch is recorded between two events behind a device-side
    sleep (``torch.cuda._sleep``), so the stream is busy while the host enqueues
    the launch and the events time the launch's device work only. On the CPU:
    the median wall time of a call. A :class:`StepLaunch`'s ``prepare`` is
    not timed.
    """
    prepare = launch.prepare if isinstance(launch, StepLaunch) else (lambda: None)
    run = launch.launch if isinstance(launch, StepLaunch) else launch
    samples = []
    if device.type == "cuda":
        synchronize(device)
        pairs = []
        for _ in range(repeats):
            torch.cuda._sleep(2_000_000)  # about a millisecond: longer than the host needs to enqueue one launch
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            prepare()
            start.record()
            run()
            end.record()
            pairs.append((start, end))
        synchronize(device)
        samples = [1e3 * start.elapsed_time(end) for start, end in pairs]
    else:
        for _ in range(repeats):
            prepare()
            t0 = time.perf_counter()
            run()
            samples.append(1e6 * (time.perf_counter() - t0))
    return statistics.median(samples)


def copy_bandwidth(device: torch.device, repeats: int = 20) -> dict[str, float]:
    """Device-to-device copy bandwidth of a large float32 tensor, counting bytes read plus bytes written.

    1 GiB on a GPU, 64 MiB on the CPU; random contents; the median of ``repeats`` copies.
    """
    numel = (1 << 28) if device.type == "cuda" else (1 << 24)
    src = torch.rand(numel, device=device)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    seconds = statistics.median(time_region(lambda: dst.copy_(src), 1, device) for _ in range(repeats))
    moved = 2 * src.numel() * src.element_size()
    return {"bytes": moved, "seconds": seconds, "GB_per_s": moved / seconds / 1e9}
