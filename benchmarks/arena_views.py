"""Host time of handing out fresh outputs (``copy=True``) against the size of the batches they are made in.

    python benchmarks/arena_views.py [--caps-mb 8 64 1048576] [--steps 2000] [--device meta|cpu]
                                     [--same-step] [--fresh-for-kernel | --ring-slot] [--rounds N]

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
slot the kernel writes itself where the outputs are large (no copy); ``--ring-slot``
times :meth:`~gpu_vecenv.outputs.OutputArena.ring_slot`, the fresh slot a CUDA
kernel finds through the device ring (a GPU's ``copy=True`` where a batch holds
two slots or more; the ring's write is a host-to-device copy there, a CPU copy
here). Prints one line per configuration and cap: the slots per batch and the µs
per step (with ``--rounds N``, the median and the smallest of N timings).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from gpu_vecenv import outputs

# (games, agents, obs_dim): WarpTag-v0's 10+100 K=10 at 100 and 2000 games, 1+3 full at 64 and 10000, 5+100
# full at 2000 (615 MB a step: one slot a batch).
CONFIGS = ((100, 110, 73), (2000, 110, 73), (64, 4, 23), (10000, 4, 23), (2000, 105, 730))


def host_us_per_step(games: int, agents: int, obs_dim: int, cap_bytes: int, steps: int, device: torch.device,
                     same_step: bool = False, hand_out: str = "results", rounds: int = 1,
                     ) -> tuple[list[float], int, int]:  # fmt: skip
    """µs per call of ``hand_out`` (``"results"``: ``results(copy=True)``; ``"fresh_for_kernel"``;
    ``"ring_slot"``) with batches capped at ``cap_bytes``, timed ``rounds`` times; the slots per batch
    and the bytes of one step's outputs."""
    arena = outputs.OutputArena(games, agents, obs_dim, same_step, device, batch_bytes=cap_bytes,
                                own_buffer=hand_out == "results")  # fmt: skip
    if hand_out == "ring_slot" and arena.slots_per_batch == 1:
        return [], 1, arena.nbytes  # no env names its slots through the ring at one slot a batch
    call = {"results": lambda: arena.results(True), "fresh_for_kernel": arena.fresh_for_kernel,
            "ring_slot": arena.ring_slot}[hand_out]  # fmt: skip
    for _ in range(min(steps, 200)):
        call()
    timings = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(steps):
            call()
        timings.append(1e6 * (time.perf_counter() - start) / steps)
    return timings, arena.slots_per_batch, arena.nbytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--caps-mb", type=int, nargs="+", default=[8, 64, 1 << 20], metavar="MB")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--device", choices=("meta", "cpu"), default="meta")
    parser.add_argument("--same-step", action="store_true", help="the outputs of SAME_STEP autoreset")
    hand_out = parser.add_mutually_exclusive_group()
    hand_out.add_argument("--fresh-for-kernel", action="store_true", help="time fresh_for_kernel() instead")
    hand_out.add_argument("--ring-slot", action="store_true", help="time ring_slot() instead")
    parser.add_argument("--rounds", type=int, default=1, help="time each configuration this many times")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    call = "fresh_for_kernel" if args.fresh_for_kernel else "ring_slot" if args.ring_slot else "results"
    device = torch.device(args.device)
    print(f"default cap: {outputs._BATCH_BYTES_GPU >> 20} MB on a GPU, {outputs._BATCH_BYTES_CPU >> 20} MB elsewhere; "
          f"at most {outputs._BATCH_SLOTS} slots a batch; device {args.device}")  # fmt: skip
    for games, agents, obs_dim in CONFIGS:
        for cap in args.caps_mb:
            timings, batch, nbytes = host_us_per_step(games, agents, obs_dim, cap << 20, args.steps, device,
                                                      args.same_step, call, args.rounds)  # fmt: skip
            mb = nbytes / 2**20
            if not timings:
                us = "the ring is not used at one slot a batch"
            elif len(timings) == 1:
                us = f"{timings[0]:.1f} us a step"
            else:
                us = f"{statistics.median(timings):.2f} (min {min(timings):.2f}) us a step"
            print(f"{games} games x {agents} agents, obs {obs_dim} ({mb:.2f} MB a step), cap {cap} MB: "
                  f"{batch} slots a batch, {us}")  # fmt: skip


if __name__ == "__main__":
    main()
