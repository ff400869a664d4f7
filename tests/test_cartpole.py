"""WarpCartPole-v1 steps exactly like Gymnasium's CartPole-v1 and agrees with its numpy reference."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from cartpole_helpers import balancing_policy, lockstep_with_gymnasium, read_states
from gymnasium import spaces
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.vector import AutoresetMode

import gpu_vecenv  # noqa: F401  (registers WarpCartPole-v1)
from envs.cartpole import reference, sim
from envs.cartpole.env import cartpole_definition, make_warp_cartpole
from gpu_vecenv.counter_rng import uniform01
from gpu_vecenv.oracle import compare_with_reference
from gpu_vecenv.vector_env import GpuVectorEnv

ENV_ID = "WarpCartPole-v1"


def test_physics_constants_are_gymnasiums():
    gym_env = CartPoleEnv()
    assert gym_env.kinematics_integrator == "euler"
    pairs = {
        "gravity": "GRAVITY",
        "masscart": "MASSCART",
        "masspole": "MASSPOLE",
        "total_mass": "TOTAL_MASS",
        "length": "LENGTH",
        "polemass_length": "POLEMASS_LENGTH",
        "force_mag": "FORCE_MAG",
        "tau": "TAU",
        "theta_threshold_radians": "THETA_THRESHOLD_RADIANS",
        "x_threshold": "X_THRESHOLD",
    }
    for attr, name in pairs.items():
        want = getattr(gym_env, attr)
        for module in (sim, reference):
            got = getattr(module, name)
            assert float(got) == want, f"{module.__name__}.{name} = {got!r}, Gymnasium's {attr} = {want!r}"
        assert isinstance(getattr(sim, name), np.float64), f"sim.{name} must be a float64 global"


def test_random_episodes_step_like_gymnasium(device):
    """64 games at a time, each next to its own Gymnasium CartPole-v1, until its first end; four rounds."""
    envs = make_warp_cartpole(num_envs=64, device=device, max_episode_steps=500)
    rng = np.random.default_rng(0)
    steps = terminated = 0
    for round_ in range(4):
        result = lockstep_with_gymnasium(envs, seed=1000 * round_, rng=rng)
        steps += result.steps
        terminated += result.terminated
        if envs.device.type == "cpu":
            # Same float64 operations in the same order: on the CPU even the float64 states agree bit for bit.
            assert result.state_bitwise_equal
    assert terminated == 4 * 64  # random actions never last 500 steps
    assert steps > 1000


def test_truncation_at_500_like_gymnasium(device):
    envs = make_warp_cartpole(num_envs=16, device=device, max_episode_steps=500)
    # On a GPU the float64 arithmetic is contracted into fused multiply-adds, so the states differ from
    # Gymnasium's in the last bits; the upright pole is unstable (errors grow about e^(4 t), t in seconds), so
    # over 10 s that reaches float32 precision. There, each step is compared from Gymnasium loaded with the
    # game's state; on the CPU the two run side by side for all 500 steps, bit for bit.
    on_gpu = envs.device.type != "cpu"
    result = lockstep_with_gymnasium(envs, seed=7, rng=np.random.default_rng(1), policy=balancing_policy, resync=on_gpu)
    assert (result.truncated, result.terminated, result.steps) == (16, 0, 16 * 500)
    assert result.state_bitwise_equal or on_gpu


@pytest.mark.parametrize("max_episode_steps", [500, 9])
@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_matches_reference(device, mode, max_episode_steps):
    envs = make_warp_cartpole(num_envs=8, device=device, autoreset_mode=mode, max_episode_steps=max_episode_steps)
    report = compare_with_reference(envs, steps=80, seed=11)
    assert report.ok, report.table()
    assert report.game_ends >= 8 and report.resets > 8, report.table()
    if device == "cpu":
        # The reference is Gymnasium's arithmetic too, so nothing differs at all on the CPU.
        assert all(d.max_abs == 0.0 for d in report.differences.values()), report.table()


def test_layout_and_spaces_are_gymnasiums():
    envs = GpuVectorEnv(cartpole_definition(), num_games=5, device="cpu")
    assert envs.num_envs == envs.num_games == 5 and envs.num_agents == 1
    gym_vec = gym.make_vec("CartPole-v1", num_envs=5, vectorization_mode="sync")
    assert envs.single_action_space == spaces.Discrete(2) == gym_vec.single_action_space
    assert envs.action_space == gym_vec.action_space
    assert envs.single_observation_space == CartPoleEnv().observation_space == gym_vec.single_observation_space
    assert envs.observation_space == gym_vec.observation_space
    obs, info = envs.reset(seed=0)
    assert obs.shape == (5, 4) and obs.dtype == torch.float32
    assert envs.observation_space.contains(obs.numpy())
    assert bool(info["active"].all())
    obs, rewards, terminated, truncated, info = envs.step(envs.action_space.sample())
    assert rewards.shape == terminated.shape == truncated.shape == (5,)
    assert rewards.dtype == torch.float32 and terminated.dtype == torch.bool
    # A (games, agents) shaped action is accepted too.
    envs.step(np.ones((5, 1), np.int64))


def test_initial_state_draws():
    envs = make_warp_cartpole(num_envs=256, device="cpu")
    envs.reset(seed=3)
    first = read_states(envs)
    assert first.dtype == np.float64
    assert ((first >= -0.05) & (first < 0.05)).all()
    assert len(np.unique(first)) == first.size  # every game and variable draws its own value
    envs.reset(seed=None)  # the next episode of each game
    second = read_states(envs)
    assert not np.any(first == second)
    envs.reset(seed=3)
    np.testing.assert_array_equal(read_states(envs), first)
    # Draw i of reset e of a game seeded s, mapped to -0.05 + 0.1 * u in float64.
    draw = getattr(uniform01, "py_func", uniform01)
    game = 17
    want = [np.float64(-0.05) + np.float64(0.1) * np.float64(draw(3 + game, 0, i)) for i in range(4)]
    np.testing.assert_array_equal(first[game], want)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_reset_bounds_options_hold_until_a_reset_without_them_as_gymnasiums_vector_cartpole(backend):
    envs = make_warp_cartpole(num_envs=3, device="cpu", backend=backend, max_episode_steps=2)
    draw = getattr(uniform01, "py_func", uniform01)

    def drawn(low, high, seed, episode):  # the reference's draw: low + (high - low) * u, in float64
        return [np.float64(low) + (np.float64(high) - np.float64(low)) * np.float64(draw(seed, episode, i))
                for i in range(4)]  # fmt: skip

    envs.reset(seed=5, options={"low": -0.1, "high": 0.15})  # within the limits: no game ends before the time's up
    bounded = read_states(envs)
    np.testing.assert_array_equal(bounded[1], drawn(-0.1, 0.15, 5 + 1, 0))  # game 1, seeded 6, reset 0
    assert ((bounded >= -0.1) & (bounded < 0.15)).all() and (np.abs(bounded) > 0.05).any()
    # The autoreset after the time limit draws from the same bounds, as CartPoleVectorEnv keeps them.
    for _ in range(3):  # truncated at the second step, reset at the third
        _, _, terminated, _, _ = envs.step(np.ones(3, np.int64))
        assert not terminated.any()
    np.testing.assert_array_equal(read_states(envs)[1], drawn(-0.1, 0.15, 6, 1))
    # A masked reset with one bound: the other's default, for the games reset only.
    before = read_states(envs)
    envs.reset(options={"high": 0.12, "reset_mask": np.array([False, True, False])})
    after = read_states(envs)
    np.testing.assert_array_equal(after[1], drawn(-0.05, 0.12, 6, 2))
    np.testing.assert_array_equal(after[[0, 2]], before[[0, 2]])
    # A reset without options: the defaults again.
    envs.reset()
    np.testing.assert_array_equal(read_states(envs)[1], drawn(-0.05, 0.05, 6, 3))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"low": 0.2, "high": 0.1}, r"low must be <= high, got low=0.2, high=0.1"),
        ({"low": float("nan")}, r"low must be a finite number, got nan"),
        ({"high": "0.1"}, r"high must be a finite number, got '0.1'"),
        ({"low": -1e308, "high": 1e308}, r"high - low must be finite, got low=-1e\+308, high=1e\+308"),
    ],
)
def test_bad_reset_bounds_are_refused_before_resetting(options, message):
    envs = make_warp_cartpole(num_envs=2, device="cpu")
    envs.reset(seed=1)
    before = read_states(envs)
    with pytest.raises(ValueError, match=message):
        envs.reset(seed=9, options=options)
    np.testing.assert_array_equal(read_states(envs), before)


def test_max_episode_steps_truncates():
    envs = make_warp_cartpole(num_envs=3, device="cpu", max_episode_steps=5)
    envs.reset(seed=0)
    push_right = np.ones(3, np.int64)  # from the initial states the pole cannot fall within 5 steps
    for step in range(1, 6):
        _, rewards, terminated, truncated, _ = envs.step(push_right)
        assert torch.equal(rewards, torch.ones(3))
        assert not terminated.any()
        assert bool(truncated.all()) == (step == 5)
    episode = envs.state["episode"].clone()
    obs, rewards, terminated, truncated, _ = envs.step(push_right)  # NEXT_STEP autoreset
    assert torch.equal(envs.state["episode"], episode + 1) and int(envs.state["t"].max()) == 0
    assert torch.equal(rewards, torch.zeros(3)) and not (terminated.any() or truncated.any())
    np.testing.assert_array_equal(obs.numpy(), read_states(envs).astype(np.float32))


def test_termination_rewards_and_thresholds():
    """The terminating step still pays 1.0; the bounds are strict, as Gymnasium's."""
    envs = GpuVectorEnv(cartpole_definition(), num_games=4, device="cpu", autoreset_mode=AutoresetMode.DISABLED)
    envs.reset(seed=0)
    limit = 12 * 2 * math.pi / 360
    # (x, x_dot, theta, theta_dot) just inside each bound, moving out (x_dot, theta_dot set so that one step crosses).
    starts = np.array(
        [[2.39, 1.0, 0.0, 0.0], [-2.39, -1.0, 0.0, 0.0], [0.0, 0.0, limit - 1e-3, 1.0], [0.0, 0.0, -limit, 0.0]]
    )
    for i, key in enumerate(("x", "x_dot", "theta", "theta_dot")):
        envs.state[key][:, 0] = torch.from_numpy(starts[:, i])
    _, rewards, terminated, truncated, _ = envs.step(np.zeros(4, np.int64))
    assert torch.equal(rewards, torch.ones(4))
    # Game 3 starts exactly on -limit with theta_dot = 0, so Euler keeps theta there for one step: not over.
    assert terminated.tolist() == [True, True, True, False] and not truncated.any()
    # DISABLED: a finished game stays frozen with zero reward until it is reset.
    _, rewards, terminated, _, _ = envs.step(np.zeros(4, np.int64))
    assert rewards.tolist() == [0.0, 0.0, 0.0, 1.0] and terminated[:3].all()


def test_registered_id_passes_the_time_limit():
    envs = gym.make_vec(ENV_ID, num_envs=3, device="cpu")
    assert isinstance(envs.unwrapped, GpuVectorEnv) and envs.unwrapped.max_episode_steps == 500
    assert envs.single_observation_space == CartPoleEnv().observation_space
    assert gym.make_vec(ENV_ID, num_envs=2, device="cpu", max_episode_steps=5).unwrapped.max_episode_steps == 5


def test_unknown_parameters_are_rejected():
    with pytest.raises(TypeError, match=r"gravity.*valid parameters are.*max_episode_steps"):
        make_warp_cartpole(num_envs=2, gravity=3.0)
