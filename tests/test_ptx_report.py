"""benchmarks/ptx_report.py refuses a register cap it cannot apply before compiling anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--param", "max_registers=300"], "--param max_registers must be between 16 and 255, got 300"),
        (["--param", "max_registers=forty"], "--param max_registers must be an integer, None or 'auto', got 'forty'"),
        (["--param", "max_registers=40", "--max-registers", "48"], "--param max_registers=40 and --max-registers 48"),
        (["--max-registers", "8"], "--max-registers must be between 16 and 255, got 8"),
    ],
)
def test_a_register_cap_that_cannot_apply_is_refused(arguments, message):
    command = [sys.executable, str(ROOT / "benchmarks" / "ptx_report.py"), "WarpTag-v0", *arguments]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]
