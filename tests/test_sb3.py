"""SB3VecEnv against Stable-Baselines3's VecEnv contract, SB3's own wrappers and algorithms, and the SB3 example."""

from __future__ import annotations

import copy
import json
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")

from cartpole_helpers import balancing_policy  # noqa: E402
from conftest import SMALL_TAG  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import VecEnv, VecMonitor, VecNormalize  # noqa: E402

import gpu_vecenv  # noqa: E402, F401  (registers the envs)
from gpu_vecenv.sb3 import SB3VecEnv  # noqa: E402
from gpu_vecenv.wrappers import TorchEpisodeStatistics  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TAG_AGENTS = SMALL_TAG["num_taggers"] + SMALL_TAG["num_runners"]  # 7 slots a game


def cartpole(games=4, **kwargs):
    return SB3VecEnv.make("WarpCartPole-v1", games, device="cpu", **kwargs)


def tag(games=2, **kwargs):
    return SB3VecEnv.make("WarpTag-v0", games, device="cpu", **{**SMALL_TAG, **kwargs})


def random_actions(venv, rng):
    nvec = getattr(venv.action_space, "nvec", None)
    if nvec is None:
        return rng.integers(0, venv.action_space.n, venv.num_envs)
    return rng.integers(0, nvec, (venv.num_envs, len(nvec)))


# -- the VecEnv contract -------------------------------------------------------------------------------------


def test_spaces_shapes_and_dtypes_are_what_sb3_expects():
    venv = tag(games=2)
    envs = venv.env
    assert isinstance(venv, VecEnv)
    assert venv.num_envs == 2 * TAG_AGENTS
    assert venv.observation_space == envs.single_observation_space
    assert venv.action_space == envs.single_action_space
    assert venv.render_mode is None
    obs = venv.reset()
    assert obs.shape == (venv.num_envs, *venv.observation_space.shape) and obs.dtype == np.float32
    assert all(venv.observation_space.contains(o) for o in obs)
    actions = np.stack([venv.action_space.sample() for _ in range(venv.num_envs)])
    obs, rewards, dones, infos = venv.step(actions)
    assert obs.shape == (venv.num_envs, *venv.observation_space.shape) and obs.dtype == np.float32
    assert rewards.shape == (venv.num_envs,) and rewards.dtype == np.float32
    assert dones.shape == (venv.num_envs,) and dones.dtype == np.bool_
    assert isinstance(infos, list) and len(infos) == venv.num_envs
    assert all(isinstance(info, dict) for info in infos)
    with pytest.raises(RuntimeError, match="without a step_async"):
        venv.step_wait()


def test_returned_arrays_are_never_overwritten_by_later_steps():
    venv = cartpole(games=3)  # made with copy=False: the env hands out its own buffers
    first = venv.reset()
    kept_first = first.copy()
    obs, rewards, dones, _ = venv.step(np.ones(3, np.int64))
    kept = obs.copy(), rewards.copy(), dones.copy()
    venv.step(np.zeros(3, np.int64))
    np.testing.assert_array_equal(first, kept_first)
    for array, copy_ in zip((obs, rewards, dones), kept, strict=True):
        np.testing.assert_array_equal(array, copy_)


def test_reset_on_done_gives_the_true_last_observation_and_the_next_first_one():
    # A NEXT_STEP twin with the same seeds and actions shows the last observation at the ending step, and the
    # first observation of the next episode one step later.
    games = 6
    venv = cartpole(games)
    venv.seed(11)
    twin = gym.make_vec("WarpCartPole-v1", num_envs=games, device="cpu", autoreset_mode="next_step")
    obs = venv.reset()
    twin_obs, _ = twin.reset(seed=11)
    np.testing.assert_array_equal(obs, twin_obs.numpy())
    rng = np.random.default_rng(0)
    dones = np.zeros(games, bool)
    while not dones.any():
        actions = rng.integers(0, 2, games)
        obs, rewards, dones, infos = venv.step(actions)
        twin_obs, _, twin_terminated, _, _ = twin.step(torch.as_tensor(actions))
        np.testing.assert_array_equal(obs[~dones], twin_obs.numpy()[~dones])
    for i in np.flatnonzero(dones):
        np.testing.assert_array_equal(infos[i]["terminal_observation"], twin_obs.numpy()[i])
        assert bool(twin_terminated[i]) and infos[i]["TimeLimit.truncated"] is False
    for i in np.flatnonzero(~dones):
        assert infos[i] == {}
    twin_obs, *_ = twin.step(torch.zeros(games, dtype=torch.int64))  # the twin's reset step
    np.testing.assert_array_equal(obs[dones], twin_obs.numpy()[dones])


