"""The parameters of the continuous Tag game, with WarpTag-v0's defaults and their checks."""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TagConfig:
    """Parameters of one Tag game; defaults are WarpDrive's training configuration.

    See the game specification for the meaning of each field. Two options go
    beyond WarpDrive: ``observe_own_type`` appends the observing agent's own
    type to its observation (so one shared policy can tell the roles apart),
    and ``tagger_ids`` names the tagger agents explicitly (by default agents
    ``0 .. num_taggers-1``).
    """

    num_taggers: int = 10
    num_runners: int = 100
    grid_length: float = 20.0
    episode_length: int = 500
    max_speed: float = 1.0
    skill_level_tagger: float = 1.0
    skill_level_runner: float = 1.0
    min_acceleration: float = -0.1
    max_acceleration: float = 0.1
    min_turn: float = -2.356
    max_turn: float = 2.356
    num_acceleration_levels: int = 20
    num_turn_levels: int = 20
    use_full_observation: bool = False
    num_other_agents_observed: int = 10
    tagging_distance: float = 0.02
    tag_reward_for_tagger: float = 10.0
    tag_penalty_for_runner: float = -10.0
    step_penalty_for_tagger: float = 0.0
    step_reward_for_runner: float = 0.0
    edge_hit_penalty: float = 0.0
    end_of_game_reward_for_runner: float = 1.0
    runner_exits_game_after_tagged: bool = True
    observe_own_type: bool = True
    tagger_ids: tuple[int, ...] | None = None

    @classmethod
    def from_kwargs(cls, options: frozenset[str] = frozenset(), **kwargs: Any) -> TagConfig:
        """Build a config from keyword arguments, rejecting unknown names (``options``: other accepted names)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TypeError(
                f"WarpTag: unknown parameter(s) {unknown}; valid parameters are {sorted(known)}"
                + (f" and the env options {sorted(options)}" if options else "")
            )
        if kwargs.get("tagger_ids") is not None:
            kwargs["tagger_ids"] = tuple(int(i) for i in kwargs["tagger_ids"])
        config = cls(**kwargs)
        config.validate()
        return config

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def num_agents(self) -> int:
        return self.num_taggers + self.num_runners

    @property
    def taggers(self) -> tuple[int, ...]:
        return self.tagger_ids if self.tagger_ids is not None else tuple(range(self.num_taggers))

    @property
    def runners(self) -> tuple[int, ...]:
        taggers = set(self.taggers)
        return tuple(i for i in range(self.num_agents) if i not in taggers)

    @property
    def num_observed(self) -> int:
        """M, the number of other agents listed in one observation."""
        return self.num_agents - 1 if self.use_full_observation else self.num_other_agents_observed

    @property
    def obs_dim(self) -> int:
        return 7 * self.num_observed + 1 + int(self.observe_own_type)

    def acceleration_table(self) -> np.ndarray:
        """``[0, linspace(min, max, levels)]`` as float32: index 0 is the no-op."""
        return np.concatenate(
            [[0.0], np.linspace(self.min_acceleration, self.max_acceleration, self.num_acceleration_levels)]
        ).astype(np.float32)

    def turn_table(self) -> np.ndarray:
        return np.concatenate([[0.0], np.linspace(self.min_turn, self.max_turn, self.num_turn_levels)]).astype(
            np.float32
        )

    def validate(self) -> None:
        """Raise ``ValueError`` naming the parameter, the value and what is allowed."""

        def bad(name: str, expected: str) -> ValueError:
            return ValueError(f"WarpTag: {name}={getattr(self, name)!r} is invalid; expected {expected}")

        def is_int(value: object) -> bool:
            return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))

        def is_real(value: object) -> bool:
            return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))

        for name in ("num_taggers", "num_runners", "episode_length", "num_acceleration_levels", "num_turn_levels"):
            value = getattr(self, name)
            if not is_int(value) or value < 1:
                raise bad(name, "an integer >= 1")
        for name in ("grid_length", "max_speed", "skill_level_tagger", "skill_level_runner"):
            value = getattr(self, name)
            if not (is_real(value) and math.isfinite(value) and value > 0):
                raise bad(name, "a finite number > 0")
        for name in (
            "min_acceleration",
            "max_acceleration",
            "min_turn",
            "max_turn",
            "tag_reward_for_tagger",
            "step_reward_for_runner",
            "end_of_game_reward_for_runner",
        ):
            value = getattr(self, name)
            if not (is_real(value) and math.isfinite(value)):
                raise bad(name, "a finite number")
        for name in ("tag_penalty_for_runner", "step_penalty_for_tagger", "edge_hit_penalty"):
            value = getattr(self, name)
            if not (is_real(value) and math.isfinite(value) and value <= 0):
                raise bad(name, "a finite penalty <= 0")
        if self.min_acceleration > self.max_acceleration:
            raise bad("min_acceleration", f"<= max_acceleration ({self.max_acceleration})")
        if self.min_turn > self.max_turn:
            raise bad("min_turn", f"<= max_turn ({self.max_turn})")
        if not (is_real(self.tagging_distance) and 0.0 <= self.tagging_distance <= 1.0):
            raise bad("tagging_distance", "a fraction of grid_length in [0, 1]")
        if not self.use_full_observation:
            k = self.num_other_agents_observed
            if not is_int(k) or not 1 <= k <= self.num_agents - 1:
                raise bad("num_other_agents_observed", f"an integer in [1, num_agents - 1 = {self.num_agents - 1}]")
        if self.tagger_ids is not None:
            ids = self.tagger_ids
            if (
                len(ids) != self.num_taggers
                or len(set(ids)) != len(ids)
                or not all(0 <= i < self.num_agents for i in ids)
            ):
                raise bad("tagger_ids", f"{self.num_taggers} distinct agent ids in [0, {self.num_agents})")
