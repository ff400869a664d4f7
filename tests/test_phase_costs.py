"""phase_costs.py times a phase by running it twice, and refuses to time one that changes the game so."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import SMALL_TAG

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import phase_costs  # noqa: E402

from envs.tag_continuous.config import TagConfig  # noqa: E402
from envs.tag_continuous.env import tag_definition  # noqa: E402


def test_a_repeated_phase_runs_twice_in_a_row_wherever_it_runs():
    definition = tag_definition(TagConfig(**SMALL_TAG), backend="cpu", game_work="staged")
    assert phase_costs.step_phases(definition) == ["move", "find_nearest", "observe_listed", "tag_runners",
                                                    "reward_taggers_and_survivors", "count_runners_left",
                                                    "end_game_counted"]  # fmt: skip
    twice = phase_costs.repeated(definition, "observe_listed")
    assert [p.name for p in twice.observe_phases] == ["find_nearest", "observe_listed", "observe_listed"]
    assert twice.update_phases == definition.update_phases and twice.reward_phases == definition.reward_phases


def test_the_search_is_timed_and_the_move_is_not(tmp_path):
    params = [f"--param={k}={v}" for k, v in SMALL_TAG.items()]
    code = phase_costs.main(["--device", "cpu", "--games", "4", *params, "--phases", "move", "find_nearest",
                             "--rounds", "1", "--repeats", "3", "--check-steps", "20", "--warmup-steps", "5",
                             "--out", str(tmp_path)])  # fmt: skip
    assert code == 0
    rows = {r["phase"]: r for r in json.loads((tmp_path / "phase_costs.json").read_text())["rows"]}
    # move run twice moves every agent twice: a different game, so it is not timed.
    assert rows["move"]["repeatable"] is False and "kernel_us" not in rows["move"]
    assert rows["find_nearest"]["repeatable"] is True and len(rows["find_nearest"]["kernel_us"]) == 1
    base = rows["(none repeated)"]["kernel_us"][0]
    assert rows["find_nearest"]["cost_us"] == pytest.approx(rows["find_nearest"]["kernel_us"][0] - base)
    table = (tmp_path / "phase_costs.txt").read_text()
    assert "move" in table and "not timed: changes the game when run twice" in table


def test_an_unknown_phase_is_refused(capsys):
    with pytest.raises(SystemExit):
        phase_costs.main(["--device", "cpu", "--games", "2", "--phases", "find_nearst"])
    assert "--phases: ['find_nearst'] are not phases of this step" in capsys.readouterr().err
