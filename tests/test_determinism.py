"""Determinism: the same seed and actions give the same bits, whatever runs them.

Bit for bit: two runs in one process, runs in separate processes, game ``g``
of an env seeded ``s`` and game 0 of a one-game env seeded ``s + g`` (whole
trajectories, autoresets included), ``copy=True`` and ``copy=False``. Across
backends, the initial states (of the first reset and of every autoreset) are
bit-identical: the CPU backend's, the CUDA kernel's under Numba's simulator
and, with a GPU, the real CUDA kernel's. Stepping is compared across backends
by the reference tests, to float32 tolerance: compilers may contract
``a * b + c`` into one rounding on one target and not on another.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import SMALL_TAG
from gymnasium.vector import AutoresetMode

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)

HERE = Path(__file__).resolve().parent
# Tags, time-limit ends and autoresets all happen within 40 steps.
BUSY_TAG = dict(SMALL_TAG, tagging_distance=0.3, episode_length=8)
START_KEYS = ("x", "y", "direction", "speed", "acceleration", "alive", "t", "episode", "seed")


def make(device="cpu", games=4, **kwargs):
    return gym.make_vec("WarpTag-v0", num_envs=games, device=device, **{**BUSY_TAG, **kwargs})


def _hash(h, *tensors: torch.Tensor) -> None:
    for t in tensors:
        h.update(t.detach().cpu().contiguous().numpy().tobytes())


class DigestRun:
    """Steps ``envs`` with random actions drawn from ``seed`` and hashes (SHA-256) every output as it comes."""

    def __init__(self, envs, seed: int) -> None:
        self.envs, self.hash = envs, hashlib.sha256()
        self.rng = np.random.default_rng(seed)
        obs, infos = envs.reset(seed=seed)
        _hash(self.hash, obs, infos["active"])

    def step(self) -> None:
        envs = self.envs
        actions = torch.as_tensor(self.rng.integers(0, envs.single_action_space.nvec, size=(envs.num_envs, 2)))
        obs, rewards, terminated, truncated, infos = envs.step(actions.to(envs.device))
        _hash(self.hash, obs, rewards, terminated, truncated, infos["active"])
        if "final_obs" in infos:
            _hash(self.hash, infos["final_obs"], infos["final_info"]["active"])
        if envs.unwrapped.autoreset_mode is AutoresetMode.DISABLED:
            done = envs.unwrapped.per_game(terminated | truncated)[:, 0]
            if bool(done.any()):
                _hash(self.hash, envs.reset(options={"reset_mask": done})[0])

    def hexdigest(self) -> str:
        """The digest so far, with the env's whole state."""
        final = self.hash.copy()
        _hash(final, *self.envs.state.values())
        return final.hexdigest()


def run_digest(device="cpu", games=4, steps=40, seed=11, mode="NextStep", **kwargs) -> str:
    """SHA-256 of every output of a reset and ``steps`` steps of seeded random actions, and of the final state."""
    envs = make(device, games, autoreset_mode=mode, **kwargs)
    run = DigestRun(envs, seed)
    for _ in range(steps):
        run.step()
    digest = run.hexdigest()
    envs.close()
    return digest


def starting_states(envs) -> dict[str, np.ndarray]:
    return {k: envs.state[k].cpu().numpy().copy() for k in START_KEYS}


def record_starts(envs, seed: int, steps: int) -> list[dict[str, np.ndarray]]:
    """The state after the seeded reset and after every step that (auto)reset some game, with still actions.

    Still actions (index 0: no acceleration, no turn) keep positions where they were drawn, so that every
    autoreset's fresh draws are what the comparison sees.
    """
    envs.reset(seed=seed)
    out = [starting_states(envs)]
    still = np.zeros((envs.num_envs, 2), np.int64)
    for _ in range(steps):
        envs.step(still)
        if bool((envs.state["t"] == 0).any()):
            out.append(starting_states(envs))
    return out


def assert_same_starts(a, b):
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        for k in START_KEYS:
            assert x[k].dtype == y[k].dtype and x[k].tobytes() == y[k].tobytes(), f"record {i}: {k} differs"


# -- same device, same process ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_two_runs_give_bit_identical_outputs(device, mode):
    first = run_digest(device, mode=mode)
    assert run_digest(device, mode=mode) == first
    assert run_digest(device, mode=mode, seed=12) != first  # the digest does see the seed


def test_copy_false_gives_the_same_bits_as_copy_true(device):
    assert run_digest(device, copy=False) == run_digest(device, copy=True)


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_game_g_plays_like_a_one_game_env_seeded_s_plus_g(device, mode):
    games, seed, steps = 5, 40, 30
    together = make(device, games, autoreset_mode=mode)
    alone = [make(device, 1, autoreset_mode=mode) for _ in range(games)]
    obs, _ = together.reset(seed=seed)
    for g, env in enumerate(alone):
        assert torch.equal(env.reset(seed=seed + g)[0], together.per_game(obs)[g])
    rng = np.random.default_rng(seed)
    ends = 0
    for _ in range(steps):
        actions = rng.integers(0, 21, size=(games, together.num_agents, 2))
        outputs = together.step(actions)
        ends += int(outputs[2].sum() + outputs[3].sum())
        for g, env in enumerate(alone):
            own = env.step(actions[g])
            for a, b in zip(outputs[:4], own[:4], strict=True):
                assert torch.equal(together.per_game(a)[g], b[: together.num_agents])
    for g, env in enumerate(alone):
        for k in START_KEYS:
            assert torch.equal(together.state[k][g], env.state[k][0]), k
    assert ends > 0  # games ended and were reset on the way


