"""Cells and candidates the spatial index's ring search visits per agent, by agents in the game and cell grid.

    python benchmarks/index_visits.py --agents 1000 --in-game 1000 500 220 100

Agents spread uniformly over the arena (the Tag arena's side is 1 here: only
ratios matter). For each count of agents in the game, the search of
``envs.tag_continuous.sim.find_nearest_indexed`` (rings around the agent's
cell until the K-th nearest is nearer than every cell not yet searched) runs
on two grids: the one the env builds, ``index_cells_per_side(agents, K)``
cells a side, fixed by the agents a game starts with, and one sized for the
agents in the game. It counts, per searching agent, the cells visited and the
candidates whose distance is computed. CPU only; seconds.
"""

from __future__ import annotations

import argparse

import numpy as np

from envs.tag_continuous.env import index_cells_per_side


def ring_search_visits(points: np.ndarray, cells: int, k: int, searches: int) -> tuple[float, float]:
    """Mean cells and candidates visited by the ring search of ``searches`` of ``points`` ``(m, 2)`` in [0, 1)."""
    m = len(points)
    cell_size = 1.0 / cells
    column = np.minimum((points / cell_size).astype(np.int64), cells - 1)
    members: dict[tuple[int, int], list[int]] = {}
    for i, (qx, qy) in enumerate(column):
        members.setdefault((int(qx), int(qy)), []).append(i)
    last = cells - 1
    visited_cells = visited_candidates = 0
    searchers = range(0, m, max(1, m // searches))
    for i in searchers:
        (x, y), (cx, cy) = points[i], column[i]
        nearest: list[float] = []
        for r in range(cells):
            for qy in range(max(cy - r, 0), min(cy + r, last) + 1):
                step = 1 if r == 0 or qy in (cy - r, cy + r) else 2 * r
                for qx in range(cx - r, cx + r + 1, step):
                    if 0 <= qx <= last:
                        visited_cells += 1
                        others = [j for j in members.get((qx, qy), []) if j != i]
                        visited_candidates += len(others)
                        nearest += [float(((points[j] - points[i]) ** 2).sum()) for j in others]
            nearest = sorted(nearest)[:k]
            if len(nearest) == k:
                gaps = [x - (cx - r) * cell_size if cx - r > 0 else np.inf,
                        (cx + r + 1) * cell_size - x if cx + r < last else np.inf,
                        y - (cy - r) * cell_size if cy - r > 0 else np.inf,
                        (cy + r + 1) * cell_size - y if cy + r < last else np.inf]  # fmt: skip
                if nearest[-1] < min(gaps) ** 2:
                    break
    return visited_cells / len(searchers), visited_candidates / len(searchers)


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
    print(f"{'in game':>8} {'grid':>5} {'cells':>6} {'candidates':>10}   {'grid':>5} {'cells':>6} {'candidates':>10}")
    print(f"{'':>8} {'env (fixed)':>23}   {'sized for those in the game':>23}")
    for m in args.in_game:
        sized = index_cells_per_side(m, args.k)
        layouts = [rng.random((m, 2)) for _ in range(args.layouts)]  # both grids search the same agents
        rows = []
        for cells in (fixed, sized):
            runs = [ring_search_visits(points, cells, args.k, args.searches) for points in layouts]
            rows.append((cells, *np.mean(runs, axis=0)))
        (fc, fv, fp), (sc, sv, sp) = rows
        print(f"{m:>8} {fc:>5} {fv:>6.1f} {fp:>10.1f}   {sc:>5} {sv:>6.1f} {sp:>10.1f}")


if __name__ == "__main__":
    main()
