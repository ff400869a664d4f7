"""Whether the case before it slows 1+3 full at 10000 games with copy=True (0.041 ms in one targets run, 0.028
in an A/B run of the same code): that env measured in one process alone, again, after the case the targets
preset runs before it (5+100 full, 2000 games, copy=True), after the cache is emptied, with cProfile of its
steps in both states and the CUDA allocations made while it steps.

    python benchmarks/results/h100_2026-12-06i/merged/order_diag.py    # from the repository root, on a GPU
"""

import cProfile
import gc
import io
import pstats
import sys
import time
from dataclasses import replace

sys.path.insert(0, "benchmarks")
import torch  # noqa: E402
from bench_step import TIMING, build_env, measure_ours, targets_preset  # noqa: E402
from rollout_timing import in_place_draw  # noqa: E402

dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
by = {(c.name, c.copy): (c if dev.type == "cuda" else replace(c, games=4)) for c in targets_preset()}
timing = TIMING["cuda" if dev.type == "cuda" else "quick"]
small, big = by[("1+3 full, 10000 games", True)], by[("5+100 full, 2000 games", True)]
small_f = by[("1+3 full, 10000 games", False)]


def allocations() -> int:
    return torch.cuda.memory_stats(dev).get("num_device_alloc", 0) if dev.type == "cuda" else 0


def sync_and_empty_cache() -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def memory(tag: str) -> None:
    if dev.type != "cuda":
        return
    s = torch.cuda.memory_stats(dev)
    mib = {key: s.get(f"{key}_bytes.all.current", 0) / 2**20 for key in ("reserved", "allocated")}
    print(f"  [{tag}] reserved {mib['reserved']:.0f} MiB, allocated {mib['allocated']:.0f} MiB, segments "
          f"{s.get('segment.all.current', 0)}, cudaMalloc so far {s.get('num_device_alloc', 0)}, frees "
          f"{s.get('num_device_free', 0)}", flush=True)  # fmt: skip


def measure(tag: str, case) -> None:
    memory(tag + " before")
    before = allocations()
    row = measure_ours(case, dev, timing)
    print(f"{tag:<40} ms/step {row['ms_per_step']:.4f}  host us {row['host_us']:.1f}  kernel us "
          f"{row['kernel_us']:.1f}  cudaMallocs during {allocations() - before}", flush=True)  # fmt: skip


def profile(tag: str, case, steps: int = 400) -> None:
    gc.collect()
    env, _ = build_env(case, dev)
    print(f"  writes_ring={env._writes_ring} slots_per_batch={env._arena.slots_per_batch} "
          f"direct_write={env.direct_write} no_stream_writes={env._arena._stream_ops._no_stream_writes}")  # fmt: skip
    nvec = env.single_action_space.nvec
    draw = in_place_draw(torch.zeros((env.num_envs, len(nvec)), dtype=torch.int64, device=env.device), nvec)
    for _ in range(50):
        env.step(draw())
    sync_and_empty_cache()
    start = time.perf_counter()
    for _ in range(steps):
        env.step(draw())
    plain = time.perf_counter() - start
    sync_and_empty_cache()
    print(f"  {steps} steps without the profiler: {1e6 * plain / steps:.1f} us a step of host time (no sync inside)")
    before = allocations()
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    for _ in range(steps):
        env.step(draw())
    profiler.disable()
    profiled = time.perf_counter() - start
    sync_and_empty_cache()
    print(f"{tag}: profiled {steps} steps, {1e6 * profiled / steps:.1f} us a step under the profiler, "
          f"cudaMallocs {allocations() - before}")  # fmt: skip
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(14)
    print("\n".join(text.getvalue().splitlines()[6:26]), flush=True)
    env.close()


measure("1+3 D fresh (compiles)", small)
measure("1+3 D again", small)
measure("1+3 F", small_f)
profile("profile 1+3 D, fast state", small)
measure("5+100 full D", big)
measure("1+3 D after 5+100 full D", small)
measure("1+3 D after that (cache emptied)", small)
measure("5+100 full D again", big)
profile("profile 1+3 D after 5+100 full D", small)
gc.collect()
sync_and_empty_cache()
measure("1+3 D after gc.collect + empty_cache", small)
