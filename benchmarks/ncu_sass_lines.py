"""Instructions executed and stall samples of a profiled step kernel, per phase function and per source line.

    SOURCE=1 bash benchmarks/ncu_profile.sh OUTDIR index_100x900       # on the GPU
    python benchmarks/ncu_sass_lines.py OUTDIR/index_100x900.sass.csv WarpTag-v0 \\
        --param num_taggers=100 --param num_runners=900 --param game_work=staged [--top 40]

Nsight Compute's source page of the kernel as SASS (``ncu --page source --csv --print-source sass``)
counts each machine instruction, but the kernel the driver compiled carries no line table to say which
source line an instruction came from. This script compiles the same kernel here, with line information
(the generated module of ``GPU_VECENV_LINEINFO=1``, the profiled one; PTX through NVRTC, then ``ptxas
-lineinfo`` and ``nvdisasm -g``: no GPU needed), aligns its instructions with the profiled ones by their
opcodes (``difflib``; the two compilers may differ by a few instructions), and gives each profiled
instruction the line of its match (an unmatched one the line of the matched one before it).

Numba files the inlined phase functions' lines under the generated module's name with their own modules'
numbers, and the module's body starts at line
:data:`~gpu_vecenv.codegen.KERNEL_BODY_FIRST_LINE_WITH_LINEINFO`: a line below it is one of a phase
module's (the function that holds it is looked up there), a line above it the kernel's own (phase calls,
loops, barriers). Under ``GPU_VECENV_LINEINFO=1`` every ``@shared`` function is inlined at Numba IR level,
those kept as real calls too (``inline=False``, the searches), so their lines are named as well; this
script sets the variable for itself before the env's modules are imported, as the profiled process had it.
Give the env's parameters as on the GPU (the GPU's defaults may differ from the CPU's: ``game_work``);
the script checks that the kernel it compiled is the profiled one (the module's name hashes its source
and the package's), unless told ``--other-sources``.
``nvdisasm`` comes with a CUDA toolkit or the ``nvidia-cuda-nvdisasm`` wheel.
"""

from __future__ import annotations

import argparse
import ast
import csv
import difflib
import gzip
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from types import ModuleType

# Before the env's modules are imported: their @shared functions are then all inlined, as in the profiled kernel.
os.environ["GPU_VECENV_LINEINFO"] = "1"

from ptx_report import cuda_tool, kernel_ptx  # noqa: E402

from gpu_vecenv.check import parse_param  # noqa: E402
from gpu_vecenv.codegen import KERNEL_BODY_FIRST_LINE_WITH_LINEINFO  # noqa: E402

INSTRUCTIONS = "Instructions Executed"
THREAD_INSTRUCTIONS = "Thread Instructions Executed"
STALLS = "Warp Stall Sampling (All Samples)"


def number(text: str) -> float:
    """A metric cell as a number ("-" and blanks count 0)."""
    text = text.replace(",", "").strip()
    return float(text) if text not in ("", "-") else 0.0


