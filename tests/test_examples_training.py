"""Smoke runs of the training examples on the CPU: two PPO iterations on tiny Tag games, then a recorded rollout.

Each example runs in its own process, as a user would run it, and the test
checks the files it promises: command, TensorBoard events, checkpoints,
curves (JSON and PNG), the evaluation figures, the GIF and its still.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import SMALL_TAG
from PIL import Image

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TINY = [f"--env-kwarg={key}={value}" for key, value in SMALL_TAG.items()]  # 2 taggers + 5 runners, 15-step games
# Two iterations of 4 games x 8 steps; a fetch of the statistics and a checkpoint after each.
TWO_ITERATIONS = ["--device", "cpu", "--num-envs", "4", "--num-steps", "8", "--total-timesteps", "64", "--log-every",
                  "1", "--save-every", "1", "--eval-games", "3", "--hidden-size", "16", *TINY]  # fmt: skip


def run_example(script: str, *args: str) -> subprocess.CompletedProcess:
    # One thread each for torch and Numba: on a small shared CPU their two thread pools otherwise contend.
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(EXAMPLES / script), *args], env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def two_policy_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ppo_two_policies")
    run_example("cleanrl_ppo_tag.py", *TWO_ITERATIONS, "--out", str(out))
    return out


def test_ppo_writes_curves_checkpoints_tensorboard_and_evaluation(two_policy_run):
    out = two_policy_run
    assert (out / "command.txt").read_text().startswith("python ")
    assert list((out / "tb").glob("events.out.tfevents.*"))
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["final.pt", "iter_1.pt"]
    with Image.open(out / "learning_curves.png") as png:
        assert png.format == "PNG" and png.width > 400
    curves = json.loads((out / "curves.json").read_text())
    assert [c["game_steps"] for c in curves] == [32, 64]  # 4 games x 8 steps per iteration
    assert all(c["agent_steps_per_s"] > 0 and 0 < c["rollout_fraction"] < 1 for c in curves)
    assert curves[-1]["episodes"] > 0  # the games the staggered start reset last end whole episodes within 16 steps

    summary = json.loads((out / "summary.json").read_text())
    assert summary["policies"] == ["tagger", "runner"]
    assert summary["game_steps"] == 64 and summary["agent_steps"] == 64 * 7
    assert summary["end_to_end_agent_steps_per_s"] > 0

    evaluation = json.loads((out / "evaluation.json").read_text())
    assert evaluation["games_per_matchup"] == 3 and evaluation["episode_length"] == 15
    for matchup in evaluation["matchups"].values():
        assert 0 <= matchup["tags_per_game"]["mean"] <= 5  # five runners a game
        assert 0 < matchup["runner_steps_alive"]["mean"] <= 15
    evidence = evaluation["evidence"]
    taggers, runners = evidence["taggers_vs_trained_runners"], evidence["runners_vs_trained_taggers"]
    assert set(taggers["tags_per_game"]) == {"a_trained_taggers", "b_random_taggers", "ratio"}
    assert set(runners["runner_steps_alive"]) == {"c_trained_runners", "d_random_runners", "ratio"}


def test_ppo_checkpoint_holds_one_policy_per_role(two_policy_run):
    checkpoint = torch.load(two_policy_run / "checkpoints" / "final.pt", weights_only=False)
    assert set(checkpoint["policies"]) == {"tagger", "runner"}
    assert checkpoint["iteration"] == 2 and checkpoint["game_steps"] == 64
    assert checkpoint["env_kwargs"] == SMALL_TAG


def test_ppo_with_one_shared_policy(tmp_path):
    run_example("cleanrl_ppo_tag.py", *TWO_ITERATIONS, "--shared-policy", "--eval-games", "0",
                "--no-track-tensorboard", "--out", str(tmp_path))  # fmt: skip
    checkpoint = torch.load(tmp_path / "checkpoints" / "final.pt", weights_only=False)
    assert set(checkpoint["policies"]) == {"shared"}
    assert (tmp_path / "learning_curves.png").exists()
    assert not (tmp_path / "tb").exists() and not (tmp_path / "evaluation.json").exists()


def test_evaluation_of_a_saved_checkpoint(two_policy_run, tmp_path):
    proc = run_example("cleanrl_ppo_tag.py", "--eval-only", "--checkpoint", str(two_policy_run / "checkpoints" /
                       "iter_1.pt"), "--device", "cpu", "--eval-games", "2", "--out", str(tmp_path))  # fmt: skip
    evaluation = json.loads((tmp_path / "evaluation.json").read_text())
    assert evaluation["games_per_matchup"] == 2 and evaluation["checkpoint"].endswith("iter_1.pt")
    assert "tags per game" in proc.stdout


def test_record_rollout_from_a_checkpoint_writes_a_gif_and_a_still(two_policy_run, tmp_path):
    gif, still = tmp_path / "rollout.gif", tmp_path / "still.png"
    run_example("record_rollout.py", "--checkpoint", str(two_policy_run / "checkpoints" / "final.pt"), "--games", "2",
                "--steps", "6", "--frame-every", "2", "--arena-pixels", "64", "--device", "cpu", "--out", str(gif),
                "--still", str(still), "--still-step", "3")  # fmt: skip
    with Image.open(gif) as image:
        assert image.format == "GIF"
        assert image.n_frames == 4  # steps 0, 2, 4, 6
        assert image.size == (2 * 80 + 4, 80)  # two 80-pixel games side by side, 4 pixels apart
    with Image.open(still) as image:
        assert image.size == (2 * 80 + 4, 80)


def test_record_rollout_with_random_actions(tmp_path):
    gif = tmp_path / "random.gif"
    proc = run_example("record_rollout.py", "--games", "1", "--steps", "3", "--frame-every", "1", "--device", "cpu",
                       "--arena-pixels", "32", "--out", str(gif), *TINY)  # fmt: skip
    assert "random actions" in proc.stdout
    with Image.open(gif) as image:
        assert image.n_frames == 4 and image.size == (48, 48)


@pytest.mark.gpu
def test_ppo_loop_never_syncs_with_the_gpu(tmp_path):
    """Outside the log and checkpoint iterations, nothing in the loop waits for the device."""
    run_example("cleanrl_ppo_tag.py", "--device", "cuda", "--num-envs", "8", "--num-steps", "8", "--total-timesteps",
                "320", "--log-every", "5", "--save-every", "0", "--eval-games", "0", "--check-no-sync", *TINY,
                "--out", str(tmp_path))  # fmt: skip
    assert (tmp_path / "checkpoints" / "final.pt").exists()
