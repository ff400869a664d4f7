"""What each phase of WarpTag-v0's step costs on the device, measured by running it twice.

    python benchmarks/phase_costs.py --games 2000 --param num_taggers=100 --param num_runners=900 [--out DIR]
    python benchmarks/phase_costs.py --games 2000 --phases find_nearest observe_listed --rounds 3

A phase that only reads the state and rewrites what it wrote before (the K-nearest
search, the observation, the spatial index's build, the end-of-game test) leaves
the game unchanged when it runs twice in a row; running it twice adds its cost,
and one barrier's, to the step. For every phase of the step (or those named by
``--phases``) this script builds the env with that phase repeated and checks
that the game stays the same: a rollout of a whole episode and a few steps more
(``--check-steps``; at least one game must end in it) must give bit for bit the
plain env's observations, rewards, ends and ``active`` flags (scratch state such
as a sort's second plane may differ, the outputs may not). A phase that changes
the game when repeated, such as ``move``, is reported and not timed. It then
times the step kernel of the plain env and of each variant, alternating,
``--rounds`` times, as ``bench_step.py`` times its kernel column (the launch
alone behind a device-side sleep, CUDA events, the median of ``--repeats``
launches), and checks once more at full size that one step after the timed
launches gives every variant the plain env's outputs. A phase's cost is its
variant's kernel time less the plain one. Each variant is a kernel compiled of
its own, so its cost includes any change of registers or spills, and costs do
not add up exactly to the kernel time: a repeated phase runs on warm caches and
overlaps differently with other blocks' work.

On a CPU it runs too (the checks are the same, the times are the CPU backend's).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from rollout_timing import device_us_per_launch, step_kernel_launch, synchronize

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from gpu_vecenv import GpuVectorEnv
from gpu_vecenv.check import parse_param
from gpu_vecenv.definition import EnvDefinition, Phase

STEP_PHASE_GROUPS = ("update_phases", "observe_phases", "reward_phases")


def step_phases(definition: EnvDefinition) -> list[str]:
    """The names of the phases a step runs, in order, each once."""
    names: list[str] = []
    for group in STEP_PHASE_GROUPS:
        names += [p.name for p in getattr(definition, group) if p.name not in names]
    return names


def repeated(definition: EnvDefinition, name: str) -> EnvDefinition:
    """``definition`` with phase ``name`` run twice in a row wherever it runs."""
    groups: dict[str, tuple[Phase, ...]] = {}
    for group in STEP_PHASE_GROUPS + ("reset_phases",):
        phases: list[Phase] = []
        for phase in getattr(definition, group):
            phases += [phase, phase] if phase.name == name else [phase]
        groups[group] = tuple(phases)
    return dataclasses.replace(definition, **groups)


def outputs_of_rollout(env: GpuVectorEnv, steps: int, seed: int, keep: bool = True) -> tuple[list[torch.Tensor], int]:
    """Every output of ``steps`` random steps from ``reset(seed)`` (a fixed stream of actions), and the game ends.

    ``keep=False`` keeps no output (a warm-up at full size: a copy of every step's would take gigabytes).
    """
    rng = np.random.default_rng(seed)
    nvec = np.asarray(env.definition.action_nvec)
    obs, info = env.reset(seed=seed)
    seen, ends = [obs.clone(), info["active"].clone()], 0
    for _ in range(steps):
        actions = torch.as_tensor(rng.integers(0, nvec, size=(env.num_envs, len(nvec))), device=env.device)
        outputs = step_outputs(env, actions)
        if keep:
            seen += [t.clone() for t in outputs]
        ended = outputs[2] | outputs[3]  # terminated or truncated, one flag a slot; every slot of a game ends together
        ends += int(ended.view(env.num_games, -1)[:, 0].sum())
    return seen, ends


def step_outputs(env: GpuVectorEnv, actions: torch.Tensor) -> tuple[torch.Tensor, ...]:
    obs, rewards, terminated, truncated, info = env.step(actions)
    return obs, rewards, terminated, truncated, info["active"]


def same_outputs(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(a, b, strict=True))


def kernel_us(env: GpuVectorEnv, repeats: int, warmup_steps: int, seed: int) -> float:
    """Median device µs of the step kernel, from the game ``warmup_steps`` random steps after ``reset(seed)``."""
    outputs_of_rollout(env, warmup_steps, seed, keep=False)
    synchronize(env.device)
    return device_us_per_launch(step_kernel_launch(env), env.device, repeats)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=int, default=2000, help="games a step (default 2000)")
    parser.add_argument("--param", type=parse_param, action="append", default=[], help="WarpTag-v0 NAME=VALUE")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--phases", nargs="+", metavar="NAME", help="only these phases (default: every step phase)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating timing rounds (default 2)")
    parser.add_argument("--repeats", type=int, default=200, help="launches timed a measurement (default 200)")
    parser.add_argument("--check-steps", type=int, help="steps of the repeat check (default: the episode length + 5)")
    parser.add_argument("--check-games", type=int, default=8, help="games of the repeat check (default 8)")
    parser.add_argument("--warmup-steps", type=int, default=50, help="random steps before each timing (default 50)")
    parser.add_argument("--out", type=Path, help="write phase_costs.json and phase_costs.txt here")
    args = parser.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    params = dict(args.param)

    def make(definition: EnvDefinition | None, games: int) -> GpuVectorEnv:
        if definition is None:
            return gym.make_vec("WarpTag-v0", num_envs=games, device=str(device), copy=False, **params).unwrapped
        return GpuVectorEnv(definition, num_games=games, device=str(device), copy=False)

    base_small = make(None, args.check_games)
    names = step_phases(base_small.definition)
    unknown = sorted(set(args.phases or ()) - set(names))
    if unknown:
        parser.error(f"--phases: {unknown} are not phases of this step; its phases are {names}")
    wanted = [n for n in names if not args.phases or n in args.phases]
    check_steps = args.check_steps or int(base_small.definition.constants.get("episode_length", 25)) + 5
    reference, ends = outputs_of_rollout(base_small, check_steps, seed=1)
    base_small.close()
    if ends == 0:
        parser.error(f"no game ended in the {check_steps} steps of the repeat check: give more --check-steps")
    # The variants take the definition of the timed size (WarpTag's register cap depends on the number of
    # games); this env is the plain one timed below.
    base_full = make(None, args.games)
    base_definition = base_full.definition

    rows: list[dict[str, Any]] = [{"phase": "(none repeated)", "repeatable": True}]
    for name in wanted:
        small = make(repeated(base_definition, name), args.check_games)
        repeatable = same_outputs(reference, outputs_of_rollout(small, check_steps, seed=1)[0])
        small.close()
        rows.append({"phase": name, "repeatable": repeatable})
        print(f"{name}: {'the same game when run twice' if repeatable else 'changes the game when run twice'}")

    timed = [r for r in rows if r["repeatable"]]
    envs = {r["phase"]: base_full if r["phase"] == "(none repeated)" else make(repeated(base_definition, r["phase"]),
                                                                                args.games)
            for r in timed}  # fmt: skip
    samples: dict[str, list[float]] = {r["phase"]: [] for r in timed}
    for _ in range(args.rounds):
        for r in timed:
            samples[r["phase"]].append(kernel_us(envs[r["phase"]], args.repeats, args.warmup_steps, seed=2))
    # Every env had the same reset, steps and launches: one more step must give every variant the same outputs.
    last = torch.as_tensor(np.random.default_rng(3).integers(0, base_definition.action_nvec,
                                                             size=(args.games * base_definition.num_agents,
                                                                   len(base_definition.action_nvec))),
                           device=device)  # fmt: skip
    final = {name: [t.clone() for t in step_outputs(env, last)] for name, env in envs.items()}
    for env in envs.values():
        env.close()
    base_us = statistics.median(samples["(none repeated)"])
    for r in timed:
        r["kernel_us"] = samples[r["phase"]]
        r["cost_us"] = statistics.median(samples[r["phase"]]) - base_us
        r["same_at_full_size"] = same_outputs(final[r["phase"]], final["(none repeated)"])

    header = f"phase costs: WarpTag-v0 {params}, {args.games} games, {device.type}, {args.rounds} rounds"
    lines = [header, f"{'phase':<40} {'kernel us (rounds)':<28} {'cost us':>9} {'% of step':>9}"]
    for r in rows:
        if not r["repeatable"]:
            lines.append(f"{r['phase']:<40} {'not timed: changes the game when run twice'}")
            continue
        rounds = ", ".join(f"{v:.1f}" for v in r["kernel_us"])
        if r["phase"] == "(none repeated)":
            cost, share = "-", "-"
        else:
            cost, share = f"{r['cost_us']:.1f}", f"{100 * r['cost_us'] / base_us:.1f}%"
        note = "" if r["same_at_full_size"] else "  NOT the plain env's outputs at full size: cost invalid"
        lines.append(f"{r['phase']:<40} {rounds:<28} {cost:>9} {share:>9}{note}")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        meta = {"command": " ".join(["python3", "benchmarks/phase_costs.py", *(argv or sys.argv[1:])]),
                "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                "torch": torch.__version__, "games": args.games, "params": params}  # fmt: skip
        (args.out / "phase_costs.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        (args.out / "phase_costs.txt").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
