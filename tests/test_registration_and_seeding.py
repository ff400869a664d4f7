"""Making WarpTag-v0 through Gymnasium's registry, and seeding it reproducibly."""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import SMALL_TAG
from gymnasium.vector import AutoresetMode

import gpu_vecenv
from envs.tag_continuous.config import TagConfig
from envs.tag_continuous.env import tag_definition
from gpu_vecenv.vector_env import GpuVectorEnv

REPO = Path(__file__).resolve().parents[1]


def make(device="cpu", games=3, **kwargs):
    return gym.make_vec("WarpTag-v0", num_envs=games, device=device, **{**SMALL_TAG, **kwargs})


def record_trajectory(envs, seed, steps):
    """Reset with ``seed``, then take ``steps`` steps of actions drawn from ``seed``; every output, on the CPU."""
    import numpy as np

    obs, _ = envs.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = [obs.cpu()]
    for _ in range(steps):
        actions = rng.integers(0, envs.single_action_space.nvec, size=(envs.num_envs, 2))
        obs, rewards, terminated, truncated, _ = envs.step(actions)
        out += [obs.cpu(), rewards.cpu(), terminated.cpu(), truncated.cpu()]
    return out


def assert_same_trajectory(a, b):
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        assert torch.equal(x, y), f"output {i} differs"


# -- registration -------------------------------------------------------------------------------------------


def test_import_registers_warp_tag_with_a_string_entry_point():
    spec = gym.spec("WarpTag-v0")
    assert spec.vector_entry_point == "envs.tag_continuous.env:make_warp_tag"
    assert spec.entry_point is None  # only the vectorised form exists


# A fresh interpreter that makes the env by "module:id" without importing gpu_vecenv first, then records a
# trajectory with the function above, so that the test can also compare it with this process's.
FRESH_PROCESS = """
import sys
import gymnasium as gym
import numpy as np
assert "gpu_vecenv" not in sys.modules
envs = gym.make_vec("gpu_vecenv:WarpTag-v0", num_envs=3, device="cpu", **{params!r})
assert "gpu_vecenv" in sys.modules and type(envs).__name__ == "GpuVectorEnv", type(envs)
{source}
out = record_trajectory(envs, seed=21, steps=30)
np.savez(sys.argv[1], *[t.numpy() for t in out])
print("made", envs)
"""


