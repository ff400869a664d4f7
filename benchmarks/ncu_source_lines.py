"""Instructions executed and stall samples per source line, from Nsight Compute's source page as CSV.

    SOURCE=1 bash benchmarks/ncu_profile.sh OUTDIR index_100x900
    python benchmarks/ncu_source_lines.py OUTDIR/index_100x900.source.csv \
        --sources envs/tag_continuous/sim.py [--top 30]

The kernel is compiled with line information (``GPU_VECENV_LINEINFO=1``). Numba files the lines of the
inlined phase functions under the generated module's name with their own numbers, and the generated
module's body starts at :data:`~gpu_vecenv.codegen.KERNEL_BODY_FIRST_LINE_WITH_LINEINFO`, so a line
below that is a line of a phase module (``--sources``; the function that holds it is looked up there)
and a line above it the kernel's own (the phase call lines, loops and barriers). Prints the instructions
executed and the warp stall samples summed per function of the sources and per kernel line, then the
single lines with the most instructions, each with its share of the kernel's whole.
"""

from __future__ import annotations

import argparse
import ast
import csv
import sys
from collections import defaultdict
from pathlib import Path

from gpu_vecenv.codegen import KERNEL_BODY_FIRST_LINE_WITH_LINEINFO

INSTRUCTIONS = "Instructions Executed"
STALLS = "Warp Stall Sampling (All Samples)"


def number(text: str) -> float:
    """A metric cell as a number (thousands separators and blanks allowed; anything else counts 0)."""
    try:
        return float(text.replace(",", "").strip() or 0)
    except ValueError:
        return 0.0


def read_lines(path: Path) -> tuple[list[dict[str, str]], list[str]]:
    """The rows of the source page (each a dict by column name) and the column names, from the header row
    that names ``INSTRUCTIONS``; rows before it (the profiler's own messages) are skipped."""
    rows = list(csv.reader(path.read_text(errors="replace").splitlines()))
    for i, row in enumerate(rows):
        if INSTRUCTIONS in row:
            header = row
            return [dict(zip(header, r, strict=False)) for r in rows[i + 1 :] if len(r) == len(header)], header
    raise SystemExit(f"{path}: no header row naming {INSTRUCTIONS!r} (is it `ncu --page source --csv` output?)")


def functions_by_line(path: Path) -> dict[int, str]:
    """For each line of ``path`` inside a function, the innermost function's name."""
    owner: dict[int, str] = {}
    spans = [node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef)]
    for node in sorted(spans, key=lambda node: node.end_lineno - node.lineno, reverse=True):  # type: ignore[operator]
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            owner[line] = node.name  # inner functions come later and win
    return owner


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", type=Path)
    parser.add_argument("--sources", type=Path, nargs="*", default=[], help="the env's phase modules")
    parser.add_argument("--top", type=int, default=30, help="lines to print (default 30)")
    args = parser.parse_args(argv)
    owners = [(path.name, functions_by_line(path), path.read_text().splitlines()) for path in args.sources]
    rows, header = read_lines(args.csv)
    line_column = next((c for c in header if c in ("#", "Line", "# Line")), header[0])
    text_column = next((c for c in header if c == "Source"), header[1] if len(header) > 1 else header[0])
    total = sum(number(r[INSTRUCTIONS]) for r in rows) or 1.0
    stalls = STALLS if STALLS in header else None
    total_stalls = sum(number(r[stalls]) for r in rows) if stalls else 0.0
    print(f"{args.csv}: {len(rows)} lines, {total:,.0f} instructions executed (warp level)"
          + (f", {total_stalls:,.0f} stall samples" if stalls else ""))  # fmt: skip

    def where(row: dict[str, str]) -> tuple[str, str]:
        """The place a row's line names (a function of the sources, or the kernel's line) and its text."""
        line = int(number(row[line_column]))
        if line >= KERNEL_BODY_FIRST_LINE_WITH_LINEINFO or line == 0:
            return f"kernel:{line}", row[text_column].strip()
        found = [(f"{name}:{line} {owner[line]}", text[line - 1].strip()) for name, owner, text in owners
                 if line in owner]  # fmt: skip
        return (" or ".join(f for f, _ in found), found[0][1]) if found else (f"phase line {line}", "")

    def share(value: float, whole: float) -> str:
        return f"{100 * value / whole:5.1f}%" if whole else "     -"

    groups: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for r in rows:
        place, text = where(r)
        key = place.split(":")[0] + " " + place.split(" ", 1)[1] if not place.startswith("kernel") else text[:60]
        groups[key][0] += number(r[INSTRUCTIONS])
        groups[key][1] += number(r[stalls]) if stalls else 0.0
    print(f"{'instructions':>14} {'share':>6} {'stalls':>6}  function (phase modules) or kernel line")
    for key, (count, stall) in sorted(groups.items(), key=lambda item: -item[1][0])[: args.top]:
        print(f"{count:>14,.0f} {share(count, total)} {share(stall, total_stalls)}  {key}")
    print()
    print(f"{'instructions':>14} {'share':>6} {'stalls':>6}  line")
    for r in sorted(rows, key=lambda r: -number(r[INSTRUCTIONS]))[: args.top]:
        place, text = where(r)
        print(f"{number(r[INSTRUCTIONS]):>14,.0f} {share(number(r[INSTRUCTIONS]), total)} "
              f"{share(number(r[stalls]), total_stalls) if stalls else '     -'}  {place}: {text[:90]}")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
