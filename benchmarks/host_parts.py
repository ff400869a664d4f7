"""Where a rollout step's time goes when the host sets the pace: each part of it timed alone.

    python benchmarks/host_parts.py --games 100 [--param num_runners=100 ...] [--copy] [--out parts.json]

For one WarpTag-v0 configuration (``make_vec`` keyword arguments as in ``python
-m gpu_vecenv.check``), each part of the benchmark's rollout step is called
back to back and timed two ways: its pace (CUDA events around many calls: the
larger of its host and device time) and its host time (wall time of the calls
in bursts right after a sync, which the device's queue absorbs;
``rollout_timing.host_us_per_call``). With ``--device cpu`` every call is
synchronous and both are the wall time. Parts: the in-place action draw,
``step`` with fixed actions and, inside it, loading the actions and the kernel
launch (a graph replay) and, with ``--copy``, handing out the fresh outputs
(the copy), and the whole rollout step (draw + ``step``), and that step again
with the actions drawn into the env's ``action_buffer``, which ``step`` then
reads where they are (no copy). With ``copy=True`` on a GPU the kernel writes
each step's fresh outputs itself, into the slot a device ring names: the part
inside ``step`` is naming the slot and the launch (a graph replay,
``gpu_vecenv/codegen.py``). Where the env copies (``--direct-write-bytes``
above its outputs), on a GPU inside the step's graph
(``gpu_vecenv/slot_copy.py``): that graph's replay beside the kernel's graph
alone. On the CPU with large outputs the parts are the fresh slot
(``fresh_for_kernel``) and the eager launch into it. When a part's pace equals
its host time, the host decides it; when it is larger, the device does. With
``--primitives``, also the torch calls of those parts beside the CUDA driver
calls that can replace them (``gpu_vecenv/stream_ops.py``), each alone.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from rollout_timing import host_us_per_call, in_place_draw, step_kernel_launch, time_region

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from gpu_vecenv.check import parse_param
from gpu_vecenv.codegen import OP_STEP


def pace_us(fn: Callable[[], object], device: torch.device, calls: int = 500, repeats: int = 5) -> float:
    """Median over ``repeats`` runs of ``calls`` back-to-back calls (CUDA events on a GPU), per call."""
    return 1e6 * statistics.median(time_region(fn, calls, device) / calls for _ in range(repeats))


def primitives(env: Any, actions: torch.Tensor) -> dict[str, Callable[[], object]]:
    """The torch calls inside ``step`` and the driver calls of ``StreamOps`` that can replace them, alone."""
    from gpu_vecenv.stream_ops import StreamOps

    ops = StreamOps(env.device)
    index = env.device.index or 0
    outputs = env._arena.buffer if env._arena.buffer.numel() else torch.empty(env._arena.nbytes, dtype=torch.uint8,
                                                                               device=env.device)  # fmt: skip
    slot = torch.empty_like(outputs)
    target = env._action_views[actions.shape]
    parts: dict[str, Callable[[], object]] = {
        "outputs copy (torch copy_)": lambda: slot.copy_(outputs),
        "outputs copy (StreamOps)": lambda: ops.copy(slot, outputs),
        "actions copy (torch copy_)": lambda: target.copy_(actions),
        "actions copy (StreamOps)": lambda: ops.copy(target, actions),
    }
    if env.device.type == "cuda":
        parts["current stream (torch.cuda)"] = lambda: torch.cuda.current_stream(index).cuda_stream
        parts["current stream (StreamOps)"] = ops.stream_handle
    graph = env._backend._graphs.get(OP_STEP) if hasattr(env._backend, "_graphs") else None
    if graph is not None:
        parts["graph replay (torch)"] = graph.replay
    print(f"StreamOps through the driver: {ops.through_driver}")
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--copy", action="store_true", help="step with copy=True (fresh output tensors)")
    parser.add_argument("--direct-write-bytes", type=int, metavar="N", help="make_vec's direct_write_bytes")
    parser.add_argument("--param", type=parse_param, action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu, where every call is synchronous")
    parser.add_argument("--primitives", action="store_true", help="also time torch's and the driver's calls alone")
    parser.add_argument("--out", type=Path, help="also write the figures here as JSON")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")

    options = dict(args.param)
    if args.direct_write_bytes is not None:
        options["direct_write_bytes"] = args.direct_write_bytes
    envs = gym.make_vec("WarpTag-v0", num_envs=args.games, device=args.device, copy=args.copy, **options)
    env = envs.unwrapped
    env.reset(seed=0)
    nvec = env.single_action_space.nvec
    draw = in_place_draw(torch.zeros((env.num_envs, len(nvec)), dtype=torch.int64, device=env.device), nvec)
    fixed = draw().clone()
    parts: dict[str, Callable[[], object]] = {
        "draw (in place)": draw,
        "step, fixed actions": lambda: env.step(fixed),
        "  load actions": lambda: env._load_actions(fixed),
    }
    if getattr(env._backend, "writes_ring", False):
        parts["  name a fresh slot in the ring, launch into it"] = step_kernel_launch(env)
    elif env.direct_write:
        parts["  fresh slot (fresh_for_kernel)"] = env._arena.fresh_for_kernel
        parts["  launch into a fresh slot"] = step_kernel_launch(env)
    elif args.copy and getattr(env._backend, "_copy_graphs", None):
        parts["  launch copying (one graph: kernel + copy)"] = lambda: env._backend.launch_copying(OP_STEP, env._arena)
        parts["  launch (the kernel's graph alone)"] = step_kernel_launch(env)
    else:
        parts["  launch (a graph replay on a GPU)"] = step_kernel_launch(env)
        if args.copy:
            parts["  fresh outputs (copy)"] = lambda: env._arena.results(True)
    parts["rollout step (draw + step)"] = lambda: env.step(draw())
    # Actions written where the kernel reads them (GpuVectorEnv.action_buffer): no copy into the env.
    draw_in_place = in_place_draw(env.action_buffer, nvec)
    parts["rollout step, drawn into action_buffer"] = lambda: env.step(draw_in_place())
    if args.primitives:
        parts.update(primitives(env, fixed))
    rows = {}
    for name, fn in parts.items():
        for _ in range(50):
            fn()
        host = host_us_per_call(lambda: None, lambda _, fn=fn: fn(), device, calls=1000)
        row = rows[name.strip()] = {"pace_us": pace_us(fn, device), "host_us": host}
        print(f"{name:34s} pace {row['pace_us']:8.1f} us   host {row['host_us']:7.1f} us")
    envs.close()
    if args.out:
        meta = {"games": args.games, "copy": args.copy, "direct_write": env.direct_write,
                "params": dict(args.param), "agents": env.num_agents,
                "device_name": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
                "torch": torch.__version__}  # fmt: skip
        args.out.write_text(json.dumps({"meta": meta, "parts": rows}, indent=1))


if __name__ == "__main__":
    main()