@pytest.fixture(scope="module")
def fresh_process_trajectory(tmp_path_factory):
    path = tmp_path_factory.mktemp("fresh") / "trajectory.npz"
    script = FRESH_PROCESS.format(params=SMALL_TAG, source=textwrap.dedent(inspect.getsource(record_trajectory)))
    # GPU_VECENV_CACHE_DIR (set by conftest) is inherited, so the child loads the kernel compiled here.
    proc = subprocess.run([sys.executable, "-c", script, str(path)], cwd=REPO, env=dict(os.environ),
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    return proc, path


def test_make_vec_by_module_and_id_in_a_fresh_process(fresh_process_trajectory):
    proc, path = fresh_process_trajectory
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "made GpuVectorEnv(WarpTag-v0, num_games=3, num_agents=7, device=cpu" in proc.stdout
    assert path.exists()


def test_same_seed_and_actions_give_the_same_trajectory_in_another_process(fresh_process_trajectory):
    proc, path = fresh_process_trajectory
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with np.load(path) as data:
        theirs = [torch.from_numpy(data[f"arr_{i}"]) for i in range(len(data.files))]
    ours = record_trajectory(make(), seed=21, steps=30)
    assert_same_trajectory(ours, theirs)


# A valid value different from SMALL_TAG's (and the default) for every field of TagConfig.
OTHER_VALUES = dict(
    num_taggers=3, num_runners=4, grid_length=7.0, episode_length=9, max_speed=0.5, skill_level_tagger=0.8,
    skill_level_runner=0.9, min_acceleration=-0.2, max_acceleration=0.3, min_turn=-1.0, max_turn=1.0,
    num_acceleration_levels=5, num_turn_levels=7, use_full_observation=True, num_other_agents_observed=2,
    tagging_distance=0.05, tag_reward_for_tagger=3.0, tag_penalty_for_runner=-4.0, step_penalty_for_tagger=-0.1,
    step_reward_for_runner=0.2, edge_hit_penalty=-0.5, end_of_game_reward_for_runner=2.0,
    runner_exits_game_after_tagged=False, observe_own_type=False, tagger_ids=(3, 5),
)  # fmt: skip


def test_the_parameter_list_covers_every_tag_parameter():
    assert set(OTHER_VALUES) == {f.name for f in dataclasses.fields(TagConfig)}


def fingerprint(envs):
    """What a Tag configuration turns into: sizes, constants, roles and the observation phase."""
    d = envs.unwrapped.definition
    constants = {k: tuple(v) if isinstance(v, list) else v for k, v in d.constants.items()}
    roles = {k: tuple(v) for k, v in d.roles.items()}
    return d.num_agents, d.action_nvec, d.obs_dim, constants, roles, tuple(p.name for p in d.observe_phases)


@pytest.mark.parametrize("name", list(OTHER_VALUES))
def test_every_tag_parameter_can_be_passed_to_make_vec(name):
    params = {**SMALL_TAG, name: OTHER_VALUES[name]}
    envs = gym.make_vec("WarpTag-v0", num_envs=2, device="cpu", **params)
    direct = GpuVectorEnv(tag_definition(TagConfig(**params), backend="cpu"), num_games=2, device="cpu")
    assert fingerprint(envs) == fingerprint(direct)  # the value arrived as given...
    assert fingerprint(envs) != fingerprint(make(games=2))  # ...and changed the game
    assert envs.spec.kwargs[name] == OTHER_VALUES[name]
    obs, _ = envs.reset(seed=0)
    obs, *_ = envs.step(np.zeros((envs.num_envs, 2), np.int64))
    assert obs.shape == (envs.num_envs, envs.unwrapped.definition.obs_dim)


def test_make_vec_of_the_spec_rebuilds_the_same_env():
    envs = make(games=4, autoreset_mode=AutoresetMode.SAME_STEP, max_episode_steps=7, tagging_distance=0.2)
    spec = envs.spec
    assert spec.kwargs["num_envs"] == 4 and spec.kwargs["max_episode_steps"] == 7
    again = gym.make_vec(spec)
    assert repr(again) == repr(envs)
    assert again.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP and again.unwrapped.max_episode_steps == 7
    first, _ = envs.reset(seed=13)
    second, _ = again.reset(seed=13)
    assert torch.equal(first, second)
    assert_same_trajectory(record_trajectory(envs, seed=13, steps=10), record_trajectory(again, seed=13, steps=10))


def test_make_vec_accepts_max_episode_steps():
    envs = make(games=2, max_episode_steps=4)
    assert envs.unwrapped.max_episode_steps == 4
    envs.reset(seed=0)
    for _ in range(4):
        _, _, _, truncated, _ = envs.step(np.zeros((envs.num_envs, 2), np.int64))
    assert bool(truncated.all())


@pytest.fixture
def my_tag():
    gpu_vecenv.register(
        "MyTag-v0",
        vector_entry_point="envs.tag_continuous.env:make_warp_tag",
        max_episode_steps=6,
        num_taggers=1,
        num_runners=3,
        num_other_agents_observed=2,
        grid_length=4.0,
        device="cpu",
    )
    yield "MyTag-v0"
    del gym.registry["MyTag-v0"]


def test_register_a_variant_with_other_defaults(my_tag):
    spec = gym.spec(my_tag)
    assert spec.vector_entry_point == "envs.tag_continuous.env:make_warp_tag" and spec.max_episode_steps == 6
    envs = gym.make_vec(my_tag, num_envs=2)
    assert (envs.num_games, envs.num_agents, envs.num_envs) == (2, 4, 8)
    assert envs.single_observation_space.shape == (7 * 2 + 2,)
    assert envs.unwrapped.max_episode_steps == 6
    assert envs.unwrapped.definition.constants["grid_length"] == 4.0
    # Keyword arguments of make_vec override the registered defaults.
    other = gym.make_vec(my_tag, num_envs=1, num_runners=5, max_episode_steps=2)
    assert other.num_agents == 6 and other.unwrapped.max_episode_steps == 2
    envs.reset(seed=0)
    for _ in range(6):
        _, _, _, truncated, _ = envs.step(np.zeros((8, 2), np.int64))
    assert bool(truncated.all())


def test_registering_again_replaces_the_entry(my_tag):
    gpu_vecenv.register(my_tag, vector_entry_point="envs.tag_continuous.env:make_warp_tag", num_runners=2,
                        num_other_agents_observed=1, device="cpu")  # fmt: skip
    envs = gym.make_vec(my_tag, num_envs=1)
    assert envs.num_agents == 10 + 2 and envs.unwrapped.max_episode_steps is None


# -- seeding ----------------------------------------------------------------------------------------------------


def starting_state(envs):
    return torch.stack([envs.state[k].cpu() for k in ("x", "y", "direction")], dim=-1)  # (games, agents, 3)


@pytest.mark.parametrize("games", [1, 2, 5])
def test_game_g_starts_like_game_0_seeded_seed_plus_g(device, games):
    envs = make(device, games=games)
    obs, _ = envs.reset(seed=100)
    state = starting_state(envs)
    for g in range(games):
        single = make(device, games=1)
        single_obs, _ = single.reset(seed=100 + g)
        assert torch.equal(envs.per_game(obs)[g], single_obs)
        assert torch.equal(state[g], starting_state(single)[0])


def test_seed_lists_give_each_game_its_seed(device):
    by_game = make(device)
    by_game.reset(seed=[7, 3, 7])
    seeded_7, seeded_3 = make(device, games=1), make(device, games=1)
    seeded_7.reset(seed=7)
    seeded_3.reset(seed=3)
    state = starting_state(by_game)
    assert torch.equal(state[0], starting_state(seeded_7)[0]) and torch.equal(state[2], state[0])
    assert torch.equal(state[1], starting_state(seeded_3)[0])
    # One seed per slot, repeated over the agents of a game, is the same thing.
    by_slot = make(device)
    by_slot.reset(seed=[7] * 7 + [3] * 7 + [7] * 7)
    assert torch.equal(starting_state(by_slot), state)
    # numpy integers work too.
    by_array = make(device)
    by_array.reset(seed=np.array([7, 3, 7]))
    assert torch.equal(starting_state(by_array), state)


def test_a_none_in_a_seed_list_keeps_that_games_stream_as_gymnasiums_sub_envs_do(device):
    mixed, unseeded = make(device), make(device)
    mixed.reset(seed=[7, 3, 7])
    unseeded.reset(seed=[7, 3, 7])
    mixed.reset(seed=[None, 5, None])
    unseeded.reset()  # every game's stream goes on
    seeded_5 = make(device, games=1)
    seeded_5.reset(seed=5)
    state = starting_state(mixed)
    assert torch.equal(state[0], starting_state(unseeded)[0]) and torch.equal(state[2], starting_state(unseeded)[2])
    assert torch.equal(state[1], starting_state(seeded_5)[0])


def test_an_int_seed_also_seeds_np_random_as_gymnasiums_vector_env_does():
    one, two = make(), make()
    one.reset(seed=42)
    two.reset(seed=42)
    assert one.np_random_seed == two.np_random_seed == 42
    assert one.np_random.integers(1 << 30) == two.np_random.integers(1 << 30)
    one.reset(seed=[1, 2, 3])  # a list seeds the games only, as SyncVectorEnv's does
    assert one.np_random_seed == 42


def test_no_seed_gives_different_starts_to_fresh_envs():
    a, b = make(), make()
    obs_a, _ = a.reset()
    obs_b, _ = b.reset()
    assert not torch.equal(obs_a, obs_b)
    assert not torch.equal(starting_state(a), starting_state(b))


def test_same_seed_and_actions_give_bit_identical_trajectories(device):
    # Tags, time-limit ends and autoresets all happen within 40 steps.
    params = dict(tagging_distance=0.3, episode_length=8)
    one = record_trajectory(make(device, **params), seed=4, steps=40)
    two = record_trajectory(make(device, **params), seed=4, steps=40)
    assert_same_trajectory(one, two)
    assert sum(int(t.sum()) for t in one[3::4]) > 0  # some game ended
    other_seed = record_trajectory(make(device, **params), seed=5, steps=40)
    assert not torch.equal(one[0], other_seed[0])


def test_every_autoreset_draws_a_new_initial_state(device):
    envs = make(device, games=2, episode_length=2, tagging_distance=0.0)
    obs, _ = envs.reset(seed=9)
    starts = [starting_state(envs)]
    still = np.zeros((envs.num_envs, 2), np.int64)
    for episode in (1, 2, 3):
        for _ in range(2):
            envs.step(still)
        envs.step(still)  # NEXT_STEP: the autoreset
        assert envs.state["episode"].tolist() == [episode, episode]
        starts.append(starting_state(envs))
    for i in range(len(starts)):
        for j in range(i):
            assert not torch.equal(starts[i], starts[j]), f"episodes {j} and {i} start alike"
    # The k-th autoreset starts like k resets without a seed after the seeded one: one stream per game.
    stream = make(device, games=2, episode_length=2, tagging_distance=0.0)
    stream.reset(seed=9)
    for k in (1, 2, 3):
        stream.reset()
        assert torch.equal(starting_state(stream), starts[k])


NAN = math.nan


def test_initial_positions_and_directions_fix_every_game(device):
    envs = make(device, games=3)
    positions = np.array([[1.0, 2.0], [3.0, 4.0], [NAN, 2.5], [0.5, NAN]] + [[NAN, NAN]] * 3, np.float32)
    directions = np.array([0.0, math.pi / 2, NAN, 1.0, NAN, NAN, NAN], np.float32)
    envs.reset(seed=0, options={"initial_positions": positions, "initial_directions": directions})
    x, y, heading = (envs.state[k].cpu() for k in ("x", "y", "direction"))
    assert x[:, 0].tolist() == [1.0] * 3 and y[:, 0].tolist() == [2.0] * 3
    assert x[:, 1].tolist() == [3.0] * 3 and y[:, 1].tolist() == [4.0] * 3
    assert y[:, 2].tolist() == [2.5] * 3 and x[:, 3].tolist() == [0.5] * 3
    assert torch.equal(heading[:, 1], torch.full((3,), np.float32(math.pi / 2)))
    assert torch.equal(heading[:, 3], torch.ones(3))
    # NaN entries stay random: they differ from game to game, and headings are multiples of pi/2.
    assert len(set(x[:, 2].tolist())) == 3 and len(set(y[:, 3].tolist())) == 3
    random_headings = heading[:, [2, 4, 5, 6]] / (math.pi / 2)
    assert torch.allclose(random_headings, random_headings.round(), atol=1e-6)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_initial_positions_apply_to_later_autoresets_until_a_reset_without_them(device, mode):
    envs = make(device, games=2, episode_length=2, tagging_distance=0.0, autoreset_mode=mode)
    positions = np.array([[0.5 + 0.6 * a, 4.0 - 0.5 * a] for a in range(7)], np.float32)  # inside the 5 x 5 arena
    fixed = torch.from_numpy(positions)
    envs.reset(seed=1, options={"initial_positions": positions})
    flat_out = np.full((envs.num_envs, 2), 20, np.int64)
    for _ in range(2):
        envs.step(flat_out)
    if mode is AutoresetMode.NEXT_STEP:
        envs.step(flat_out)  # the autoreset
    assert envs.state["episode"].tolist() == [1, 1]
    for g in range(2):
        assert torch.equal(torch.stack([envs.state["x"][g], envs.state["y"][g]], -1).cpu(), fixed)
    envs.reset()  # without the option: random positions again
    assert not torch.equal(torch.stack([envs.state["x"][0], envs.state["y"][0]], -1).cpu(), fixed)
