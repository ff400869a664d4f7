"""The real CUDA kernel, run by Numba's CUDA simulator, agrees with the numpy reference."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cudasim_scenarios import CHECKS, SCENARIOS

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def simulator_run():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run(
        [sys.executable, str(HERE / "cudasim_scenarios.py")], env=env, capture_output=True, text=True, timeout=900
    )
    return proc


@pytest.mark.parametrize("name", [*SCENARIOS, *CHECKS])
def test_cuda_kernel_under_simulator_matches_reference(simulator_run, name):
    out = simulator_run.stdout
    assert f"== {name}\n" in out, simulator_run.stdout + simulator_run.stderr
    section = out.split(f"== {name}\n", 1)[1].split("\n== ", 1)[0]
    assert section.rstrip().endswith("OK"), section
