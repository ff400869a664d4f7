"""The reference backend: the env's numpy reference, one game at a time, behind the kernel's interface.

It gives an env with a hand-written CUDA kernel (``EnvDefinition.cuda_kernel``)
a CPU backend, and it is a second, plain-Python statement of what the
generated kernel's control flow does: resets of pending games, NEXT_STEP,
SAME_STEP and DISABLED autoresets, ``max_episode_steps`` truncation, and
out-of-range actions acting as 0 and being recorded. It is slow (Python per
game and step) and meant for small sizes and tests.

Before each launch every game's reference is loaded from the env's state
tensors, and after it the state is written back, so ``env.state`` stays the
single source of truth.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from gpu_vecenv.codegen import (
    DISABLED,
    NEXT_STEP,
    OP_RESET,
    PENDING_AUTORESET,
    PENDING_RESET_CALL,
    SAME_STEP,
)
from gpu_vecenv.definition import EnvDefinition
from gpu_vecenv.outputs import KernelOutputs, OutputArena, SlotOutputs


class ReferenceBackend:
    """Runs ``definition.reference`` for each game on the CPU, writing the same outputs as the kernel."""

    name = "reference"

    def __init__(self, definition: EnvDefinition, views: Mapping[str, torch.Tensor], actions: torch.Tensor,
                 out: KernelOutputs, autoreset_mode: int, max_episode_steps: int) -> None:  # fmt: skip
        if definition.reference is None:
            raise ValueError(f"env {definition.name!r}: the reference backend needs a numpy reference")
        self.definition = definition
        self.views = views
        self.actions = actions
        self.out = out
        self.mode = autoreset_mode
        self.max_episode_steps = max_episode_steps
        self.num_games = int(views["seed"].shape[0])
        self.refs = [definition.reference() for _ in range(self.num_games)]
        self.state_keys = [k for k in self.refs[0].get_state() if k != "t"]
        # Each game's reset options, from the last reset call that reset it: they hold for its autoresets too.
        self.options: list[dict[str, Any] | None] = [None] * self.num_games

    def set_reset_options(self, options: Mapping[str, Any] | None, game_mask: torch.Tensor) -> None:
        """The env-specific ``reset`` options of the games in ``game_mask``, which the reference applies itself."""
        for g in torch.nonzero(game_mask.cpu()).flatten().tolist():
            self.options[g] = dict(options) if options else None

    def capture(self, ops: tuple[int, ...], copy_into: OutputArena | None = None) -> None:
        """Nothing to capture."""

    def launch_copying(self, op: int, arena: OutputArena) -> SlotOutputs | None:
        """``None``: the env copies the outputs itself."""
        return None

    # -- one game -----------------------------------------------------------------
    def _load(self, g: int) -> None:
        state: dict[str, Any] = {
            k: self.definition.game_entries(self.views, k, g).numpy().copy() for k in self.state_keys
        }
        state["t"] = int(self.views["t"][g])
        self.refs[g].set_state(state)

    def _store(self, g: int) -> None:
        for k, v in self.refs[g].get_state().items():
            if k == "t":
                self.views["t"][g] = int(v)
            else:
                self.definition.game_entries(self.views, k, g)[...] = torch.as_tensor(np.asarray(v))

    def _reset_game(self, g: int) -> np.ndarray:
        v = self.views
        v["episode"][g] += 1
        v["t"][g] = 0
        v["terminated"][g] = 0
        v["truncated"][g] = 0
        v["pending_reset"][g] = 0
        return self.refs[g].reset(int(v["seed"][g]), int(v["episode"][g]), self.options[g])

    def _active(self, g: int) -> np.ndarray:
        name = self.definition.active
        n = self.definition.num_agents
        return np.ones(n, bool) if name is None else self.views[name][g].numpy() != 0

    def _write(self, g: int, obs: np.ndarray, rewards: Any, term: bool, trunc: bool, active: np.ndarray) -> None:
        out = self.out
        out.obs[g] = torch.as_tensor(np.asarray(obs, np.float32))
        out.rewards[g] = torch.as_tensor(np.asarray(rewards, np.float32))
        out.flags[0, g] = int(term)
        out.flags[1, g] = int(trunc)
        out.flags[2, g] = torch.as_tensor(active)
        out.flags[3, g] = int(term or trunc)

    def _validated_actions(self, g: int) -> np.ndarray:
        nvec = np.asarray(self.definition.action_nvec)
        acts = self.actions[g].numpy()
        bad = (acts < 0) | (acts >= nvec)
        errors = self.views["action_error"]
        for a, k in zip(*np.nonzero(bad), strict=True):
            if errors[0, g, a] == 0:
                errors[0, g, a] = int(k) + 1
                errors[1, g, a] = int(np.clip(acts[a, k], -(2**31), 2**31 - 1))
        clean = np.where(bad, 0, acts)
        self.views["action"][:, g] = torch.as_tensor(clean.T.astype(np.int32))
        return clean[:, 0] if self.definition.discrete_actions else clean

    def launch(self, op: int) -> None:
        v, n = self.views, self.definition.num_agents
        for g in range(self.num_games):
            self._load(g)
            pending = int(v["pending_reset"][g])
            was_term, was_trunc = bool(v["terminated"][g]), bool(v["truncated"][g])
            autoreset = pending == PENDING_AUTORESET and self.mode == NEXT_STEP
            if op == OP_RESET or autoreset:
                reset_now = pending == PENDING_RESET_CALL if op == OP_RESET else autoreset
                obs = self._reset_game(g) if reset_now else self.refs[g].observe()
                self._store(g)
                self._write(g, obs, np.zeros(n), False, False, self._active(g))
                continue
            if (was_term or was_trunc) and self.mode == DISABLED:
                self._write(g, self.refs[g].observe(), np.zeros(n), was_term, was_trunc, self._active(g))
                continue
            active = self._active(g)
            obs, rewards, over = self.refs[g].step(self._validated_actions(g))
            self._store(g)
            t = int(v["t"][g])
            trunc = self.max_episode_steps > 0 and t >= self.max_episode_steps
            v["terminated"][g] = int(over)
            v["truncated"][g] = int(trunc)
            self._write(g, obs, rewards, over, trunc, active)
            if self.mode == SAME_STEP:
                self.out.final_obs[g] = self.out.obs[g] if (over or trunc) else 0.0
                self.out.flags[4, g] = torch.as_tensor(active & (over or trunc))
            if over or trunc:
                if self.mode == NEXT_STEP:
                    v["pending_reset"][g] = PENDING_AUTORESET
                elif self.mode == SAME_STEP:
                    self.out.obs[g] = torch.as_tensor(np.asarray(self._reset_game(g), np.float32))
                    self._store(g)
                    self.out.flags[2, g] = torch.as_tensor(self._active(g))