def test_cartpole_truncation_at_500_steps_is_reported_as_timelimit_truncated():
    venv = cartpole(games=3)
    venv.seed(0)
    obs = venv.reset()
    for t in range(1, 501):
        obs, rewards, dones, infos = venv.step(balancing_policy(obs))
        assert dones.all() == (t == 500), f"step {t}"
    for info in infos:
        assert info["TimeLimit.truncated"] is True
        assert info["episode"]["r"] == 500.0 and info["episode"]["l"] == 500
        assert abs(info["terminal_observation"][2]) < 0.2095  # the pole is still up: truncated, not terminated
    assert np.abs(obs).max() <= 0.05  # the new episodes' first observations


def test_episode_info_matches_a_manual_sum_of_rewards_for_every_agent():
    venv = tag(games=3)
    venv.seed(2)
    venv.reset()
    rng = np.random.default_rng(2)
    manual_returns, manual_lengths = np.zeros(venv.num_envs), np.zeros(venv.num_envs, int)
    checked = 0
    for _ in range(2 * SMALL_TAG["episode_length"] + 2):
        _, rewards, dones, infos = venv.step(random_actions(venv, rng))
        manual_returns += rewards
        manual_lengths += 1
        for i in np.flatnonzero(dones):
            episode = infos[i]["episode"]
            assert episode["r"] == pytest.approx(manual_returns[i], abs=1e-5)
            assert episode["l"] == manual_lengths[i]
            assert isinstance(episode["t"], float) and episode["t"] >= 0.0
            checked += 1
        manual_returns[dones], manual_lengths[dones] = 0.0, 0
    assert checked >= 2 * venv.num_envs
    assert len({round(float(r), 3) for r in manual_returns}) > 1  # the rewards differ between agents


def test_a_masked_reset_starts_new_episodes_only_in_the_games_it_resets():
    venv = cartpole(games=2)
    venv.reset()
    for _ in range(3):
        venv.step(np.zeros(2, np.int64))
    venv.set_options({"reset_mask": np.array([True, False])})
    venv.reset()
    steps = 3
    while True:
        _, _, dones, infos = venv.step(np.zeros(2, np.int64))  # pushed left until the pole falls
        steps += 1
        if dones[1]:
            break
        assert not dones[0]  # game 0 was reset 3 steps later: it cannot fall first
    assert infos[1]["episode"]["l"] == steps  # counted from the first reset, through the masked one


def test_infos_of_unfinished_slots_are_a_shared_read_only_empty_dict():
    venv = cartpole(games=2)
    venv.reset()
    _, _, dones, infos = venv.step(np.ones(2, np.int64))
    assert not dones.any() and infos[0] == {} and infos[0] is infos[1]
    with pytest.raises(TypeError, match=r"dict\(info\)"):
        infos[0]["mine"] = 1
    mine = dict(infos[0])
    mine["mine"] = 1
    assert infos[1] == {}
    assert copy.deepcopy(infos) == [{}, {}] and pickle.loads(pickle.dumps(infos)) == [{}, {}]


# -- seeds, options, attributes ------------------------------------------------------------------------------


def test_seed_gives_each_game_its_seed_and_is_used_by_the_next_reset_only():
    venv = tag(games=2)
    assert venv.seed(7) == [7] * TAG_AGENTS + [8] * TAG_AGENTS
    obs = venv.reset()
    reference = gym.make_vec("WarpTag-v0", num_envs=2, device="cpu", **SMALL_TAG)
    reference_obs, _ = reference.reset(seed=7)
    np.testing.assert_array_equal(obs, reference_obs.numpy())
    assert not np.array_equal(venv.reset(), obs)  # unseeded: each game's stream goes on


def test_options_are_shared_by_all_games():
    venv = tag(games=2)
    positions = np.full((TAG_AGENTS, 2), 1.5, np.float32)
    venv.set_options({"initial_positions": positions})
    venv.reset()
    assert float(venv.env.state["x"].min()) == float(venv.env.state["x"].max()) == 1.5
    venv.set_options([{"initial_positions": positions}] + [{}] * (venv.num_envs - 1))
    with pytest.raises(ValueError, match="one options dict for all games"):
        venv.reset()


