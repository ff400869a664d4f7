"""Kernel time of WarpTag-v0 against the CUDA block size (threads per game), per configuration.

    python benchmarks/block_sweep.py --full --configs 5+100x2000 10+200x500 1+3x10000 \\
        --threads default warps 128 256 384 512 [--param spatial_index=True] [--rounds 2] [--out DIR]

A configuration is ``TAGGERS+RUNNERS`` with ``xGAMES`` (default 2000 games);
``--full`` uses the full observation, else K-nearest (K = 10); ``--param
KEY=VALUE`` passes any other ``make_vec`` keyword (a Python literal). A block size is
an integer, ``default`` (what the env picks when asked for none: WarpTag-v0's
full observation widens large games' blocks, see ``full_observation_threads`` in
``envs/tag_continuous/env.py``) or ``warps`` (the agents rounded up to whole
warps, at most 256: the package's default for a definition that names none).
Each distinct block size of a configuration is timed once a round, in the
order given, by ``profile_kernel.time_config`` (the kernel's launch replayed
back to back between CUDA events, median of three); ``obs GB/s`` is the
observation's bytes over that time. Prints a table; ``--out DIR`` also writes
DIR/block_sweep.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile_kernel import time_config  # noqa: E402

from gpu_vecenv.backends import default_threads_per_block  # noqa: E402
from gpu_vecenv.check import parse_param  # noqa: E402

# make_vec keywords the sweep sets itself, from --configs, --full and --threads.
SWEPT = ("num_envs", "games", "num_taggers", "num_runners", "use_full_observation", "threads_per_block", "threads")


def parse_config(text: str) -> tuple[int, int, int]:
    """``"5+100x2000"`` -> (taggers, runners, games); games default to 2000."""
    match = re.fullmatch(r"(\d+)\+(\d+)(?:x(\d+))?", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"a configuration is TAGGERS+RUNNERS[xGAMES], like 5+100x2000; got {text!r}")
    return int(match[1]), int(match[2]), int(match[3] or 2000)


def parse_threads(text: str) -> str | int:
    if text in ("default", "warps"):
        return text
    if text.isdigit() and 1 <= int(text) <= 1024:
        return int(text)
    raise argparse.ArgumentTypeError(f"a block size is 'default', 'warps' or an integer in [1, 1024]; got {text!r}")


def unswept_param(text: str) -> tuple[str, object]:
    """``--param KEY=VALUE`` (:func:`gpu_vecenv.check.parse_param`), refused for a key the sweep sets."""
    key, value = parse_param(text)
    if key in SWEPT:
        raise argparse.ArgumentTypeError(f"{key} is set by --configs, --full or --threads, not by --param")
    return key, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", type=parse_config, nargs="+", required=True)
    parser.add_argument("--threads", type=parse_threads, nargs="+", default=["default", "warps", 128, 256, 384, 512])
    parser.add_argument("--full", action="store_true", help="full observation (else K-nearest, K = 10)")
    parser.add_argument("--param", type=unswept_param, action="append", default=[], help="KEY=VALUE for make_vec")
    parser.add_argument("--rounds", type=int, default=1, help="at least 1")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if not torch.cuda.is_available():
        raise SystemExit("block_sweep.py times CUDA kernels: no CUDA device is visible")
    rows = []
    print(f"{'config':<12}{'games':>7}{'block':>14}{'threads':>8}{'kernel us':>11}{'obs GB/s':>10}")
    for _ in range(args.rounds):
        for taggers, runners, games in args.configs:
            n = taggers + runners
            params = dict(games=games, num_taggers=taggers, num_runners=runners, use_full_observation=args.full)
            if not args.full:
                params["num_other_agents_observed"] = min(10, n - 1)
            params.update(args.param)
            names: dict[int | None, list[str]] = {}
            for choice in args.threads:
                block = None if choice == "default" else default_threads_per_block(n) if choice == "warps" else choice
                names.setdefault(block, []).append(str(choice))
            for block, labels in names.items():
                row = time_config(f"{taggers}+{runners}", threads=block, **params)
                row["block"] = "/".join(labels)
                rows.append(row)
                print(f"{row['config']:<12}{games:>7}{row['block']:>14}{row['threads_per_block']:>8}"
                      f"{1e3 * row['kernel_ms']:>11.1f}{row['obs_bytes'] / row['kernel_ms'] / 1e6:>10.0f}",
                      flush=True)  # fmt: skip
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "argv": sys.argv[1:],
                  "full_observation": args.full, "params": dict(args.param), "rows": rows}  # fmt: skip
        (args.out / "block_sweep.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
