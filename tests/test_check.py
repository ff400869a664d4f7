"""The consistency checker, as a command and as a function, passes on WarpTag-v0 and catches a wrong game."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from functools import partial

import numpy as np
import pytest
import torch
from conftest import SMALL_TAG
from drift_phases import DriftReference, drift_definition
from faulty_phases import (
    drift_observing_one_entry_too_many,
    drift_reading_pos_without_its_axis,
    observe_indexed_leaving_every_row_out_of_the_game,
    observe_listed_in_game_only,
)

import gpu_vecenv.check as check_module
from envs.tag_continuous.config import TagConfig
from envs.tag_continuous.env import tag_definition
from envs.tag_continuous.reference import TagReference
from gpu_vecenv.check import (
    check,
    check_block_local_rewritten,
    check_bounds,
    check_kept_outputs,
    check_outputs_written,
    main,
)
from gpu_vecenv.codegen import KernelCompileError
from gpu_vecenv.definition import Phase, StateArray
from gpu_vecenv.oracle import compare_with_reference
from gpu_vecenv.vector_env import GpuVectorEnv


def test_check_function_passes_on_warp_tag():
    report = check("WarpTag-v0", device="cpu", steps=40, num_envs=3, **SMALL_TAG)
    assert report.ok, report.table()
    assert report.game_ends >= 6


def test_check_command_prints_a_table_and_exits_zero(capsys):
    params = [f"--param={k}={v}" for k, v in SMALL_TAG.items()]
    assert main(["WarpTag-v0", "--device", "cpu", "--steps", "20", "--num-envs", "2", *params]) == 0
    out = capsys.readouterr().out
    assert "max abs diff" in out and "OK" in out
    assert "bounds: every index a phase takes is inside its array: OK" in out
    assert "outputs: every reset and step writes every entry it returns: OK" in out
    assert "kept outputs: outputs kept between launches (copy=False) are those written afresh: OK" in out


def test_check_command_runs_only_the_comparison_when_both_other_checks_are_skipped(capsys):
    params = [f"--param={k}={v}" for k, v in SMALL_TAG.items()]
    argv = ["WarpTag-v0", "--device", "cpu", "--steps", "5", "--num-envs", "2", *params]
    assert main([*argv, "--no-order-check", "--no-outputs-check"]) == 0
    out = capsys.readouterr().out
    assert "max abs diff" in out and "agent order" not in out and "outputs:" not in out


def test_a_failing_check_of_the_command_is_named_with_what_it_found_and_the_exit_status_is_one(capsys, monkeypatch):
    monkeypatch.setattr(check_module, "check_kept_outputs", lambda definition, num_games: ["obs"])
    params = [f"--param={k}={v}" for k, v in SMALL_TAG.items()]
    assert main(["WarpTag-v0", "--device", "cpu", "--steps", "5", "--num-envs", "2", "--no-order-check", *params]) == 1
    out = capsys.readouterr().out
    assert "bounds: every index a phase takes is inside its array: OK" in out
    assert "outputs: every reset and step writes every entry it returns: OK" in out
    assert "kept outputs: env 'WarpTag-v0' returns other ['obs'] where obs keeps what the launch before wrote" in out


def test_check_runs_as_a_module():
    params = ["num_runners=4", "num_taggers=1", "num_other_agents_observed=2"]
    cmd = [sys.executable, "-m", "gpu_vecenv.check", "WarpTag-v0", "--device", "cpu", "--steps", "5", "--num-envs", "2"]
    cmd += [f"--param={p}" for p in params]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK" in proc.stdout


def test_state_arrays_with_a_leading_axis_are_compared_game_by_game():
    # pos is (2, games, agents) and wind (2, games) in the env, (2, agents) and (2,) in the reference: the
    # checker takes game g's entries of each, with more games than the axis is long.
    report = compare_with_reference(GpuVectorEnv(drift_definition(), num_games=3, device="cpu"), steps=14, seed=1)
    assert report.ok, report.table()
    assert report.game_ends >= 6
    # A reference that draws the wind's components the other way round is caught at the first reset.
    definition = dataclasses.replace(drift_definition(), reference=partial(WindSwappedReference, 3, 6))
    report = compare_with_reference(GpuVectorEnv(definition, num_games=3, device="cpu"), steps=2, seed=1)
    assert report.differences["initial_state"].first_failure.startswith("reset, game 0, wind, index (0,)")


def test_a_phase_that_does_not_compile_is_named_with_numbas_words_and_the_indexing_rules():
    definition = dataclasses.replace(drift_definition(), observe_phases=(Phase(drift_reading_pos_without_its_axis),))
    with pytest.raises(KernelCompileError) as caught:
        GpuVectorEnv(definition, num_games=2, device="cpu").reset(seed=0)
    message = str(caught.value)
    assert message.startswith("env 'Drift': its phases do not compile for the cpu backend. Numba said:")
    assert "drift_reading_pos_without_its_axis" in message and "[k, g, a]" in message
    assert "\x1b" not in message  # Numba's terminal colours are taken out


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(num_agents=2.5), r"num_agents must be an integer >= 1, got 2\.5"),
        (dict(num_agents="4"), r"num_agents must be an integer >= 1, got '4'"),
        (dict(obs_dim=3.0), r"obs_dim must be an integer >= 1, got 3\.0"),
        (dict(state=(StateArray("pos", "float32", length=2.0),)), r"'pos' has length 2\.0; expected an integer >= 1"),
    ],
)
def test_sizes_that_are_not_integers_are_refused_naming_what_came(change, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(drift_definition(), **change).validate()


def test_numpy_and_torch_dtypes_name_a_state_arrays_dtype():
    assert StateArray("x", np.float32).dtype == StateArray("x", torch.float32).dtype == "float32"
    assert StateArray("n", np.dtype("int64")).dtype == "int64"


def test_a_phase_writing_past_the_observation_row_is_named_by_the_bounds_check():
    # Unchecked, obs[g, a, 3] with obs_dim 3 is the next agent's first entry (or past the buffer, for the last).
    definition = dataclasses.replace(drift_definition(), observe_phases=(Phase(drift_observing_one_entry_too_many),))
    assert check_bounds(definition, num_games=2, steps=6) == ["NextStep", "SameStep", "Disabled"]
    assert check_bounds(drift_definition(), num_games=2, steps=6) == []


class WindSwappedReference(DriftReference):
    def reset(self, seed, episode, options=None):
        obs = super().reset(seed, episode, options)
        self.wind[:] = self.wind[::-1].copy()
        return obs


class GenerousReference(TagReference):
    """A reference that pays taggers one point more per tag: the backend must be caught disagreeing."""

    def step(self, actions):
        obs, rewards, over = super().step(actions)
        before = rewards.copy()
        rewards[self.agent_type == 1] += (before[self.agent_type == 1] > 0) * 1.0
        return obs, rewards, over


def test_a_wrong_game_is_reported_with_the_first_failing_step_and_slot():
    config = TagConfig.from_kwargs(**dict(SMALL_TAG, tagging_distance=1.0))
    definition = dataclasses.replace(tag_definition(config), reference=partial(GenerousReference, config))
    env = GpuVectorEnv(definition, num_games=2, device="cpu")
    report = compare_with_reference(env, steps=3, seed=0)
    assert not report.ok
    failure = report.differences["rewards"].first_failure
    assert failure is not None and failure.startswith("step 0, game 0")
    assert "MISMATCH" in report.table()


def test_an_invalid_parameter_is_a_clear_error_not_a_traceback(capsys):
    assert main(["WarpTag-v0", "--device", "cpu", "--param", "num_runners=0"]) == 2
    assert "num_runners=0 is invalid" in capsys.readouterr().err
    # A module to import before the id (Gymnasium's "module:Env-v0") that is not there: the env cannot be made.
    assert main(["no_such_module_here:Gather-v0", "--device", "cpu"]) == 2
    assert "No module named 'no_such_module_here'" in capsys.readouterr().err


def test_an_observation_left_unwritten_out_of_the_game_is_named_by_the_outputs_check():
    assert check_outputs_written(tag_definition(TagConfig.from_kwargs(**SMALL_TAG), backend="cpu")) == []
    # Runners are tagged within a few steps, and leave the game.
    config = TagConfig.from_kwargs(**dict(SMALL_TAG, tagging_distance=1.0))
    definition = tag_definition(config, spatial_index=False, backend="cpu")
    assert check_outputs_written(definition, num_games=2, steps=12) == []
    faulty = Phase(observe_listed_in_game_only, "slot", slots=config.num_observed)
    phases = tuple(faulty if p.fn.__name__ == "observe_listed" else p for p in definition.observe_phases)
    broken = dataclasses.replace(definition, observe_phases=phases)
    assert check_outputs_written(broken, num_games=2, steps=12) == ["obs"]


def test_a_block_local_array_read_before_a_launch_writes_it_is_named_by_the_block_local_check():
    config = TagConfig.from_kwargs(**dict(SMALL_TAG, tagging_distance=0.3))
    for spatial_index in (False, True):
        definition = tag_definition(config, spatial_index=spatial_index, backend="cpu", game_work="staged")
        assert any(arr.block_local for arr in definition.state)
        assert check_block_local_rewritten(definition, num_games=2, steps=12) == []
    # The positions are the game's state, carried from step to step: a block's shared memory would lose them.
    state = tuple(dataclasses.replace(arr, block_local=arr.block_local or arr.name == "x") for arr in definition.state)
    broken = dataclasses.replace(definition, state=state)
    assert {"obs", "rewards", "active"} <= set(check_block_local_rewritten(broken, num_games=2, steps=12))


def test_a_kept_row_left_for_a_runner_tagged_since_is_named_by_the_kept_outputs_check():
    # Runners are tagged within a few steps and leave the game; their rows change once, then stay.
    config = TagConfig.from_kwargs(**dict(SMALL_TAG, tagging_distance=1.0))
    assert check_kept_outputs(tag_definition(config, spatial_index=False, backend="cpu"), num_games=2, steps=12) == []
    definition = tag_definition(config, spatial_index=True, backend="cpu")
    assert check_kept_outputs(definition, num_games=2, steps=12) == []
    assert check_outputs_written(definition, num_games=2, steps=12) == []
    faulty = Phase(observe_indexed_leaving_every_row_out_of_the_game, "slot", slots=config.num_observed)
    phases = tuple(faulty if p.fn.__name__ == "observe_indexed" else p for p in definition.observe_phases)
    broken = dataclasses.replace(definition, observe_phases=phases)
    assert check_kept_outputs(broken, num_games=2, steps=12) == ["obs"]
    # Written afresh at every launch, it leaves no row.
    assert check_outputs_written(broken, num_games=2, steps=12) == []
