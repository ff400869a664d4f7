"""How fast can a kernel write the full observation? Store-only kernels over the same buffer.

    python benchmarks/store_ceiling.py --games 2000 --agents 105 [--no-own-type] [--out DIR]

The 5 + 100 full-observation step writes 613 MB of observation per step; its
kernel also loads state, moves agents and pays rewards. These kernels only
store, into a buffer of the same shape ``(games, agents, 7 * (agents - 1) + 2)``
float32 (``+ 1`` with ``--no-own-type``, as WarpTag-v0's ``observe_own_type=False``),
so their times bound what the observation's stores alone can take:

- ``torch fill_``: torch's own fill of the buffer (the card's write rate).
- ``flat 4 B (block per game)``: one block per game writes its game's
  entries in order, 4 bytes a thread a store.
- ``flat 4 B`` / ``8 B`` / ``16 B (grid-stride)``: the whole buffer viewed as
  words of 4, 8 or 16 bytes, 16 blocks an SM, grid-stride (a game's entries
  are not a whole number of 8-byte words, so no block per game there).
- ``flat 4 B (block per game, B/SM)``: the same with dynamic shared memory
  that leaves room for only B blocks of 128 an SM, so fewer games are written
  at once (fewer concurrent write streams, the same block shape).
- ``flat 4 B (block per game, T threads)``: one block of T threads per game.
- ``flat 4 B (persistent, 2 x 1024 an SM)``: two blocks of 1024 an SM, each
  writing whole games in turn, so 2 games an SM are written at once.
- ``pairs``: the env's order before v31 (one observed agent a call; with an
  even number of others the env now writes two a call by 8-byte stores), one
  (observer, observed) pair a call of 128 threads, seven 4-byte stores a pair
  ``num_observed`` floats apart and the time (and own type) entries at slot 0,
  the pair stepped as the generated kernel steps it.
- ``pairs, B blocks/SM``: the same with dynamic shared memory that leaves room
  for B blocks of 128 an SM (8: the occupancy of the env's 64-register kernel).

If the per-game rows get faster as fewer games are written at once, the number
of concurrent write streams (DRAM row locality of the L2's write-backs), not
the stores' width or count, is what the per-game pattern costs.

If ``pairs`` alone takes most of the env kernel's time, the stores' pattern is
the ceiling; if it takes far less, the loads and the latency of a pair are.
Times are the median of 20 launches after 3 warm-up launches, each launch's
device time alone (``rollout_timing.device_us_per_launch``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from numba import cuda

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rollout_timing import copy_bandwidth, device_us_per_launch  # noqa: E402

THREADS = 128


def make_pairs_kernel(num_agents: int, num_observed: int, tail_entries: int):
    """The pair-order store kernel for ``num_agents`` agents, sizes as compile-time constants."""
    tail = 7 * num_observed

    @cuda.jit
    def pairs(obs):
        g = np.uint32(cuda.blockIdx.x)
        tid = np.uint32(cuda.threadIdx.x)
        nthreads = np.uint32(cuda.blockDim.x)
        value = np.float32(1.0)
        a = np.uint32(tid // num_observed)
        k = np.uint32(tid - a * num_observed)
        step_a = np.uint32(nthreads // num_observed)
        step_k = np.uint32(nthreads - step_a * num_observed)
        while a < num_agents:
            for f in range(7):
                obs[g, a, f * num_observed + k] = value
            if k == 0:
                for e in range(tail_entries):
                    obs[g, a, tail + e] = value
            k = np.uint32(k + step_k)
            a = np.uint32(a + step_a)
            if k >= num_observed:
                k = np.uint32(k - num_observed)
                a = np.uint32(a + 1)

    return pairs


@cuda.jit
def flat_per_game(words):
    """Block g writes row g of ``words`` (games, words_per_game), one word a thread a store."""
    g = cuda.blockIdx.x
    i = cuda.threadIdx.x
    while i < words.shape[1]:
        words[g, i] = 1
        i += cuda.blockDim.x


@cuda.jit
def flat_persistent(words):
    """Row g of ``words`` (games, words_per_game) by block g mod grid size, whole rows in turn."""
    g = cuda.blockIdx.x
    while g < words.shape[0]:
        i = cuda.threadIdx.x
        while i < words.shape[1]:
            words[g, i] = 1
            i += cuda.blockDim.x
        g += cuda.gridDim.x


@cuda.jit
def flat_grid(words):
    """Every word of the 1-D ``words``, grid-stride."""
    i = cuda.grid(1)
    while i < words.shape[0]:
        words[i] = 0
        i += cuda.gridsize(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=int, default=2000)
    parser.add_argument("--agents", type=int, default=105)
    parser.add_argument("--own-type", action=argparse.BooleanOptionalAction, default=True,
                        help="an entry for the agent's own type after the time, as WarpTag-v0's default")  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="a folder for store_ceiling.json")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("store_ceiling.py times CUDA kernels: no CUDA device is visible")
    games, n = args.games, args.agents
    num_observed = n - 1
    tail_entries = 1 + int(args.own_type)
    obs_dim = 7 * num_observed + tail_entries
    obs = torch.zeros((games, n, obs_dim), dtype=torch.float32, device="cuda")
    nbytes = obs.numel() * obs.element_size()
    stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
    pairs = make_pairs_kernel(n, num_observed, tail_entries)
    view = cuda.as_cuda_array(obs)
    per_game = cuda.as_cuda_array(obs.view(games, n * obs_dim))
    words4 = cuda.as_cuda_array(obs.view(-1))
    words8 = cuda.as_cuda_array(obs.view(-1).view(torch.int64))
    words16 = cuda.as_cuda_array(obs.view(-1).view(torch.complex128)) if obs.numel() % 4 == 0 else None
    properties = torch.cuda.get_device_properties(0)
    sms = properties.multi_processor_count

    def shared_bytes_for(blocks_per_sm: int) -> int:
        # An SM's shared memory over one block more than wanted, so that no more than that many fit.
        return properties.shared_memory_per_multiprocessor // (blocks_per_sm + 1)

    cases = {
        "torch fill_": lambda: obs.fill_(1.0),
        "flat 4 B (block per game)": lambda: flat_per_game[games, THREADS, stream](per_game),
        "flat 4 B (block per game, 8/SM)": lambda: flat_per_game[games, THREADS, stream, shared_bytes_for(8)](per_game),
        "flat 4 B (block per game, 4/SM)": lambda: flat_per_game[games, THREADS, stream, shared_bytes_for(4)](per_game),
        "flat 4 B (block per game, 512 threads)": lambda: flat_per_game[games, 512, stream](per_game),
        "flat 4 B (block per game, 1024 threads)": lambda: flat_per_game[games, 1024, stream](per_game),
        "flat 4 B (persistent, 2 x 1024 an SM)": lambda: flat_persistent[sms * 2, 1024, stream](per_game),
        "flat 4 B (grid-stride)": lambda: flat_grid[sms * 16, THREADS, stream](words4),
        "flat 8 B (grid-stride)": lambda: flat_grid[sms * 16, THREADS, stream](words8),
        "pairs": lambda: pairs[games, THREADS, stream](view),
        "pairs, 8 blocks/SM": lambda: pairs[games, THREADS, stream, shared_bytes_for(8)](view),
        "pairs, 4 blocks/SM": lambda: pairs[games, THREADS, stream, shared_bytes_for(4)](view),
    }
    if words16 is not None:
        cases["flat 16 B (grid-stride)"] = lambda: flat_grid[sms * 16, THREADS, stream](words16)
    bandwidth = copy_bandwidth(torch.device("cuda"))
    rows = []
    print(f"{torch.cuda.get_device_name(0)}: {games} games x {n} agents, {nbytes / 1e6:.1f} MB written a launch; "
          f"copy bandwidth (read + write) {bandwidth['GB_per_s']:.0f} GB/s")  # fmt: skip
    print(f"{'kernel':<40} {'us':>9} {'GB/s':>8} {'of copy bw':>11}")
    for name, fn in cases.items():
        for _ in range(3):
            fn()
        us = device_us_per_launch(fn, torch.device("cuda"), repeats=20)
        rate = nbytes / us / 1e3
        rows.append({"kernel": name, "us": us, "GB_per_s": rate, "copy_bw_fraction": rate / bandwidth["GB_per_s"]})
        print(f"{name:<40} {us:9.1f} {rate:8.0f} {rate / bandwidth['GB_per_s']:10.0%}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        result = {"device": torch.cuda.get_device_name(0), "games": games, "agents": n, "bytes": nbytes,
                  "copy_bandwidth": bandwidth, "rows": rows}  # fmt: skip
        (args.out / "store_ceiling.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
