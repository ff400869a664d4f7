"""Exercise every launch path of WarpTag-v0's CUDA kernel at several sizes, for compute-sanitizer.

    compute-sanitizer --tool memcheck python benchmarks/sanitize_driver.py
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/sanitize_driver.py --tiny     # the same paths, under Numba's simulator
    python benchmarks/sanitize_driver.py --cpu                            # the same sequence, CPU backend

Each configuration below is built in each autoreset mode and driven through:
a seeded reset; a step with out-of-range actions (the kernel's error record);
the masked reset (half the games) that reports them, then one that goes on;
steps with random actions past two game ends (so autoresets run: NEXT_STEP's
reset branch, SAME_STEP's in-step reset, DISABLED's frozen games and masked
resets of the finished ones); a last seeded reset. CUDA graphs are off by
default (``--graphs`` turns them on) so that every launch is a plain kernel
launch the sanitizer sees as such. Sizes include more agents than threads per
block (the block is the agents rounded up to a warp, at most 256, or
``threads_per_block``), so the kernel's stride loop over agents is checked too.
Prints one line per run and ``driver finished: N runs``.
"""

from __future__ import annotations

import argparse
import sys
import time

import gymnasium as gym
import numpy as np
import torch

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from gpu_vecenv.shared import SIMULATOR

# name -> (games, make_vec parameters); episode_length is short so that games end within the run.
CONFIGS = {
    "default-110-agents": (64, dict(episode_length=6)),
    # spatial_index=True: at 300 agents the GPU's default is the scan; this size checks the index kernel.
    "300-agents-over-256-threads": (8, dict(num_runners=290, episode_length=6, spatial_index=True)),
    "110-agents-on-32-threads": (16, dict(threads_per_block=32, episode_length=6)),
    "full-observation-24-agents": (
        16,
        dict(num_taggers=4, num_runners=20, use_full_observation=True, episode_length=6),
    ),  # fmt: skip
    "K1-all-tagged-early": (
        16,
        dict(
            num_taggers=3,
            num_runners=5,
            num_other_agents_observed=1,
            grid_length=2.0,
            tagging_distance=0.5,
            episode_length=6,
        ),
    ),  # fmt: skip
}
# Under the simulator every CUDA thread is a Python thread: a few games of a few agents, 2 threads per block.
TINY_CONFIGS = {
    "tiny-5-agents-over-2-threads": (
        2,
        dict(num_taggers=2, num_runners=3, num_other_agents_observed=2, episode_length=3, threads_per_block=2),
    ),  # fmt: skip
    "tiny-full-observation": (
        2,
        dict(num_taggers=1, num_runners=3, use_full_observation=True, episode_length=3, threads_per_block=4),
    ),  # fmt: skip
}
MODES = ("NextStep", "SameStep", "Disabled")


def drive(name: str, games: int, params: dict, mode: str, device: str, graphs: bool, seed: int) -> str:
    """Build one env and run every launch path once or more; returns a one-line summary."""
    backend = {"backend": "cuda"} if SIMULATOR else {"cuda_graphs": graphs} if device == "cuda" else {}
    envs = gym.make_vec("WarpTag-v0", num_envs=games, device=device, autoreset_mode=mode, **backend, **params)
    env = envs.unwrapped
    rng = np.random.default_rng(seed)
    nvec = envs.single_action_space.nvec
    envs.reset(seed=seed)
    bad = rng.integers(0, nvec, size=(envs.num_envs, 2))  # from fresh games, so that the kernel records them
    bad[:: max(1, envs.num_envs // 7), 0] = -3
    bad[1 :: max(1, envs.num_envs // 5), 1] = 10**6
    envs.step(torch.as_tensor(bad, device=env.device))
    half = torch.arange(games, device=env.device) % 2 == 0
    try:
        envs.reset(options={"reset_mask": half})
        raise AssertionError(f"{name} {mode}: the out-of-range actions were not reported")
    except ValueError as exc:
        assert "out-of-range actions" in str(exc), exc
    envs.reset(options={"reset_mask": half})
    ends = 0
    for _ in range(2 * params["episode_length"] + 2):
        actions = torch.as_tensor(rng.integers(0, nvec, size=(envs.num_envs, 2)), device=env.device)
        _, _, terminated, truncated, _ = envs.step(actions)
        done = env.per_game(terminated | truncated)[:, 0]
        ends += int(done.sum())
        if mode == "Disabled" and bool(done.any()):
            envs.reset(options={"reset_mask": done})
    obs, _ = envs.reset(seed=seed + 1)
    finite = bool(torch.isfinite(obs).all())
    if env.device.type == "cuda":
        torch.cuda.synchronize(env.device)
    block = getattr(env._backend, "block", "-")
    envs.close()
    assert finite, f"{name} {mode}: non-finite observations"
    return (f"{name:<30} {mode:<9} games={games:<3} agents={env.num_agents:<4} threads_per_block={block:<4} "
            f"game_ends={ends}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (default under NUMBA_ENABLE_CUDASIM=1)")
    parser.add_argument("--cpu", action="store_true", help="a dry run of the same sequence on the CPU backend")
    parser.add_argument("--graphs", action="store_true", help="replay CUDA graphs instead of direct launches")
    parser.add_argument("--only", nargs="*", default=None, help="configuration names to run (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not SIMULATOR and not args.cpu and not torch.cuda.is_available():
        print("sanitize_driver: needs a CUDA GPU, or NUMBA_ENABLE_CUDASIM=1 for the simulator", file=sys.stderr)
        return 2
    configs = TINY_CONFIGS if (args.tiny or SIMULATOR) else CONFIGS
    device = "cpu" if (SIMULATOR or args.cpu) else "cuda"
    runs, start = 0, time.perf_counter()
    for name, (games, params) in configs.items():
        if args.only and name not in args.only:
            continue
        for mode in MODES:
            print(drive(name, games, params, mode, device, args.graphs, args.seed), flush=True)
            runs += 1
    print(f"driver finished: {runs} runs in {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
