"""The reference backend agrees with the generated CPU kernel, and carries envs with a hand-written CUDA kernel."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import SMALL_TAG

from envs.tag_continuous.config import TagConfig
from envs.tag_continuous.env import tag_definition
from gpu_vecenv.codegen import load_kernel_module
from gpu_vecenv.oracle import compare_with_reference
from gpu_vecenv.vector_env import GpuVectorEnv


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_reference_backend_steps_like_the_cpu_kernel(mode):
    kernel = gym.make_vec("WarpTag-v0", num_envs=3, device="cpu", autoreset_mode=mode, **SMALL_TAG)
    reference = gym.make_vec("WarpTag-v0", num_envs=3, device="cpu", backend="reference", autoreset_mode=mode,
                             **SMALL_TAG)  # fmt: skip
    assert reference.unwrapped.backend == "reference"
    assert torch.equal(kernel.reset(seed=4)[0], reference.reset(seed=4)[0])
    rng = np.random.default_rng(1)
    ends = 0
    for _ in range(40):
        actions = rng.integers(0, 21, size=(kernel.num_envs, 2))
        a, b = kernel.step(actions), reference.step(actions)
        for x, y in zip(a[:4], b[:4], strict=True):
            torch.testing.assert_close(x, y, rtol=0, atol=1e-6)
        if mode == "SameStep":
            torch.testing.assert_close(a[4]["final_obs"], b[4]["final_obs"], rtol=0, atol=1e-6)
        done = kernel.per_game(a[2] | a[3])[:, 0]
        ends += int(done.sum())
        if mode == "Disabled" and bool(done.any()):
            kernel.reset(options={"reset_mask": done})
            reference.reset(options={"reset_mask": done})
    assert ends >= 6


def test_out_of_range_actions_are_recorded_by_the_reference_backend_too():
    envs = gym.make_vec("WarpTag-v0", num_envs=2, device="cpu", backend="reference", **SMALL_TAG)
    envs.reset(seed=0)
    actions = np.zeros((envs.num_envs, 2), np.int64)
    actions[3, 1] = 99
    envs.step(actions)
    with pytest.raises(ValueError, match="action component 1 of slot 3 .* was 99"):
        envs.reset()


def hand_written(**params):
    """Tag with its generated CUDA kernel passed as if hand-written (the escape hatch)."""
    # A hand-written kernel has no generated kernel to cap (WarpTag-v0 caps its K-nearest one by default).
    definition = tag_definition(TagConfig.from_kwargs(**params), max_registers=None)
    return dataclasses.replace(definition, cuda_kernel=load_kernel_module(definition, "cuda").run)


def test_an_env_with_a_hand_written_kernel_runs_its_reference_on_the_cpu():
    env = GpuVectorEnv(hand_written(**SMALL_TAG), num_games=2, device="cpu")
    assert env.backend == "reference"
    report = compare_with_reference(env, steps=20, seed=3)
    assert report.ok, report.table()
    with pytest.raises(ValueError, match="hand-written CUDA kernel and no CPU kernel; use backend='reference'"):
        GpuVectorEnv(hand_written(**SMALL_TAG), num_games=2, device="cpu", backend="cpu")


def test_a_cuda_kernel_must_be_a_kernel():
    with pytest.raises(ValueError, match="cuda_kernel must be a numba.cuda.jit kernel, got function"):
        dataclasses.replace(tag_definition(TagConfig(), max_registers=None), cuda_kernel=lambda *args: None)


SIMULATED = """
import dataclasses
from envs.tag_continuous.config import TagConfig
from envs.tag_continuous.env import tag_definition
from gpu_vecenv.codegen import load_kernel_module
from gpu_vecenv.oracle import compare_with_reference
from gpu_vecenv.vector_env import GpuVectorEnv
params = dict(num_taggers=1, num_runners=3, num_other_agents_observed=2, episode_length=4, grid_length=5.0,
              tagging_distance=0.2)
definition = tag_definition(TagConfig.from_kwargs(**params), max_registers=None)
definition = dataclasses.replace(definition, cuda_kernel=load_kernel_module(definition, "cuda").run)
env = GpuVectorEnv(definition, num_games=2, device="cpu", backend="cuda")
report = compare_with_reference(env, steps=6, seed=1)
print(report.table())
assert report.ok
"""


def test_a_hand_written_kernel_runs_as_the_cuda_backend_under_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, "-c", SIMULATED], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK" in proc.stdout
