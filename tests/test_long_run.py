"""benchmarks/long_run.py at a tiny size on the CPU, and its spot check catching a planted disagreement."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from conftest import SMALL_TAG

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from gpu_vecenv.oracle import Difference

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import long_run  # noqa: E402


def test_a_tiny_long_run_passes_and_writes_its_files(tmp_path):
    argv = ["--device", "cpu", "--games", "1", "--steps", "40", "--spot-every", "10", "--reset-every", "25",
            "--samples", "4", "--cycles", "3", "--cycle-games", "1", "--out", str(tmp_path)]  # fmt: skip
    assert long_run.main(argv) == 0
    result = json.loads((tmp_path / "long_run.json").read_text())
    run = result["run"]
    assert result["ok"] and run["steps"] == 40 and run["finite"] and run["spot_checks"] == 4
    assert [s["step"] for s in run["samples"]] == [10, 20, 30, 40]
    assert run["memory_growth"]["host_rss"]["flat"] and result["cycles"]["no_leak"]
    assert "ALL CHECKS PASSED: True" in (tmp_path / "long_run.txt").read_text()


class _ShiftedReference:
    """The real reference, but every observation it computes is off by 0.001."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def step(self, actions):
        obs, rewards, over = self._real.step(actions)
        return obs + np.float32(1e-3), rewards, over


def test_the_spot_check_reports_a_reference_disagreement():
    envs = gym.make_vec("WarpTag-v0", num_envs=2, device="cpu", **SMALL_TAG)
    env = envs.unwrapped
    env.reset(seed=0)
    actions = torch.zeros((env.num_envs, 2), dtype=torch.int64)
    differences = {name: Difference(name, 1e-5) for name in ("obs", "rewards", "terminated", "state")}
    assert long_run.spot_check(env, 1, actions, differences) is not None
    assert all(d.first_failure is None for d in differences.values())
    real = env.definition.reference
    env.definition = dataclasses.replace(env.definition, reference=lambda: _ShiftedReference(real()))
    long_run.spot_check(env, 1, actions, differences)
    assert differences["obs"].first_failure is not None and differences["obs"].max_abs >= 1e-3 - 1e-7
    assert differences["rewards"].first_failure is None
