"""Two generated CPU kernels of one configuration, timed in one process on the same buffers, alternating.

On a small shared machine the time of a step drifts by tens of percent from one process to the next, more
than most changes to the generated code move it. Here this checkout's kernel and another one (a module
printed by ``python -m gpu_vecenv.show_kernel ... --target cpu`` in another checkout, with the same
parameters) take turns stepping the same env's buffers, in rounds of many launches, the order flipped
every round, so that both see the same machine and the same games (this checkout's kernel is written beside
the other's, as ``this_kernel_OTHER.py``, and both are loaded alike):

    python -m gpu_vecenv.show_kernel WarpTag-v0 --target cpu --param num_taggers=1 --param num_runners=3 \\
        --param use_full_observation=True > OTHER.py                    # in the other checkout
    python benchmarks/cpu_kernel_ab.py OTHER.py --param num_taggers=1 --param num_runners=3 \\
        --param use_full_observation=True --games 1024 --rounds 20     # in this one

Both kernels must read the same buffers the same way: kernels of versions that laid out the parameters or
the state arrays otherwise (v64 added ``obs_kept`` and ``out_when_observed``) cannot take turns, and are
refused with the first line where they differ.

Prints ms a launch (min, median, max over the rounds) for each kernel and the rounds each won; ``--out``
also writes them as JSON. The launches step the games with random actions (autoresets included).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

import gymnasium as gym
import numpy as np

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from gpu_vecenv.check import parse_param
from gpu_vecenv.codegen import OP_STEP, generate_source


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # where Numba's cache of the kernel finds its module again
    spec.loader.exec_module(module)
    return module


# A line of a generated kernel that reads a parameter or finds a buffer's row by one: `x = agent_f32[params_i64[22]]`.
_LAYOUT_LINE = re.compile(r"^\s*\w+ = .*\bparams_(?:i64|f32)\[")


def layout_difference(this_source: str, other_source: str) -> str | None:
    """The first line where two generated kernels read their parameters or rows differently, or None."""
    this_lines, other_lines = ([line.strip() for line in source.splitlines() if _LAYOUT_LINE.match(line)]
                               for source in (this_source, other_source))  # fmt: skip
    for i, (mine, theirs) in enumerate(zip(this_lines, other_lines, strict=False)):
        if mine != theirs:
            return f"layout line {i}: this checkout's kernel has {mine!r}, the other {theirs!r}"
    if len(this_lines) != len(other_lines):
        return f"this checkout's kernel has {len(this_lines)} layout lines, the other {len(other_lines)}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, help="the other kernel's module (show_kernel --target cpu)")
    parser.add_argument("--env-id", default="WarpTag-v0")
    parser.add_argument("--param", type=parse_param, action="append", default=[], help="env parameter NAME=VALUE")
    parser.add_argument("--games", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--launches", type=int, default=400, help="launches a kernel a round")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)

    envs = gym.make_vec(args.env_id, num_envs=args.games, device="cpu", backend="cpu", copy=False,
                        **dict(args.param))  # fmt: skip
    envs.reset(seed=0)
    env = envs.unwrapped
    # This checkout's kernel is loaded as the other one is, from a file beside it, so that nothing but the
    # source differs (in two runs made while this tool was written, not kept, a kernel run through the env's
    # own cache was a few percent slower than one loaded from a file, in either role).
    this_file = args.other.with_name(f"this_kernel_{args.other.stem}.py")
    this_source = generate_source(env.definition, "cpu")
    difference = layout_difference(this_source, args.other.read_text())
    if difference is not None:
        raise SystemExit(
            f"{args.other}: not a kernel of this checkout's buffers ({difference}): give a kernel "
            "printed with the same parameters by a checkout of the same parameter and state layout"
        )
    this_file.write_text(this_source)
    kernels = {"this": _load(this_file, "this_cpu_kernel").run, "other": _load(args.other, "other_cpu_kernel").run}
    kernel_args = env._backend._args
    actions = env._actions.numpy()
    rng = np.random.default_rng(0)
    drawn = [rng.integers(0, env.single_action_space.nvec, size=actions.shape) for _ in range(64)]

    def launches(run, count: int) -> float:
        start = time.perf_counter()
        for i in range(count):
            actions[...] = drawn[i % len(drawn)]
            run(*kernel_args, OP_STEP)
        return (time.perf_counter() - start) / count * 1e3

    for run in kernels.values():  # the first call compiles (or loads the cache)
        launches(run, 20)
    ms: dict[str, list[float]] = {name: [] for name in kernels}
    for r in range(args.rounds):
        for name in kernels if r % 2 == 0 else reversed(kernels):
            ms[name].append(launches(kernels[name], args.launches))

    wins = sum(a < b for a, b in zip(ms["this"], ms["other"], strict=True))
    print(f"{args.env_id} {dict(args.param)}, {args.games} games, {args.rounds} rounds of {args.launches} launches")
    print("| kernel | min ms | median ms | max ms | rounds faster |")
    print("|---|---|---|---|---|")
    for name, values in ms.items():
        faster = wins if name == "this" else args.rounds - wins
        print(f"| {name} | {min(values):.4f} | {statistics.median(values):.4f} | {max(values):.4f} | {faster} |")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        record = {"command": "python benchmarks/cpu_kernel_ab.py " + " ".join(sys.argv[1:] if argv is None else argv),
                  "games": args.games, "rounds": args.rounds, "launches": args.launches, "ms": ms}  # fmt: skip
        args.out.write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