def profiled_instructions(path: Path) -> tuple[str, list[dict[str, str]]]:
    """The kernel name and the rows (one per SASS instruction, in address order) of ncu's SASS source page."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", errors="replace") as file:
        rows = list(csv.reader(file))
    kernel = next((row[1] for row in rows if row[:1] == ["Kernel Name"] and len(row) > 1), "")
    for i, row in enumerate(rows):
        if row[:2] == ["Address", "Source"] and INSTRUCTIONS in row:
            return kernel, [dict(zip(row, r, strict=False)) for r in rows[i + 1 :] if len(r) == len(row)]
    raise SystemExit(f"{path}: no 'Address','Source' header naming {INSTRUCTIONS!r}: expected the output of "
                     "`ncu -i REPORT --page source --csv --print-source sass`")  # fmt: skip


def local_instructions(ptx: str, cc: tuple[int, int], max_registers: int | None) -> list[tuple[int, str]]:
    """(line, SASS text) of each instruction of ``ptx`` compiled here with line information."""
    ptxas, nvdisasm = cuda_tool("ptxas"), cuda_tool("nvdisasm")
    if ptxas is None or nvdisasm is None:
        raise SystemExit("ptxas and nvdisasm are needed (a CUDA toolkit on PATH or CUDA_HOME; nvdisasm also "
                         "comes with `pip install nvidia-cuda-nvdisasm`, then put its bin folder on PATH)")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        source, cubin = Path(tmp, "kernel.ptx"), Path(tmp, "kernel.cubin")
        source.write_text(ptx)
        cap = ["--maxrregcount", str(max_registers)] if max_registers else []
        subprocess.run([ptxas, f"-arch=sm_{cc[0]}{cc[1]}", "-lineinfo", *cap, str(source), "-o", str(cubin)],
                       check=True, capture_output=True)  # fmt: skip
        sass = subprocess.run([nvdisasm, "-g", "-c", str(cubin)], check=True, capture_output=True, text=True).stdout
    line, listed = 0, []
    for text in sass.splitlines():
        mark = re.search(r'//## File ".*", line (\d+)', text)
        if mark:
            line = int(mark.group(1))
            continue
        instruction = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", text)
        if instruction:
            listed.append((line, instruction.group(1)))
    return listed


def opcode(sass: str) -> str:
    """The opcode of a SASS instruction, without its predicate (``@P0 BRA ...`` -> ``BRA``)."""
    words = [word for word in sass.split() if not word.startswith("@")]
    return words[0] if words else ""


def lines_of_profiled(profiled: list[dict[str, str]], local: list[tuple[int, str]]) -> tuple[list[int], int]:
    """The source line of each profiled instruction, and how many matched an instruction compiled here."""
    matcher = difflib.SequenceMatcher(None, [opcode(s) for _, s in local],
                                      [opcode(r["Source"]) for r in profiled], autojunk=False)  # fmt: skip
    lines: list[int | None] = [None] * len(profiled)
    for tag, i1, i2, j1, _ in matcher.get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                lines[j1 + k] = local[i1 + k][0]
    matched = sum(line is not None for line in lines)
    last, filled = 0, []
    for line in lines:
        last = line if line is not None else last
        filled.append(last)
    return filled, matched


def functions_by_line(module: ModuleType) -> dict[int, str]:
    """For each line of the env's phase modules inside a function, ``module.function`` (innermost)."""
    owner: dict[int, str] = {}
    phase_modules = {sys.modules[name] for name in set(re.findall(r"^from (\S+) import", Path(
        module.__file__ or "").read_text(), re.M)) if name.startswith("envs.") and name in sys.modules}  # fmt: skip
    for phase_module in phase_modules:
        tree = ast.parse(Path(phase_module.__file__ or "").read_text())
        spans = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
        short = phase_module.__name__.rsplit(".", 1)[-1]
        for node in sorted(spans, key=lambda node: (node.end_lineno or node.lineno) - node.lineno, reverse=True):
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                owner[line] = f"{short}.{node.name}"  # inner functions come later and win
    return owner


def line_owner(line: int, owner: dict[int, str]) -> str:
    """Who line ``line`` of the kernel module belongs to: ``"kernel"`` for the kernel's own lines (from
    :data:`~gpu_vecenv.codegen.KERNEL_BODY_FIRST_LINE_WITH_LINEINFO` on), else the phase-module function
    of :func:`functions_by_line` that holds it, else ``"(no line)"``."""
    if line >= KERNEL_BODY_FIRST_LINE_WITH_LINEINFO:
        return "kernel"
    return owner.get(line, "(no line)")


