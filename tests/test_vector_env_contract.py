"""What WarpTag-v0 promises as a Gymnasium VectorEnv: spaces, layout, dtypes, copies, lifetime."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import SMALL_TAG
from gymnasium import spaces
from gymnasium.error import ResetNeeded
from gymnasium.vector.utils import batch_space

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)
from gpu_vecenv import outputs

GAMES = 3
AGENTS = SMALL_TAG["num_taggers"] + SMALL_TAG["num_runners"]  # 7
OBS_DIM = 7 * SMALL_TAG["num_other_agents_observed"] + 2  # 3 listed agents, the clock, the agent's own type


def make(device, games=GAMES, **kwargs):
    return gym.make_vec("WarpTag-v0", num_envs=games, device=device, **{**SMALL_TAG, **kwargs})


def random_actions(envs, rng):
    return rng.integers(0, envs.single_action_space.nvec, size=(envs.num_envs, 2))


# -- spaces and sizes ---------------------------------------------------------------------------------------


def test_spaces():
    envs = make("cpu", num_acceleration_levels=5, num_turn_levels=7)
    assert envs.num_games == GAMES and envs.num_agents == AGENTS
    assert envs.num_envs == GAMES * AGENTS == 21
    assert envs.single_observation_space == spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
    # Index 0 of each component is the no-op, then the levels.
    assert envs.single_action_space == spaces.MultiDiscrete([6, 8])
    assert envs.observation_space == batch_space(envs.single_observation_space, 21)
    assert envs.observation_space.shape == (21, OBS_DIM)
    assert envs.action_space == batch_space(envs.single_action_space, 21)
    assert envs.action_space.shape == (21, 2)


def test_reset_and_step_return_batched_tensors_on_the_env_device(device):
    envs = make(device)
    assert envs.device.type == device
    obs, infos = envs.reset(seed=0)
    assert obs.shape == (21, OBS_DIM) and obs.dtype == torch.float32 and obs.device == envs.device
    assert envs.observation_space.contains(obs.cpu().numpy())
    assert set(infos) == {"active", "_active"}
    for value in infos.values():
        assert value.shape == (21,) and value.dtype == torch.bool and value.device == envs.device
    assert bool(infos["_active"].all()) and bool(infos["active"].all())

    envs.action_space.seed(0)
    obs, rewards, terminated, truncated, infos = envs.step(envs.action_space.sample())
    assert obs.shape == (21, OBS_DIM) and obs.dtype == torch.float32
    assert envs.observation_space.contains(obs.cpu().numpy())
    assert rewards.shape == (21,) and rewards.dtype == torch.float32
    assert terminated.shape == truncated.shape == (21,)
    assert terminated.dtype == truncated.dtype == torch.bool
    assert set(infos) == {"active", "_active"}
    assert infos["active"].dtype == infos["_active"].dtype == torch.bool
    for value in (obs, rewards, terminated, truncated, infos["active"], infos["_active"]):
        assert value.device == envs.device
    assert bool(infos["_active"].all())


def test_observations_stay_in_the_space_over_many_steps():
    envs = make("cpu", tagging_distance=0.3)
    obs, _ = envs.reset(seed=3)
    rng = np.random.default_rng(3)
    ends = 0
    for _ in range(40):
        obs, rewards, terminated, truncated, _ = envs.step(random_actions(envs, rng))
        assert envs.observation_space.contains(obs.numpy())
        assert bool(torch.isfinite(rewards).all())
        ends += int((terminated | truncated).sum())
    assert ends > 0


# -- agent slots ---------------------------------------------------------------------------------------------


def test_slot_g_times_n_plus_a_is_agent_a_of_game_g(device):
    envs = make(device)
    envs.reset(seed=1)
    game, agent = 2, 4
    actions = np.zeros((envs.num_envs, 2), np.int64)
    actions[game * AGENTS + agent] = (20, 0)  # full acceleration for that one agent
    envs.step(actions)
    speed = envs.state["speed"].cpu()
    assert speed.shape == (GAMES, AGENTS)
    assert speed.nonzero().tolist() == [[game, agent]]


def test_per_game_is_a_view_of_games_by_agents(device):
    envs = make(device)
    obs, _ = envs.reset(seed=2)
    view = envs.per_game(obs)
    assert view.shape == (GAMES, AGENTS, OBS_DIM)
    assert view.data_ptr() == obs.data_ptr()
    assert torch.equal(view[1, 5], obs[1 * AGENTS + 5])
    # The last observation entry is the agent's own type (1 for taggers), which the roles agree with.
    types = envs.per_game(obs[:, -1])
    assert torch.equal(types[:, envs.roles["tagger"]], torch.ones(GAMES, 2, device=envs.device))
    assert torch.equal(types[:, envs.roles["runner"]], torch.zeros(GAMES, 5, device=envs.device))


def test_roles_follow_tagger_ids():
    envs = make("cpu", tagger_ids=(3, 6))
    assert envs.roles["tagger"].tolist() == [3, 6]
    assert envs.roles["runner"].tolist() == [0, 1, 2, 4, 5]
    obs, _ = envs.reset(seed=0)
    assert envs.per_game(obs)[:, :, -1].tolist() == [[0, 0, 0, 1, 0, 0, 1]] * GAMES


def test_actions_by_slot_or_by_game_and_agent_are_the_same(device):
    by_slot, by_game = make(device), make(device)
    by_slot.reset(seed=5)
    by_game.reset(seed=5)
    rng = np.random.default_rng(5)
    for _ in range(5):
        actions = random_actions(by_slot, rng)
        a = by_slot.step(actions)
        b = by_game.step(actions.reshape(GAMES, AGENTS, 2))
        for x, y in zip(a[:4], b[:4], strict=True):
            assert torch.equal(x, y)


def test_actions_written_into_the_action_buffer_step_as_the_same_actions_passed_in(device):
    passed, in_place = make(device), make(device)
    passed.reset(seed=3)
    in_place.reset(seed=3)
    buffer = in_place.unwrapped.action_buffer
    assert buffer.shape == (GAMES * AGENTS, 2) and buffer.dtype == torch.int64 and buffer.device == in_place.device
    rng = np.random.default_rng(3)
    for step in range(2 * SMALL_TAG["episode_length"]):  # autoresets on the way
        actions = torch.as_tensor(random_actions(passed, rng), device=passed.device)
        a = passed.step(actions)
        buffer.copy_(actions)
        # The buffer itself, or its (games, agents, components) view: the same bytes, read where they are.
        b = in_place.step(buffer if step % 2 else buffer.view(GAMES, AGENTS, 2))
        for x, y in zip(a[:4], b[:4], strict=True):
            assert torch.equal(x, y)


def test_the_action_buffer_is_read_where_it_is_and_other_tensors_are_copied_into_it(monkeypatch):
    envs = make("cpu")
    envs.reset(seed=0)
    copies = []
    copy = envs.unwrapped._stream_ops.copy
    monkeypatch.setattr(envs.unwrapped._stream_ops, "copy", lambda dst, src: copies.append(src) or copy(dst, src))
    envs.unwrapped.action_buffer.fill_(1)
    envs.step(envs.unwrapped.action_buffer)
    assert copies == []
    actions = torch.full((GAMES * AGENTS, 2), 2)
    envs.step(actions)
    assert len(copies) == 1 and torch.equal(envs.unwrapped.action_buffer, actions)


def test_discrete_actions_have_a_one_dimensional_action_buffer():
    envs = gym.make_vec("WarpCartPole-v1", num_envs=4, device="cpu")  # the one env with Discrete actions
    envs.reset(seed=0)
    buffer = envs.unwrapped.action_buffer
    assert buffer.shape == (4,)
    buffer.fill_(1)
    envs.step(buffer)


def test_a_tagged_runner_keeps_its_slot_until_its_game_ends(device):
    envs = make(device, games=1, num_taggers=1, num_runners=2, num_other_agents_observed=2, episode_length=4)
    # Runner 1 starts 0.2 from the tagger (tag radius 0.1 * 5 = 0.5); runner 2 is far away.
    start = np.array([[1.0, 1.0], [1.2, 1.0], [4.0, 4.0]], np.float32)
    envs.reset(seed=0, options={"initial_positions": start, "initial_directions": np.zeros(3, np.float32)})
    still = np.zeros((3, 2), np.int64)
    obs, rewards, terminated, _, infos = envs.step(still)
    assert envs.num_envs == 3
    assert rewards.tolist() == [10.0, -10.0, 0.0]
    assert infos["active"].tolist() == [True, True, True]  # runner 1 was in the game during this step
    assert not bool(terminated.any())

    # From now on runner 1 is out: reward 0, inactive, and its actions are ignored.
    runner_flat_out = still.copy()
    runner_flat_out[1] = (20, 20)
    where = torch.stack([envs.state["x"][0, 1], envs.state["y"][0, 1]]).cpu()
    assert torch.equal(where, torch.tensor([1.2, 1.0]))
    for step in (2, 3, 4):
        obs, rewards, terminated, _, infos = envs.step(runner_flat_out)
        assert obs.shape == (3, 7 * 2 + 2)
        assert infos["active"].tolist() == [True, False, True]
        assert float(rewards[1]) == 0.0
        assert torch.equal(torch.stack([envs.state["x"][0, 1], envs.state["y"][0, 1]]).cpu(), where)
        assert float(envs.state["speed"][0, 1]) == 0.0
        assert terminated.tolist() == [step == 4] * 3
    assert rewards.tolist() == [0.0, 0.0, 1.0]  # only the surviving runner gets the end-of-game reward

    obs, rewards, terminated, _, infos = envs.step(still)  # NEXT_STEP: the new episode has everyone back
    assert infos["active"].tolist() == [True, True, True]


# -- copies and zero-copy -------------------------------------------------------------------------------------


def test_returned_tensors_never_change_by_default(device):
    envs = make(device)
    assert envs.unwrapped.copy is True
    rng = np.random.default_rng(0)
    first_obs, _ = envs.reset(seed=0)
    first_obs_copy = first_obs.clone()
    returned = envs.step(random_actions(envs, rng))
    kept = [t.clone() for t in returned[:4]] + [returned[4]["active"].clone()]
    for _ in range(3):
        later = envs.step(random_actions(envs, rng))
        assert later[0].data_ptr() != returned[0].data_ptr()
    assert not torch.equal(later[0], returned[0])  # the game moved on...
    for now, then in zip([*returned[:4], returned[4]["active"]], kept, strict=True):
        assert torch.equal(now, then)  # ...but what was returned earlier did not
    assert torch.equal(first_obs, first_obs_copy)


@pytest.mark.parametrize("fresh", ["written", "copied"])
def test_fresh_outputs_kept_over_many_steps_stay_as_returned(device, fresh, monkeypatch):
    # copy=True hands out slots made ahead in batches; with batches of 3 slots (the byte cap deciding), keep
    # 20 steps' outputs: each must still hold what a copy=False twin showed at its step, in memory of its own.
    # "written": the kernel writes the slots (on a GPU, the slot a device ring names); "copied": the
    # env told to copy its buffers into the slots (on a GPU inside the step's graph, gpu_vecenv/slot_copy.py).
    options = {"direct_write_bytes": 0} if fresh == "written" else {"direct_write_bytes": 1 << 62}
    nbytes = make(device, copy=False).unwrapped._arena.nbytes
    monkeypatch.setattr(outputs, "_BATCH_BYTES_GPU", 3 * nbytes)
    monkeypatch.setattr(outputs, "_BATCH_BYTES_CPU", 3 * nbytes)
    envs, twin = make(device, **options), make(device, copy=False)
    assert envs.unwrapped._arena._batch == 3
    rng = np.random.default_rng(1)
    envs.reset(seed=0)
    twin.reset(seed=0)
    backend = envs.unwrapped._backend
    on_gpu = device == "cuda"
    assert getattr(backend, "writes_ring", False) == (on_gpu and fresh == "written")
    assert bool(getattr(backend, "_copy_graphs", None)) == (on_gpu and fresh == "copied")
    kept, seen = [], []
    for _ in range(20):
        actions = random_actions(envs, rng)
        obs, rewards, terminated, truncated, info = envs.step(actions)
        kept.append((obs, rewards, terminated, truncated, info["active"]))
        obs, rewards, terminated, truncated, info = twin.step(actions)
        seen.append(tuple(t.clone() for t in (obs, rewards, terminated, truncated, info["active"])))
    for part in range(5):
        assert len({outputs_of_step[part].data_ptr() for outputs_of_step in kept}) == len(kept)
    for returned, then in zip(kept, seen, strict=True):
        for now, expected in zip(returned, then, strict=True):
            assert torch.equal(now, expected)


@pytest.mark.parametrize("same_step", [False, True])
def test_a_slot_alone_is_viewed_as_a_slot_of_a_batch_is(same_step):
    # Large outputs come one slot a batch, viewed by a shorter path than a batch's slots: same memory, same
    # shapes and dtypes.
    arena = outputs.OutputArena(3, 7, 5, same_step, torch.device("cpu"))
    rows = (torch.arange(2 * arena.nbytes) % 251).to(torch.uint8).view(2, arena.nbytes)
    in_batch = arena._slot_views(rows)[1]
    alone = arena._row_views(rows[1])
    assert (alone.final_obs is None) == (not same_step)
    for a, b in zip(in_batch, alone, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.shape == b.shape and a.dtype == b.dtype and a.data_ptr() == b.data_ptr()
            assert torch.equal(a.view(torch.uint8), b.view(torch.uint8))


@pytest.mark.parametrize("same_step", [False, True])
def test_the_kernels_pointers_into_a_fresh_slot_are_its_views_pointers(same_step):
    arena = outputs.OutputArena(3, 7, 5, same_step, torch.device("cpu"))
    _, row = arena.fresh_for_kernel()
    views = arena.kernel_views(row)
    assert arena.kernel_pointers(row) == tuple(t.data_ptr() for t in views.arrays())


def test_the_ring_names_each_batchs_slots_once_and_again_when_forgotten():
    # A copying graph writes slot ring[1 + ring[0]] and adds one to ring[0]; the host writes the ring only
    # when a batch starts or it cannot know where ring[0] is. Here the advance is done by hand.
    arena = outputs.OutputArena(3, 7, 5, False, torch.device("cpu"), batch_bytes=3 * outputs.OutputArena(
        3, 7, 5, False, torch.device("cpu")).nbytes)  # fmt: skip
    ring = arena.ring()
    assert arena.nbytes % 8 == 0  # slots of whole 8-byte words, which the graph's copy moves a word a thread

    def step():
        out = arena.ring_slot()
        slot = int(ring[0])
        assert out.obs.data_ptr() == int(ring[1 + slot])  # the slot the graph would write is the one returned
        ring[0] += 1
        return out, ring.clone()

    first, ring_after_first = step()
    assert ring_after_first[4:].eq(0).all() and ring_after_first[1:4].ne(0).all()  # a batch of three slots
    _, ring_after_second = step()
    assert torch.equal(ring_after_second[1:], ring_after_first[1:])  # same batch: not written again
    step()
    fourth, ring_after_fourth = step()  # a new batch: its addresses, and slot 0 of it
    assert int(ring_after_fourth[0]) == 1 and not torch.equal(ring_after_fourth[1:4], ring_after_first[1:4])
    ring[0] = 7  # a launch that failed half-way leaves entry 0 unknown
    arena.forget_ring()
    fifth, _ = step()  # written again: slot 1 of the batch
    assert fifth.obs.data_ptr() == int(ring[2]) and fifth.obs.data_ptr() != fourth.obs.data_ptr()


@pytest.mark.parametrize("same_step", [False, True])
@pytest.mark.parametrize("games, agents, obs_dim", [(1, 3, 4), (3, 7, 5), (2, 1, 1), (5, 11, 2)])
def test_every_slot_is_whole_8_byte_words(games, agents, obs_dim, same_step):
    # The step's graph copies 8-byte words (gpu_vecenv/slot_copy.py); an odd count of float32 words before
    # the flags (3 slots x (4 + 1) here) must not leave the slot 4 bytes short of a word.
    arena = outputs.OutputArena(games, agents, obs_dim, same_step, torch.device("cpu"))
    assert arena.nbytes % 8 == 0 and arena.nbytes >= arena._float_bytes + 5 * games * agents


def test_an_arena_without_a_buffer_of_its_own_never_allocates_one(monkeypatch):
    allocated = []
    zeros = torch.zeros
    monkeypatch.setattr(torch, "zeros", lambda *args, **kwargs: allocated.append(args) or zeros(*args, **kwargs))
    arena = outputs.OutputArena(30, 7, 5, True, torch.device("cpu"), own_buffer=False)
    assert arena.nbytes == outputs.arena_bytes(30, 7, 5, True) == outputs.OutputArena(30, 7, 5, True, torch.device(
        "cpu")).nbytes  # fmt: skip
    assert (arena.nbytes,) in allocated[-1:]  # the arena with a buffer of its own, made just above, has one
    assert allocated[:-1] == [] and arena.buffer.numel() == 0 and arena.kernel.stand_ins
    with pytest.raises(RuntimeError, match="no buffer of its own"):
        arena.results(copy=True)


def test_fresh_output_batches_stay_under_the_cpu_cap_on_the_cpu():
    # Above glibc's 32 MiB mmap threshold every batch would come back as fresh, faulting pages.
    cpu = outputs.OutputArena(100, 110, 73, False, torch.device("cpu"))
    meta_as_gpu = outputs.OutputArena(100, 110, 73, False, torch.device("meta"), batch_bytes=64 << 20)
    assert cpu._batch * cpu.nbytes <= 8 << 20 < meta_as_gpu._batch * meta_as_gpu.nbytes <= 64 << 20


def returned_tensors(returned):
    """Every tensor of a ``reset`` or ``step`` result, infos and final infos included, in a fixed order."""
    if isinstance(returned, torch.Tensor):
        return [returned]
    if isinstance(returned, dict):
        return [t for key in sorted(returned) for t in returned_tensors(returned[key])]
    return [t for part in returned for t in returned_tensors(part)]


@pytest.mark.parametrize("slots", ["batched", "one a batch"])
@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_large_fresh_outputs_are_written_by_the_kernel_itself(device, mode, slots, monkeypatch):
    # direct_write_bytes=0: every copy=True launch writes a fresh set of outputs itself rather than the env's
    # buffers and a copy of them. What each call returns must be what a copy=False twin shows at the same
    # call, episode ends and a masked reset included, and must stay so, in memory of its own. Each fresh
    # slot is filled with 0xFF bytes (NaN floats, bools of 255) first, so that an entry left unwritten shows.
    take_fresh = outputs.OutputArena._take_fresh

    def take_poisoned(arena):
        i = take_fresh(arena)
        arena._fresh_row(i).fill_(0xFF)
        return i

    monkeypatch.setattr(outputs.OutputArena, "_take_fresh", take_poisoned)
    if slots == "one a batch":  # as outputs larger than a batch's bytes are made
        monkeypatch.setattr(outputs, "_BATCH_BYTES_CPU", 1)
        monkeypatch.setattr(outputs, "_BATCH_BYTES_GPU", 1)
    envs = make(device, autoreset_mode=mode, episode_length=6, direct_write_bytes=0)
    twin = make(device, autoreset_mode=mode, episode_length=6, copy=False)
    assert envs.unwrapped.direct_write and not twin.unwrapped.direct_write
    arena = envs.unwrapped._arena
    assert (arena._batch == 1) == (slots == "one a batch")
    # The env keeps no output buffer of its own then. On a GPU the kernel finds each launch's slot through a
    # device ring where a batch holds several (else the launch is given the slot); on the CPU its backend
    # refuses to launch into the stand-ins.
    assert arena.buffer.numel() == 0
    assert all(t.untyped_storage().nbytes() <= 4 for t in arena.kernel.arrays())
    if device == "cuda":
        assert envs.unwrapped._backend.writes_ring == (slots == "batched")
    else:
        with pytest.raises(RuntimeError, match="no output buffer of its own"):
            envs.unwrapped._backend.launch(0)
    rng = np.random.default_rng(2)
    kept = [returned_tensors(envs.reset(seed=0))]
    seen = [[t.clone() for t in returned_tensors(twin.reset(seed=0))]]
    for t in range(16):
        if t == 9:
            mask = {"reset_mask": np.array([True, False, True])}
            kept.append(returned_tensors(envs.reset(options=mask)))
            seen.append([t.clone() for t in returned_tensors(twin.reset(options=mask))])
        actions = random_actions(envs, rng)
        kept.append(returned_tensors(envs.step(actions)))
        seen.append([t.clone() for t in returned_tensors(twin.step(actions))])
    assert sum(bool(step[2].any() | step[3].any()) for step in seen if len(step) > 3) >= 2  # games ended
    for returned, expected in zip(kept, seen, strict=True):
        assert len(returned) == len(expected)
        for now, then in zip(returned, expected, strict=True):
            assert torch.equal(now.view(torch.uint8), then.view(torch.uint8))  # bytes: a bool of 255 is no True
    obs_memory = [returned[0].data_ptr() for returned in kept]
    assert len(set(obs_memory)) == len(obs_memory)


def test_fresh_outputs_are_written_directly_from_the_devices_default_size(device, monkeypatch):
    nbytes = make(device, copy=False).unwrapped._arena.nbytes  # every output of a launch, in one buffer
    # On a GPU always (no copy, a graph replay); on the CPU small outputs are copied out of the env's buffers.
    assert make(device).unwrapped.direct_write == (device == "cuda")
    assert make(device, direct_write_bytes=nbytes).unwrapped.direct_write
    assert not make(device, direct_write_bytes=nbytes + 1).unwrapped.direct_write
    assert not make(device, copy=False, direct_write_bytes=0).unwrapped.direct_write  # nothing fresh to write
    monkeypatch.setitem(outputs.DIRECT_WRITE_BYTES, device, nbytes)
    assert make(device).unwrapped.direct_write


def test_copy_false_returns_the_same_buffers_every_step(device):
    envs = make(device, copy=False)
    obs0, _ = envs.reset(seed=0)
    obs1, rewards1, terminated1, _, _ = envs.step(np.zeros((21, 2), np.int64))
    seen = obs1.clone()
    obs2, rewards2, terminated2, _, _ = envs.step(np.zeros((21, 2), np.int64))
    assert obs0.data_ptr() == obs1.data_ptr() == obs2.data_ptr()
    assert rewards1.data_ptr() == rewards2.data_ptr() and terminated1.data_ptr() == terminated2.data_ptr()
    # The clock entry advanced, so the first view now shows the second step's observation.
    assert not torch.equal(obs1, seen)
    assert torch.equal(obs1, obs2)


def test_observations_export_through_dlpack_without_a_copy(device):
    envs = make(device, copy=False)
    obs, _ = envs.reset(seed=0)
    exported = torch.from_dlpack(obs)
    assert exported.data_ptr() == obs.data_ptr() and exported.device == obs.device
    assert torch.equal(exported, obs)
    envs.step(np.zeros((21, 2), np.int64))
    assert torch.equal(exported, obs)  # the exported tensor is the env's memory, so it sees the next step


# -- lifetime ---------------------------------------------------------------------------------------------------


def test_closed_env_refuses_to_run():
    envs = make("cpu")
    envs.reset(seed=0)
    envs.close()
    assert envs.closed
    envs.close()  # closing twice is fine
    with pytest.raises(RuntimeError, match="WarpTag-v0: the env is closed; make a new one"):
        envs.step(np.zeros((21, 2), np.int64))
    with pytest.raises(RuntimeError, match="the env is closed"):
        envs.reset(seed=0)
    with pytest.raises(RuntimeError, match="the env is closed"):
        envs.state  # noqa: B018


def test_step_before_reset_raises_reset_needed():
    envs = make("cpu")
    with pytest.raises(ResetNeeded, match=r"call reset\(\) before step\(\)"):
        envs.step(np.zeros((21, 2), np.int64))
    # A reset that fails does not count as one.
    with pytest.raises(ValueError):
        envs.reset(options={"initial_positions": np.zeros((2, 2))})
    with pytest.raises(ResetNeeded):
        envs.step(np.zeros((21, 2), np.int64))
    envs.reset(seed=0)
    envs.step(np.zeros((21, 2), np.int64))


@pytest.mark.parametrize("render_mode", [None, "rgb_array"])
def test_render_modes_accepted(render_mode):
    envs = make("cpu", render_mode=render_mode)
    assert envs.render_mode == render_mode
    assert envs.metadata["render_modes"] == ["rgb_array"]


@pytest.mark.parametrize("render_mode", ["human", "ansi", ""])
def test_other_render_modes_rejected(render_mode):
    with pytest.raises(ValueError, match=f"render_mode must be None or 'rgb_array', got '{render_mode}'"):
        make("cpu", render_mode=render_mode)
