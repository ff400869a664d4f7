"""Print the kernel gpu_vecenv generates for a registered env.

    python -m gpu_vecenv.show_kernel WarpTag-v0 [--target cuda|cpu] [--param NAME=VALUE ...]

The printed module is what the backends compile; copy it as the starting point
of a hand-written kernel (``EnvDefinition.cuda_kernel``).
"""

from __future__ import annotations

import sys

from gpu_vecenv.codegen import generate_source
from gpu_vecenv.definition import EnvDefinition


def main(argv: list[str] | None = None) -> int:
    """Print the kernel source gpu_vecenv generates for an env: the starting point of a hand-written kernel."""
    import argparse

    import gymnasium as gym

    import gpu_vecenv  # noqa: F401  (registers the package's envs)
    from gpu_vecenv.check import parse_param

    parser = argparse.ArgumentParser(prog="python -m gpu_vecenv.show_kernel", description=main.__doc__)
    parser.add_argument("env_id")
    parser.add_argument("--target", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--param", type=parse_param, action="append", default=[], help="env parameter NAME=VALUE")
    args = parser.parse_args(argv)
    envs = gym.make_vec(args.env_id, num_envs=1, device="cpu", **dict(args.param))
    definition = getattr(envs.unwrapped, "definition", None)
    if not isinstance(definition, EnvDefinition):
        print(f"error: {args.env_id} is not a gpu_vecenv environment", file=sys.stderr)
        return 2
    print(generate_source(definition, args.target), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
