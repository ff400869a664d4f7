"""The PPO example's bookkeeping (examples/cleanrl_ppo_tag.py): GAE at terminal and truncated ends, whole-episode
statistics, and the env options the training loop fixes."""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from conftest import SMALL_TAG

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import cleanrl_ppo_tag as example  # noqa: E402


def one_agent_rollout(rewards, values, dones, terminal):
    """Storage of one agent of one game over ``len(rewards)`` steps."""
    column = lambda xs: torch.tensor(xs, dtype=torch.float32)[:, None, None]  # noqa: E731
    return {"rewards": column(rewards), "values": column(values), "dones": column(dones), "terminal": column(terminal)}


def test_a_truncated_end_bootstraps_the_last_observations_value_and_a_terminal_one_does_not():
    gamma, lam = 0.9, 0.5
    next_value = torch.tensor([[7.0]])
    # Step 0 ends an episode; step 1 is the autoreset step; step 2 the new episode's first.
    values = [1.0, 4.0, 2.0]  # values[1]: the value of the ended episode's last observation (NEXT_STEP returns it)
    truncated = one_agent_rollout([1.0, 0.0, 0.5], values, dones=[1, 0, 0], terminal=[0, 0, 0])
    terminated = one_agent_rollout([1.0, 0.0, 0.5], values, dones=[1, 0, 0], terminal=[1, 0, 0])
    adv_truncated, returns_truncated = example.compute_advantages(truncated, next_value, gamma, lam)
    adv_terminated, _ = example.compute_advantages(terminated, next_value, gamma, lam)
    assert adv_truncated[0].item() == pytest.approx(1.0 + gamma * 4.0 - 1.0)  # bootstrapped, nothing carried back
    assert adv_terminated[0].item() == pytest.approx(1.0 - 1.0)  # no value after a terminal end
    assert adv_truncated[2].item() == pytest.approx(0.5 + gamma * 7.0 - 2.0)  # the rollout's end bootstraps
    assert torch.equal(adv_truncated[1:], adv_terminated[1:])
    assert torch.equal(returns_truncated, adv_truncated + torch.tensor(values)[:, None, None])


def test_the_tally_counts_only_episodes_seen_from_their_start():
    envs = gym.make_vec("WarpTag-v0", num_envs=2, device="cpu", **SMALL_TAG)
    envs.reset(seed=0)
    tally = example.EpisodeTally(envs, whole=torch.tensor([True, False]))
    zeros = torch.zeros(2, envs.num_agents)
    active, tagged_by = torch.ones(2, envs.num_agents, dtype=torch.bool), torch.full((2, envs.num_agents), -1)
    both, counted = torch.tensor([True, True]), torch.tensor([True, True])
    tally.update(zeros + 1.0, active, tagged_by, both, counted)  # game 1's episode began before the tally
    assert tally.sums[0].item() == 1.0 and tally.sums[1].item() == 1.0
    tally.update(zeros + 2.0, active, tagged_by, both, counted)  # both games' episodes now began after an end
    assert tally.sums[0].item() == 3.0 and tally.sums[1].item() == 1.0 + 2 * 2.0


@pytest.mark.parametrize("kwarg", ["autoreset_mode=same_step", "copy=True", "device=cpu", "num_envs=3"])
def test_env_options_the_training_loop_fixes_are_refused(kwarg, capsys):
    with pytest.raises(SystemExit):
        example.parse_args([f"--env-kwarg={kwarg}"])
    assert "--env-kwarg cannot set" in capsys.readouterr().err


def test_a_time_budget_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        example.parse_args(["--time-budget-s", "0"])
    assert "--time-budget-s must be > 0" in capsys.readouterr().err
