"""Host time of handing out fresh outputs (``copy=True``) against the size of the batches they are made in.

    python benchmarks/arena_views.py [--caps-mb 8 64 1048576] [--steps 2000] [--device meta|cpu]
                                     [--same-step] [--fresh-for-kernel]

``step`` with ``copy=True`` copies the output arena into a fresh slot whose
views (obs, rewards, flags) were made ahead, a batch of slots at a time. This
times :meth:`gpu_vecenv.outputs.OutputArena.results` alone on torch's ``meta``
device, where tensors have shapes but no memory: what is left is the host time
of making the batches and their views, the part the batch size decides. The
copy itself (one ``cudaMemcpyAsync`` on a GPU) is not in it. With ``--device
cpu`` the arena is real CPU memory and the copy is in it: the CPU backend's
cost of ``copy=True`` under each cap. ``--same-step`` adds ``final_obs`` and
its flags to the outputs; ``--fresh-for-kernel`` times
:meth:`~gpu_vecenv.outputs.OutputArena.fresh_for_kernel` instead, the fresh
slot the kernel writes itself where the outputs are large (no copy). Prints
one line per configuration and cap: the slots per batch and the µs per step.
"""

from __future__ import annotations

import argparse
import time

import torch

from gpu_vecenv import outputs

# (games, agents, obs_dim): WarpTag-v0's 10+100 K=10 at 100 and 2000 games, 1+3 full at 64 and 10000, 5+100
# full at 2000 (615 MB a step: one slot a batch).
CONFIGS = ((100, 110, 73), (2000, 110, 73), (64, 4, 23), (10000, 4, 23), (2000, 105, 730))


def host_us_per_step(games: int, agents: int, obs_dim: int, cap_bytes: int, steps: int, device: torch.device,
                     same_step: bool = False, fresh_for_kernel: bool = False) -> tuple[float, int, int]:  # fmt: skip
    """µs per ``results(copy=True)`` call (or ``fresh_for_kernel()`` call) with batches capped at
    ``cap_bytes``, the slots per batch and the bytes of one step's outputs."""
    arena = outputs.OutputArena(games, agents, obs_dim, same_step, device, batch_bytes=cap_bytes)
    hand_out = arena.fresh_for_kernel if fresh_for_kernel else lambda: arena.results(True)
    for _ in range(min(steps, 200)):
        hand_out()
    start = time.perf_counter()
    for _ in range(steps):
        hand_out()
    return 1e6 * (time.perf_counter() - start) / steps, arena._batch, arena.nbytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--caps-mb", type=int, nargs="+", default=[8, 64, 1 << 20], metavar="MB")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--device", choices=("meta", "cpu"), default="meta")
    parser.add_argument("--same-step", action="store_true", help="the outputs of SAME_STEP autoreset")
    parser.add_argument("--fresh-for-kernel", action="store_true", help="time fresh_for_kernel() instead")
    args = parser.parse_args()
    device = torch.device(args.device)
    print(f"default cap: {outputs._BATCH_BYTES_GPU >> 20} MB on a GPU, {outputs._BATCH_BYTES_CPU >> 20} MB elsewhere; "
          f"at most {outputs._BATCH_SLOTS} slots a batch; device {args.device}")  # fmt: skip
    for games, agents, obs_dim in CONFIGS:
        for cap in args.caps_mb:
            us, batch, nbytes = host_us_per_step(games, agents, obs_dim, cap << 20, args.steps, device,
                                                 args.same_step, args.fresh_for_kernel)  # fmt: skip
            mb = nbytes / 2**20
            print(f"{games} games x {agents} agents, obs {obs_dim} ({mb:.2f} MB a step), cap {cap} MB: "
                  f"{batch} slots a batch, {us:.1f} us a step")  # fmt: skip


if __name__ == "__main__":
    main()
