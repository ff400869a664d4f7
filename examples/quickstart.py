"""Quickstart: make WarpTag-v0 on the best device, run random actions, print throughput.

    python examples/quickstart.py                       # GPU if there is one, else CPU
    python examples/quickstart.py --games 100 2000 --steps 2000 --device cuda

Random actions are drawn on the env's device, so the loop never leaves it; the
device is synchronized only around the timed loop.
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import torch
from tqdm import tqdm

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)


def run(num_games: int, steps: int, device: str, copy: bool) -> dict:
    t0 = time.perf_counter()
    envs = gym.make_vec("WarpTag-v0", num_envs=num_games, device=device, copy=copy)
    envs.reset(seed=0)
    setup_s = time.perf_counter() - t0
    nvec = torch.as_tensor(envs.single_action_space.nvec, device=envs.device)

    def random_actions() -> torch.Tensor:
        u = torch.rand((envs.num_envs, len(nvec)), device=envs.device)
        return (u * nvec).long()

    for _ in range(10):  # warm-up: first launches, allocator
        envs.step(random_actions())
    if envs.device.type == "cuda":
        torch.cuda.synchronize(envs.device)
    start = time.perf_counter()
    for _ in tqdm(range(steps), desc=f"{num_games} games", unit="step", leave=False):
        envs.step(random_actions())
    if envs.device.type == "cuda":
        torch.cuda.synchronize(envs.device)
    elapsed = time.perf_counter() - start
    result = {
        "games": num_games,
        "agents": envs.num_agents,
        "device": str(envs.device),
        "copy": copy,
        "steps": steps,
        "ms_per_step": 1e3 * elapsed / steps,
        "game_steps_per_s": num_games * steps / elapsed,
        "agent_steps_per_s": envs.num_envs * steps / elapsed,
        "setup_s": setup_s,
    }
    envs.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=int, nargs="+", help="numbers of games (default: 100 2000 on GPU, 100 on CPU)")
    parser.add_argument("--steps", type=int, help="timed steps per size (default: 2000 on GPU, 100 on CPU)")
    parser.add_argument("--device", default=None, help="'cuda', 'cuda:N' or 'cpu' (default: best available)")
    parser.add_argument("--no-copy", action="store_true", help="return views of the env's buffers (copy=False)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    on_gpu = device.startswith("cuda")
    games = args.games or ([100, 2000] if on_gpu else [100])
    steps = args.steps or (2000 if on_gpu else 100)

    results = [run(g, steps, device, copy=not args.no_copy) for g in games]
    name = torch.cuda.get_device_name(torch.device(device)) if on_gpu else "CPU"
    print(
        f"\nWarpTag-v0 defaults (10 taggers + 100 runners, K = 10), random actions, {steps} timed steps, "
        f"copy={not args.no_copy}"
    )
    print(f"{'games':>7} {'agents':>7} {'ms/step':>9} {'steps/s':>10} {'game-steps/s':>14} "
          f"{'agent-steps/s':>15} {'set-up s':>9}  device")  # fmt: skip
    for r in results:
        print(f"{r['games']:>7} {r['agents']:>7} {r['ms_per_step']:>9.3f} {1e3 / r['ms_per_step']:>10.0f} "
              f"{r['game_steps_per_s']:>14.3e} {r['agent_steps_per_s']:>15.3e} {r['setup_s']:>9.1f}  "
              f"{r['device']} ({name})")  # fmt: skip
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device_name": name, "torch": torch.__version__, "results": results}, fh, indent=2)


if __name__ == "__main__":
    main()
