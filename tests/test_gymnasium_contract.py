"""WarpTag-v0 follows Gymnasium 1.x's VectorEnv contract: spaces, autoreset modes, infos, registration, seeding.

The autoreset tests follow the logic of Gymnasium's own autoreset-mode and
partial-reset tests, applied to games that end at known steps.
"""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import SMALL_TAG
from gymnasium.vector import AutoresetMode

import gpu_vecenv
from envs.tag_continuous.config import TagConfig

# Games end only by the time limit, at step 5, so every flag is predictable.
TIMED = dict(SMALL_TAG, episode_length=5, tagging_distance=0.0)


def make(num_games=3, **kwargs):
    return gym.make_vec("WarpTag-v0", num_envs=num_games, device="cpu", **dict(TIMED, **kwargs))


def noop(envs):
    return np.zeros((envs.num_envs, 2), np.int64)


# -- spaces and shapes ------------------------------------------------------------------------------------------


def test_spaces_shapes_dtypes_and_slot_layout():
    envs = make(num_games=4)
    n = 7  # 2 taggers + 5 runners
    assert (envs.num_games, envs.num_agents, envs.num_envs) == (4, n, 4 * n)
    assert envs.single_observation_space.shape == (7 * 3 + 2,)
    assert envs.observation_space.shape == (4 * n, 7 * 3 + 2)
    assert isinstance(envs.single_action_space, gym.spaces.MultiDiscrete)
    assert envs.single_action_space.nvec.tolist() == [21, 21]
    assert envs.action_space.shape == (4 * n, 2)
    assert isinstance(envs.metadata["autoreset_mode"], AutoresetMode)

    obs, info = envs.reset(seed=0)
    assert obs.dtype == torch.float32 and obs.shape == (4 * n, 23)
    assert envs.observation_space.contains(obs.numpy())
    obs, rewards, terminated, truncated, info = envs.step(envs.action_space.sample())
    assert rewards.dtype == torch.float32 and rewards.shape == (4 * n,)
    assert terminated.dtype == torch.bool and truncated.dtype == torch.bool
    assert info["active"].dtype == torch.bool and bool(info["_active"].all())
    # Slot g * N + a is agent a of game g; the last observation entry is the agent's own type.
    per_game = envs.per_game(obs)
    assert per_game.shape == (4, n, 23) and per_game.data_ptr() == obs.data_ptr()
    assert torch.equal(per_game[:, :2, -1], torch.ones(4, 2)) and torch.equal(per_game[:, 2:, -1], torch.zeros(4, 5))
    assert envs.roles["tagger"].tolist() == [0, 1] and envs.roles["runner"].tolist() == [2, 3, 4, 5, 6]


def test_actions_may_be_given_per_game_and_agent():
    a, b = make(), make()
    a.reset(seed=1)
    b.reset(seed=1)
    actions = np.random.default_rng(0).integers(0, 21, size=(3, 7, 2))
    assert torch.equal(a.step(actions)[0], b.step(actions.reshape(21, 2))[0])


def test_a_runner_that_left_keeps_its_slot_inactive_with_zero_reward():
    envs = make(num_games=2, tagging_distance=1.0, episode_length=50, num_runners=5)
    envs.reset(seed=0)
    _, rewards, terminated, _, info = envs.step(noop(envs))  # every runner is tagged at once
    assert torch.all(info["active"])  # they were in the game during this step
    assert torch.all(envs.per_game(rewards)[:, 2:] == -10.0)
    assert torch.all(terminated)  # no runner left: the games are over


def test_inactive_slots_until_the_game_ends():
    # One runner starts on top of the tagger and is tagged at step 1; the others stay far away.
    positions = np.array([[0.1, 0.1], [4.9, 4.9], [0.1, 0.1], [2.5, 4.9], [4.9, 0.1], [2.5, 0.1], [0.1, 4.9]])
    envs = make(num_games=1, episode_length=6, tagging_distance=0.05, min_acceleration=0.0, max_acceleration=0.0)
    envs.reset(seed=0, options={"initial_positions": positions})
    _, r, _, _, info = envs.step(noop(envs))
    assert r[2] == -10.0 and bool(info["active"][2])
    for _ in range(4):
        _, r, term, _, info = envs.step(np.random.default_rng(0).integers(0, 21, size=(7, 2)))
        assert not bool(info["active"][2]) and r[2] == 0.0 and not bool(term.any())
    _, r, term, _, _ = envs.step(noop(envs))
    assert bool(term.all()) and r[2] == 0.0 and torch.all(r[3:] == 1.0)  # survivors get the end bonus


# -- autoreset modes --------------------------------------------------------------------------------------------