def test_attributes_and_methods_are_those_of_the_one_shared_env():
    venv = tag(games=2)
    assert venv.get_attr("num_games") == [2] * venv.num_envs
    assert venv.get_attr("num_agents", indices=[0, 3]) == [TAG_AGENTS, TAG_AGENTS]
    assert venv.has_attr("per_game") and not venv.has_attr("no_such_attribute")
    with pytest.raises(AttributeError, match="no_such_attribute"):
        venv.get_attr("no_such_attribute")
    venv.set_attr("strict", True)
    assert venv.env.strict is True
    with pytest.raises(ValueError, match="share one env"):
        venv.set_attr("strict", False, indices=[0])
    with pytest.raises(IndexError, match="slot indices"):
        venv.get_attr("num_games", indices=[venv.num_envs])
    per_game = venv.env.memory_per_game()
    assert venv.env_method("memory_per_game", indices=[1, 2]) == [per_game, per_game]
    # As DummyVecEnv's list of envs: negative indices count from the end, and no index calls nothing.
    assert venv.get_attr("num_games", indices=[-1, 0]) == [2, 2]
    with pytest.raises(IndexError, match="slot indices"):
        venv.get_attr("num_games", indices=[-venv.num_envs - 1])
    calls = []
    venv.env.record_call = lambda: calls.append(1)
    assert venv.env_method("record_call", indices=[]) == [] and calls == []
    assert venv.env_is_wrapped(Monitor) == [True] * venv.num_envs
    assert venv.env_is_wrapped(TorchEpisodeStatistics) == [False] * venv.num_envs


def test_wraps_gymnasium_wrappers_of_the_env():
    inner = gym.make_vec("WarpCartPole-v1", num_envs=3, device="cpu", autoreset_mode="same_step")
    venv = SB3VecEnv(TorchEpisodeStatistics(inner, buffer_length=5))
    assert venv.env_is_wrapped(TorchEpisodeStatistics, indices=0) == [True]
    assert venv.get_attr("buffer_length", indices=0) == [5]
    assert venv.get_attr("num_games", indices=0) == [3]  # found on the env inside the wrapper
    venv.reset()
    venv.step(np.ones(3, np.int64))


def test_an_env_in_another_autoreset_mode_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match=r"SAME_STEP autoreset mode.*got NEXT_STEP.*autoreset_mode='same_step'"):
        SB3VecEnv(gym.make_vec("WarpCartPole-v1", num_envs=2, device="cpu"))
    with pytest.raises(
        ValueError, match=r"makes its env in the SAME_STEP autoreset mode.*got autoreset_mode='next_step'"
    ):
        cartpole(autoreset_mode="next_step")
    assert cartpole(games=1, autoreset_mode="same_step").num_envs == 1


def test_stepping_without_actions_is_a_clear_error():
    venv = cartpole(games=2)
    venv.reset()
    with pytest.raises(TypeError, match="needs the actions of all 2 slots, got None"):
        venv.step(None)
    with pytest.raises(TypeError, match="Gymnasium VectorEnv"):
        SB3VecEnv(gym.make("CartPole-v1"))


def test_get_images_are_the_frames_the_env_renders(monkeypatch):
    venv = cartpole(games=2)
    with pytest.warns(UserWarning, match="rgb_array"):
        assert venv.get_images() == [None, None]
    drawn = SB3VecEnv.make("WarpCartPole-v1", 2, device="cpu", render_mode="rgb_array")
    frames = np.zeros((2, 6, 8, 3), np.uint8)
    frames[1] = 255
    monkeypatch.setattr(drawn.env, "render", lambda: frames)
    images = drawn.get_images()
    assert len(images) == 2 and images[1].min() == 255
    assert drawn.render().shape == (12, 8, 3)  # SB3 tiles the frames


def test_importing_without_stable_baselines3_says_how_to_install_it():
    code = "import sys; sys.modules['stable_baselines3'] = None; import gpu_vecenv.sb3"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode != 0
    assert 'pip install "gpu_vecenv[sb3]"' in proc.stderr


# -- SB3's wrappers and algorithms -----------------------------------------------------------------------------


def test_vec_monitor_records_the_same_episodes():
    with pytest.warns(UserWarning, match="Monitor"):  # SB3 notes that the adapter already reports episodes
        venv = VecMonitor(tag(games=2))
    venv.seed(4)
    venv.reset()
    rng = np.random.default_rng(4)
    manual = np.zeros(venv.num_envs)
    for _ in range(SMALL_TAG["episode_length"] + 1):
        _, rewards, dones, infos = venv.step(random_actions(venv, rng))
        manual += rewards
        for i in np.flatnonzero(dones):
            assert infos[i]["episode"]["r"] == pytest.approx(manual[i], abs=1e-5)
            assert "terminal_observation" in infos[i]
        manual[dones] = 0.0
    assert venv.episode_count >= venv.num_envs


