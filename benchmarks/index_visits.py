"""Cells, runs, candidates and insertions of the spatial index's ring search per agent, by agents in the game and grid.

    python benchmarks/index_visits.py --agents 1000 --in-game 1000 500 220 100

Agents spread uniformly over the arena (the Tag arena's side is 1 here: only
ratios matter). For each count of agents in the game, the search of
``envs.tag_continuous.sim.find_nearest_indexed`` (rings around the agent's
cell until the K-th nearest is nearer than every cell not yet searched) runs
on two grids: the one the env builds, ``index_cells_per_side(agents, K)``
cells a side, fixed by the agents a game starts with, and one sized for the
agents in the game. It counts, per searching agent, the cells visited, the
runs of the index's list read (the search starts at the 3 x 3 ring, and reads
all three rows of it, and each later ring's top and bottom rows, as one run
each, their cells being neighbours in the list, and each other ring cell as a
run of its own: two loads of bounds a run), the candidates whose distance is
computed, and the insertions into the running list of the K nearest (a
candidate no farther than the list's last place, in the order the search
reads them: rows in ascending order, a cell's agents by ascending id). CPU
only; seconds.
"""

from __future__ import annotations

import argparse
from typing import NamedTuple

import numpy as np

from envs.tag_continuous.env import index_cells_per_side


class Visits(NamedTuple):
    """Means per search: cells visited, runs of the index's list read, candidates compared, insertions."""

    cells: float
    runs: float
    candidates: float
    insertions: float


def ring_search_visits(points: np.ndarray, cells: int, k: int, searches: int) -> Visits:
    """What the ring search of ``searches`` of ``points`` ``(m, 2)`` in [0, 1) visits, on average."""
    m = len(points)
    cell_size = 1.0 / cells
    column = np.minimum((points / cell_size).astype(np.int64), cells - 1)
    members: dict[tuple[int, int], list[int]] = {}
    for i, (qx, qy) in enumerate(column):
        members.setdefault((int(qx), int(qy)), []).append(i)
    last = cells - 1
    visited_cells = visited_runs = visited_candidates = insertions = 0
    searchers = range(0, m, max(1, m // searches))
    for i in searchers:
        (x, y), (cx, cy) = points[i], column[i]
        nearest: list[float] = []
        for r in range(1, max(cells - 1, 1) + 1):
            for qy in range(max(cy - r, 0), min(cy + r, last) + 1):
                edge = r == 1 or qy in (cy - r, cy + r)
                step = 1 if edge else 2 * r
                visited_runs += 1 if edge else 0
                for qx in range(cx - r, cx + r + 1, step):
                    if 0 <= qx <= last:
                        visited_cells += 1
                        visited_runs += 0 if edge else 1
                        others = [j for j in members.get((qx, qy), []) if j != i]
                        visited_candidates += len(others)
                        for j in others:
                            d2 = float(((points[j] - points[i]) ** 2).sum())
                            if len(nearest) < k or d2 <= nearest[-1]:
                                insertions += 1
                                nearest = sorted([*nearest, d2])[:k]
            if len(nearest) == k:
                gaps = [x - (cx - r) * cell_size if cx - r > 0 else np.inf,
                        (cx + r + 1) * cell_size - x if cx + r < last else np.inf,
                        y - (cy - r) * cell_size if cy - r > 0 else np.inf,
                        (cy + r + 1) * cell_size - y if cy + r < last else np.inf]  # fmt: skip
                if nearest[-1] < min(gaps) ** 2:
                    break
    n = len(searchers)
    return Visits(visited_cells / n, visited_runs / n, visited_candidates / n, insertions / n)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=1000, help="agents a game starts with (default 1000)")
    parser.add_argument("--in-game", type=int, nargs="+", default=[1000, 500, 220, 100], help="agents in the game")
    parser.add_argument("-k", type=int, default=10, help="agents observed (default 10)")
    parser.add_argument("--searches", type=int, default=100, help="searching agents a layout (default 100)")
    parser.add_argument("--layouts", type=int, default=3, help="random layouts a row (default 3)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    fixed = index_cells_per_side(args.agents, args.k)
    columns = f"{'grid':>5} {'cells':>6} {'runs':>5} {'candidates':>10} {'inserted':>8}"
    print(f"{'in game':>8} {columns}   {columns}")
    print(f"{'':>8} {'env (fixed)':>38}   {'sized for those in the game':>38}")
    for m in args.in_game:
        sized = index_cells_per_side(m, args.k)
        layouts = [rng.random((m, 2)) for _ in range(args.layouts)]  # both grids search the same agents
        rows = []
        for cells in (fixed, sized):
            runs = [ring_search_visits(points, cells, args.k, args.searches) for points in layouts]
            rows.append((cells, *np.mean(runs, axis=0)))
        cells_text = [f"{c:>5} {v:>6.1f} {r:>5.1f} {p:>10.1f} {i:>8.1f}" for c, v, r, p, i in rows]
        print(f"{m:>8} {cells_text[0]}   {cells_text[1]}")


if __name__ == "__main__":
    main()
