"""Gymnasium's three autoreset modes, and partial resets, on WarpTag-v0.

The logic of Gymnasium's ``tests/vector/test_autoreset_mode.py`` and of its
partial-reset tests, played on Tag games that end at known steps. The step
counter every agent observes (``t / episode_length``, the entry after the
listed agents) plays the part of Gymnasium's counting test env.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)

# One tagger, two runners, three agents a game. No tag is possible (tagging_distance=0),
# so only the time limit ends a game: at step 5 of every episode.
TIMED = dict(num_taggers=1, num_runners=2, num_other_agents_observed=2, grid_length=5.0, episode_length=5,
             tagging_distance=0.0)  # fmt: skip
AGENTS = 3
CLOCK = 7 * TIMED["num_other_agents_observed"]  # index of t / episode_length in an observation
NO_OP = np.zeros((2, AGENTS, 2), np.int64)  # two games; action index 0 is "no acceleration, no turn"
FULL_THROTTLE = np.full((2, AGENTS, 2), 20, np.int64)

# A tag radius of the whole arena (1.0 * grid_length = 5) and the tagger in the centre of the 5 x 5 square:
# every runner is within 3.6 of it, so each episode ends at its first step with every runner tagged.
CENTRE_TAGGER = np.array([[2.5, 2.5], [np.nan, np.nan], [np.nan, np.nan]], np.float32)
INSTANT = dict(TIMED, tagging_distance=1.0, episode_length=15)

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


def make(device, mode=AutoresetMode.NEXT_STEP, games=2, **params):
    return gym.make_vec("WarpTag-v0", num_envs=games, device=device, autoreset_mode=mode, **{**TIMED, **params})


def clock(envs, obs):
    """The step counter of each game, as its tagger (agent 0) observes it."""
    t = envs.per_game(obs)[:, 0, CLOCK] * envs.unwrapped.definition.constants["episode_length"]
    return [round(float(v)) for v in t]


def by_game(envs, tensor):
    """One value per game of a per-slot flag, checking that all agents of a game agree."""
    games = envs.per_game(tensor)
    assert torch.equal(games, games[:, :1].expand_as(games)), f"agents of one game disagree: {games}"
    return games[:, 0].tolist()


def first_obs_of_episode(device, seed, episode, games=2, **params):
    """The observation a game seeded ``seed + g`` starts its ``episode``-th episode with (0 is the first)."""
    envs = make(device, games=games, **params)
    obs, _ = envs.reset(seed=seed)
    for _ in range(episode):
        obs, _ = envs.reset()  # seed=None: the next episode of each game's stream
    return envs.per_game(obs)


# -- the three modes one step at a time -----------------------------------------------------------------


def desynchronised(device, mode):
    """Two games whose clocks are one step apart: game 1 is reset again after the first step."""
    envs = make(device, mode)
    envs.reset(seed=0)
    envs.step(NO_OP)
    obs, _ = envs.reset(options={"reset_mask": np.array([False, True])})
    assert clock(envs, obs) == [1, 0]
    return envs


def test_next_step_resets_a_finished_game_on_the_following_step(device):
    envs = desynchronised(device, AutoresetMode.NEXT_STEP)
    assert envs.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    for want in ([2, 1], [3, 2], [4, 3]):
        obs, rewards, terminated, truncated, infos = envs.step(NO_OP)
        assert clock(envs, obs) == want
        assert by_game(envs, terminated) == [False, False]
    assert "final_obs" not in infos

    obs, rewards, terminated, truncated, infos = envs.step(NO_OP)  # game 0 reaches its time limit
    assert clock(envs, obs) == [5, 4]
    assert by_game(envs, terminated) == [True, False]
    assert by_game(envs, truncated) == [False, False]
    assert envs.per_game(rewards)[0].tolist() == [0.0, 1.0, 1.0]  # the runners' end-of-game reward

    # The next step resets game 0 and ignores its actions: the reset observation, reward 0, no flags.
    obs, rewards, terminated, truncated, infos = envs.step(FULL_THROTTLE)
    assert clock(envs, obs) == [0, 5]
    assert by_game(envs, terminated) == [False, True]
    assert by_game(envs, truncated) == [False, False]
    assert envs.per_game(rewards)[0].tolist() == [0.0, 0.0, 0.0]
    assert envs.per_game(rewards)[1].tolist() == [0.0, 1.0, 1.0]
    assert bool(infos["active"].all())
    # Game 0 was reset once before (episode 0), so this is its episode 1; nothing moved (speed 0).
    assert torch.equal(envs.per_game(obs)[0], first_obs_of_episode(device, seed=0, episode=1)[0])
    assert float(envs.state["speed"][0].abs().max()) == 0.0

    obs, rewards, terminated, truncated, infos = envs.step(NO_OP)
    assert clock(envs, obs) == [1, 0]
    assert by_game(envs, terminated) == [False, False]
    assert envs.per_game(rewards)[1].tolist() == [0.0, 0.0, 0.0]
    # Game 1 was reset twice before (the seeded reset and the masked one): this is its episode 2.
    assert torch.equal(envs.per_game(obs)[1], first_obs_of_episode(device, seed=0, episode=2)[1])


def test_same_step_returns_the_reset_observation_and_the_final_one_in_infos(device):
    envs = desynchronised(device, AutoresetMode.SAME_STEP)
    assert envs.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    for want in ([2, 1], [3, 2], [4, 3]):
        obs, _, terminated, _, infos = envs.step(NO_OP)
        assert clock(envs, obs) == want
        assert not bool(infos["_final_obs"].any()) and not bool(infos["_final_info"].any())

    obs, rewards, terminated, truncated, infos = envs.step(NO_OP)  # game 0 ends and is reset at once
    assert clock(envs, obs) == [0, 4]
    assert torch.equal(envs.per_game(obs)[0], first_obs_of_episode(device, seed=0, episode=1)[0])
    assert clock(envs, infos["final_obs"])[0] == 5
    assert by_game(envs, infos["_final_obs"]) == [True, False]
    assert by_game(envs, infos["_final_info"]) == [True, False]
    assert by_game(envs, infos["final_info"]["_active"]) == [True, False]
    assert by_game(envs, terminated) == [True, False]  # the flags and rewards are the final step's
    assert envs.per_game(rewards)[0].tolist() == [0.0, 1.0, 1.0]

    obs, rewards, terminated, truncated, infos = envs.step(NO_OP)
    assert clock(envs, obs) == [1, 0]
    assert clock(envs, infos["final_obs"])[1] == 5
    assert by_game(envs, infos["_final_obs"]) == [False, True]
    assert by_game(envs, terminated) == [False, True]
    assert torch.equal(envs.per_game(obs)[1], first_obs_of_episode(device, seed=0, episode=2)[1])

    obs, _, terminated, _, infos = envs.step(NO_OP)
    assert clock(envs, obs) == [2, 1]
    assert by_game(envs, terminated) == [False, False]
    assert not bool(infos["_final_obs"].any())


def test_disabled_waits_for_a_masked_reset(device):
    envs = desynchronised(device, AutoresetMode.DISABLED)
    assert envs.metadata["autoreset_mode"] is AutoresetMode.DISABLED
    for _ in range(4):
        obs, _, terminated, _, infos = envs.step(NO_OP)
    assert clock(envs, obs) == [5, 4]
    assert by_game(envs, terminated) == [True, False]
    assert "final_obs" not in infos

    # Not reset: the finished game stays as it ended (its flag repeated, reward 0) while the other plays on.
    last = envs.per_game(obs)[0].clone()
    obs, rewards, terminated, _, _ = envs.step(FULL_THROTTLE)
    assert clock(envs, obs) == [5, 5]
    assert torch.equal(envs.per_game(obs)[0], last)
    assert by_game(envs, terminated) == [True, True]
    assert envs.per_game(rewards)[0].tolist() == [0.0, 0.0, 0.0]

    # A per-slot mask (num_envs,), as `terminated` is, resets the finished games only.
    kept = envs.per_game(obs)[1].clone()
    mask = terminated.clone()
    mask[AGENTS:] = False
    obs, infos = envs.reset(options={"reset_mask": mask})
    assert clock(envs, obs) == [0, 5]
    assert by_game(envs, infos["_active"]) == [True, False]  # as SyncVectorEnv: infos of the envs reset only
    assert torch.equal(envs.per_game(obs)[0], first_obs_of_episode(device, seed=0, episode=1)[0])
    assert torch.equal(envs.per_game(obs)[1], kept)

    # A per-game mask (num_games,) works as well.
    obs, infos = envs.reset(options={"reset_mask": np.array([False, True])})
    assert clock(envs, obs) == [0, 0]
    assert by_game(envs, infos["_active"]) == [False, True]
    assert torch.equal(envs.per_game(obs)[1], first_obs_of_episode(device, seed=0, episode=2)[1])
    obs, _, terminated, _, _ = envs.step(NO_OP)
    assert clock(envs, obs) == [1, 1]
    assert by_game(envs, terminated) == [False, False]


# -- the three modes play the same episodes -------------------------------------------------------------


def play(device, mode, params, seed, actions_per_game, options=None):
    """Play ``actions_per_game`` actions in every game, each game from its own stream of actions.

    Returns, per game, the list of events in mode-independent form: ``("start", obs)`` for the first
    observation of an episode and ``("step", actions, rewards, terminated, truncated, obs)`` for each step,
    ``obs`` of the ending step being the final observation.
    """
    envs = make(device, mode, games=3, **params)
    games, agents = envs.num_games, envs.num_agents
    rng = np.random.default_rng(seed)
    streams = rng.integers(0, envs.single_action_space.nvec, size=(games, actions_per_game, agents, 2))
    obs, _ = envs.reset(seed=seed, options=options)
    events = [[("start", envs.per_game(obs)[g])] for g in range(games)]
    used = [0] * games
    waiting = [False] * games  # NEXT_STEP: the game ended and the next step resets it
    while min(used) < actions_per_game:
        actions = np.stack([streams[g, min(used[g], actions_per_game - 1)] for g in range(games)])
        obs, rewards, terminated, truncated, infos = envs.step(actions)
        obs, rewards, terminated, truncated = (envs.per_game(x) for x in (obs, rewards, terminated, truncated))
        ended_games = []
        for g in range(games):
            if used[g] == actions_per_game:
                continue
            if waiting[g]:
                assert rewards[g].tolist() == [0.0] * agents
                assert not bool(terminated[g].any() or truncated[g].any())
                events[g].append(("start", obs[g]))
                waiting[g] = False
                continue  # the actions of this step were ignored
            used[g] += 1
            ended = bool(terminated[g, 0] or truncated[g, 0])
            final = envs.per_game(infos["final_obs"])[g] if ended and mode is AutoresetMode.SAME_STEP else obs[g]
            events[g].append(("step", torch.as_tensor(actions[g]), rewards[g], terminated[g], truncated[g], final))
            if ended and mode is AutoresetMode.NEXT_STEP:
                waiting[g] = True
            elif ended and mode is AutoresetMode.SAME_STEP:
                assert bool(envs.per_game(infos["_final_obs"])[g].all())
                events[g].append(("start", obs[g]))
            elif ended:
                ended_games.append(g)
        if ended_games:
            mask = np.zeros(games, bool)
            mask[ended_games] = True
            obs, _ = envs.reset(options={**(options or {}), "reset_mask": mask})
            for g in ended_games:
                events[g].append(("start", envs.per_game(obs)[g]))
    for game in events:
        while game[-1][0] == "start":  # an episode the budget left no step for
            game.pop()
    return events


def episode_lengths(events):
    lengths, steps = [], 0
    for event in events[1:]:
        if event[0] == "start":
            lengths.append(steps)
            steps = 0
        else:
            steps += 1
    return lengths


CHASE = dict(num_taggers=2, num_runners=1, tagging_distance=0.3, episode_length=8)
ENDINGS = {
    # name: (Tag parameters, reset options, length of every episode or None when lengths vary)
    "time_limit": (dict(episode_length=5), None, 5),
    "every_runner_tagged_at_once": (INSTANT, {"initial_positions": CENTRE_TAGGER}, 1),
    "truncated_by_max_episode_steps": (dict(episode_length=15, max_episode_steps=3), None, 3),
    # Two taggers chase one runner: games end when it is caught, at different steps, or at step 8.
    "runner_caught_at_random_times": (CHASE, None, None),
}


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_every_mode_plays_the_same_episodes(device, ending):
    params, options, length = ENDINGS[ending]
    played = {mode: play(device, mode, params, seed=5, actions_per_game=12, options=options) for mode in MODES}
    reference = played[AutoresetMode.NEXT_STEP]
    for g, events in enumerate(reference):
        lengths = episode_lengths(events)
        if length is not None:
            assert lengths == [length] * (12 // length - (12 % length == 0)), f"game {g}: {lengths}"
        else:
            assert len(lengths) >= 1, f"game {g} never ended"
    if length is None:
        # Games end at different steps, so their resets interleave differently in each mode.
        assert len({tuple(episode_lengths(e)) for e in reference}) > 1
    for mode in (AutoresetMode.SAME_STEP, AutoresetMode.DISABLED):
        for g, (want, got) in enumerate(zip(reference, played[mode], strict=True)):
            assert [e[0] for e in got] == [e[0] for e in want], f"{mode.name}, game {g}: episodes differ"
            for i, (a, b) in enumerate(zip(want, got, strict=True)):
                for x, y in zip(a[1:], b[1:], strict=True):
                    assert torch.equal(x.cpu(), y.cpu()), f"{mode.name}, game {g}, event {i} ({a[0]}) differs"


# -- modes by name ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given, mode",
    [
        (AutoresetMode.NEXT_STEP, AutoresetMode.NEXT_STEP),
        ("NextStep", AutoresetMode.NEXT_STEP),
        ("next_step", AutoresetMode.NEXT_STEP),
        ("SameStep", AutoresetMode.SAME_STEP),
        ("SAME_STEP", AutoresetMode.SAME_STEP),
        (AutoresetMode.SAME_STEP, AutoresetMode.SAME_STEP),
        ("Disabled", AutoresetMode.DISABLED),
        ("disabled", AutoresetMode.DISABLED),
    ],
)
def test_autoreset_mode_is_reported_as_the_enum_member(given, mode):
    envs = make("cpu", given)
    assert isinstance(envs.metadata["autoreset_mode"], AutoresetMode)
    assert envs.metadata["autoreset_mode"] is mode
    assert envs.unwrapped.autoreset_mode is mode
    envs.close()


def test_default_autoreset_mode_is_next_step():
    envs = gym.make_vec("WarpTag-v0", num_envs=1, device="cpu", **TIMED)
    assert envs.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP


def test_unknown_autoreset_mode_is_rejected():
    with pytest.raises(ValueError, match=r"autoreset_mode must be .*'NextStep'.*got 'sometimes'"):
        make("cpu", "sometimes")


# -- truncation by max_episode_steps ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "episode_length, ends",
    [
        (15, [(False, False), (False, False), (False, True)]),  # the game's own end comes later: truncated
        (3, [(False, False), (False, False), (True, True)]),  # both at step 3
        (2, [(False, False), (True, False)]),  # the game's own end comes first: terminated
    ],
)
def test_max_episode_steps_truncates(device, episode_length, ends):
    envs = make(device, episode_length=episode_length, max_episode_steps=3)
    assert envs.unwrapped.max_episode_steps == 3
    obs, _ = envs.reset(seed=1)
    for want in ends:
        obs, _, terminated, truncated, _ = envs.step(NO_OP)
        assert (by_game(envs, terminated), by_game(envs, truncated)) == ([want[0]] * 2, [want[1]] * 2)
    obs, rewards, terminated, truncated, _ = envs.step(NO_OP)  # NEXT_STEP: the reset
    assert clock(envs, obs) == [0, 0] and not bool(truncated.any() or terminated.any() or rewards.any())
    for _ in range(len(ends)):
        _, _, terminated, truncated, _ = envs.step(NO_OP)
    assert by_game(envs, terminated | truncated) == [True, True]  # the limit applies to every episode


def test_same_step_reports_a_truncation_in_final_obs(device):
    envs = make(device, AutoresetMode.SAME_STEP, episode_length=15, max_episode_steps=3)
    envs.reset(seed=2)
    for _ in range(3):
        obs, _, terminated, truncated, infos = envs.step(NO_OP)
    assert by_game(envs, truncated) == [True, True] and by_game(envs, terminated) == [False, False]
    assert clock(envs, obs) == [0, 0]
    assert [round(c * 15) for c in envs.per_game(infos["final_obs"])[:, 0, CLOCK].tolist()] == [3, 3]
    assert bool(infos["_final_obs"].all())


# -- partial resets ---------------------------------------------------------------------------------------------


def test_partial_reset_keeps_the_unmasked_games():
    """Gymnasium's partial-reset test: masked games restart from their seeds, the others go on unchanged."""
    envs = make("cpu", AutoresetMode.DISABLED, games=3)
    twin = make("cpu", AutoresetMode.DISABLED, games=3)
    initial, _ = envs.reset(seed=[0, 1, 2])
    twin.reset(seed=[0, 1, 2])
    rng = np.random.default_rng(123)
    envs.action_space.seed(123)
    for _ in range(3):
        actions = envs.action_space.sample()
        step_obs, *_ = envs.step(actions)
        twin.step(actions)

    obs, _ = envs.reset(seed=[0, 1, 0], options={"reset_mask": np.array([True, True, False])})
    assert torch.equal(envs.per_game(obs)[:2], envs.per_game(initial)[:2])
    assert torch.equal(envs.per_game(obs)[2], envs.per_game(step_obs)[2])
    # The seed given for the unmasked game 2 is ignored: it plays on exactly like its twin.
    for _ in range(2):
        actions = rng.integers(0, 21, size=(envs.num_envs, 2))
        obs, rewards, *_ = envs.step(actions)
        twin_obs, twin_rewards, *_ = twin.step(actions)
        assert torch.equal(envs.per_game(obs)[2], twin.per_game(twin_obs)[2])
        assert torch.equal(envs.per_game(rewards)[2], twin.per_game(twin_rewards)[2])


