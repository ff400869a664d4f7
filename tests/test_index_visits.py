"""index_visits.py counts what the index's ring search visits; a finer grid visits more cells, fewer candidates."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import index_visits  # noqa: E402


def test_a_finer_grid_visits_more_cells_and_fewer_candidates():
    points = np.random.default_rng(0).random((220, 2))
    fine = index_visits.ring_search_visits(points, cells=14, k=10, searches=50)
    coarse = index_visits.ring_search_visits(points, cells=6, k=10, searches=50)
    assert fine.cells > coarse.cells and fine.candidates < coarse.candidates
    # At least the K nearest were looked at, and never more than every other agent.
    assert 10 <= fine.candidates <= 219 and 10 <= coarse.candidates <= 219
    # Rows read as runs: fewer runs than cells, and at least the first ring's three rows.
    assert 3 <= fine.runs < fine.cells
    # Every search inserts its first K candidates, and never more candidates than it reads.
    assert 10 <= fine.insertions <= fine.candidates and 10 <= coarse.insertions <= coarse.candidates


def test_a_search_of_1000_agents_inserts_about_as_many_candidates_as_a_random_order_would():
    # 1000 agents on the env's 14 x 14 grid: about 43 candidates a search, of which a random order would
    # insert K (1 + ln(43 / K)), about 25; the first K always.
    points = np.random.default_rng(2).random((1000, 2))
    visits = index_visits.ring_search_visits(points, cells=14, k=10, searches=200)
    assert 40 <= visits.candidates <= 46
    assert 20 <= visits.insertions <= 30


def test_one_cell_holds_every_candidate():
    points = np.random.default_rng(1).random((30, 2))
    visits = index_visits.ring_search_visits(points, cells=1, k=5, searches=30)
    assert visits[:3] == (1.0, 1.0, 29.0)
    assert 5 <= visits.insertions < 29


def test_the_first_ring_is_three_runs_and_each_later_ring_four_per_ring_number():
    # Two agents in the centre cell of a 9 x 9 grid, K larger than the agents: the list never fills, so every
    # ring is searched. Ring 1 is 3 rows (3 runs, 9 cells); ring r > 1 has 2 full rows and 2 (2r - 1) end
    # cells (4r runs, 8r cells).
    points = np.full((2, 2), 0.5) + np.array([[0.0, 0.0], [0.01, 0.0]])
    visits = index_visits.ring_search_visits(points, cells=9, k=5, searches=2)
    assert visits == (9 + 16 + 24 + 32, 3 + 8 + 12 + 16, 1.0, 1.0)


def test_the_table_has_a_row_per_count_in_the_game(capsys):
    index_visits.main(["--agents", "200", "--in-game", "200", "60", "--searches", "10", "--layouts", "1"])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [int(row.split()[0]) for row in rows] == [200, 60]
    first = rows[0].split()
    assert first[1:6] == first[6:11]  # every agent in the game: the env's grid is the one sized for them