# -- other processes ---------------------------------------------------------------------------------------------

DIGESTS_IN_A_CHILD = """
import sys
sys.path.insert(0, {here!r})
from test_determinism import run_digest
for mode in ("NextStep", "SameStep", "Disabled"):
    print(mode, run_digest({device!r}, mode=mode))
"""


def digests_in_another_process(device: str, hash_seed: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)  # set iteration orders differ between the processes
    code = DIGESTS_IN_A_CHILD.format(here=str(HERE), device=device)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dict(line.split() for line in proc.stdout.splitlines() if line.split()[:1] != [])


def test_runs_in_other_processes_give_bit_identical_outputs(device):
    theirs = digests_in_another_process(device, hash_seed="1")
    ours = {mode: run_digest(device, mode=mode) for mode in ("NextStep", "SameStep", "Disabled")}
    assert theirs == ours


# -- across backends: initial states -----------------------------------------------------------------------------

# Tiny, for the simulator: 2 games of 5 agents, 3 episodes of 2 steps.
TINY = dict(num_taggers=2, num_runners=3, num_other_agents_observed=2, episode_length=2, grid_length=5.0,
            tagging_distance=0.0)  # fmt: skip
STARTS_UNDER_THE_SIMULATOR = """
import sys
import numpy as np
import gymnasium as gym
sys.path.insert(0, {here!r})
from test_determinism import TINY, record_starts
envs = gym.make_vec("WarpTag-v0", num_envs=2, device="cpu", backend="cuda", threads_per_block=4, **TINY)
starts = record_starts(envs, seed=77, steps=9)
np.savez(sys.argv[1], **{{f"{{i}}/{{k}}": v for i, s in enumerate(starts) for k, v in s.items()}})
"""


def test_cuda_kernel_under_the_simulator_draws_the_cpu_backends_initial_states(tmp_path):
    path = tmp_path / "starts.npz"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    code = STARTS_UNDER_THE_SIMULATOR.format(here=str(HERE))
    proc = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with np.load(path) as data:
        simulated = [{k: data[f"{i}/{k}"] for k in START_KEYS} for i in range(len(data.files) // len(START_KEYS))]
    on_cpu = record_starts(gym.make_vec("WarpTag-v0", num_envs=2, device="cpu", **TINY), seed=77, steps=9)
    assert len(on_cpu) == 4  # the seeded reset and three autoresets
    assert_same_starts(simulated, on_cpu)


NO_TAGS_SMALL = dict(BUSY_TAG, tagging_distance=0.0)
NO_TAGS_DEFAULT = {"episode_length": 3, "tagging_distance": 0.0}  # the default game of 110 agents, short episodes


# No tags: only the resets are compared, never float32 stepping arithmetic.
@pytest.mark.gpu
@pytest.mark.parametrize("params", [NO_TAGS_SMALL, NO_TAGS_DEFAULT], ids=["small", "default-110-agents"])
def test_gpu_draws_the_cpu_backends_initial_states(params):
    def starts(device):
        envs = gym.make_vec("WarpTag-v0", num_envs=50, device=device, **params)
        return record_starts(envs, seed=123, steps=params["episode_length"] * 3 + 3)

    on_gpu = starts("cuda")
    assert len(on_gpu) == 4  # the seeded reset and three autoresets
    assert_same_starts(on_gpu, starts("cpu"))


@pytest.mark.gpu
def test_gpu_masked_resets_with_seed_lists_draw_the_cpu_backends_states():
    def starts(device):
        envs = make(device, games=6)
        envs.reset(seed=5)
        mask = np.array([True, False, True, True, False, True])
        envs.reset(seed=[2**62, 0, 9, 9, 1, 31], options={"reset_mask": mask})
        return [starting_states(envs)]

    assert_same_starts(starts("cuda"), starts("cpu"))


# -- the GPU ------------------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_runs_at_training_size_are_bit_identical():
    params = dict(device="cuda", games=16, steps=520, num_taggers=10, num_runners=100, num_other_agents_observed=10,
                  episode_length=500, grid_length=20.0, tagging_distance=0.02)  # the default game  # fmt: skip
    first = run_digest(**params)
    assert run_digest(**params) == first
    assert run_digest(**params, cuda_graphs=False) == first  # graph replay and direct launches agree
    assert run_digest(**params, threads_per_block=32) == first  # so do other block sizes (a stride loop here)
