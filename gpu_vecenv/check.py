"""Consistency checker: step a registered env next to its numpy reference and print where they differ.

    python -m gpu_vecenv.check WarpTag-v0 --device cpu --steps 200 --num-envs 8
    python -m gpu_vecenv.check WarpTag-v0 --param num_runners=20 --param use_full_observation=true

Both start from the same initial states and take the same random actions over
several episodes, resets included. The table gives, per output (obs, rewards,
terminated, active, state, initial state), the largest absolute and relative
differences and the first step and slot where one exceeded its tolerance. The
exit status is 1 on any mismatch, 2 when the env cannot be built.
"""

from __future__ import annotations

import argparse
import ast
import sys
from typing import Any

import gymnasium as gym

import gpu_vecenv  # noqa: F401  (registers the package's envs)
from gpu_vecenv.oracle import Report, compare_with_reference
from gpu_vecenv.vector_env import GpuVectorEnv


def check(
    env_id: str,
    device: str | None = None,
    steps: int = 200,
    num_envs: int = 4,
    seed: int = 0,
    autoreset_mode: str = "NextStep",
    **env_kwargs: Any,
) -> Report:
    """Build ``env_id`` with ``num_envs`` games and compare ``steps`` steps with its reference."""
    envs = gym.make_vec(env_id, num_envs=num_envs, device=device, autoreset_mode=autoreset_mode, **env_kwargs)
    env = envs.unwrapped
    if not isinstance(env, GpuVectorEnv):
        raise TypeError(f"{env_id} is not a gpu_vecenv environment (got {type(env).__name__})")
    try:
        return compare_with_reference(env, steps=steps, seed=seed)
    finally:
        env.close()


def _parse_param(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--param needs NAME=VALUE, got {text!r}")
    name, value = text.split("=", 1)
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return name, lowered == "true"
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpu_vecenv.check", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("env_id")
    parser.add_argument("--device", default=None, help="'cuda', 'cuda:N' or 'cpu' (default: best available)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--num-envs", type=int, default=4, help="number of games")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--autoreset-mode", default="NextStep", help="NextStep, SameStep or Disabled")
    parser.add_argument("--param", type=_parse_param, action="append", default=[], help="env parameter NAME=VALUE")
    args = parser.parse_args(argv)
    try:
        report = check(args.env_id, device=args.device, steps=args.steps, num_envs=args.num_envs, seed=args.seed,
                       autoreset_mode=args.autoreset_mode, **dict(args.param))  # fmt: skip
    except (ValueError, TypeError, gym.error.Error) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.env_id}: {args.num_envs} games, device={args.device or 'auto'}, mode={args.autoreset_mode}")
    print(report.table())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