def rollout(mode, steps=12, seed=5, **kwargs):
    envs = make(autoreset_mode=mode, **kwargs)
    first, _ = envs.reset(seed=seed)
    out = [envs.step(a) for a in np.random.default_rng(3).integers(0, 21, size=(steps, envs.num_envs, 2))]
    return envs, first, out


def test_next_step_resets_on_the_step_after_the_end():
    envs, first, out = rollout("NextStep")
    for i, (obs, rew, term, trunc, _) in enumerate(out, start=1):
        assert not bool(trunc.any())
        assert bool(term.all()) == (i % 6 == 5)  # steps 5 and 11 end the games
        if i % 6 == 0:  # the step after: reset observation, reward 0, flags False
            assert torch.all(rew == 0) and not bool(term.any())
            assert torch.all(envs.per_game(obs)[:, :, 21] == 0)  # time feature back to t = 0
    assert "final_obs" not in out[4][4]


def test_same_step_resets_at_once_and_reports_the_final_observation():
    _, _, nxt = rollout("NextStep", steps=13)
    envs, _, same = rollout("SameStep", steps=13)
    obs, rew, term, trunc, info = same[4]  # step 5: the games end
    assert bool(term.all())
    assert bool(info["_final_obs"].all()) and bool(info["_final_info"].all())
    torch.testing.assert_close(info["final_obs"], nxt[4][0])
    torch.testing.assert_close(rew, nxt[4][1])
    torch.testing.assert_close(obs, nxt[5][0])  # the new first observation
    assert torch.equal(info["final_info"]["active"], info["active"])
    obs6, _, term6, _, info6 = same[5]
    assert not bool(term6.any()) and not bool(info6["_final_obs"].any())
    assert torch.all(info6["final_obs"] == 0)


def test_disabled_freezes_finished_games_until_a_masked_reset():
    envs = make(autoreset_mode="Disabled")
    envs.reset(seed=5)
    for _ in range(5):
        obs, _, term, _, _ = envs.step(noop(envs))
    assert bool(term.all())
    frozen_x = envs.state["x"].clone()
    obs2, rew2, term2, _, _ = envs.step(np.ones((envs.num_envs, 2), np.int64))
    assert torch.equal(envs.state["x"], frozen_x) and torch.all(rew2 == 0) and bool(term2.all())
    torch.testing.assert_close(obs2, obs)
    # Reset game 1 only: it starts over, the others stay finished.
    mask = torch.tensor([False, True, False])
    obs3, _ = envs.reset(options={"reset_mask": mask})
    assert torch.equal(envs.state["t"], torch.tensor([5, 0, 5]))
    torch.testing.assert_close(envs.per_game(obs3)[0], envs.per_game(obs)[0])
    _, _, term4, _, _ = envs.step(noop(envs))
    assert envs.per_game(term4)[:, 0].tolist() == [True, False, True]


def test_a_slot_mask_must_be_equal_within_a_game():
    envs = make(autoreset_mode="Disabled")
    envs.reset(seed=0)
    slot_mask = np.zeros(envs.num_envs, bool)
    slot_mask[7:14] = True
    envs.reset(options={"reset_mask": slot_mask})
    slot_mask[7] = False
    with pytest.raises(ValueError, match="equal for all agents of a game"):
        envs.reset(options={"reset_mask": slot_mask})


@pytest.mark.parametrize("value", ["next_step", "NextStep", "SAME_STEP", "disabled", AutoresetMode.SAME_STEP])
def test_autoreset_mode_strings_are_accepted(value):
    envs = make(autoreset_mode=value)
    assert isinstance(envs.metadata["autoreset_mode"], AutoresetMode)


def test_max_episode_steps_truncates():
    envs = make(episode_length=50, max_episode_steps=3)
    envs.reset(seed=0)
    flags = [envs.step(noop(envs))[2:4] for _ in range(4)]
    assert [bool(tr.all()) for _, tr in flags] == [False, False, True, False]
    assert not any(bool(te.any()) for te, _ in flags)


# -- copy semantics, zero-copy, lifecycle -----------------------------------------------------------------------


def test_copy_true_outputs_never_change_and_copy_false_reuses_its_buffers():
    envs = make()
    envs.reset(seed=0)
    first = envs.step(noop(envs))
    kept = [t.clone() for t in first[:4]]
    for _ in range(3):
        envs.step(np.ones((envs.num_envs, 2), np.int64))
    for t, k in zip(first[:4], kept, strict=True):
        assert torch.equal(t, k)

    views = make(copy=False)
    obs0, _ = views.reset(seed=0)
    before = obs0.clone()
    obs1 = views.step(np.ones((views.num_envs, 2), np.int64))[0]
    assert obs1.data_ptr() == obs0.data_ptr() and not torch.equal(obs0, before)


def test_outputs_export_through_dlpack_without_a_copy():
    obs, _ = make(copy=False).reset(seed=0)
    shared = torch.from_dlpack(obs)
    assert shared.data_ptr() == obs.data_ptr() and torch.equal(shared, obs)


