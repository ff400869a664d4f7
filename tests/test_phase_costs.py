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
    assert phase_costs.step_phases(definition) == ["move", "count_alive_before", "list_alive", "find_nearest",
                                                    "observe_listed", "note_out_of_game", "tag_runners",
                                                    "reward_taggers_and_survivors", "count_runners_left",
                                                    "end_game_counted"]  # fmt: skip
    twice = phase_costs.repeated(definition, "observe_listed")
    assert [p.name for p in twice.observe_phases] == ["count_alive_before", "list_alive", "find_nearest",
                                                      "observe_listed", "observe_listed",
                                                      "note_out_of_game"]  # fmt: skip
    assert twice.update_phases == definition.update_phases and twice.reward_phases == definition.reward_phases


def test_the_search_is_timed_and_the_survivors_bonus_is_not(tmp_path):
    # Run twice, the rewards phase pays the survivors' bonus twice at the end of an episode: the check's
    # rollout goes past the episode length (15) so that it sees an end, and the phase is not timed.
    params = [f"--param={k}={v}" for k, v in SMALL_TAG.items()]
    code = phase_costs.main(["--device", "cpu", "--games", "4", *params, "--phases", "reward_taggers_and_survivors",
                             "find_nearest", "--rounds", "1", "--repeats", "3", "--warmup-steps", "5",
                             "--out", str(tmp_path)])  # fmt: skip
    assert code == 0
    rows = {r["phase"]: r for r in json.loads((tmp_path / "phase_costs.json").read_text())["rows"]}
    bonus = rows["reward_taggers_and_survivors"]
    assert bonus["repeatable"] is False and "kernel_us" not in bonus
    search = rows["find_nearest"]
    assert search["repeatable"] is True and search["same_at_full_size"] is True and len(search["kernel_us"]) == 1
    base = rows["(none repeated)"]["kernel_us"][0]
    assert search["cost_us"] == pytest.approx(search["kernel_us"][0] - base)
    table = (tmp_path / "phase_costs.txt").read_text()
    assert "reward_taggers_and_survivors" in table and "not timed: changes the game when run twice" in table


def test_a_check_that_sees_no_game_end_is_refused(capsys):
    params = [f"--param={k}={v}" for k, v in SMALL_TAG.items()]
    with pytest.raises(SystemExit):
        phase_costs.main(["--device", "cpu", "--games", "2", *params, "--check-steps", "3"])
    assert "no game ended in the 3 steps of the repeat check" in capsys.readouterr().err


def test_an_unknown_phase_is_refused(capsys):
    with pytest.raises(SystemExit):
        phase_costs.main(["--device", "cpu", "--games", "2", "--phases", "find_nearst"])
    assert "--phases: ['find_nearst'] are not phases of this step" in capsys.readouterr().err
