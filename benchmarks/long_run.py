"""Long run of WarpTag-v0: no NaN, no drift from the reference, flat memory, no leak across 100 envs.

    python benchmarks/long_run.py --out results/long_run                          # 10**6 steps of 100 games, GPU
    python benchmarks/long_run.py --device cpu --games 2 --steps 300 --cycles 5 --out /tmp/lr   # a small CPU run

The default game (10 taggers, 100 runners, 500-step episodes) is stepped
``--steps`` times with random actions drawn on the device, with autoreset
(and an explicit ``reset()`` every ``--reset-every`` steps). What is checked:

- **No NaN or infinity**: the sums of every step's observations and rewards
  are added into one float64 on the device (a NaN or infinity anywhere stays
  in it); it is read only at checkpoints, so the run does not sync per step.
- **No drift from the reference** (spot checks every ``--spot-every`` steps):
  one game's state is copied to the host before a step, the numpy reference is
  loaded with it and steps with the same actions, and observations, rewards,
  terminated and the new state are compared within the consistency checker's
  tolerances (``gpu_vecenv.oracle.DEFAULT_TOLERANCES``).
- **Flat memory**: at ``--samples`` checkpoints, torch's allocated and
  reserved bytes, the device memory in use as the driver counts it
  (``torch.cuda.mem_get_info``, which sees Numba's and the graphs' memory too,
  as nvidia-smi would) and the process's resident host memory; the slope of a
  least-squares line through the second half of the samples, per 1000 steps
  and per 1000 game ends.
- **No leak across envs**: ``--cycles`` envs are made, reset, stepped and
  closed one after the other in this process; memory after them against a
  baseline taken after the first one.

Writes ``long_run.json`` (every figure and sample) and ``long_run.txt`` (a
summary) into ``--out``; exit status 1 if a check failed.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from gpu_vecenv.oracle import DEFAULT_TOLERANCES, Difference, _game_state
from gpu_vecenv.vector_env import GpuVectorEnv

# A fitted growth below these over the whole sampled span counts as flat (allocator rounding, Python's heap).
FLAT_DEVICE_BYTES = 1 << 20
FLAT_HOST_BYTES = 16 << 20
# After the env cycles, memory back within these of the baseline.
LEAK_DEVICE_BYTES = 1 << 20
LEAK_HOST_BYTES = 32 << 20


def host_rss_bytes() -> int:
    """Resident memory of this process (Linux ``/proc``; elsewhere the peak from ``resource``)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def memory_sample(device: torch.device) -> dict[str, int]:
    """Host RSS and, on a GPU, torch's allocated / reserved / peak bytes and the driver's used bytes."""
    sample = {"host_rss": host_rss_bytes()}
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        free, total = torch.cuda.mem_get_info(device)
        sample.update(
            allocated=torch.cuda.memory_allocated(device),
            reserved=torch.cuda.memory_reserved(device),
            max_allocated=torch.cuda.max_memory_allocated(device),
            driver_used=total - free,
        )
    return sample


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ``ys`` over ``xs`` (0 for fewer than two points)."""
    if len(xs) < 2 or np.ptp(xs) == 0:
        return 0.0
    return float(np.polyfit(np.asarray(xs, np.float64), np.asarray(ys, np.float64), 1)[0])


def spot_check(
    env: GpuVectorEnv, g: int, actions: torch.Tensor, differences: dict[str, Difference]
) -> tuple[torch.Tensor, ...] | None:
    """Step ``env`` with ``actions`` and game ``g``'s reference from ``g``'s pre-step state; record differences.

    Returns the step's ``(obs, rewards, terminated, truncated)``, or ``None`` (having stepped nothing) when
    game ``g`` is waiting for its autoreset, whose step is a reset.
    """
    if int(env.state["pending_reset"][g]) != 0:
        return None
    reference = env.definition.reference()
    keys = list(reference.get_state())
    reference.set_state(_game_state(env, keys, g))
    own = actions.view(env.num_games, env.num_agents, -1)[g].cpu().numpy()
    obs, rewards, terminated, truncated, _ = env.step(actions)
    want_obs, want_rewards, over = reference.step(own)
    where = f"game {g}, t={int(env.state['t'][g])}"
    differences["obs"].update(env.per_game(obs)[g].cpu().numpy(), want_obs, where)
    differences["rewards"].update(env.per_game(rewards)[g].cpu().numpy(), want_rewards, where)
    differences["terminated"].update(env.per_game(terminated)[g].cpu().numpy(), np.full(env.num_agents, over), where)
    got = _game_state(env, keys, g)
    for key, value in reference.get_state().items():
        differences["state"].update(got[key], value, f"{where}, {key}")
    return obs, rewards, terminated, truncated


def long_run(env: GpuVectorEnv, args: argparse.Namespace) -> dict[str, Any]:
    device = env.device
    nvec = torch.as_tensor(env.definition.action_nvec, device=device)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    # A pool of action tensors made up front: drawing them costs no launches inside the timed loop. Its
    # length is prime, so that it never lines up with the episode length.
    pool = [(torch.rand((env.num_envs, len(nvec)), device=device, generator=generator) * nvec).long()
            for _ in range(args.action_pool)]  # fmt: skip
    differences = {name: Difference(name, DEFAULT_TOLERANCES.get(name, 0.0))
                   for name in ("obs", "rewards", "terminated", "state")}  # fmt: skip
    finite_sum = torch.zeros((), dtype=torch.float64, device=device)
    game_ends = torch.zeros((), dtype=torch.int64, device=device)
    first_slots = slice(None, None, env.num_agents)
    sample_every = max(1, args.steps // args.samples)
    samples: list[dict[str, Any]] = []
    spot_checks, first_nonfinite_by = 0, None

    env.reset(seed=args.seed)
    start = time.perf_counter()
    for step in range(args.steps):
        actions = pool[step % len(pool)]
        outputs = None
        if step % args.spot_every == args.spot_every - 1:
            for k in range(env.num_games):  # the first game that is not waiting for its autoreset
                outputs = spot_check(env, (spot_checks + k) % env.num_games, actions, differences)
                if outputs is not None:
                    spot_checks += 1
                    break
        if outputs is None:
            outputs = env.step(actions)[:4]
        obs, rewards, terminated, truncated = outputs
        finite_sum.add_(obs.sum(dtype=torch.float64)).add_(rewards.sum(dtype=torch.float64))
        game_ends.add_((terminated | truncated)[first_slots].sum())
        if args.reset_every and step % args.reset_every == args.reset_every - 1:
            env.reset()
        if step % sample_every == sample_every - 1 or step == args.steps - 1:
            sample = memory_sample(device)  # synchronizes
            sample.update(step=step + 1, seconds=time.perf_counter() - start, game_ends=int(game_ends))
            if first_nonfinite_by is None and not bool(torch.isfinite(finite_sum)):
                first_nonfinite_by = step + 1
            samples.append(sample)
            if sample["seconds"] > args.max_seconds:
                break
    seconds = time.perf_counter() - start
    steps_done = samples[-1]["step"]

    half = samples[len(samples) // 2 :]
    growth: dict[str, Any] = {}
    for key in ("allocated", "reserved", "driver_used", "host_rss"):
        if key not in half[0]:
            continue
        values = [s[key] for s in half]
        per_step = slope([s["step"] for s in half], values)
        per_end = slope([s["game_ends"] for s in half], values)
        span = half[-1]["step"] - half[0]["step"]
        limit = FLAT_HOST_BYTES if key == "host_rss" else FLAT_DEVICE_BYTES
        growth[key] = {
            "bytes_per_1000_steps": 1000 * per_step,
            "bytes_per_1000_game_ends": 1000 * per_end,
            "fitted_growth_over_span_bytes": per_step * span,
            "span_steps": span,
            "min": min(values),
            "max": max(values),
            "flat": abs(per_step * span) < limit,
        }
    return {
        "steps": steps_done,
        "seconds": seconds,
        "ms_per_step": 1000 * seconds / steps_done,
        "game_ends": samples[-1]["game_ends"],
        "finite": first_nonfinite_by is None,
        "first_nonfinite_by_step": first_nonfinite_by,
        "spot_checks": spot_checks,
        "spot_check_differences": {
            name: {
                "max_abs": d.max_abs,
                "max_rel": d.max_rel,
                "tolerance": d.tolerance,
                "first_failure": d.first_failure,
            }
            for name, d in differences.items()
        },
        "spot_checks_ok": spot_checks > 0 and all(d.first_failure is None for d in differences.values()),
        "memory_growth": growth,
        "memory_flat": all(g["flat"] for g in growth.values()),
        "samples": samples,
    }


def env_cycles(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """Make, reset, step and close ``args.cycles`` envs; memory after them against the baseline after the first."""

    def one_env() -> None:
        envs = gym.make_vec("WarpTag-v0", num_envs=args.cycle_games, device=str(device))
        envs.reset(seed=0)
        zeros = torch.zeros((envs.num_envs, 2), dtype=torch.int64, device=device)
        for _ in range(3):
            envs.step(zeros)
        envs.close()

    def settled() -> dict[str, int]:
        gc.collect()
        return memory_sample(device)

    one_env()  # first-time costs (kernel loading, allocator pools, graph machinery) go into the baseline
    baseline = settled()
    per_cycle = []
    for _ in range(args.cycles - 1):
        one_env()
        per_cycle.append(settled())
    after = per_cycle[-1] if per_cycle else baseline
    deltas = {key: after[key] - baseline[key] for key in baseline if key != "max_allocated"}
    limits = {key: LEAK_HOST_BYTES if key == "host_rss" else LEAK_DEVICE_BYTES for key in deltas}
    return {
        "cycles": args.cycles,
        "games_per_env": args.cycle_games,
        "baseline": baseline,
        "after": after,
        "delta_bytes": deltas,
        "slope_bytes_per_env": {
            key: slope(list(range(len(per_cycle))), [s[key] for s in per_cycle]) for key in deltas
        },  # fmt: skip
        "no_leak": all(deltas[key] <= limits[key] for key in deltas),
    }


def mib(n: float) -> str:
    return f"{n / 2**20:+.3f} MiB"


def summary_text(result: dict[str, Any]) -> str:
    run, cycles = result["run"], result["cycles"]
    lines = [
        f"WarpTag-v0 long run on {result['device']} ({result['device_name']}), {result['games']} games x "
        f"{result['agents']} agents, copy={result['copy']}",
        f"steps: {run['steps']} in {run['seconds']:.1f} s ({run['ms_per_step']:.3f} ms/step), "
        f"game ends (episodes): {run['game_ends']}",
        f"no NaN/inf in observations and rewards: {run['finite']}",
        f"spot checks against the reference: {run['spot_checks']}, all within tolerance: {run['spot_checks_ok']}",
    ]
    for name, d in run["spot_check_differences"].items():
        lines.append(f"  {name:<11} max abs {d['max_abs']:.3e}  max rel {d['max_rel']:.3e}  "
                     f"tolerance {d['tolerance']:.0e}  {d['first_failure'] or ''}")  # fmt: skip
    lines.append(f"memory over the second half of the run (flat: {run['memory_flat']}):")
    for key, g in run["memory_growth"].items():
        lines.append(f"  {key:<12} {mib(g['bytes_per_1000_steps'])} per 1000 steps, "
                     f"{mib(g['bytes_per_1000_game_ends'])} per 1000 game ends, fitted growth "
                     f"{mib(g['fitted_growth_over_span_bytes'])} over {g['span_steps']} steps; "
                     f"range {g['min'] / 2**20:.1f}..{g['max'] / 2**20:.1f} MiB")  # fmt: skip
    lines.append(f"{cycles['cycles']} envs of {cycles['games_per_env']} games made, stepped and closed "
                 f"(no leak: {cycles['no_leak']}):")  # fmt: skip
    for key, delta in cycles["delta_bytes"].items():
        lines.append(f"  {key:<12} after - baseline {mib(delta)}, "
                     f"{mib(cycles['slope_bytes_per_env'][key])} per env")  # fmt: skip
    lines.append(f"ALL CHECKS PASSED: {result['ok']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for long_run.json and long_run.txt")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--max-seconds", type=float, default=float("inf"), help="stop the stepping loop after this")
    parser.add_argument("--spot-every", type=int, default=20_000)
    parser.add_argument("--reset-every", type=int, default=100_000, help="explicit reset() every N steps (0: never)")
    parser.add_argument("--samples", type=int, default=40, help="memory checkpoints over the run")
    parser.add_argument("--action-pool", type=int, default=257)
    parser.add_argument("--cycles", type=int, default=100, help="envs made and closed after the run")
    parser.add_argument("--cycle-games", type=int, default=100)
    parser.add_argument("--no-copy", action="store_true", help="copy=False (views of the output buffers)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.cycles < 2 or args.steps < 1 or args.spot_every < 1:
        parser.error("--cycles must be >= 2, --steps and --spot-every >= 1")

    envs = gym.make_vec("WarpTag-v0", num_envs=args.games, device=args.device, copy=not args.no_copy)
    env = envs.unwrapped
    assert isinstance(env, GpuVectorEnv)
    device, agents = env.device, env.num_agents
    run = long_run(env, args)
    envs.close()
    del envs, env
    cycles = env_cycles(args, device)
    result = {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "games": args.games,
        "agents": agents,
        "copy": not args.no_copy,
        "args": vars(args),
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__},
        "run": run,
        "cycles": cycles,
    }
    result["ok"] = bool(run["finite"] and run["spot_checks_ok"] and run["memory_flat"] and cycles["no_leak"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "long_run.json").write_text(json.dumps(result, indent=1, default=float) + "\n")
    text = summary_text(result)
    (out / "long_run.txt").write_text(text + "\n")
    print(text, flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
