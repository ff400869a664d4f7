"""benchmarks/cpu_kernel_ab.py: two generated CPU kernels timed in one process on the same buffers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import SMALL_TAG

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import cpu_kernel_ab  # noqa: E402

from gpu_vecenv import show_kernel  # noqa: E402


def test_this_checkouts_kernel_and_another_take_turns_on_the_same_games(tmp_path, capsys):
    params = [arg for name, value in SMALL_TAG.items() for arg in ("--param", f"{name}={value}")]
    assert show_kernel.main(["WarpTag-v0", "--target", "cpu", *params]) == 0
    other = tmp_path / "other.py"
    other.write_text(capsys.readouterr().out)
    out = tmp_path / "ab.json"
    argv = [str(other), *params, "--games", "3", "--rounds", "3", "--launches", "5", "--out", str(out)]
    assert cpu_kernel_ab.main(argv) == 0
    table = capsys.readouterr().out
    assert "| this |" in table and "| other |" in table
    record = json.loads(out.read_text())
    assert record["rounds"] == 3 and [len(v) for v in record["ms"].values()] == [3, 3]
    assert all(ms > 0 for values in record["ms"].values() for ms in values)
    # This checkout's kernel is written beside the other, and is the same source when the checkouts agree.
    assert (tmp_path / "this_kernel_other.py").read_text() == other.read_text()


def test_a_kernel_that_reads_other_parameters_or_rows_is_refused_before_it_runs(tmp_path, capsys):
    params = [arg for name, value in SMALL_TAG.items() for arg in ("--param", f"{name}={value}")]
    assert show_kernel.main(["WarpTag-v0", "--target", "cpu", *params]) == 0
    source = capsys.readouterr().out
    other = tmp_path / "other.py"
    # As a kernel from before obs_kept was a parameter: every later parameter one place earlier.
    other.write_text(source.replace("params_i64[12]", "params_i64[11]"))
    with pytest.raises(
        SystemExit, match="not a kernel of this checkout's buffers .*params_i64\\[12\\].*params_i64\\[11\\]"
    ):
        cpu_kernel_ab.main([str(other), *params, "--games", "2", "--rounds", "1", "--launches", "1"])
    assert not (tmp_path / "this_kernel_other.py").exists()
