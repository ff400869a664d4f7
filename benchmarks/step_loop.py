"""Step one WarpTag-v0 configuration a fixed number of times, for an external profiler such as Nsight Compute.

    python benchmarks/step_loop.py --games 2000 --param num_runners=900 --param num_taggers=100 --steps 12
    ncu --clock-control none --set full -k regex:run --launch-skip 10 --launch-count 1 \\
        python benchmarks/step_loop.py --games 2000 --steps 12

The env is built with ``copy=False`` and without CUDA graphs, and its actions
are drawn once, so that each ``step`` is exactly one plain launch of the env's
kernel (the first launch is ``reset``'s): a profiler that skips the first
launches and records one sees a step like those of a rollout, autoresets
included. With ``--redraw`` the actions are drawn afresh before every step,
as in a rollout of random play (``bench_step.py``'s), by torch kernels of
their own that a profiler filtering on the env's kernel (``-k regex:run``)
does not count, so that a late step's games have emptied and been reset as
a rollout's have. ``--in-game`` prints the share of agents in the game at
the last step and on average over the steps after the 30th (kept on the
device, read once at the end); on the CPU backend, 8 games of 100+900:

    python benchmarks/step_loop.py --device cpu --games 8 --param num_taggers=100 \
        --param num_runners=900 --steps 560 --redraw --in-game

about a fifth on average after the 30th step, and at the 10th step (``--steps 10``) about
60% with either kind of actions. Parameters are ``make_vec`` keyword arguments,
parsed as by ``python -m gpu_vecenv.check``.
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
    parser.add_argument("--redraw", action="store_true", help="draw the actions afresh before every step")
    parser.add_argument("--in-game", action="store_true", help="print the share of agents in the game")
    args = parser.parse_args()
    graphs = {"cuda_graphs": False} if args.device == "cuda" else {}
    envs = gym.make_vec("WarpTag-v0", num_envs=args.games, device=args.device, copy=False, **graphs,
                        **dict(args.param))  # fmt: skip
    envs.reset(seed=0)
    nvec = torch.as_tensor(envs.single_action_space.nvec, device=args.device)
    actions = (torch.rand((envs.num_envs, len(nvec)), device=args.device) * nvec).long()
    later_sum = torch.zeros((), device=args.device)
    share = torch.zeros((), device=args.device)
    for step in range(1, args.steps + 1):
        if args.redraw:
            actions = (torch.rand((envs.num_envs, len(nvec)), device=args.device) * nvec).long()
        infos = envs.step(actions)[4]
        if args.in_game:
            share = infos["active"].float().mean()
            if step > 30:
                later_sum += share
    if args.in_game:
        later = f"{later_sum.item() / (args.steps - 30):.3f}" if args.steps > 30 else "-"
        print(f"agents in the game: {share.item():.3f} at step {args.steps}, {later} on average after step 30")
    if args.device == "cuda":
        torch.cuda.synchronize()
    print(f"stepped {args.steps} times: {args.games} games, {envs.unwrapped.num_agents} agents each")
    envs.close()


if __name__ == "__main__":
    main()
