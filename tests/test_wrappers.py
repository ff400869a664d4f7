"""TorchEpisodeStatistics in the three autoreset modes, and which Gymnasium vector wrappers work on the torch env.

The episode statistics are checked on Tag games that end at known steps (no tag is possible, the time limit
is 5 steps) and whose rewards vary from step to step (step rewards and edge penalties), against sums
of the rewards the env returned over the steps that each mode counts.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import vector as gym_vector

import gpu_vecenv  # noqa: F401  (registers the envs)
from gpu_vecenv.wrappers import TorchEpisodeStatistics

# One tagger and two runners a game; only the time limit ends a game, at step 5 of every episode.
TIMED_VARYING = dict(num_taggers=1, num_runners=2, num_other_agents_observed=2, grid_length=5.0, episode_length=5,
                     tagging_distance=0.0, step_penalty_for_tagger=-0.25, step_reward_for_runner=0.5,
                     edge_hit_penalty=-1.0)  # fmt: skip
GAMES, AGENTS, LENGTH = 2, 3, 5


def make_tag(device, mode, **wrapper_kwargs):
    envs = gym.make_vec("WarpTag-v0", num_envs=GAMES, device=device, autoreset_mode=mode, **TIMED_VARYING)
    return TorchEpisodeStatistics(envs, **wrapper_kwargs)


def run_desynchronised(envs, steps, seed=0):
    """Reset, step once, reset game 1 again (so game 1 ends one step after game 0), then step ``steps`` times.

    Returns the rewards ``(steps + 1, num_envs)`` and, per step, the ``(episode, _episode)`` infos.
    """
    rng = np.random.default_rng(seed)
    envs.reset(seed=seed)
    actions = [torch.as_tensor(rng.integers(0, 21, (envs.num_envs, 2)), device=envs.device) for _ in range(steps + 1)]
    _, first_rewards, _, _, _ = envs.step(actions[0])
    envs.reset(options={"reset_mask": torch.tensor([False, True])})
    rewards, reports = [first_rewards], []
    for t in range(1, steps + 1):
        _, r, _, _, infos = envs.step(actions[t])
        rewards.append(r)
        reports.append((infos["episode"], infos["_episode"]))
    return torch.stack(rewards).double(), reports


def reported(reports):
    """``{(step, game): (returns of the game's agents, lengths)}`` of every reported episode (steps from 1)."""
    found = {}
    for t, (stats, mask) in enumerate(reports, start=1):
        for slot in torch.nonzero(mask).flatten().tolist():
            game = slot // AGENTS
            r, length = found.setdefault((t, game), ([], []))
            r.append(float(stats["r"][slot]))
            length.append(int(stats["l"][slot]))
    return found


def expected_return(rewards, game, steps):
    """The hand computation: the sum of each agent's rewards over the episode's steps (1-based step indices)."""
    slots = slice(game * AGENTS, (game + 1) * AGENTS)
    return rewards[list(steps), slots].sum(dim=0).tolist()


# Steps (1-based, after the masked reset of game 1 following step 0) at which each mode ends episodes,
# and the steps each episode counts. Game 0 started at step 0, game 1 restarts after step 0.
EPISODES = {
    # Every step counts; episodes end at 5, 10, 15 (game 0) and 6, 11, 16 (game 1).
    AutoresetMode.SAME_STEP: {
        (4, 0): range(0, 5), (9, 0): range(5, 10), (14, 0): range(10, 15),
        (5, 1): range(1, 6), (10, 1): range(6, 11), (15, 1): range(11, 16),
    },
    # The step after an end resets the game and counts towards no episode.
    AutoresetMode.NEXT_STEP: {
        (4, 0): range(0, 5), (10, 0): range(6, 11),
        (5, 1): range(1, 6), (11, 1): range(7, 12),
    },
    # A finished game stays frozen: one episode each.
    AutoresetMode.DISABLED: {(4, 0): range(0, 5), (5, 1): range(1, 6)},
}  # fmt: skip


@pytest.mark.parametrize("mode", list(EPISODES), ids=lambda m: m.value)
def test_episode_returns_and_lengths_match_a_hand_computation(device, mode):
    envs = make_tag(device, mode)
    rewards, reports = run_desynchronised(envs, steps=15)
    found = reported(reports)
    assert sorted(found) == sorted(EPISODES[mode])
    for (t, game), steps in EPISODES[mode].items():
        returns, lengths = found[(t, game)]
        assert lengths == [LENGTH] * AGENTS
        assert returns == pytest.approx(expected_return(rewards, game, steps), abs=1e-9)
    # The rewards do vary within an episode, so the sums check which steps were counted.
    assert len({round(x, 3) for x in rewards.flatten().tolist()}) > 2
    # Entries of slots that did not finish are zero.
    stats, mask = reports[0]
    assert not bool(mask.any()) and float(stats["r"].abs().sum()) == 0.0 and int(stats["l"].sum()) == 0
    assert int(envs.episode_count) == len(EPISODES[mode]) * AGENTS


def test_disabled_mode_restarts_the_statistics_of_masked_slots_only(device):
    envs = make_tag(device, AutoresetMode.DISABLED)
    rewards, reports = run_desynchronised(envs, steps=6)  # both games have ended and are frozen
    envs.reset(options={"reset_mask": np.array([True, False])})  # a (num_games,) numpy mask
    more = []
    for _ in range(5):
        _, r, _, _, infos = envs.step(torch.zeros((GAMES * AGENTS, 2), dtype=torch.int64, device=device))
        more.append(r.double())
        assert not bool(infos["_episode"][AGENTS:].any()), "game 1 is still frozen"
    assert bool(infos["_episode"][:AGENTS].all())
    assert infos["episode"]["l"][:AGENTS].tolist() == [LENGTH] * AGENTS
    assert infos["episode"]["r"][:AGENTS].tolist() == pytest.approx(torch.stack(more)[:, :AGENTS].sum(0).tolist())


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.value)
def test_agrees_with_gymnasiums_record_episode_statistics_on_numpy(mode):
    pytest.importorskip("array_api_compat")
    ours = make_tag("cpu", mode)
    numpy_env = gym_vector.ArrayConversion(
        gym.make_vec("WarpTag-v0", num_envs=GAMES, device="cpu", autoreset_mode=mode, **TIMED_VARYING),
        env_xp=torch,
        target_xp=np,
    )
    theirs = gym_vector.RecordEpisodeStatistics(numpy_env)
    rng = np.random.default_rng(3)
    ours.reset(seed=3)
    theirs.reset(seed=3)
    for _ in range(2 * LENGTH + 3):
        actions = rng.integers(0, 21, (GAMES * AGENTS, 2))
        *_, our_infos = ours.step(torch.as_tensor(actions))
        *_, their_infos = theirs.step(actions)
        np.testing.assert_array_equal(our_infos["_episode"].numpy(), their_infos.get("_episode", False))
        if "episode" in their_infos:
            np.testing.assert_array_equal(our_infos["episode"]["r"].numpy(), their_infos["episode"]["r"])
            np.testing.assert_array_equal(our_infos["episode"]["l"].numpy(), their_infos["episode"]["l"])
    assert int(ours.episode_count) == theirs.episode_count > 0


def test_ring_buffer_keeps_the_latest_episodes_in_slot_order(device):
    envs = make_tag(device, AutoresetMode.SAME_STEP, buffer_length=4)
    mean_return, mean_length = envs.recent_means()
    assert math.isnan(float(mean_return)) and math.isnan(float(mean_length))
    assert envs.recent_returns().numel() == 0
    rewards, reports = run_desynchronised(envs, steps=10)
    found = reported(reports)
    # Finished in this order: game 0 at step 4, game 1 at 5, game 0 at 9, game 1 at 10; three agents each.
    order = [found[key][0] for key in sorted(found)]
    all_returns = [r for returns in order for r in returns]
    assert envs.recent_returns().tolist() == pytest.approx(all_returns[-4:])
    assert envs.recent_lengths().tolist() == [LENGTH] * 4
    mean_return, mean_length = envs.recent_means()
    assert float(mean_return) == pytest.approx(np.mean(all_returns[-4:]))
    assert float(mean_length) == LENGTH
    assert int(envs.episode_count) == 12


def test_more_finished_episodes_than_the_buffer_holds_in_one_step(device):
    envs = make_tag(device, AutoresetMode.SAME_STEP, buffer_length=2)
    envs.reset(seed=1)
    for _ in range(LENGTH):
        _, _, _, _, infos = envs.step(torch.ones((GAMES * AGENTS, 2), dtype=torch.int64, device=device))
    assert bool(infos["_episode"].all())  # six slots finished at once
    assert envs.recent_returns().tolist() == infos["episode"]["r"][-2:].tolist()
    assert int(envs.episode_count) == GAMES * AGENTS


def test_reset_restarts_every_slot_and_bad_input_is_refused():
    envs = make_tag("cpu", AutoresetMode.SAME_STEP)
    envs.reset(seed=0)
    envs.step(torch.ones((GAMES * AGENTS, 2), dtype=torch.int64))
    assert bool((envs.episode_lengths == 1).all())
    envs.reset()
    assert int(envs.episode_lengths.sum()) == 0 and float(envs.episode_returns.abs().sum()) == 0.0
    with pytest.raises(ValueError, match="buffer_length must be an integer >= 1"):
        TorchEpisodeStatistics(envs.env, buffer_length=0)
    with pytest.raises(ValueError, match="already have the key 'episode'"):
        twice = TorchEpisodeStatistics(envs)
        twice.reset(seed=0)
        twice.step(torch.ones((GAMES * AGENTS, 2), dtype=torch.int64))


@pytest.mark.gpu
def test_no_step_synchronises_the_device():
    envs = TorchEpisodeStatistics(
        gym.make_vec("WarpCartPole-v1", num_envs=64, device="cuda", autoreset_mode="next_step"), buffer_length=8
    )
    envs.reset(seed=0)
    envs.step(torch.ones(64, dtype=torch.int64, device="cuda"))  # first launch outside the check
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(40):
            actions = torch.randint(0, 2, (64,), device="cuda")
            _, _, _, _, infos = envs.step(actions)
        mean_return, _ = envs.recent_means()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert infos["episode"]["r"].device.type == "cuda"
    assert float(mean_return) > 0


# -- Gymnasium's own vector wrappers on the torch env (see docs/training.md) ----------------------------------


def cartpole(mode="next_step", games=4):
    return gym.make_vec("WarpCartPole-v1", num_envs=games, device="cpu", autoreset_mode=mode)


def test_transform_wrappers_keep_torch_tensors_on_the_device():
    envs = gym_vector.TransformReward(cartpole(), lambda r: 2.0 * r)
    envs = gym_vector.TransformAction(envs, lambda a: 1 - a, envs.action_space)
    envs = gym_vector.TransformObservation(envs, lambda o: o.clamp(-1.0, 1.0), envs.observation_space)
    obs, _ = envs.reset(seed=0)
    obs, rewards, terminated, truncated, _ = envs.step(torch.zeros(4, dtype=torch.int64))
    assert all(isinstance(x, torch.Tensor) for x in (obs, rewards, terminated, truncated))
    assert rewards.tolist() == [2.0] * 4
    assert float(obs.abs().max()) <= 1.0


def test_slot_by_slot_wrappers_go_through_numpy():
    obs, _ = gym_vector.DtypeObservation(cartpole(), np.float64).reset(seed=0)
    assert isinstance(obs, np.ndarray)  # no longer a tensor on the env's device
    with pytest.raises(TypeError):
        gym_vector.FlattenObservation(cartpole()).reset(seed=0)


def test_gymnasium_observation_wrappers_refuse_same_step_mode():
    with pytest.raises(ValueError, match="autoreset_mode"):
        gym_vector.TransformObservation(cartpole("same_step"), lambda o: o, cartpole().observation_space)


def test_numpy_only_wrappers_need_array_conversion_first():
    pytest.importorskip("array_api_compat")
    with pytest.raises(TypeError):  # numpy statistics over torch tensors
        stats = gym_vector.RecordEpisodeStatistics(cartpole())
        stats.reset(seed=0)
        stats.step(torch.zeros(4, dtype=torch.int64))
    envs = gym_vector.ArrayConversion(cartpole(), env_xp=torch, target_xp=np)
    stats = gym_vector.RecordEpisodeStatistics(envs)
    envs = gym_vector.NormalizeObservation(stats)
    obs, _ = envs.reset(seed=0)
    for _ in range(12):
        obs, rewards, terminated, truncated, infos = envs.step(np.zeros(4, np.int64))
    assert isinstance(obs, np.ndarray) and obs.dtype == np.float32 and isinstance(rewards, np.ndarray)
    assert stats.episode_count >= 4  # always pushing left ends every episode within 12 steps
