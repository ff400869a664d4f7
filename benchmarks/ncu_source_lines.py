"""Instructions executed and stall samples per source line, from Nsight Compute's source page as CSV.

    SOURCE=1 bash benchmarks/ncu_profile.sh OUTDIR index_100x900
    python benchmarks/ncu_source_lines.py OUTDIR/index_100x900.source.csv [--top 30]

The kernel is compiled with line information (``GPU_VECENV_LINEINFO=1``), so its instructions are
attributed to lines of the generated kernel module, where each phase is one call line (the phase
functions are inlined into it). Prints the lines with the most instructions executed, each with its
share of the kernel's instructions and of its warp stall samples, and the line's text.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", type=Path)
    parser.add_argument("--top", type=int, default=30, help="lines to print (default 30)")
    args = parser.parse_args(argv)
    rows, header = read_lines(args.csv)
    line_column = next((c for c in header if c in ("#", "Line", "# Line")), header[0])
    text_column = next((c for c in header if c == "Source"), header[1] if len(header) > 1 else header[0])
    total = sum(number(r[INSTRUCTIONS]) for r in rows) or 1.0
    stalls = STALLS if STALLS in header else None
    total_stalls = sum(number(r[stalls]) for r in rows) if stalls else 0.0
    print(f"{args.csv}: {len(rows)} lines, {total:,.0f} instructions executed (warp level)"
          + (f", {total_stalls:,.0f} stall samples" if stalls else ""))  # fmt: skip
    print(f"{'line':>6} {'instructions':>14} {'share':>6} {'stalls':>6}  source")
    for r in sorted(rows, key=lambda r: -number(r[INSTRUCTIONS]))[: args.top]:
        stall_share = f"{100 * number(r[stalls]) / total_stalls:5.1f}%" if stalls and total_stalls else "     -"
        print(f"{r[line_column]:>6} {number(r[INSTRUCTIONS]):>14,.0f} {100 * number(r[INSTRUCTIONS]) / total:5.1f}% "
              f"{stall_share}  {r[text_column].strip()[:100]}")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
