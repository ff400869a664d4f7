"""Step a GpuVectorEnv next to its numpy reference and report where they differ.

Every game of the env gets its own reference game. Before each step the
reference is loaded with the env's pre-step state of that game (so rounding
differences never accumulate into different trajectories), both take the same
random actions, and the outputs and the post-step state are compared. Resets
are compared too: the reference draws the initial state of the same
``(seed, episode)``, and initial states must agree bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.vector_env import GpuVectorEnv

DEFAULT_TOLERANCES = {"obs": 1e-5, "rewards": 1e-5, "state": 1e-4, "initial_state": 0.0}


@dataclass
class Difference:
    """The largest differences seen for one output, and the first place it exceeded its tolerance."""

    name: str
    tolerance: float
    max_abs: float = 0.0
    max_rel: float = 0.0
    first_failure: str | None = None

    def update(self, got: np.ndarray, want: np.ndarray, where: str) -> None:
        got = np.asarray(got, np.float64)
        want = np.asarray(want, np.float64)
        if got.shape != want.shape:
            self.first_failure = self.first_failure or f"{where}: shape {got.shape} != reference {want.shape}"
            self.max_abs = float("inf")
            return
        if got.size == 0:
            return
        bad_nan = np.isnan(got) != np.isnan(want)
        diff = np.where(bad_nan, np.inf, np.abs(np.nan_to_num(got) - np.nan_to_num(want)))
        rel = diff / np.maximum(np.abs(np.nan_to_num(want)), 1e-12)
        self.max_abs = max(self.max_abs, float(diff.max()))
        self.max_rel = max(self.max_rel, float(np.where(diff > 0, rel, 0.0).max()))
        if self.first_failure is None and float(diff.max()) > self.tolerance:
            index = np.unravel_index(int(np.argmax(diff)), diff.shape)
            self.first_failure = (
                f"{where}, index {tuple(int(i) for i in index)}: got {got[index]!r}, reference {want[index]!r}"
            )


@dataclass
class Report:
    """Outcome of :func:`compare_with_reference`."""

    steps: int
    resets: int = 0
    game_ends: int = 0
    differences: dict[str, Difference] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(d.first_failure is None for d in self.differences.values())

    def table(self) -> str:
        lines = [f"{'output':<16}{'max abs diff':>14}{'max rel diff':>14}{'tolerance':>11}  first failure"]
        for d in self.differences.values():
            lines.append(
                f"{d.name:<16}{d.max_abs:>14.3e}{d.max_rel:>14.3e}{d.tolerance:>11.1e}  {d.first_failure or '-'}"
            )
        lines.append(f"{self.steps} steps, {self.resets} game resets, {self.game_ends} game ends: "
                     f"{'OK' if self.ok else 'MISMATCH'}")  # fmt: skip
        return "\n".join(lines)


def _numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _game_state(env: GpuVectorEnv, keys: list[str], g: int) -> dict[str, Any]:
    """Game ``g``'s entries of the state arrays ``keys``, as a reference's ``get_state`` gives them
    (:meth:`EnvDefinition.game_entries`); the step counter ``t`` as an int."""
    state = env.state
    return {
        k: int(state["t"][g]) if k == "t" else _numpy(env.definition.game_entries(state, k, g)).copy() for k in keys
    }


def _check_reference_space(env: GpuVectorEnv, ref_obs: Any) -> None:
    """Raise if the reference's observations do not fit the env's declared observation space."""
    d = env.definition
    obs = np.asarray(ref_obs)
    expected = (d.num_agents, d.obs_dim)
    if obs.shape != expected or obs.dtype != np.float32:
        raise ValueError(
            f"env {d.name!r}: the reference's reset returned observations of shape {obs.shape} and dtype {obs.dtype}, "
            f"but the env declares {expected} float32 (num_agents x observation_space.shape); "
            "make the reference and obs_dim/observation_space agree"
        )
    if not all(env.single_observation_space.contains(row) for row in obs):
        raise ValueError(
            f"env {d.name!r}: the reference's reset observations lie outside the declared observation_space "
            f"{env.single_observation_space}"
        )


def compare_with_reference(
    env: GpuVectorEnv,
    steps: int,
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
    action_seed: int = 0,
    tolerances: Mapping[str, float] | None = None,
) -> Report:
    """Reset ``env`` with ``seed`` and step it ``steps`` times with random actions next to its reference.

    Works in every autoreset mode except DISABLED (where finished games are
    reset with ``reset_mask`` by this function, like a user would).
    """
    d = env.definition
    if d.reference is None:
        raise ValueError(f"{d.name}: the definition has no numpy reference")
    tol = dict(DEFAULT_TOLERANCES, **(tolerances or {}))
    report = Report(steps=steps)
    diffs = report.differences
    for name in ("obs", "rewards", "terminated", "active", "state", "initial_state"):
        diffs[name] = Difference(name, tol.get(name, 0.0))
    G, N = env.num_games, env.num_agents
    refs = [d.reference() for _ in range(G)]
    state_keys = list(refs[0].get_state())
    mode = env.autoreset_mode

    first_obs, _ = env.reset(seed=seed, options=options)
    obs0 = _numpy(env.per_game(first_obs))
    for g in range(G):
        want = refs[g].reset(seed + g, 0, options)
        if g == 0:
            _check_reference_space(env, want)
        diffs["obs"].update(obs0[g], want, f"reset, game {g}")
        for k, v in refs[g].get_state().items():
            diffs["initial_state"].update(_game_state(env, [k], g)[k], v, f"reset, game {g}, {k}")
    report.resets += G

    rng = np.random.default_rng(action_seed)
    nvec = np.asarray(d.action_nvec)
    for step in range(steps):
        pending = _numpy(env.state["pending_reset"]).copy()
        episode = _numpy(env.state["episode"]).copy()
        seeds = _numpy(env.state["seed"]).copy()
        before = [_game_state(env, state_keys, g) for g in range(G)]
        actions = rng.integers(0, nvec, size=(G, N, len(nvec)))
        given = actions[..., 0] if d.discrete_actions else actions
        step_out = env.step(torch.as_tensor(given, device=env.device))
        o, r, term, trunc = (_numpy(env.per_game(t)) for t in step_out[:4])
        info = step_out[4]
        active = _numpy(env.per_game(info["active"]))
        # In SAME_STEP mode a game reset within the step reports its final step's infos in final_info.
        final_active = _numpy(env.per_game(info["final_info"]["active"])) if "final_info" in info else active
        final_obs = _numpy(env.per_game(info["final_obs"])) if "final_obs" in info else np.empty(0)
        finished = []
        for g in range(G):
            where = f"step {step}, game {g}"
            if pending[g] and mode is AutoresetMode.NEXT_STEP:
                want = refs[g].reset(int(seeds[g]), int(episode[g]) + 1, options)
                diffs["obs"].update(o[g], want, where + " (autoreset)")
                diffs["rewards"].update(r[g], np.zeros(N), where + " (autoreset)")
                diffs["terminated"].update(term[g], np.zeros(N), where + " (autoreset)")
                report.resets += 1
                continue
            refs[g].set_state(before[g])
            alive_before = np.asarray(before[g].get(d.active, np.ones(N))) != 0 if d.active else np.ones(N, bool)
            want_obs, want_r, over = refs[g].step(given[g])
            diffs["rewards"].update(r[g], want_r, where)
            diffs["terminated"].update(term[g], np.full(N, over), where)
            # A game ends by its own rule (terminated) or by max_episode_steps (truncated).
            ended = over or bool(trunc[g].any())
            same_step_end = ended and mode is AutoresetMode.SAME_STEP
            diffs["active"].update(final_active[g] if same_step_end else active[g], alive_before, where)
            if ended:
                report.game_ends += 1
                finished.append(g)
            if ended and mode is AutoresetMode.SAME_STEP:
                diffs["obs"].update(final_obs[g], want_obs, where + " (final_obs)")
                want = refs[g].reset(int(seeds[g]), int(episode[g]) + 1, options)
                diffs["obs"].update(o[g], want, where + " (same-step reset)")
                report.resets += 1
                continue
            diffs["obs"].update(o[g], want_obs, where)
            for k, v in refs[g].get_state().items():
                diffs["state"].update(_game_state(env, [k], g)[k], v, f"{where}, {k}")
        if mode is AutoresetMode.DISABLED and finished:
            mask = np.zeros(G, bool)
            mask[finished] = True
            o2 = _numpy(env.per_game(env.reset(options={**(options or {}), "reset_mask": mask})[0]))
            for g in finished:
                want = refs[g].reset(int(seeds[g]), int(episode[g]) + 1, options)
                diffs["obs"].update(o2[g], want, f"step {step}, game {g} (masked reset)")
                report.resets += 1
    return report