def print_opcode_mix(path: Path, profiled: list[dict[str, str]], top: int) -> None:
    """The instructions executed per opcode family (the opcode before its first dot), most first."""
    families: dict[str, float] = defaultdict(float)
    for row in profiled:
        families[opcode(row["Source"]).split(".")[0]] += number(row[INSTRUCTIONS])
    total = sum(families.values()) or 1.0
    print(f"{path}: {total:,.0f} instructions executed (warp level), by opcode family")
    for family, count in sorted(families.items(), key=lambda item: -item[1])[:top]:
        print(f"{count:>14,.0f} {100 * count / total:5.1f}%  {family}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sass_csv", type=Path, help="ncu's SASS source page as CSV (.gz allowed)")
    parser.add_argument("env_id")
    parser.add_argument("--param", type=parse_param, action="append", default=[], help="env parameter NAME=VALUE")
    parser.add_argument("--cc", default="9.0", help="compute capability (default 9.0: H100, H200)")
    parser.add_argument("--top", type=int, default=40, help="lines to print (default 40)")
    parser.add_argument("--opcodes", action="store_true",
                        help="print the instructions executed per opcode family (IMAD.MOV counts as IMAD) instead: "
                             "read from the page alone, nothing compiled")  # fmt: skip
    parser.add_argument("--other-sources", action="store_true",
                        help="go on where the sources differ from the profiled kernel's (the match count then "
                             "says how alike the two kernels are)")  # fmt: skip
    args = parser.parse_args(argv)
    cc = tuple(int(part) for part in args.cc.split("."))
    kernel_name, profiled = profiled_instructions(args.sass_csv)
    if args.opcodes:
        print_opcode_mix(args.sass_csv, profiled, args.top)
        return
    ptx, max_registers, module = kernel_ptx(args.env_id, dict(args.param), (cc[0], cc[1]), lineinfo=True)
    if module.__name__ not in kernel_name and not args.other_sources:
        raise SystemExit(f"the profiled kernel is {kernel_name.split('::')[0]!r}, these parameters compile "
                         f"{module.__name__!r}: give the parameters of the profiled env (on a GPU the defaults "
                         "may differ, e.g. --param game_work=staged), on the same sources (else "
                         "--other-sources)")  # fmt: skip
    local = local_instructions(ptx, (cc[0], cc[1]), max_registers)
    lines, matched = lines_of_profiled(profiled, local)
    text = Path(module.__file__ or "").read_text().splitlines()
    owner = functions_by_line(module)
    phase_text = {}
    for name in {o.split(".")[0] for o in owner.values()}:
        path = next(Path(m.__file__ or "") for m in sys.modules.values()
                    if getattr(m, "__name__", "").endswith("." + name) and getattr(m, "__file__", None))  # fmt: skip
        phase_text[name] = path.read_text().splitlines()

    # The kernel calls its phases by aliases: name them.
    aliases = dict(re.findall(r"^from \S+ import (\w+) as (\w+)$", "\n".join(text), re.M))
    aliases = {alias: name for name, alias in aliases.items()}

    def place(line: int) -> tuple[str, str, str]:
        """(group, where, text) of a line: a phase module's function, or the kernel's own line."""
        function = line_owner(line, owner)
        if function == "kernel":
            source = re.sub(r"\b(_phase\d+)\(", lambda m: aliases.get(m.group(1), m.group(1)) + "(", text[line - 1])
            return f"kernel: {source.strip()[:70]}", f"kernel:{line}", source.strip()
        if line in owner:
            short = function.split(".")[0]
            return function, f"{short}:{line}", phase_text[short][line - 1].strip()
        return function, f"line {line}", ""

    total = sum(number(r[INSTRUCTIONS]) for r in profiled) or 1.0
    stalls = sum(number(r.get(STALLS, "")) for r in profiled) or 1.0
    threads = sum(number(r.get(THREAD_INSTRUCTIONS, "")) for r in profiled)
    groups: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    by_line: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for row, line in zip(profiled, lines, strict=True):
        figures = (number(row[INSTRUCTIONS]), number(row.get(STALLS, "")), number(row.get(THREAD_INSTRUCTIONS, "")))
        for table, key in ((groups, place(line)[0]), (by_line, line)):
            for i, value in enumerate(figures):
                table[key][i] += value  # type: ignore[index]
    print(f"{args.sass_csv}: {len(profiled)} SASS instructions, {matched} matched to the kernel compiled here; "
          f"{total:,.0f} executed (warp level, {threads / total:.1f} threads each), "
          f"{stalls:,.0f} stall samples")  # fmt: skip

    def figures(count: float, stall: float, thread: float) -> str:
        return f"{count:>14,.0f} {100 * count / total:5.1f}% {100 * stall / stalls:5.1f}% {thread / max(count, 1):7.1f}"

    heading = f"{'instructions':>14} {'share':>6} {'stalls':>6} {'threads':>7}"
    print(f"\n{heading}  phase function, or kernel line")
    for key, (count, stall, thread) in sorted(groups.items(), key=lambda item: -item[1][0])[: args.top]:
        print(f"{figures(count, stall, thread)}  {key}")
    print(f"\n{heading}  line")
    for line, (count, stall, thread) in sorted(by_line.items(), key=lambda item: -item[1][0])[: args.top]:
        _, where, source = place(line)
        print(f"{figures(count, stall, thread)}  {where}: {source[:90]}")


if __name__ == "__main__":
    main(sys.argv[1:])
