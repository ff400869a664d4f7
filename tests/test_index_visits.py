"""index_visits.py counts what the index's ring search visits; a finer grid visits more cells, fewer candidates."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import index_visits  # noqa: E402


def test_a_finer_grid_visits_more_cells_and_fewer_candidates():
    points = np.random.default_rng(0).random((220, 2))
    fine_cells, fine_candidates = index_visits.ring_search_visits(points, cells=14, k=10, searches=50)
    coarse_cells, coarse_candidates = index_visits.ring_search_visits(points, cells=6, k=10, searches=50)
    assert fine_cells > coarse_cells and fine_candidates < coarse_candidates
    # At least the K nearest were looked at, and never more than every other agent.
    assert 10 <= fine_candidates <= 219 and 10 <= coarse_candidates <= 219


def test_one_cell_holds_every_candidate():
    points = np.random.default_rng(1).random((30, 2))
    assert index_visits.ring_search_visits(points, cells=1, k=5, searches=30) == (1.0, 29.0)


def test_the_table_has_a_row_per_count_in_the_game(capsys):
    index_visits.main(["--agents", "200", "--in-game", "200", "60", "--searches", "10", "--layouts", "1"])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [int(row.split()[0]) for row in rows] == [200, 60]
    first = rows[0].split()
    assert first[1] == first[4]  # every agent in the game: the env's grid is the one sized for them