def test_vec_normalize_round_trip_with_save_and_load(tmp_path):
    venv = VecNormalize(cartpole(games=4), gamma=0.98)
    venv.seed(0)
    venv.reset()
    rng = np.random.default_rng(0)
    finished = 0
    for _ in range(60):
        obs, rewards, dones, infos = venv.step(rng.integers(0, 2, 4))
        for i in np.flatnonzero(dones):
            raw_last = venv.unnormalize_obs(infos[i]["terminal_observation"])
            np.testing.assert_allclose(venv.normalize_obs(raw_last), infos[i]["terminal_observation"], rtol=1e-5)
            finished += 1
    assert finished > 0 and np.abs(obs).max() <= venv.clip_obs
    path = tmp_path / "vecnormalize.pkl"
    venv.save(str(path))
    loaded = VecNormalize.load(str(path), cartpole(games=4))
    for name in ("mean", "var", "count"):
        np.testing.assert_array_equal(getattr(loaded.obs_rms, name), getattr(venv.obs_rms, name))
        np.testing.assert_array_equal(getattr(loaded.ret_rms, name), getattr(venv.ret_rms, name))
    raw = venv.get_original_obs()
    np.testing.assert_array_equal(loaded.normalize_obs(raw), venv.normalize_obs(raw))
    loaded.training = False
    assert loaded.reset().shape == (4, 4)
    model = PPO("MlpPolicy", loaded, n_steps=16, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(64)
    assert model.num_timesteps == 64


def test_evaluate_policy_reads_the_true_episode_returns():
    games = 4
    model = PPO("MlpPolicy", cartpole(games), n_steps=16, batch_size=64, seed=1, device="cpu")
    venv = cartpole(games)
    venv.seed(5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        returns, lengths = evaluate_policy(
            model, venv, n_eval_episodes=games, deterministic=True, return_episode_rewards=True
        )
    assert not [w for w in caught if "Monitor" in str(w.message)]
    # By hand: the first episode of each game, played by the same deterministic policy from the same seeds.
    manual = cartpole(games)
    manual.seed(5)
    obs = manual.reset()
    totals, first = np.zeros(games), {}
    while len(first) < games:
        obs, rewards, dones, _ = manual.step(model.predict(obs, deterministic=True)[0])
        totals += rewards
        for i in np.flatnonzero(dones):
            first.setdefault(i, totals[i])
        totals[dones] = 0.0
    assert sorted(returns) == sorted(first.values())
    assert lengths == [int(r) for r in returns]  # CartPole: one reward per step


def test_ppo_trains_one_shared_policy_over_all_agents_of_tag():
    venv = tag(games=2)
    model = PPO("MlpPolicy", venv, n_steps=8, batch_size=56, n_epochs=1, seed=0, device="cpu")
    model.learn(2 * 8 * venv.num_envs)
    assert model.num_timesteps == 2 * 8 * venv.num_envs
    actions, _ = model.predict(venv.reset())
    assert actions.shape == (venv.num_envs, 2)


def test_sb3_cartpole_example_smoke_run(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "sb3_cartpole.py"), "--smoke", "--compare-gymnasium",
         "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WarpCartPole-v1" in proc.stdout and "CartPole-v1" in proc.stdout
    curve = json.loads((tmp_path / "sb3_cartpole_curve.json").read_text())
    assert [run["env"] for run in curve["runs"]] == ["WarpCartPole-v1", "CartPole-v1"]
    for run in curve["runs"]:
        assert [row["env_steps"] for row in run["rows"]] == [256, 512]
        assert all(0 < row["mean_return"] < 500 for row in run["rows"])
    pytest.importorskip("matplotlib")
    assert (tmp_path / "sb3_cartpole_curve.png").stat().st_size > 0


@pytest.mark.gpu
def test_on_the_gpu_each_step_makes_one_copy_to_the_host():
    venv = SB3VecEnv.make("WarpCartPole-v1", 64, device="cuda")
    reference = cartpole(64)
    venv.seed(3)
    reference.seed(3)
    np.testing.assert_array_equal(venv.reset(), reference.reset())
    actions = np.random.default_rng(3).integers(0, 2, (20, 64))
    venv.step(actions[0])
    reference.step(actions[0])
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for a in actions[1:]:
                obs, rewards, dones, infos = venv.step(a)
                want = reference.step(a)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    # Only torch's per-call report counts; its once-per-process notice that the debug mode is a prototype
    # feature also says "synchronization", and appears in whichever test of the process sets the mode first.
    syncs = [w for w in caught if "called a synchronizing" in str(w.message)]
    # The actions' copy to the device and the outputs' copy to the host; nothing else waits for the GPU.
    assert len(syncs) <= 2 * (len(actions) - 1), [str(w.message) for w in syncs[:4]]
    # The GPU's fused multiply-adds may change the last float32 bit; the episodes end at the same steps.
    np.testing.assert_allclose(obs, want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(rewards, want[1])
    np.testing.assert_array_equal(dones, want[2])
