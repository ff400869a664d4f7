"""SASS instructions of an env's CUDA step kernel per phase function, compiled here (no GPU, no profile).

    python benchmarks/sass_lines_static.py WarpTag-v0 --param num_taggers=100 --param num_runners=900 \\
        --param game_work=staged [--runs insert_key]

The static side of ``benchmarks/ncu_sass_lines.py``: the same compile (the kernel module of
``GPU_VECENV_LINEINFO=1``, ``ptxas -lineinfo``, ``nvdisasm -g``), each instruction counted for the
phase-module function or kernel line it came from. A function inlined at several call sites counts
once a site; ``--runs NAME`` prints the lengths of the unbroken runs of NAME's instructions, which is
one inlined copy's size where the compiler keeps it in one piece (an unrolled top-K insertion, say).
Static counts rank variants of a function; they do not say how often it runs.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from ncu_sass_lines import functions_by_line, line_owner, local_instructions  # sets GPU_VECENV_LINEINFO=1 first
from ptx_report import kernel_ptx

from gpu_vecenv.check import parse_param


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env_id")
    parser.add_argument("--param", type=parse_param, action="append", default=[], help="env parameter NAME=VALUE")
    parser.add_argument("--cc", default="9.0", help="compute capability (default 9.0: H100, H200)")
    parser.add_argument("--top", type=int, default=20, help="functions to print (default 20)")
    parser.add_argument("--runs", metavar="NAME", help="also the unbroken runs of this function's instructions")
    args = parser.parse_args(argv)
    cc = tuple(int(part) for part in args.cc.split("."))
    ptx, max_registers, module = kernel_ptx(args.env_id, dict(args.param), (cc[0], cc[1]), lineinfo=True)
    local = local_instructions(ptx, (cc[0], cc[1]), max_registers)
    owner = functions_by_line(module)

    counts = Counter(line_owner(line, owner) for line, _ in local)
    print(f"{args.env_id} {dict(args.param)}: {len(local)} SASS instructions (sm_{cc[0]}{cc[1]})")
    for name, count in counts.most_common(args.top):
        print(f"{count:>7}  {name}")
    if args.runs:
        runs, current = [], 0
        for line, _ in local:
            if line_owner(line, owner).split(".")[-1] == args.runs:
                current += 1
            elif current:
                runs.append(current)
                current = 0
        print(f"runs of {args.runs}: {runs + ([current] if current else [])}")


if __name__ == "__main__":
    main(sys.argv[1:])
