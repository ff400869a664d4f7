"""Consistency checker: step a registered env next to its numpy reference and print where they differ.

    python -m gpu_vecenv.check WarpTag-v0 --device cpu --steps 200 --num-envs 8
    python -m gpu_vecenv.check WarpTag-v0 --param num_runners=20 --param use_full_observation=true

Both start from the same initial states and take the same random actions over
several episodes, resets included; then the CPU backend is run with each
agent, entry and slot phase's agents (and each agent's slots) in reverse
order, which must not change anything, and with its outputs filled with
zeros, then with ones in every bit, before every launch, which must not
change anything either (every launch writes every output), and the same with
its block-local arrays (every launch writes them before reading them); and
with its observation kept between launches (``copy=False``) against written
afresh at each, which must give the same outputs; and compiled with bounds
checks, where no phase may index outside an array. The table gives, per output (obs, rewards,
terminated, active, state, initial state), the largest absolute and relative
differences and the first step and slot where one exceeded its tolerance. The
exit status is 1 on any mismatch, 2 when the env cannot be built.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numba
import numpy as np
import torch

import gpu_vecenv  # noqa: F401  (registers the package's envs)
from gpu_vecenv.backends import CpuBackend
from gpu_vecenv.codegen import load_kernel_module
from gpu_vecenv.definition import EnvDefinition
from gpu_vecenv.layout import ParamLayout
from gpu_vecenv.oracle import Report, compare_with_reference
from gpu_vecenv.vector_env import GpuVectorEnv


def check(
    env_id: str,
    device: str | None = None,
    steps: int = 200,
    num_envs: int = 4,
    seed: int = 0,
    autoreset_mode: str = "NextStep",
    **env_kwargs: Any,
) -> Report:
    """Build ``env_id`` with ``num_envs`` games and compare ``steps`` steps with its reference."""
    envs = gym.make_vec(env_id, num_envs=num_envs, device=device, autoreset_mode=autoreset_mode, **env_kwargs)
    env = envs.unwrapped
    if not isinstance(env, GpuVectorEnv):
        raise TypeError(f"{env_id} is not a gpu_vecenv environment (got {type(env).__name__})")
    try:
        return compare_with_reference(env, steps=steps, seed=seed)
    finally:
        env.close()


def _order_sensitive_run(definition: EnvDefinition, order_mask: int, num_games: int, steps: int, seed: int):
    env = GpuVectorEnv(definition, num_games=num_games, device="cpu", backend="cpu", copy=True)
    env._params[1][ParamLayout(definition).index["agent_order"]] = order_mask
    rng = np.random.default_rng(seed)
    outputs = [env.reset(seed=seed)[0]]
    nvec = np.asarray(definition.action_nvec)
    for _ in range(steps):
        actions = rng.integers(0, nvec, size=(num_games, definition.num_agents, len(nvec)))
        obs, rewards, term, trunc, _ = env.step(actions[..., 0] if definition.discrete_actions else actions)
        outputs += [obs, rewards, term, trunc]
    outputs += [t.clone() for t in env.state.values()]
    env.close()
    return outputs


def check_agent_order(definition: EnvDefinition, num_games: int = 4, steps: int = 60, seed: int = 0) -> list[str]:
    """Names of the agent, entry and slot phases whose results change when their agents run last to first.

    An agent phase must write only its own agent's slots and read only what
    earlier phases wrote; then the order in which agents run cannot matter.
    The same holds for the entries and slots of an observation phase, whose
    slots also run last to first within each agent when reversed (a slot
    writing another slot's entries shows there). This runs the CPU backend
    with every such phase reversed, and, if the results differ, with each
    phase reversed alone, to name the culprits.
    """
    ordered_phases = [i for i, p in enumerate(definition.all_phases) if p.per in ("agent", "entry", "slot")]
    forward = _order_sensitive_run(definition, 0, num_games, steps, seed)

    def same(a: torch.Tensor, b: torch.Tensor) -> bool:
        if a.is_floating_point():
            return torch.equal(torch.nan_to_num(a, nan=1.5e38), torch.nan_to_num(b, nan=1.5e38))
        return torch.equal(a, b)

    def differs(mask: int) -> bool:
        other = _order_sensitive_run(definition, mask, num_games, steps, seed)
        return any(not same(a, b) for a, b in zip(forward, other, strict=True))

    if not differs(sum(1 << i for i in ordered_phases)):
        return []
    return [definition.all_phases[i].name for i in ordered_phases if differs(1 << i)]


def _fill_outputs(env: GpuVectorEnv, fill: int) -> None:
    env._arena.buffer.fill_(fill)


def _fill_block_local(env: GpuVectorEnv, fill: int) -> None:
    for arr in env.definition.state:
        if arr.block_local:
            env.state[arr.name].view(torch.uint8).fill_(fill)


def _leave_as_is(env: GpuVectorEnv, fill: int) -> None:
    pass


# Every check of a definition runs in each of these, since each takes its own paths at a game's end.
_AUTORESET_MODES = ("NextStep", "SameStep", "Disabled")

# How one of two compared runs treats the env's memory: the poison, its byte, and whether obs is kept.
_Run = tuple[Callable[[GpuVectorEnv, int], None], int, bool]


def _poisoned_run(definition: EnvDefinition, poison: Callable[[GpuVectorEnv, int], None], fill: int, mode: str,
                  num_games: int, steps: int, seed: int, obs_kept: bool = False,
                  bounds_checked: bool = False) -> list[tuple[str, torch.Tensor]]:  # fmt: skip
    """Every output a reset or step call returns, by name, with ``poison(env, fill)`` setting some of the env's
    memory to bytes ``fill`` before each launch (``copy=False``: the calls return views of the output buffer).
    The kernel is told whether ``obs`` keeps what the launch before wrote (``obs_kept``): not by default, as
    for fresh outputs, whatever the buffer holds. ``bounds_checked``: launch the CPU function that raises
    ``IndexError`` at an index outside its array instead of the env's own."""
    episode = max(2, steps // 3)  # truncations: each mode's end-of-game and autoreset paths run too
    env = GpuVectorEnv(definition, num_games=num_games, device="cpu", backend="cpu", copy=False,
                       autoreset_mode=mode, max_episode_steps=episode)  # fmt: skip
    env._params[1][ParamLayout(definition).index["obs_kept"]] = int(obs_kept)
    if bounds_checked:
        assert isinstance(env._backend, CpuBackend)
        env._backend._run = load_kernel_module(definition, "cpu", bounds_checked=True).run
    rng = np.random.default_rng(seed)
    nvec = np.asarray(definition.action_nvec)
    seen: list[tuple[str, torch.Tensor]] = []

    def keep(names: tuple[str, ...], values: tuple[Any, ...]) -> None:
        seen.extend((name, value.clone()) for name, value in zip(names, values, strict=True))

    poison(env, fill)
    obs, infos = env.reset(seed=seed)
    keep(("obs", "active"), (obs, infos["active"]))
    for t in range(steps):
        if t == steps // 2:
            # Games outside a reset's mask go through the reset launch without being reset.
            poison(env, fill)
            obs, infos = env.reset(options={"reset_mask": np.arange(num_games) % 2 == 0})
            keep(("obs", "active"), (obs, infos["active"]))
        actions = rng.integers(0, nvec, size=(num_games, definition.num_agents, len(nvec)))
        poison(env, fill)
        obs, rewards, term, trunc, infos = env.step(actions[..., 0] if definition.discrete_actions else actions)
        keep(("obs", "rewards", "terminated", "truncated", "active"), (obs, rewards, term, trunc, infos["active"]))
        if "final_obs" in infos:
            keep(("final_obs", "final_info active"), (infos["final_obs"], infos["final_info"]["active"]))
    env.close()
    return seen


def check_bounds(definition: EnvDefinition, num_games: int = 4, steps: int = 30, seed: int = 0) -> list[str]:
    """The autoreset modes in which a phase indexes an array outside its bounds (an empty list: none does).

    Generated kernels do not check indices (a check at every access would slow every step), so a phase that
    writes ``obs[g, a, obs_dim]`` writes the next agent's first entry, or past the buffer. This runs the
    resets and steps of :func:`check_outputs_written` in each mode with a CPU function compiled with Numba's
    bounds checks, where such an index raises. Functions called with ``@shared(inline=False)`` are compiled
    apart and are not checked.
    """
    if getattr(numba.config, "BOUNDSCHECK", None) == 0:
        # NUMBA_BOUNDSCHECK=0 switches every bounds check off, the requested ones too: nothing would be found.
        raise RuntimeError("check_bounds needs Numba's bounds checks, which NUMBA_BOUNDSCHECK=0 switches off: unset it")
    found = []
    for mode in _AUTORESET_MODES:
        try:
            _poisoned_run(definition, _leave_as_is, 0, mode, num_games, steps, seed, bounds_checked=True)
        except IndexError:
            found.append(mode)
    return found


def check_outputs_written(definition: EnvDefinition, num_games: int = 4, steps: int = 30, seed: int = 0) -> list[str]:
    """Names of the outputs (``obs``, ``rewards``, ...) that some reset or step leaves partly unwritten.

    Every launch must write every entry of what it returns, whatever the
    buffer held before: with ``copy=True``, outputs are written straight into
    fresh, uninitialized memory (on a GPU always, on the CPU large ones) (:class:`~gpu_vecenv.vector_env.GpuVectorEnv`'s
    ``direct_write_bytes``). This runs the CPU backend in each autoreset mode,
    with truncations and a masked reset, twice: the output buffer filled with
    zero bytes, then with ``0xFF`` bytes (a float32 NaN, a bool of 255)
    before every launch. Any returned entry that differs between the two
    runs was not written.
    """
    return _outputs_that_differ(definition, (_fill_outputs, 0x00, False), (_fill_outputs, 0xFF, False), num_games,
                                steps, seed)  # fmt: skip


def check_block_local_rewritten(definition: EnvDefinition, num_games: int = 4, steps: int = 30,
                                seed: int = 0) -> list[str]:  # fmt: skip
    """Names of the outputs that depend on what the block-local arrays held before a launch (empty: none do).

    A block-local array (:class:`~gpu_vecenv.definition.StateArray`) lives in a
    CUDA block's shared memory, which starts every launch undefined, so each
    launch must write every entry of it before any phase reads that entry. As
    :func:`check_outputs_written`, on the CPU backend in each autoreset mode:
    the block-local arrays filled with zero bytes, then with ``0xFF`` bytes,
    before every launch; any returned output that differs between the two
    runs read one of them before writing it.
    """
    return _outputs_that_differ(definition, (_fill_block_local, 0x00, False), (_fill_block_local, 0xFF, False),
                                num_games, steps, seed)  # fmt: skip


def check_kept_outputs(definition: EnvDefinition, num_games: int = 4, steps: int = 30, seed: int = 0) -> list[str]:
    """Names of the outputs that differ between an env whose ``obs`` keeps what the launch before wrote there
    (``obs_kept``, as with ``copy=False``) and one whose outputs are fresh memory at every launch.

    A phase may leave observation entries it knows to be unchanged where
    ``obs`` is kept (:mod:`gpu_vecenv.definition`); then what it knows must
    hold at every launch. This runs the CPU backend in each autoreset mode,
    with truncations and a masked reset, kept and not kept (the fresh run's
    output buffer filled with ``0xFF`` bytes before every launch), and
    compares every returned entry.
    """
    return _outputs_that_differ(definition, (_leave_as_is, 0, True), (_fill_outputs, 0xFF, False), num_games,
                                steps, seed)  # fmt: skip


def _outputs_that_differ(definition: EnvDefinition, first: _Run, second: _Run, num_games: int, steps: int,
                         seed: int) -> list[str]:  # fmt: skip
    """Names of the outputs that differ between the runs ``first`` and ``second`` (``(poison, fill, obs_kept)``
    for :func:`_poisoned_run`), in each autoreset mode."""
    differing: list[str] = []
    for mode in _AUTORESET_MODES:
        one = _poisoned_run(definition, first[0], first[1], mode, num_games, steps, seed, first[2])
        other = _poisoned_run(definition, second[0], second[1], mode, num_games, steps, seed, second[2])
        for (name, a), (_, b) in zip(one, other, strict=True):
            # Compared as bytes: a written NaN equals itself, and a bool byte of 255 is not True.
            if name not in differing and not torch.equal(a.view(torch.uint8), b.view(torch.uint8)):
                differing.append(name)
    return differing


def parse_param(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` of a ``--param`` option: ``true``/``false``, a Python literal, else the text."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--param needs NAME=VALUE, got {text!r}")
    name, value = text.split("=", 1)
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return name, lowered == "true"
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def _definition_checks(
    definition: EnvDefinition, wanted: list[str]
) -> list[tuple[str, Callable[..., list[str]], str, str]]:
    """The checks of ``definition`` that main() runs after the comparison with the reference, those of
    ``wanted`` ("agent order", "outputs"), in order: each as (name, check, what passing means, what failing
    means, with ``{env}`` and ``{found}``, the check's list, to fill in)."""
    checks: list[tuple[str, Callable[..., list[str]], str, str]] = []
    if "agent order" in wanted:
        checks.append((
            "agent order",
            check_agent_order,
            "results do not depend on the order agents run in",
            "env {env}, phase(s) {found} give different results when agents run in another order: such a phase "
            "writes another agent's state slot, or reads one another agent writes in the same phase, or (a slot "
            "phase) writes the observation entries of another of its slots. Write only state slot [..., g, a] and "
            "your own entries; move reads of others' new values into a later phase.",
        ))  # fmt: skip
    if "outputs" in wanted:
        checks.append((
            "bounds",
            check_bounds,
            "every index a phase takes is inside its array",
            "env {env}: in the autoreset mode(s) {found} a phase indexes an array outside its bounds, which writes "
            "another agent's entries or past the buffer: check obs[g, a, i] against obs_dim, [k, g, a] against the "
            "array's length, and loops that run to num_agents.",
        ))  # fmt: skip
        checks.append((
            "outputs",
            check_outputs_written,
            "every reset and step writes every entry it returns",
            "env {env} leaves entries of {found} as the buffer held them at some reset or step: every launch must "
            "write every entry it returns (an observe phase writes every obs[g, a, i] of every agent, in or out of "
            "the game), since with copy=True outputs are written straight into fresh, uninitialized memory (on a "
            "GPU always).",
        ))  # fmt: skip
        checks.append((
            "kept outputs",
            check_kept_outputs,
            "outputs kept between launches (copy=False) are those written afresh",
            "env {env} returns other {found} where obs keeps what the launch before wrote (obs_kept, as with "
            "copy=False) than where every launch writes fresh memory: a phase leaves entries it takes to be "
            "unchanged that are not. Decide by state that the launch before wrote itself, in a phase after the "
            "observation (not by state other agents of the phase write). If the outputs check failed too, mend "
            "that first: an entry that no launch writes differs here as well.",
        ))  # fmt: skip
        if any(arr.block_local for arr in definition.state):
            checks.append((
                "block-local",
                check_block_local_rewritten,
                "every launch writes its block-local arrays before reading them",
                "env {env}: {found} depend on what its block-local arrays held before a launch: a phase reads an "
                "entry that no phase of that launch wrote first. On a GPU such an array is the block's shared "
                "memory, undefined at every launch: write it first, or drop block_local.",
            ))  # fmt: skip
    return checks


def _verdict(check_name: str, passed: str, failure: Any) -> bool:
    """Print one check's outcome: ``failure`` (a message; anything false when the check passed) or ``passed``."""
    print(f"{check_name}: {failure}" if failure else f"{check_name}: {passed}: OK")
    return not failure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpu_vecenv.check", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("env_id")
    parser.add_argument("--device", default=None, help="'cuda', 'cuda:N' or 'cpu' (default: best available)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--num-envs", type=int, default=4, help="number of games")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--autoreset-mode", default="NextStep", help="NextStep, SameStep or Disabled")
    parser.add_argument("--param", type=parse_param, action="append", default=[], help="env parameter NAME=VALUE")
    parser.add_argument(
        "--no-order-check", action="store_true", help="skip the check that agent phases do not depend on agent order"
    )
    parser.add_argument(
        "--no-outputs-check",
        action="store_true",
        help="skip the checks that every index is inside its array, that every launch writes every output, and its "
        "block-local arrays before reading them",
    )
    args = parser.parse_args(argv)
    try:
        report = check(args.env_id, device=args.device, steps=args.steps, num_envs=args.num_envs, seed=args.seed,
                       autoreset_mode=args.autoreset_mode, **dict(args.param))  # fmt: skip
    except (ValueError, TypeError, ImportError, gym.error.Error) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.env_id}: {args.num_envs} games, device={args.device or 'auto'}, mode={args.autoreset_mode}")
    print(report.table())
    ok = report.ok
    wanted = [name for name, skip in (("agent order", args.no_order_check), ("outputs", args.no_outputs_check))
              if not skip]  # fmt: skip
    if not wanted:
        return 0 if ok else 1
    try:
        envs = gym.make_vec(args.env_id, num_envs=1, device="cpu", **dict(args.param))
        env = envs.unwrapped
        assert isinstance(env, GpuVectorEnv)
        definition = env.definition
        envs.close()
        if definition.cuda_kernel is not None:
            # Both checks run the CPU kernel, which an env with a hand-written CUDA kernel does not have.
            print(f"{' and '.join(wanted)}: not checked (a hand-written CUDA kernel has no CPU kernel to run)")
            return 0 if ok else 1
        games = min(args.num_envs, 4)
        for name, run, passed, failure in _definition_checks(definition, wanted):
            found = run(definition, num_games=games)
            ok &= _verdict(name, passed, found and failure.format(env=repr(args.env_id), found=found))
    except (ValueError, TypeError, ImportError, gym.error.Error) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
