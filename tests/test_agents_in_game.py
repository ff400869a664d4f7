"""agents_in_game.py reports the share of agents still in the game, which sets the K-nearest search's cost."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from conftest import SMALL_TAG

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import agents_in_game  # noqa: E402


def test_tagged_runners_leave_and_a_finished_game_starts_full():
    # A wide tag radius in a small arena: runners are caught within the 15-step episode.
    shares = agents_in_game.shares_in_game(3, 40, "cpu", dict(SMALL_TAG, tagging_distance=0.4))
    assert shares.shape == (40,) and ((shares > 0) & (shares <= 1)).all()
    assert shares.min() <= 3 / 7  # at most the two taggers and one runner left in some step
    assert (np.diff(shares) > 0).any()  # only a restarted game brings agents back


def test_no_one_leaves_when_tagged_runners_stay():
    shares = agents_in_game.shares_in_game(2, 20, "cpu", dict(SMALL_TAG, tagging_distance=0.4,
                                                               runner_exits_game_after_tagged=False))  # fmt: skip
    assert np.array_equal(shares, np.ones(20, np.float32))


def test_the_printed_table_ends_with_the_whole_rollouts_share(capsys):
    params = [f"--param={k}={v}" for k, v in SMALL_TAG.items()]
    assert agents_in_game.main(["--games", "2", "--steps", "30", "--every", "10", *params]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines[1:4]] == ["1-", "11-", "21-"] and lines[4].startswith("all 30 steps")