@pytest.mark.parametrize("mode", MODES)
def test_partial_reset_mid_episode_in_every_mode(device, mode):
    envs = make(device, mode, games=3)
    envs.reset(seed=4)
    for _ in range(2):
        obs, *_ = envs.step(FULL_THROTTLE[:1].repeat(3, axis=0))
    before = {name: envs.state[name].clone() for name in ("x", "y", "speed", "direction", "t", "episode")}
    obs_after, infos = envs.reset(options={"reset_mask": np.array([False, True, False])})
    assert clock(envs, obs_after) == [2, 0, 2]
    for name, values in before.items():
        assert torch.equal(envs.state[name][[0, 2]], values[[0, 2]]), name
    assert torch.equal(envs.per_game(obs_after)[[0, 2]], envs.per_game(obs)[[0, 2]])
    assert torch.equal(envs.state["episode"][1], before["episode"][1] + 1)
    assert float(envs.state["speed"][1].abs().max()) == 0.0
    obs, *_ = envs.step(NO_OP[:1].repeat(3, axis=0))
    assert clock(envs, obs) == [3, 1, 3]


def test_masked_reset_leaves_a_finished_game_waiting_for_its_autoreset():
    """Gymnasium keeps an unmasked finished game as it ended; the next step autoresets it."""
    envs = make("cpu", AutoresetMode.NEXT_STEP, episode_length=3)
    envs.reset(seed=0)
    for _ in range(3):
        last_obs, _, terminated, _, _ = envs.step(NO_OP)
    assert by_game(envs, terminated) == [True, True]

    obs, _ = envs.reset(options={"reset_mask": np.array([True, False])})
    assert clock(envs, obs) == [0, 3]
    assert envs.state["t"].tolist() == [0, 3]
    assert torch.equal(envs.per_game(obs)[1], envs.per_game(last_obs)[1])
    obs, rewards, terminated, _, _ = envs.step(FULL_THROTTLE)
    assert clock(envs, obs) == [1, 0]  # game 1 is autoreset by this step, its actions ignored
    assert envs.per_game(rewards)[1].tolist() == [0.0, 0.0, 0.0]


def test_same_step_infos_of_a_reset_game_are_its_reset_infos():
    envs = make("cpu", AutoresetMode.SAME_STEP, games=1, episode_length=3, tagging_distance=0.1)
    # Runner 1 starts next to the tagger and is tagged at step 1; runner 2 is far away.
    start = np.array([[1.0, 1.0], [1.2, 1.0], [4.0, 4.0]], np.float32)
    envs.reset(seed=0, options={"initial_positions": start})
    for _ in range(3):
        obs, rewards, terminated, _, infos = envs.step(NO_OP[:1])
    assert terminated.tolist() == [True, True, True]
    assert infos["final_info"]["active"].tolist() == [True, False, True]  # runner 1 was out of the last step
    assert envs.state["alive"].tolist() == [[1, 1, 1]]  # the new episode has every runner back
    assert infos["active"].tolist() == [True, True, True]


def test_initial_draws_do_not_depend_on_the_mode():
    starts = [make("cpu", mode, games=4).reset(seed=8)[0] for mode in MODES]
    assert torch.equal(starts[0], starts[1]) and torch.equal(starts[0], starts[2])
