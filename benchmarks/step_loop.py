"""Step one WarpTag-v0 configuration a fixed number of times, for an external profiler such as Nsight Compute.

    python benchmarks/step_loop.py --games 2000 --param num_runners=900 --param num_taggers=100 --steps 12
    ncu --clock-control none --set full -k regex:run --launch-skip 10 --launch-count 1 \\
        python benchmarks/step_loop.py --games 2000 --steps 12

The env is built with ``copy=False`` and without CUDA graphs, and its actions
are drawn once, so that each ``step`` is exactly one plain launch of the env's
kernel (the first launch is ``reset``'s): a profiler that skips the first
launches and records one sees a step like those of a rollout, autoresets
included. Parameters are ``make_vec`` keyword arguments, parsed as by ``python -m gpu_vecenv.check``.
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import torch

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from gpu_vecenv.check import parse_param


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu, to try the command without a GPU")
    parser.add_argument("--param", type=parse_param, action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    graphs = {"cuda_graphs": False} if args.device == "cuda" else {}
    envs = gym.make_vec("WarpTag-v0", num_envs=args.games, device=args.device, copy=False, **graphs,
                        **dict(args.param))  # fmt: skip
    envs.reset(seed=0)
    nvec = torch.as_tensor(envs.single_action_space.nvec, device=args.device)
    actions = (torch.rand((envs.num_envs, len(nvec)), device=args.device) * nvec).long()
    for _ in range(args.steps):
        envs.step(actions)
    if args.device == "cuda":
        torch.cuda.synchronize()
    print(f"stepped {args.steps} times: {args.games} games, {envs.unwrapped.num_agents} agents each")
    envs.close()


if __name__ == "__main__":
    main()
