"""Host time per ``step()`` call on a small env, where launch overhead, not the kernel, sets the pace.

    python benchmarks/bench_host.py [--games 64] [--taggers 1] [--runners 3] [--steps 5000]

Actions are made once up front; the loop only calls ``step``. With a kernel
this small the device keeps up, so wall time per call is host time per call.
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import torch

import gpu_vecenv  # noqa: F401


def host_us_per_step(games: int, taggers: int, runners: int, steps: int, device: str, **options) -> float:
    envs = gym.make_vec("WarpTag-v0", num_envs=games, num_taggers=taggers, num_runners=runners,
                        num_other_agents_observed=min(10, taggers + runners - 1), device=device, **options)  # fmt: skip
    envs.reset(seed=0)
    nvec = torch.as_tensor(envs.single_action_space.nvec, device=envs.device)
    actions = (torch.rand((envs.num_envs, 2), device=envs.device) * nvec).long()
    for _ in range(50):
        envs.step(actions)
    if envs.device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        envs.step(actions)
    host = time.perf_counter() - start
    if envs.device.type == "cuda":
        torch.cuda.synchronize()
    envs.close()
    return 1e6 * host / steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--games", type=int, default=64)
    p.add_argument("--taggers", type=int, default=1)
    p.add_argument("--runners", type=int, default=3)
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--json")
    a = p.parse_args()
    variants = [{"copy": True}, {"copy": False}, {"copy": True, "strict": True}]
    if a.device.startswith("cuda"):
        variants += [{"copy": True, "cuda_graphs": False}, {"copy": False, "cuda_graphs": False}]
    rows = []
    for options in variants:
        us = host_us_per_step(a.games, a.taggers, a.runners, a.steps, a.device, **options)
        rows.append({"games": a.games, "agents": a.taggers + a.runners, "options": options, "host_us_per_step": us})
    print(f"{'games':>6} {'agents':>7} {'host us/step':>13}  options ({a.device})")
    for r in rows:
        print(f"{r['games']:>6} {r['agents']:>7} {r['host_us_per_step']:>13.1f}  {r['options']}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"device": a.device, "torch": torch.__version__, "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main()
