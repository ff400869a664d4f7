"""benchmarks/ncu_sass_lines.py reads Nsight Compute's SASS page and gives each profiled instruction the line of
its match in the kernel compiled here, where the two compiles differ by a few instructions."""

from __future__ import annotations

import gzip
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
_lineinfo = os.environ.get("GPU_VECENV_LINEINFO")
import ncu_sass_lines  # noqa: E402

# The script asks for line information for its whole process; the other tests of this one must not get it.
if _lineinfo is None:
    os.environ.pop("GPU_VECENV_LINEINFO", None)
else:
    os.environ["GPU_VECENV_LINEINFO"] = _lineinfo

PAGE = """==PROF== Connected to process 1
"Kernel Name","gpu_vecenv_kernel_WarpTag_v0_cuda_0123::run(Array<float>)"
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","Thread Instructions Executed"
"0x7f00","      LDC R1, c[0x0][0x28]","3","16,000","512,000"
"0x7f10","      @P0 BRA 0x7f40","0","16,000","256,000"
"0x7f20","      IMAD R2, R3, R4, RZ","9","8,000","-"
"0x7f30","      STG.E desc[UR4][R2.64], R5","1","8,000","128,000"
"""


def test_the_sass_page_gives_the_kernel_and_one_row_an_instruction(tmp_path):
    page = tmp_path / "k.sass.csv.gz"
    with gzip.open(page, "wt") as file:
        file.write(PAGE)
    kernel, rows = ncu_sass_lines.profiled_instructions(page)
    assert kernel.startswith("gpu_vecenv_kernel_WarpTag_v0_cuda_0123::run")
    assert [ncu_sass_lines.opcode(r["Source"]) for r in rows] == ["LDC", "BRA", "IMAD", "STG.E"]
    assert [ncu_sass_lines.number(r["Instructions Executed"]) for r in rows] == [16000, 16000, 8000, 8000]
    assert ncu_sass_lines.number(rows[2]["Thread Instructions Executed"]) == 0


def test_a_page_without_the_instruction_table_is_refused_by_what_it_lacks(tmp_path):
    page = tmp_path / "cuda.csv"
    page.write_text('"File Name","kernel.py"\n"Line No","Source"\n"1","import numpy"\n')
    with pytest.raises(SystemExit, match="--print-source sass"):
        ncu_sass_lines.profiled_instructions(page)


def test_profiled_instructions_take_the_lines_of_their_matches_and_unmatched_ones_the_line_before():
    local = [(10, "LDC R1, c[0x0][0x28]"), (11, "IMAD R2, R3, R4, RZ"), (12, "FADD R5, R6, R7"),
             (13, "STG.E desc[UR4][R2.64], R5")]  # fmt: skip
    # The profiled compile has an extra branch after the first instruction and no FADD.
    profiled = [{"Source": s} for s in ("LDC R1, c[0x0][0x28]", "@P0 BRA 0x7f40", "IMAD R2, R3, R4, RZ",
                                        "STG.E desc[UR4][R2.64], R5")]  # fmt: skip
    lines, matched = ncu_sass_lines.lines_of_profiled(profiled, local)
    assert lines == [10, 10, 11, 13] and matched == 3


def test_the_opcode_mix_counts_families_from_the_page_alone(tmp_path, capsys):
    page = tmp_path / "k.sass.csv"
    page.write_text(PAGE.replace("IMAD R2, R3, R4, RZ", "IMAD.MOV.U32 R2, RZ, RZ, R4"))
    ncu_sass_lines.main([str(page), "WarpTag-v0", "--opcodes"])
    mix = capsys.readouterr().out
    assert "48,000 instructions executed" in mix
    assert "33.3%  LDC" in mix and "16.7%  IMAD" in mix and "16.7%  BRA" not in mix and "33.3%  BRA" in mix
