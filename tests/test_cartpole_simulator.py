"""WarpCartPole's real CUDA kernel, run by Numba's CUDA simulator, agrees with its reference and Gymnasium."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cudasim_cartpole import SCENARIOS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@pytest.fixture(scope="module")
def simulator_run():
    # The simulator is chosen when numba.cuda is imported, hence a process of its own. The script's own
    # folder (tests/) is on its path; the repository root is added for a checkout that is not installed.
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(HERE / "cudasim_cartpole.py")], env=env, cwd=ROOT, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip


@pytest.mark.parametrize("name", SCENARIOS)
def test_cuda_kernel_under_simulator(simulator_run, name):
    out = simulator_run.stdout
    assert f"== {name}\n" in out, out + simulator_run.stderr
    section = out.split(f"== {name}\n", 1)[1].split("\n== ", 1)[0]
    assert section.rstrip().endswith("OK"), section
