"""Kernel and host timings of WarpTag-v0 configurations, for the performance log (benchmarks/NOTES.md).

    python benchmarks/profile_kernel.py --out results.json [--configs default100,default2000,...]
        [--variants max_registers=64,threads=64] [--variant-configs full5x100] [--host] [--copy-bandwidth] [--scaling]

For each configuration it reports the set-up time (construction and first
reset, compilation included when the kernel cache is cold), the kernel time
per step (the captured step replayed back to back, timed with CUDA events,
fixed random actions, autoresets included), and the rollout time per step
(random actions drawn in place on the device, as
``bench_step.py`` draws them, ``step`` with ``copy=True``), together with the two floors: the bytes a step must move
(state read and written once, actions read, outputs written) and the
arithmetic of the K-nearest search (pairwise distances, 5 operations each).
``--copy-bandwidth`` measures a large device-to-device copy (bytes read plus
written), the ceiling the bytes floor is divided by. ``--variants`` times the
same configuration with the kernel compiled under a register cap
(``max_registers=N``; without it, WarpTag-v0's default cap, recorded in
each row) or another block size
(``threads=N``), on ``default2000`` and ``default100`` or the configurations
named by ``--variant-configs``. ``--host`` measures host microseconds per ``step()`` at 64
games x 4 agents. ``--scaling`` measures cost per agent-step of K-nearest
observation against the number of agents N (10 ... 4096).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import gymnasium as gym
import torch
from rollout_timing import copy_bandwidth, in_place_draw, step_kernel_launch, time_region

import gpu_vecenv  # noqa: F401

CONFIGS = {
    "default100": dict(games=100, num_taggers=10, num_runners=100),
    "default2000": dict(games=2000, num_taggers=10, num_runners=100),
    "full5x100": dict(games=2000, num_taggers=5, num_runners=100, use_full_observation=True),
    "full1x3": dict(games=10000, num_taggers=1, num_runners=3, use_full_observation=True),
    "agents1000": dict(games=2000, num_taggers=10, num_runners=990),
}


def make(games: int, threads: int | None = None, **params) -> gym.vector.VectorEnv:
    options = {"threads_per_block": threads} if threads else {}
    return gym.make_vec("WarpTag-v0", num_envs=games, device="cuda", **options, **params)


def floors(envs, k_nearest: bool) -> dict:
    """Bytes a step must move and the K-nearest arithmetic, per step."""
    n, g = envs.num_agents, envs.num_games
    obs_dim = envs.single_observation_space.shape[0]
    state = 4 * 6 * n * g  # x, y, speed, direction, acceleration, alive: read and written
    outputs = g * n * (4 * obs_dim + 4 + 5)  # obs, rewards, flags
    actions = g * n * 2 * 8
    ops = 5 * g * n * (n - 1) if k_nearest else 0
    return {"bytes": 2 * state + outputs + actions, "obs_bytes": g * n * 4 * obs_dim, "ops": ops}


def event_ms(fn, repeats: int) -> float:
    """Milliseconds per call of ``fn``, ``repeats`` calls back to back between two CUDA events."""
    return 1e3 * time_region(fn, repeats, torch.device("cuda")) / repeats


def time_config(name: str, threads: int | None = None, budget_s: float = 0.5, **params) -> dict:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    envs = make(**params, threads=threads)
    envs.reset(seed=0)
    torch.cuda.synchronize()
    setup = time.perf_counter() - t0
    nvec = torch.as_tensor(envs.single_action_space.nvec, device="cuda")
    fixed = (torch.rand((envs.num_envs, 2), device="cuda") * nvec).long()
    envs.step(fixed)
    env = envs.unwrapped if hasattr(envs, "unwrapped") else envs
    backend = env._backend
    launch = step_kernel_launch(env)
    one = event_ms(launch, 3)
    repeats = max(5, min(2000, int(budget_s * 1e3 / max(one, 1e-3))))
    kernel = statistics.median(event_ms(launch, repeats) for _ in range(3))

    draw = in_place_draw(torch.empty_like(fixed), envs.single_action_space.nvec)

    def rollout():
        envs.step(draw())

    rollout_ms = statistics.median(event_ms(rollout, repeats) for _ in range(3))
    row = {
        "config": name,
        "games": envs.num_games,
        "agents": envs.num_agents,
        "threads": threads,
        "threads_per_block": backend.block,  # the block launched (the env's default when threads is None)
        "max_registers": envs.unwrapped.definition.max_registers,  # the cap compiled under ("auto" resolved)
        "setup_s": setup,
        "kernel_ms": kernel,
        "rollout_ms": rollout_ms,
        "game_steps_per_s": envs.num_games / (rollout_ms * 1e-3),
        "agent_step_ns": 1e6 * kernel / envs.num_envs,
        **floors(envs, not params.get("use_full_observation", False)),
    }
    envs.close()
    return row


def host_us(copy: bool, steps: int = 3000) -> float:
    envs = gym.make_vec("WarpTag-v0", num_envs=64, num_taggers=1, num_runners=3, num_other_agents_observed=3,
                        device="cuda", copy=copy)  # fmt: skip
    envs.reset(seed=0)
    nvec = torch.as_tensor(envs.single_action_space.nvec, device="cuda")
    actions = (torch.rand((envs.num_envs, 2), device="cuda") * nvec).long()
    for _ in range(100):
        envs.step(actions)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(steps):
            envs.step(actions)
        best = min(best, (time.perf_counter() - t0) / steps * 1e6)
        torch.cuda.synchronize()
    envs.close()
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--label", default="")
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--variants", default="", help="comma list of max_registers=N / threads=N")
    p.add_argument("--variant-configs", default="default2000,default100", help="the configurations --variants runs on")
    p.add_argument("--host", action="store_true")
    p.add_argument("--copy-bandwidth", action="store_true")
    p.add_argument("--scaling", action="store_true")
    a = p.parse_args()
    result: dict = {"label": a.label, "device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    if a.copy_bandwidth:
        result["copy_gbs"] = copy_bandwidth(torch.device("cuda"))["GB_per_s"]
        print(f"copy bandwidth (read + write): {result['copy_gbs']:.0f} GB/s", flush=True)
    rows = result["rows"]
    for name in filter(None, a.configs.split(",")):
        rows.append(time_config(name, **CONFIGS[name]))
        print(json.dumps(rows[-1]), flush=True)
    for variant in filter(None, a.variants.split(",")):
        key, value = variant.split("=")
        for name in filter(None, a.variant_configs.split(",")):
            if key == "threads":
                rows.append(time_config(name, threads=int(value), **CONFIGS[name]))
            else:
                rows.append(time_config(name, max_registers=int(value), **CONFIGS[name]))
            rows[-1]["variant"] = variant
            print(json.dumps(rows[-1]), flush=True)
    if a.scaling:
        for n in (10, 100, 1000, 4096):
            taggers = max(1, n // 10)
            games = max(64, 2_000_000 // n)
            rows.append(time_config(f"scaling{n}", games=games, num_taggers=taggers, num_runners=n - taggers,
                                    num_other_agents_observed=min(10, n - 1), budget_s=0.5))  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
    if a.host:
        result["host_us_copy"] = host_us(True)
        result["host_us_nocopy"] = host_us(False)
        print(f"host us/step 64x4: copy=True {result['host_us_copy']:.1f}  copy=False {result['host_us_nocopy']:.1f}")
    with open(a.out, "w") as fh:
        json.dump(result, fh, indent=1)
    print(f"{'config':<14}{'variant':<18}{'games':>6}{'agents':>7}{'setup s':>8}{'kernel ms':>10}{'rollout ms':>11}")
    for r in rows:
        print(f"{r['config']:<14}{r.get('variant', ''):<18}{r['games']:>6}{r['agents']:>7}{r['setup_s']:>8.1f}"
              f"{r['kernel_ms']:>10.4f}{r['rollout_ms']:>11.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
