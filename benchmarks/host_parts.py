"""Where a rollout step's time goes when the host sets the pace: each part of it timed alone.

    python benchmarks/host_parts.py --games 100 [--param num_runners=100 ...] [--copy] [--out parts.json]

For one WarpTag-v0 configuration (``make_vec`` keyword arguments as in
``python -m gpu_vecenv.check``), each part of the benchmark's rollout step is
called back to back and timed two ways: its pace (CUDA events around many
calls: the larger of its host and device time) and its host time (wall time of
a burst of calls right after a sync, which the device's queue absorbs). Parts:
the in-place action draw, ``step`` with fixed actions and, inside it, loading
the actions and the kernel launch (a graph replay), and the whole rollout
step (draw + ``step``). When a part's pace equals its host time, the host
decides it; when it is larger, the device does.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import torch
from rollout_timing import in_place_draw, time_region

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from gpu_vecenv.check import parse_param
from gpu_vecenv.codegen import OP_STEP


def host_us(fn: Callable[[], object], calls: int = 50, bursts: int = 20) -> float:
    """Median over bursts of the wall time per call, the device synchronized before each burst only."""
    per_call = []
    for _ in range(bursts):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - t0) / calls)
    torch.cuda.synchronize()
    return 1e6 * statistics.median(per_call)


def pace_us(fn: Callable[[], object], calls: int = 500, repeats: int = 5) -> float:
    """Median over ``repeats`` runs of ``calls`` back-to-back calls, between CUDA events, per call."""
    return 1e6 * statistics.median(time_region(fn, calls, torch.device("cuda")) / calls for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--copy", action="store_true", help="step with copy=True (fresh output tensors)")
    parser.add_argument("--param", type=parse_param, action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--out", type=Path, help="also write the figures here as JSON")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("needs a CUDA device: it separates host time from device time")

    envs = gym.make_vec("WarpTag-v0", num_envs=args.games, device="cuda", copy=args.copy, **dict(args.param))
    env = envs.unwrapped
    env.reset(seed=0)
    nvec = env.single_action_space.nvec
    draw = in_place_draw(torch.zeros((env.num_envs, len(nvec)), dtype=torch.int64, device=env.device), nvec)
    fixed = draw().clone()
    launch = env._backend.launch
    parts: dict[str, Callable[[], object]] = {
        "draw (in place)": draw,
        "step, fixed actions": lambda: env.step(fixed),
        "  load actions": lambda: env._load_actions(fixed),
        "  launch (graph replay)": lambda: launch(OP_STEP),
        "rollout step (draw + step)": lambda: env.step(draw()),
    }
    rows = {}
    for name, fn in parts.items():
        for _ in range(50):
            fn()
        row = rows[name.strip()] = {"pace_us": pace_us(fn), "host_us": host_us(fn)}
        print(f"{name:30s} pace {row['pace_us']:8.1f} us   host {row['host_us']:7.1f} us")
    envs.close()
    if args.out:
        meta = {"games": args.games, "copy": args.copy, "params": dict(args.param), "agents": env.num_agents,
                "device_name": torch.cuda.get_device_name(), "torch": torch.__version__}  # fmt: skip
        args.out.write_text(json.dumps({"meta": meta, "parts": rows}, indent=1))


if __name__ == "__main__":
    main()