def test_close_frees_the_env_and_later_calls_say_so():
    envs = make()
    envs.reset(seed=0)
    envs.close()
    envs.close()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        envs.step(noop(envs))
    with pytest.raises(RuntimeError, match="closed"):
        envs.reset()


def test_step_before_reset():
    with pytest.raises(gym.error.ResetNeeded, match="call reset"):
        make().step(np.zeros((21, 2), np.int64))


def test_render_modes():
    assert make(render_mode="rgb_array").render_mode == "rgb_array"
    assert make().render() is None
    with pytest.raises(ValueError, match="render_mode must be None or 'rgb_array'"):
        make(render_mode="human")


# -- registration -----------------------------------------------------------------------------------------------


def test_registration_uses_a_string_vector_entry_point():
    spec = gym.spec("WarpTag-v0")
    assert spec.vector_entry_point == "envs.tag_continuous.env:make_warp_tag"


def test_make_vec_without_a_prior_import():
    code = "import gymnasium as gym; print(gym.make_vec('gpu_vecenv:WarpTag-v0', num_envs=2, device='cpu').num_envs)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-1] == "220"


def test_every_tag_parameter_is_a_make_vec_keyword_and_the_spec_rebuilds_the_env():
    params = {k: v for k, v in TagConfig().as_dict().items() if k != "tagger_ids"}
    params.update(TIMED, tagger_ids=[0, 3], observe_own_type=False)
    envs = gym.make_vec("WarpTag-v0", num_envs=3, device="cpu", max_episode_steps=4, **params)
    assert envs.unwrapped.roles["tagger"].tolist() == [0, 3]
    again = gym.make_vec(envs.spec)
    assert (again.num_games, again.num_agents, again.max_episode_steps) == (3, 7, 4)
    assert torch.equal(envs.reset(seed=9)[0], again.reset(seed=9)[0])


def test_users_register_their_own_variants():
    gpu_vecenv.register("TinyTag-v0", vector_entry_point="envs.tag_continuous.env:make_warp_tag",
                        max_episode_steps=7, **TIMED)  # fmt: skip
    envs = gym.make_vec("TinyTag-v0", num_envs=2, device="cpu")
    assert envs.num_envs == 14 and envs.max_episode_steps == 7


# -- seeding ----------------------------------------------------------------------------------------------------


def test_game_g_of_seed_s_is_game_0_of_seed_s_plus_g_for_any_number_of_games():
    big = make(num_games=5)
    big.reset(seed=100)
    for g in (0, 3, 4):
        one = make(num_games=1)
        one.reset(seed=100 + g)
        for key in ("x", "y", "direction"):
            assert torch.equal(big.state[key][g], one.state[key][0])


def test_seed_lists_per_game_or_per_slot():
    a, b = make(), make()
    a.reset(seed=[7, 8, 9])
    b.reset(seed=7)
    assert torch.equal(a.state["x"], b.state["x"])
    b.reset(seed=[s for s in (7, 8, 9) for _ in range(7)])
    assert torch.equal(a.state["x"], b.state["x"])


def test_same_seed_same_actions_same_trajectory_and_new_states_after_each_autoreset():
    _, first_a, out_a = rollout("NextStep", steps=13)
    _, first_b, out_b = rollout("NextStep", steps=13)
    assert torch.equal(first_a, first_b)
    for x, y in zip(out_a, out_b, strict=True):
        for p, q in zip(x[:4], y[:4], strict=True):
            assert torch.equal(p, q)
    assert not torch.equal(out_a[5][0], first_a)  # the autoreset drew a new initial state
    assert not torch.equal(out_a[11][0], out_a[5][0])


def test_seed_none_draws_fresh_entropy():
    a, b = make(), make()
    assert not torch.equal(a.reset()[0], b.reset()[0])


def test_reset_options_fix_every_game_and_hold_for_autoresets():
    positions = np.full((7, 2), np.nan)
    positions[0] = (1.0, 2.0)
    directions = np.full(7, np.nan)
    directions[1] = np.pi
    envs = make(autoreset_mode="SameStep")
    envs.reset(seed=3, options={"initial_positions": positions, "initial_directions": directions})
    for _ in range(5):  # the games end and reset within the fifth step
        envs.step(noop(envs))
    assert torch.all(envs.state["x"][:, 0] == 1.0) and torch.all(envs.state["y"][:, 0] == 2.0)
    assert torch.all(envs.state["direction"][:, 1] == np.float32(np.pi))
    assert len(set(envs.state["x"][:, 2].tolist())) == 3  # the other agents stay random
    envs.reset(seed=3)  # a reset without the options frees them again
    assert not torch.all(envs.state["x"][:, 0] == 1.0)
