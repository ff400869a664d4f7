"""The rollout benchmark runs end to end on the CPU and writes numbers that hang together."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import torch

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)

ROOT = Path(__file__).resolve().parents[1]


def test_quick_preset_on_cpu_writes_consistent_results(tmp_path):
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_step.py"), "--preset", "quick", "--backend", "cpu",
               "--peers", "--markdown", "--max-registers", "40", "--game-work", "staged", "--threads-per-block", "64",
               "--out", str(tmp_path)]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    result = json.loads((tmp_path / "bench_step.json").read_text())
    assert result["meta"]["backend"] == "cpu" and result["meta"]["copy_bandwidth"]["GB_per_s"] > 0
    rows = result["rows"]
    assert {(r["obs"], r["copy"]) for r in rows} == {("K=3", True), ("full", False)}
    for row in rows:
        steps_per_s = 1e3 / row["ms_per_step"]
        assert row["game_steps_per_s"] == pytest.approx(row["games"] * steps_per_s)
        assert row["agent_steps_per_s"] == pytest.approx(row["game_steps_per_s"] * row["agents"])
        assert row["host_us"] > 0 and row["kernel_us"] > 0 and row["setup_s"] > 0
        assert row["max_registers"] == 40  # asked of every row (the CPU backend has no registers to cap)
        assert row["game_work"] == "staged"
        assert row["threads_per_block"] is None  # asked of every row, but the CPU backend has no blocks
        moved = row["bytes"]
        # The kernel reads and writes the state, reads the actions and writes the outputs, observations included.
        assert moved["kernel"] > 2 * moved["state"] + moved["outputs"] > moved["obs"] > 0
        assert moved["copy"] == (2 * moved["outputs"] if row["copy"] else 0)
        baseline = row["sync_reference"]
        # SyncVectorEnv over the numpy reference starts the same games from the same seeds.
        assert baseline["max_abs_diff_first_obs"] < 1e-6
        assert row["x_sync_reference"] == pytest.approx(baseline["ms_per_step"] / row["ms_per_step"])
        assert "warpdrive" not in row and "vmas" not in row  # GPU peers: not run on the CPU backend
    table = (tmp_path / "bench_step.txt").read_text()
    assert "quick 2+5 K=3" in table and "quick 1+3 full" in table
    # Runs under different register caps or per-game work can be told apart by their tables too, not only by
    # their JSON.
    assert re.search(r"quick 2\+5 K=3\s+4\s+2\+5\s+K=3\s+40\s+staged\s+T\s", table), table
    markdown = (tmp_path / "bench_step.md").read_text()
    assert "| 2+5 K=3 | 4 | True |" in markdown
    # The markdown rows name the kernel time, register cap and per-game work, as the text table does.
    assert re.search(r"\| 2\+5 K=3 \| 4 \| True \|( [^|]+ \|){4} 40 \| staged \|", markdown), markdown
    assert len(result["meta"]["sources_sha256"]) == 64  # identifies the code that ran, whatever the git history
    assert result["meta"]["actions"] == "copied into the env by step"


def test_actions_drawn_into_the_action_buffer_are_said_so(tmp_path):
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_step.py"), "--preset", "quick", "--backend", "cpu",
               "--cases", "1+3", "--no-baseline", "--actions-in-place", "--out", str(tmp_path)]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((tmp_path / "bench_step.json").read_text())
    assert result["meta"]["actions"] == "drawn into action_buffer"
    assert "--actions-in-place" in (tmp_path / "bench_step.txt").read_text().splitlines()[0]
    assert [row["games"] * row["agents"] for row in result["rows"]] == [16]


def test_the_agents_per_game_table_names_the_search_and_a_peer_that_cannot_launch():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_step import markdown_summary

    def row(agents, search, warpdrive):
        return {"group": "scale", "agents": agents, "games": 2, "search": search, "ms_per_step": 0.002,
                "warpdrive": warpdrive}  # fmt: skip

    launch_error = {"error": "CUDAError: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources requested"}
    rows = [row(10, "scan", {"ms_per_step": 0.004}), row(10, "index", {"ms_per_step": 0.004}),
            row(1000, "index", launch_error)]  # fmt: skip
    text = markdown_summary(rows, {"backend": "cuda", "device_name": "GPU", "date": "today", "scale_total_agents": 20})
    assert "| 10 | 2 | scan | 100.00 | 200.00 |" in text
    assert "| 10 | 2 | index | 100.00 | 200.00 |" in text
    assert "| 1000 | 2 | index | 1.00 | fails to launch |" in text


def test_the_index_preset_takes_the_agents_per_game_to_sweep():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_step import index_preset

    cases = index_preset(1200, agents=(12, 400))
    assert [(c.name, c.games, c.taggers + c.runners, c.spatial_index) for c in cases] == [
        ("N=12 scan", 100, 12, False), ("N=12 index", 100, 12, True),
        ("N=400 scan", 3, 400, False), ("N=400 index", 3, 400, True),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--scale-agents", "1"], "--scale-agents: every game needs at least 2 agents"),
        (["--scale-agents", "500", "--scale-total-agents", "300"], "must be at least the largest --scale-agents, 500"),
        (["--max-registers", "8"], "--max-registers: expected an integer in [16, 255], 'none' or 'auto', got 8"),
        (["--copy", "true"], "--copy true: no case of the presets index has it"),
        (["--threads-per-block", "0"], "--threads-per-block must be in [1, 1024], got 0"),
        (["--games", "1980", "0"], "--games: every number of games must be at least 1, got 0"),
    ],
)
def test_a_sweep_that_cannot_be_run_is_refused_before_anything_runs(arguments, message):
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_step.py"), "--backend", "cpu", "--preset", "index",
               *arguments]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]


def test_peer_workers_find_their_jobs_under_a_relative_out_directory(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from bench_step import run_peer

    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    outcome = run_peer("vmas", [{"key": "job"}], Path("out"), timeout_s=120)
    # Without VMAS the worker records why it could not import it; with it, why the job was malformed.
    # Either way it read the jobs file: a worker that cannot find it exits without a word per job.
    error = outcome["results"]["job"]["error"]
    assert "worker exited" not in error and "no result" not in error, outcome["log_tail"]


def test_the_results_say_whether_the_commit_holds_the_sources_that_ran(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from bench_step import git_state

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)  # fmt: skip

    (tmp_path / "gpu_vecenv").mkdir()
    (tmp_path / "envs").mkdir()
    (tmp_path / "gpu_vecenv" / "a.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "one")
    state = git_state(tmp_path)
    assert len(state["git_commit"]) == 40 and state["git_commit_has_sources"] is True
    (tmp_path / "README.md").write_text("not a source\n")
    assert git_state(tmp_path)["git_commit_has_sources"] is True
    (tmp_path / "gpu_vecenv" / "a.py").write_text("x = 2\n")  # as a tree copied over an older checkout
    assert git_state(tmp_path)["git_commit_has_sources"] is False
    git("checkout", "-q", "--", "gpu_vecenv")
    (tmp_path / "envs" / "new.py").write_text("y = 1\n")
    assert git_state(tmp_path)["git_commit_has_sources"] is False
    assert git_state(tmp_path.parent / "no_such_dir") == {}


def test_host_parts_times_every_part_of_a_step_on_the_cpu(tmp_path):
    out = tmp_path / "parts.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "host_parts.py"), "--device", "cpu", "--games", "4",
               "--param", "num_taggers=1", "--param", "num_runners=3", "--param", "num_other_agents_observed=3",
               "--out", str(out)]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    parts = json.loads(out.read_text())["parts"]
    assert list(parts) == ["draw (in place)", "step, fixed actions", "load actions",
                           "launch (a graph replay on a GPU)", "rollout step (draw + step)",
                           "rollout step, drawn into action_buffer"]  # fmt: skip
    assert all(part["pace_us"] > 0 and part["host_us"] > 0 for part in parts.values())
    # Loading the actions is a small part of a step (the CPU kernel is most of it).
    assert parts["load actions"]["host_us"] < parts["step, fixed actions"]["host_us"]


def test_arena_views_times_the_fresh_output_batches_under_each_cap():
    command = [sys.executable, str(ROOT / "benchmarks" / "arena_views.py"), "--caps-mb", "8", "64", "--steps", "50"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # 100 games of 110 agents make 3.16 MB of outputs a step: 2 slots fit in 8 MB, 20 in 64 MB.
    assert re.search(r"100 games x 110 agents, obs 73 \(3.16 MB a step\), cap 8 MB: 2 slots a batch", proc.stdout)
    assert re.search(r"100 games x 110 agents, obs 73 \(3.16 MB a step\), cap 64 MB: 20 slots a batch", proc.stdout)
    assert proc.stdout.startswith("default cap: 64 MB on a GPU, 8 MB elsewhere; at most 64 slots a batch")


def test_arena_views_times_the_fresh_slots_a_kernel_writes_itself():
    command = [sys.executable, str(ROOT / "benchmarks" / "arena_views.py"), "--caps-mb", "64", "--steps", "20",
               "--same-step", "--fresh-for-kernel"]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # 5+100 agents with the full observation at 2000 games, final_obs included: 1171 MB a step, one a batch.
    assert re.search(r"2000 games x 105 agents, obs 730 \(1171\.\d\d MB a step\), cap 64 MB: 1 slots a batch",
                     proc.stdout)  # fmt: skip


def test_arena_views_times_the_slots_named_through_the_ring_in_rounds():
    command = [sys.executable, str(ROOT / "benchmarks" / "arena_views.py"), "--caps-mb", "64", "--steps", "20",
               "--ring-slot", "--rounds", "3"]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert re.search(r"100 games x 110 agents, obs 73 \(3.16 MB a step\), cap 64 MB: 20 slots a batch, "
                     r"\d+\.\d\d \(min \d+\.\d\d\) us a step", proc.stdout)  # fmt: skip
    assert re.search(r"2000 games x 110 agents, .*: 1 slots a batch, the ring is not used at one slot a batch",
                     proc.stdout)  # fmt: skip


def test_the_block_size_option_reaches_the_env_only_where_named():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_step import Case, _named_options

    case = Case("10+100 K=10, 100 games", 100, 10, 100)
    assert "threads_per_block" not in _named_options(case)
    assert _named_options(dataclasses.replace(case, threads_per_block=128))["threads_per_block"] == 128


def test_another_number_of_games_renames_the_case_and_drops_what_held_for_its_own():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_step import targets_preset, with_games

    headline = next(case for case in targets_preset() if case.name.startswith("100+900") and case.setup_probe)
    assert with_games(headline, 2000) is headline
    other = with_games(headline, 1980)
    assert (other.name, other.games, other.key) == ("100+900 K=10, 1980 games", 1980, "1980x100+900:K=10")
    assert other.targets == () and other.spec_warpdrive_ms is None and not other.setup_probe
    assert (other.taggers, other.runners, other.copy) == (headline.taggers, headline.runners, headline.copy)


def test_the_register_cap_option_takes_a_cap_none_or_auto():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_step import register_cap

    assert register_cap("48") == 48 and register_cap("none") is None and register_cap("auto") == "auto"
    for text in ("256", "forty"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"expected an integer in \[16, 255\], 'none' or 'auto'"):
            register_cap(text)


def test_the_kernel_column_launches_a_direct_write_env_into_a_fresh_slot(monkeypatch):
    # Such an env has no output buffer of its own, and its backend refuses to launch into one.
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from rollout_timing import step_kernel_launch

    envs = gym.make_vec("WarpTag-v0", num_envs=2, device="cpu", direct_write_bytes=0)
    envs.reset(seed=0)
    assert envs.unwrapped.direct_write
    step_kernel_launch(envs.unwrapped)()
    copied = gym.make_vec("WarpTag-v0", num_envs=2, device="cpu")
    copied.reset(seed=0)
    step_kernel_launch(copied.unwrapped)()


@pytest.mark.parametrize("nvec", [(21, 21), (3, 7, 2)], ids=["equal-levels", "mixed-levels"])
def test_the_in_place_draw_fills_every_component_within_its_levels(monkeypatch, nvec):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from rollout_timing import in_place_draw

    actions = torch.full((4000, len(nvec)), -1, dtype=torch.int64)
    draw = in_place_draw(actions, nvec)
    assert draw() is actions
    for k, levels in enumerate(nvec):
        # 4000 draws of at most 21 levels: every level comes up, none outside them.
        assert sorted(actions[:, k].unique().tolist()) == list(range(levels))
    before = actions.clone()
    draw()
    assert not torch.equal(actions, before)
    with pytest.raises(ValueError, match="must end in 2 components"):
        in_place_draw(torch.zeros((5, 3), dtype=torch.int64), (21, 21))
