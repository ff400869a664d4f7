"""How many of WarpTag-v0's agents are still in the game, step by step, under the benchmarks' random play.

    python benchmarks/agents_in_game.py --param num_taggers=10 --param num_runners=100
    python benchmarks/agents_in_game.py --param num_taggers=100 --param num_runners=900 --games 4

Since only agents in the game take a thread of the K-nearest search, a step's
cost depends on this share, and random play (actions drawn uniformly, as in
``bench_step.py``) empties a game fast: runners leave when tagged, and a game
ends, then starts full, when none is left. Prints the share averaged over each
window of ``--every`` steps and over the whole rollout (from ``reset(seed=1)``,
autoreset on).
"""

from __future__ import annotations

import argparse
import sys

import gymnasium as gym
import numpy as np
import torch
from rollout_timing import in_place_draw

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from gpu_vecenv.check import parse_param


def shares_in_game(games: int, steps: int, device: str, params: dict) -> np.ndarray:
    """The share of the agents in the game after each of ``steps`` random steps, averaged over the games."""
    env = gym.make_vec("WarpTag-v0", num_envs=games, device=device, copy=False, **params).unwrapped
    actions = torch.zeros((env.num_envs, len(env.definition.action_nvec)), dtype=torch.int64, device=env.device)
    draw = in_place_draw(actions, env.definition.action_nvec)
    env.reset(seed=1)
    torch.manual_seed(1)
    alive = env.state["alive"]
    shares = torch.empty(steps, device=env.device)
    for i in range(steps):
        env.step(draw())
        shares[i] = (alive != 0).float().mean()
    env.close()
    return shares.cpu().numpy()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=int, default=4, help="games (default 4)")
    parser.add_argument("--steps", type=int, default=1000, help="random steps (default 1000: two episodes)")
    parser.add_argument("--every", type=int, default=100, help="steps a printed window (default 100)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--param", type=parse_param, action="append", default=[], help="WarpTag-v0 NAME=VALUE")
    args = parser.parse_args(argv)
    shares = shares_in_game(args.games, args.steps, args.device, dict(args.param))
    print(f"WarpTag-v0 {dict(args.param)}, {args.games} games, random actions: share of the agents in the game")
    for start in range(0, args.steps, args.every):
        end = min(start + args.every, args.steps)
        print(f"steps {start + 1:5d}-{end:5d}  {shares[start:end].mean():.3f}")
    print(f"all {args.steps} steps       {shares.mean():.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
