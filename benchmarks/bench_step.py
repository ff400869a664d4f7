"""Rollout throughput of WarpTag-v0 over games × agents × observation mode × backend, beside its peers.

    python benchmarks/bench_step.py --preset targets scale --peers --out DIR --markdown   # on a GPU
    python benchmarks/bench_step.py --backend cpu --out DIR      # CPU backend vs SyncVectorEnv over the numpy reference
    python benchmarks/bench_step.py --preset quick --backend cpu # smoke run, seconds

Writes DIR/bench_step.json (every number, the machine, the versions, the
command) and DIR/bench_step.txt (the tables), and with ``--markdown``
DIR/bench_step.md (a summary with ratios, for the README).

Every row builds ``gym.make_vec("WarpTag-v0", num_envs=games, ...)``, resets it
with ``seed=0`` and times a rollout: random actions drawn on the env's device
(in place into one tensor, one ``random_`` for all components of equal levels, as for WarpDrive;
that tensor the benchmark's own, which ``step`` copies into the env, or with ``--actions-in-place``
the env's ``action_buffer``, read where it is, as WarpDrive reads its actions),
``step`` with NEXT_STEP autoreset, no host sync inside the timed loop (on a GPU,
torch's sync-debug mode counts any torch op that syncs there). Per row:

- ms/step, game-steps/s, agent-steps/s: the rollout (draw + ``step``) between two
  CUDA events; on the CPU, the wall clock.
- host µs: wall time of the ``step`` call alone, in bursts the GPU's queue absorbs.
- kernel µs: CUDA events around the env's step launch alone (``envs._backend``,
  see ``gpu_vecenv/backends.py``), recorded behind a device-side sleep so that the
  host's launch latency is not counted.
- bytes per step, counted from the env's buffers: every state buffer read and
  written, the action buffer read, the output arena written (``copy=True`` moves
  the arena once more; that is listed apart). All of the arena counts as written,
  also where a kept observation (``copy=False``) leaves the rows of agents out of
  the game as they are (``benchmarks/NOTES.md`` v64): there the figure is an upper bound. Over the kernel time, as a
  fraction of the device-to-device copy bandwidth measured in the same run
  (read + written); ``obs %bw``: the observation bytes alone.
- memory per game: ``torch.cuda.memory_allocated`` after construction and reset,
  less before, over games (on the CPU: the bytes of the env's buffers).
- set-up: construction + first reset. ``cold``: this process compiled the kernel
  (the kernel cache, ``GPU_VECENV_CACHE_DIR``, did not have it), ``warm``: loaded
  from that cache, ``in-process``: an earlier row of this run loaded it. The
  2000 × 1000 target is also set up in two fresh processes, with an empty and
  then with the filled cache.

Presets (``--preset``, several allowed):

- ``targets``: the configurations of the performance issue, ``copy=True`` (default)
  and ``copy=False``: 10+100 agents, K=10, 2000 and 100 games; 5+100 full observation,
  2000 games; 1+3 full observation, 10000 games; 2000 games of 100+900 agents, K=10;
  host time per ``step()`` at 64 games of 1+3 agents (K=3). The WarpDrive figures of
  the game specification (H200) are kept beside the ones measured here.
- ``scale``: N = 10 … 4096 agents per game (one tagger in 11, K = min(10, N-1)),
  ``copy=False``, at a fixed total of 2**19 agents (games = 2**19 // N). A fixed
  total keeps the work per step and the filling of the GPU about constant
  (N = 4096 still has 128 games, about one per multiprocessor), so the cost per
  agent-step shows how the per-agent work grows with N; a fixed number of games
  would leave the GPU nearly idle at small N and measure launch overhead there.
- ``index``: the ``scale`` sizes twice, the K nearest found by scanning every agent
  and through WarpTag-v0's spatial index (``spatial_index=False`` / ``True``), with
  WarpDrive beside them up to 1000 agents under ``--peers``.
  ``--scale-total-agents`` sets the total (both presets) for a smaller machine.
- ``outputs``: ``copy=True`` at growing output sizes (5+100 full observation, 63 to
  2000 games; 10+100 K=10, 2000 and 8000 games): run with ``--direct-write-bytes 0``
  and with a larger value than any to see from which size the kernel writing the
  fresh outputs itself beats copying them.
- ``cpu``: the CPU backend against ``SyncVectorEnv`` over the numpy reference
  (``benchmarks/sync_reference.py``), same games and seeds; run whenever ``--backend cpu``
  (``--no-baseline`` skips it). On the CPU each row takes three timed windows (the
  median is reported, and the best). With few cores, torch's and Numba's OpenMP threads
  spin against each other unless ``OMP_WAIT_POLICY=passive`` is set (see
  ``benchmarks/results/cpu_2026-12-03/README.md``).
- ``quick``: tiny sizes, a few steps (smoke test).

``--cases TEXT...`` keeps only the cases whose name contains one of the texts, e.g.
``--preset targets index --cases 100+900 "N=1000 "``; ``--copy true`` or ``false`` keeps
only the cases that step with that ``copy``.

Peers (``--peers``, GPU only, each in a worker process, see ``benchmarks/peers.py``):
WarpDrive 2.7.1's Numba Tag continuous with the same configuration (for N <= 1000:
one thread per agent, 1024 at most; not at 2000 × 1000, whose set-up the
specification puts over 7 minutes for 200 games), and VMAS 1.5.2's ``simple_tag``
at matched agent counts (10000 × 1+3, 100 and 2000 × 10+100: it takes seconds per
step at 110 agents). A peer that cannot be imported or built is recorded with its
error and the run goes on.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from anywhere: the project's envs package sits beside gpu_vecenv

from peers import warpdrive_kwargs  # noqa: E402
from rollout_timing import (  # noqa: E402
    copy_bandwidth,
    device_us_per_launch,
    host_us_per_call,
    in_place_draw,
    step_kernel_launch,
    synchronize,
    time_rollout,
)
from sync_reference import make_sync_reference  # noqa: E402

import gpu_vecenv  # noqa: E402,F401  (registers WarpTag-v0)
from envs.tag_continuous.config import TagConfig  # noqa: E402
from gpu_vecenv.codegen import cache_dir  # noqa: E402

# ---------------------------------------------------------------------------------------------------------------
# Configurations


@dataclass(frozen=True)
class Target:
    """A goal of the performance issue: ``metric`` of the row at least (or at most) ``bound``."""

    metric: str
    bound: float
    at_least: bool = True

    def text(self) -> str:
        return {
            "x_warpdrive": f">= {self.bound:g}x WarpDrive",
            "x_sync_reference": f">= {self.bound:g}x SyncVectorEnv",
            "game_steps_per_s": f">= {self.bound / 1e6:g} M game-steps/s",
            "host_us": f"host <= {self.bound:g} us",
            "setup_cold_s": f"set-up < {self.bound:g} s",
            "obs_bw_fraction": f"obs write >= {100 * self.bound:g}% copy bw",
        }[self.metric]


@dataclass(frozen=True)
class Case:
    """One row: ``games`` games of ``taggers + runners`` agents, K-nearest (``k``) or full observation."""

    name: str
    games: int
    taggers: int
    runners: int
    full_obs: bool = False
    k: int = 10
    copy: bool = True
    peers: tuple[str, ...] = ()
    targets: tuple[Target, ...] = ()
    spec_warpdrive_ms: float | None = None  # the game specification's H200 figure for this configuration
    setup_probe: bool = False
    group: str = "targets"
    spatial_index: bool | None = None  # WarpTag-v0's choice (SPATIAL_INDEX_MIN_AGENTS) unless set
    max_registers: int | str | None = "auto"  # WarpTag-v0's register cap ("auto": its default; None: the compiler's)
    game_work: str | None = None  # WarpTag-v0's per-game work, "serial" or "staged" (None: its default)
    direct_write_bytes: int | None = None  # the env's option (None: the device's default)
    block_scratch_bytes: int | None = None  # WarpTag-v0's shared memory for the step's scratch (None: its default)
    index_cells: int | None = None  # WarpTag-v0's spatial index's cells per side (None: its default)
    threads_per_block: int | None = None  # the CUDA threads of a game's block (None: the env's default)

    @property
    def agents(self) -> int:
        return self.taggers + self.runners

    @property
    def obs_label(self) -> str:
        return "full" if self.full_obs else f"K={self.tag_config().num_other_agents_observed}"

    @property
    def key(self) -> str:
        """Identifies the simulated configuration, whatever the options of our env; peers are matched on it."""
        return f"{self.games}x{self.taggers}+{self.runners}:{self.obs_label}"

    def tag_config(self) -> TagConfig:
        return TagConfig(num_taggers=self.taggers, num_runners=self.runners, use_full_observation=self.full_obs,
                         num_other_agents_observed=min(self.k, self.agents - 1))  # fmt: skip


def targets_preset() -> list[Case]:
    both = ("warpdrive", "vmas")
    cases = []
    for copy in (True, False):
        cases += [
            Case("10+100 K=10, 2000 games", 2000, 10, 100, copy=copy, peers=both, spec_warpdrive_ms=1.20,
                 targets=(Target("x_warpdrive", 12),)),
            Case("10+100 K=10, 100 games", 100, 10, 100, copy=copy, peers=both, spec_warpdrive_ms=0.76,
                 targets=(Target("x_warpdrive", 20),)),
            Case("5+100 full, 2000 games", 2000, 5, 100, full_obs=True, copy=copy, peers=("warpdrive",),
                 spec_warpdrive_ms=9.48, targets=(Target("x_warpdrive", 25), Target("obs_bw_fraction", 0.5))),
            Case("1+3 full, 10000 games", 10000, 1, 3, full_obs=True, copy=copy, peers=both,
                 spec_warpdrive_ms=1.14, targets=(Target("x_warpdrive", 10),)),
        ]  # fmt: skip
    headline = (Target("game_steps_per_s", 2.9e6), Target("setup_cold_s", 30, at_least=False))
    # Both ways, as the other targets: copy=True moves the observation (576 MB a step here) once more.
    cases.append(Case("100+900 K=10, 2000 games", 2000, 100, 900, setup_probe=True, targets=headline))
    cases.append(Case("100+900 K=10, 2000 games", 2000, 100, 900, copy=False, targets=headline[:1]))
    for copy, bound in ((False, 30), (True, 50)):
        cases.append(Case("host time, 64 games of 1+3", 64, 1, 3, k=3, copy=copy,
                          targets=(Target("host_us", bound, at_least=False),)))  # fmt: skip
    return cases


SCALE_TOTAL_AGENTS = 1 << 19
SCALE_AGENTS = (10, 30, 100, 300, 1000, 2000, 4096)
WARPDRIVE_MAX_AGENTS = 1024  # one thread per agent, one block per game


def scale_preset(total_agents: int = SCALE_TOTAL_AGENTS, agents: tuple[int, ...] = SCALE_AGENTS) -> list[Case]:
    cases = []
    for n in agents:
        taggers = max(1, n // 11)
        peers = ("warpdrive",) if n <= WARPDRIVE_MAX_AGENTS else ()
        cases.append(Case(f"N={n}", total_agents // n, taggers, n - taggers, k=10, copy=False, peers=peers,
                          group="scale"))  # fmt: skip
    return cases


def index_preset(total_agents: int = SCALE_TOTAL_AGENTS, agents: tuple[int, ...] = SCALE_AGENTS) -> list[Case]:
    """The scale sizes twice: K-nearest by scanning every agent, and through the spatial index."""
    return [replace(case, name=f"{case.name} {'index' if indexed else 'scan'}", spatial_index=indexed)
            for case in scale_preset(total_agents, agents) for indexed in (False, True)]  # fmt: skip


def outputs_preset() -> list[Case]:
    """``copy=True`` over output sizes (all games' outputs, 19 MB to 613 MB a step): with
    ``--direct-write-bytes 0`` and then a larger value than any, where the kernel writing the fresh outputs
    itself starts to pay over copying them (``gpu_vecenv.outputs.DIRECT_WRITE_BYTES``)."""
    cases = [Case(f"5+100 full, {games} games", games, 5, 100, full_obs=True, group="outputs")
             for games in (63, 125, 250, 500, 1000, 2000)]  # fmt: skip
    cases += [Case(f"10+100 K=10, {games} games", games, 10, 100, group="outputs") for games in (2000, 8000)]
    return cases


def cpu_preset() -> list[Case]:
    ref = ("sync_reference",)
    x100 = (Target("x_sync_reference", 100),)
    return [
        Case("10+100 K=10, 32 games", 32, 10, 100, peers=ref, targets=x100, group="cpu"),
        Case("1+3 full, 1024 games", 1024, 1, 3, full_obs=True, peers=ref, targets=x100, group="cpu"),
    ]


def quick_preset() -> list[Case]:
    ref = ("sync_reference",)
    return [
        Case("quick 2+5 K=3", 4, 2, 5, k=3, peers=ref, group="quick"),
        Case("quick 1+3 full", 4, 1, 3, full_obs=True, copy=False, peers=ref, group="quick"),
    ]


PRESETS = {"targets": targets_preset, "scale": scale_preset, "index": index_preset, "outputs": outputs_preset,
           "cpu": cpu_preset, "quick": quick_preset}  # fmt: skip
SIZED_PRESETS = ("scale", "index")  # take the total number of agents a step and the agents per game


@dataclass(frozen=True)
class Timing:
    """Step counts of the timed loops (see ``rollout_timing.time_rollout``)."""

    warmup: int
    min_steps: int
    max_steps: int
    budget_s: float
    kernel_repeats: int
    host_calls: int
    windows: int = 1  # timed windows per row: the median is reported, and the best


TIMING = {
    "cuda": Timing(warmup=20, min_steps=200, max_steps=500, budget_s=0.5, kernel_repeats=30, host_calls=200),
    "cpu": Timing(warmup=2, min_steps=10, max_steps=200, budget_s=1.0, kernel_repeats=10, host_calls=40, windows=3),
    "quick": Timing(warmup=1, min_steps=2, max_steps=5, budget_s=0.05, kernel_repeats=2, host_calls=4),
}
PEER_TIMING = {"warpdrive": dict(warmup=3, min_steps=20, max_steps=300, budget_s=1.0),
               "vmas": dict(warmup=1, min_steps=3, max_steps=300, budget_s=2.0)}  # fmt: skip

# ---------------------------------------------------------------------------------------------------------------
# Our env


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def step_bytes(env: Any) -> dict[str, int]:
    """Bytes one step moves, from the env's buffers: state read + written, actions read, outputs written.

    ``copy``: what ``copy=True`` moves on top (the output arena read and written once more), unless the
    kernel writes the fresh outputs itself (``direct_write``).
    """
    state = sum(_nbytes(t) for t in env._buffers.values())
    params = sum(_nbytes(t) for t in env._params)
    actions = _nbytes(env._actions)
    arena = env._arena
    outputs = arena.nbytes() if callable(arena.nbytes) else int(arena.nbytes)
    obs = _nbytes(arena.kernel.obs)
    copied = env.copy and not env.direct_write
    return {"state": state, "params": params, "actions": actions, "outputs": outputs, "obs": obs,
            "kernel": 2 * state + params + actions + outputs, "copy": 2 * outputs if copied else 0}  # fmt: skip


def git_state(root: Path) -> dict[str, Any]:
    """``git_commit`` (HEAD of the checkout at ``root``) and ``git_commit_has_sources``: whether the package and
    envs there are exactly that commit's (no edit, no untracked file). A tree copied without its current
    history shows an older HEAD and ``False``; then only ``sources_sha256`` names the code that ran."""
    info: dict[str, Any] = {}
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return info
        info["git_commit"] = head.stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain", "--", "gpu_vecenv", "envs"], cwd=root,
                                capture_output=True, text=True, timeout=30)  # fmt: skip
        if status.returncode == 0:
            info["git_commit_has_sources"] = status.stdout.strip() == ""
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def strip_paths(text: str) -> str:
    """``text`` with every absolute path cut to its last part (results files name no machine's folders)."""
    return re.sub(r"(?<![\w.])/(?:[\w.+-]+/)+([\w.+-]+)", r".../\1", text)


def _kernel_modules() -> set[str]:
    return {name for name in sys.modules if name.startswith("gpu_vecenv_kernel_")}


def _cache_files() -> set[Path]:
    root = cache_dir()
    return set(root.rglob("*")) if root.exists() else set()


def _allocated(device: torch.device) -> int:
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else 0


def _named_options(case: Case) -> dict[str, int]:
    """The ``block_scratch_bytes``, ``index_cells`` and ``threads_per_block`` keywords of ``case``'s env, where
    it names them (else the defaults; ``index_cells`` only where the case's games are large enough to take it)."""
    named = {} if case.block_scratch_bytes is None else {"block_scratch_bytes": case.block_scratch_bytes}
    if case.index_cells is not None and case.index_cells**2 + 1 <= case.agents:
        named["index_cells"] = case.index_cells
    if case.threads_per_block is not None:
        named["threads_per_block"] = case.threads_per_block
    return named


def build_env(case: Case, device: torch.device) -> tuple[Any, float]:
    """Make and reset the env of ``case``; returns it and the set-up seconds (construction + first reset)."""
    synchronize(device)
    t0 = time.perf_counter()
    envs = gym.make_vec("WarpTag-v0", num_envs=case.games, device=str(device), copy=case.copy,
                        spatial_index=case.spatial_index, max_registers=case.max_registers, game_work=case.game_work,
                        direct_write_bytes=case.direct_write_bytes, **_named_options(case),
                        **asdict(case.tag_config()))  # fmt: skip
    obs, _ = envs.reset(seed=0)
    synchronize(device)
    del obs
    return envs.unwrapped, time.perf_counter() - t0


def measure_ours(case: Case, device: torch.device, timing: Timing, actions_in_place: bool = False) -> dict[str, Any]:
    """Every measurement of our env for one row (see the module docstring); ``actions_in_place``: the actions
    drawn into the env's ``action_buffer``, which ``step`` reads where they are, instead of a tensor of the
    benchmark's own that ``step`` copies."""
    modules, files = _kernel_modules(), _cache_files()
    gc.collect()
    mem_before = _allocated(device)
    env, setup_s = build_env(case, device)
    mem_after = _allocated(device)
    if not _kernel_modules() - modules:
        setup_cache = "in-process"
    else:
        setup_cache = "cold" if _cache_files() - files else "warm"

    search = (
        "-" if case.full_obs else ("index" if "cell_start" in {a.name for a in env.definition.state} else "scan")
    )  # how the K nearest are found
    # Drawn in place, one component at a time, as the WarpDrive worker draws its actions (benchmarks/peers.py).
    nvec = env.single_action_space.nvec
    actions = env.action_buffer if actions_in_place else torch.zeros((env.num_envs, len(nvec)), dtype=torch.int64,
                                                                      device=env.device)  # fmt: skip
    draw = in_place_draw(actions, nvec)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if device.type == "cuda":
            torch.cuda.set_sync_debug_mode("warn")
        try:
            rollout = time_rollout(lambda: env.step(draw()), device, warmup=timing.warmup,
                                   min_steps=timing.min_steps, max_steps=timing.max_steps,
                                   budget_s=timing.budget_s, windows=timing.windows)  # fmt: skip
        finally:
            if device.type == "cuda":
                torch.cuda.set_sync_debug_mode("default")
    syncs = sum("synchroniz" in str(w.message).lower() for w in caught)
    # As many calls as the timed rollout had steps at most: a slow step keeps these within its time budget too.
    host_us = host_us_per_call(draw, env.step, device, calls=min(timing.host_calls, rollout["steps"]))
    kernel_us = device_us_per_launch(step_kernel_launch(env), device, min(timing.kernel_repeats, rollout["steps"]))

    moved = step_bytes(env)
    s = rollout["ms_per_step"] / 1e3
    row: dict[str, Any] = {
        **_case_fields(case),
        **rollout,
        "game_steps_per_s": case.games / s,
        "agent_steps_per_s": case.games * case.agents / s,
        "host_us": host_us,
        "kernel_us": kernel_us,
        "torch_syncs_in_loop": syncs,
        "bytes": moved,
        "setup_s": setup_s,
        "setup_cache": setup_cache,
        "search": search,
        "game_work": "staged" if any(phase.stages for phase in env.definition.all_phases) else "serial",
        # The cap the definition asks for ("auto" resolved); only the CUDA backend compiles under it.
        "max_registers": env.definition.max_registers,
        "block_local_bytes": env.definition.block_local_bytes,
        "obs_dim": int(env.single_observation_space.shape[0]),
        "threads_per_block": getattr(env._backend, "block", None),
        "cuda_graphs": getattr(env._backend, "cuda_graphs", None),
        "direct_write": env.direct_write,
        "mem_per_game": (mem_after - mem_before) / case.games if device.type == "cuda" else None,
        "buffer_bytes_per_game": (moved["state"] + moved["actions"] + moved["outputs"]) / case.games,
    }
    if hasattr(env, "memory_per_game"):
        row["mem_estimate_per_game"] = env.memory_per_game()
    env.close()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row


def _case_fields(case: Case) -> dict[str, Any]:
    return {"name": case.name, "group": case.group, "key": case.key, "games": case.games, "taggers": case.taggers,
            "runners": case.runners, "agents": case.agents, "obs": case.obs_label, "copy": case.copy,
            "max_registers": case.max_registers, "game_work": case.game_work,
            "direct_write_bytes": case.direct_write_bytes, "block_scratch_bytes": case.block_scratch_bytes,
            "index_cells": case.index_cells}  # fmt: skip


def probe_setup(case: Case, cache: str) -> dict[str, Any]:
    """Set up ``case`` in a fresh process whose kernel cache is ``cache``: its set-up seconds (or the error)."""
    spec = json.dumps({"games": case.games, "taggers": case.taggers, "runners": case.runners,
                       "full_obs": case.full_obs, "k": case.k, "max_registers": case.max_registers,
                       "game_work": case.game_work, "block_scratch_bytes": case.block_scratch_bytes,
                       "index_cells": case.index_cells, "threads_per_block": case.threads_per_block})  # fmt: skip
    cmd = [sys.executable, str(Path(__file__).resolve()), "--setup-probe", spec]
    try:
        done = subprocess.run(cmd, env={**os.environ, "GPU_VECENV_CACHE_DIR": cache}, capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        return json.loads(done.stdout.strip().splitlines()[-1])
    except Exception as exc:  # noqa: BLE001  (recorded in the results)
        tail = getattr(exc, "stderr", None) or (done.stderr if "done" in locals() else "")
        return {"error": strip_paths(f"{type(exc).__name__}: {exc}"), "stderr": strip_paths(str(tail)[-2000:])}


def run_setup_probe(spec: str) -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.zeros(1, device=device)  # the CUDA context is the process's, not the env's
    case = Case("setup probe", **json.loads(spec))
    _, setup_s = build_env(case, device)
    print(json.dumps({"setup_s": setup_s}))


# ---------------------------------------------------------------------------------------------------------------
# Peers


def peer_jobs(cases: list[Case], peer: str, backend: str) -> list[dict[str, Any]]:
    jobs: dict[str, dict[str, Any]] = {}
    for case in cases:
        if peer in case.peers and case.key not in jobs:
            job = {"key": case.key, "games": case.games, "taggers": case.taggers, "runners": case.runners,
                   **PEER_TIMING[peer]}  # fmt: skip
            if peer == "warpdrive":
                job["warpdrive_kwargs"] = warpdrive_kwargs(case.tag_config())
            jobs[case.key] = job
    return list(jobs.values())


def run_peer(peer: str, jobs: list[dict[str, Any]], work: Path, timeout_s: float) -> dict[str, Any]:
    """Run ``jobs`` in worker processes of ``peers.py``; results (or errors) by key, and the worker's log."""
    work = work.resolve()  # the workers run from the repository root, so a relative --out must not reach them
    jobs_path, results_path, log_path = (work / f"peer_{peer}.{s}" for s in ("jobs.json", "results.json", "log"))
    jobs_path.write_text(json.dumps(jobs, indent=1))
    results_path.unlink(missing_ok=True)
    deadline = time.perf_counter() + timeout_s
    results: dict[str, Any] = {}
    with open(log_path, "w") as log:
        for _ in range(len(jobs) + 1):
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            try:
                status = subprocess.run([sys.executable, str(HERE / "peers.py"), peer, str(jobs_path),
                                         str(results_path)], stdout=log, stderr=subprocess.STDOUT, timeout=left,
                                        cwd=str(HERE.parent)).returncode  # fmt: skip
            except subprocess.TimeoutExpired:
                status = None
            results = json.loads(results_path.read_text()) if results_path.exists() else {}
            missing = [job["key"] for job in jobs if job["key"] not in results]
            if not missing or status is None:
                break
            if status not in (0, 3):  # the worker died inside a job: blame the first job without a result
                results[missing[0]] = {"error": f"worker exited with status {status} (see {log_path.name})"}
                results_path.write_text(json.dumps(results, indent=1))
    log_tail = strip_paths(log_path.read_text()[-4000:])
    for job in jobs:
        results.setdefault(job["key"], {"error": f"no result within the peer time limit ({timeout_s:.0f} s)"})
        for field in ("error", "traceback"):
            if field in results[job["key"]]:
                results[job["key"]][field] = strip_paths(results[job["key"]][field])
    return {"results": results, "log_tail": log_tail}


def measure_sync_reference(case: Case, timing: Timing, ours_first_obs: np.ndarray | None) -> dict[str, Any]:
    """Gymnasium's SyncVectorEnv over the numpy reference: the same games from the same seeds as our rows.

    ``ours_first_obs``: our env's first observations, to check that both start the same games. Random
    actions are drawn with numpy, on the host where this env lives.
    """
    config = case.tag_config()
    t0 = time.perf_counter()
    envs = make_sync_reference(config, case.games)
    obs, _ = envs.reset(seed=0)
    setup_s = time.perf_counter() - t0
    result: dict[str, Any] = {"setup_s": setup_s}
    if ours_first_obs is not None:
        result["max_abs_diff_first_obs"] = float(np.abs(obs.reshape(ours_first_obs.shape) - ours_first_obs).max())
    nvec = np.array([config.num_acceleration_levels + 1, config.num_turn_levels + 1])
    rng = np.random.default_rng(0)
    step = lambda: envs.step(rng.integers(0, nvec, size=(case.games, case.agents, 2)))  # noqa: E731
    result.update(time_rollout(step, torch.device("cpu"), warmup=1, min_steps=max(1, timing.min_steps // 5),
                               max_steps=timing.max_steps, budget_s=timing.budget_s,
                               windows=timing.windows))  # fmt: skip
    envs.close()
    return result


def first_obs(case: Case) -> np.ndarray:
    envs = gym.make_vec("WarpTag-v0", num_envs=case.games, device="cpu", **asdict(case.tag_config()))
    obs, _ = envs.reset(seed=0)
    out = obs.numpy().copy()
    envs.close()
    return out


# ---------------------------------------------------------------------------------------------------------------
# Ratios, targets, tables


def attach_peers(row: dict[str, Any], peers: dict[str, dict[str, Any]], case: Case) -> None:
    """Peer figures for the row's configuration and the ratios of ours to them (game-steps/s, i.e. their ms/ours)."""
    for peer, found in peers.items():
        result = found["results"].get(case.key) if peer in case.peers else None
        if result is None:
            continue
        row[peer] = result
        if "ms_per_step" in result:
            row[f"x_{peer}"] = result["ms_per_step"] / row["ms_per_step"]
            row[f"x_{peer}_best"] = result["ms_per_step_best"] / row["ms_per_step_best"]
    if case.spec_warpdrive_ms is not None:
        row["spec_warpdrive_ms"] = case.spec_warpdrive_ms
        row["x_warpdrive_spec"] = case.spec_warpdrive_ms / row["ms_per_step"]


def evaluate_targets(row: dict[str, Any], case: Case, bandwidth: float) -> None:
    kernel_s = row["kernel_us"] / 1e6
    row["bw_fraction"] = row["bytes"]["kernel"] / kernel_s / bandwidth
    row["obs_bw_fraction"] = row["bytes"]["obs"] / kernel_s / bandwidth
    verdicts = []
    for target in case.targets:
        value, source = row.get(target.metric), "measured"
        if target.metric == "x_warpdrive" and value is None and "x_warpdrive_spec" in row:
            value, source = row["x_warpdrive_spec"], "vs the specification's WarpDrive figure"
        if target.metric == "setup_cold_s" and value is None:
            value, source = row["setup_s"], f"in this process ({row['setup_cache']})"
        met = None if value is None else (value >= target.bound if target.at_least else value < target.bound)
        verdicts.append({"target": target.text(), "value": value, "met": met, "source": source})
    row["targets"] = verdicts


def _fmt(value: Any, spec: str = ".3g", missing: str = "-") -> str:
    if value is None:
        return missing
    return format(value, spec)


def _peer_ms(row: dict[str, Any], peer: str) -> str:
    result = row.get(peer)
    if result is None:
        return "-"
    return "err" if "error" in result else _fmt(result["ms_per_step"])


def _met(row: dict[str, Any]) -> str:
    marks = {True: "yes", False: "NO", None: "?"}
    return "; ".join(f"{v['target']}: {marks[v['met']]}" for v in row.get("targets", [])) or "-"


def _regs(row: dict[str, Any]) -> str:
    """The register cap a row's kernel was compiled under ("-": the compiler's choice)."""
    cap = row.get("max_registers")
    return "-" if cap is None else str(cap)


def _copy(row: dict[str, Any]) -> str:
    """A row's ``copy``, and whether its kernel wrote the fresh outputs itself (rows from before it was kept
    say nothing of it)."""
    return f"{row['copy']}{' (direct write)' if row.get('direct_write') else ''}"


def _table(header: list[str], lines: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in lines)) if lines else len(h) for i, h in enumerate(header)]
    out = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in lines]
    return "\n".join(out)


def text_tables(rows: list[dict[str, Any]], scale_total_agents: int) -> str:
    parts = []
    main = [r for r in rows if r["group"] != "scale"]
    if main:
        header = ["config", "games", "agents", "obs", "regs", "work", "copy", "ms/step", "game-st/s", "agent-st/s",
                  "host us", "kernel us", "MB/step", "%bw", "obs %bw", "KB/game", "setup s", "WD ms", "xWD", "xWD spec",
                  "VMAS ms", "xVMAS", "Sync ms", "xSync", "targets"]  # fmt: skip
        lines = [[r["name"], str(r["games"]), f"{r['taggers']}+{r['runners']}", r["obs"], _regs(r),
                  r.get("game_work", "-"), "D" if r.get("direct_write") else str(r["copy"])[0],
                  _fmt(r["ms_per_step"]), _fmt(r["game_steps_per_s"]), _fmt(r["agent_steps_per_s"]),
                  _fmt(r["host_us"], ".1f"), _fmt(r["kernel_us"], ".1f"), _fmt(r["bytes"]["kernel"] / 1e6, ".1f"),
                  _fmt(100 * r["bw_fraction"], ".0f"), _fmt(100 * r["obs_bw_fraction"], ".0f"),
                  _fmt((r["mem_per_game"] or r["buffer_bytes_per_game"]) / 1e3, ".1f"),
                  f"{r['setup_s']:.2f} {r['setup_cache']}", _peer_ms(r, "warpdrive"), _fmt(r.get("x_warpdrive"), ".1f"),
                  _fmt(r.get("x_warpdrive_spec"), ".1f"), _peer_ms(r, "vmas"), _fmt(r.get("x_vmas"), ".0f"),
                  _peer_ms(r, "sync_reference"), _fmt(r.get("x_sync_reference"), ".0f"), _met(r)]
                 for r in main]  # fmt: skip
        parts.append(_table(header, lines))
    scale = [r for r in rows if r["group"] == "scale"]
    if scale:
        header = ["N", "games", "K", "search", "regs", "work", "ms/step", "ns/agent-step", "kernel ns/agent-step",
                  "host us", "KB/game", "WD ms", "WD ns/agent-step", "xWD"]  # fmt: skip
        lines = []
        for r in scale:
            per_agent = 1e6 / (r["games"] * r["agents"])
            wd = r.get("warpdrive") or {}
            lines.append([str(r["agents"]), str(r["games"]), r["obs"], r.get("search", "?"), _regs(r),
                          r.get("game_work", "-"), _fmt(r["ms_per_step"]),
                          _fmt(r["ms_per_step"] * per_agent, ".2f"), _fmt(r["kernel_us"] * per_agent / 1e3, ".2f"),
                          _fmt(r["host_us"], ".1f"), _fmt(r["buffer_bytes_per_game"] / 1e3, ".1f"),
                          _peer_ms(r, "warpdrive"),
                          _fmt(wd["ms_per_step"] * per_agent if "ms_per_step" in wd else None, ".2f"),
                          _fmt(r.get("x_warpdrive"), ".1f")])  # fmt: skip
        parts.append(f"Agents-per-game sweep at a fixed total of {scale_total_agents} agents, copy=False\n"
                     + _table(header, lines))  # fmt: skip
    return "\n\n".join(parts)


def markdown_summary(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    device = meta.get("device_name", meta["backend"])
    lines = [f"Measured on {device} by `benchmarks/bench_step.py` ({meta['date']}); ratios are game-steps/s of "
             "WarpTag-v0 over the peer's, measured in the same run.", "",
             "| configuration | games | `copy` | ms/step | game-steps/s | host µs/step | kernel µs | register cap "
             "| per-game work | WarpDrive ms/step | × WarpDrive | VMAS ms/step | × VMAS | SyncVectorEnv ms/step "
             "| × SyncVectorEnv | target |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        if r["group"] == "scale":
            continue
        cells = [f"{r['taggers']}+{r['runners']} {r['obs']}", str(r["games"]), _copy(r),
                 f"{r['ms_per_step']:.3g}", f"{r['game_steps_per_s'] / 1e6:.3g} M", f"{r['host_us']:.0f}",
                 _fmt(r["kernel_us"], ".1f"), _regs(r), r.get("game_work", "-"), _peer_ms(r, "warpdrive"),
                 _fmt(r.get("x_warpdrive"), ".1f"), _peer_ms(r, "vmas"), _fmt(r.get("x_vmas"), ".0f"),
                 _peer_ms(r, "sync_reference"), _fmt(r.get("x_sync_reference"), ".0f"), _met(r)]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    scale = [r for r in rows if r["group"] == "scale"]
    if scale:
        total = meta["scale_total_agents"]
        lines += ["", f"Cost per agent-step against agents per game N (K = 10, {total} agents in all):",
                  "", "| N | games | K nearest by | ns per agent-step | WarpDrive ns per agent-step |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for r in scale:
            per_agent = 1e6 / (r["games"] * r["agents"])
            wd = r.get("warpdrive") or {}
            wd_ns = _fmt(wd["ms_per_step"] * per_agent if "ms_per_step" in wd else None, ".2f")
            if "error" in wd:
                wd_ns = "fails to launch" if "OUT_OF_RESOURCES" in wd["error"] else "error"
            ns = f"{r['ms_per_step'] * per_agent:.2f}"
            cells = [str(r["agents"]), str(r["games"]), r.get("search", "?"), ns, wd_ns]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------------
# Run


def machine(device: torch.device) -> dict[str, Any]:
    from importlib.metadata import version

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average": os.getloadavg(),
        # On the CPU backend, two OpenMP runtimes (torch's and Numba's) spinning on few cores slow launches a lot.
        "thread_env": {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "NUMBA_THREADING_LAYER")},
        "versions": {name: version(name) for name in ("torch", "numba", "numba-cuda", "numpy", "gymnasium")},
    }
    try:
        models = [ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("model name")]  # fmt: skip
        info["cpu_model"] = models[0] if models else platform.processor()
    except OSError:
        info["cpu_model"] = platform.processor()
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info["device_name"] = props.name
        info["multiprocessors"] = props.multi_processor_count
        info["device_memory_GiB"] = props.total_memory / 2**30
        try:
            info["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                            capture_output=True, text=True, timeout=30).stdout.strip()  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            pass
    info.update(git_state(HERE.parent))
    # The commit says nothing of uncommitted edits (or of a copied tree whose history is older): this digest
    # of the sources of the package and envs this process imported identifies the code that ran.
    import envs

    digest = hashlib.sha256()
    for package in (gpu_vecenv, envs):
        root = Path(package.__file__).resolve().parent
        for path in sorted(root.rglob("*.py")):
            digest.update(f"{package.__name__}/{path.relative_to(root).as_posix()}".encode() + b"\0")
            digest.update(path.read_bytes())
    info["sources_sha256"] = digest.hexdigest()
    info["sources_root"] = strip_paths(str(Path(gpu_vecenv.__file__).resolve().parent.parent))
    return info


def with_games(case: Case, games: int) -> Case:
    """``case`` run with ``games`` games (``--games``): renamed, and without the targets and the
    specification's WarpDrive figure, which hold for its own number of games only."""
    if games == case.games:
        return case
    name, found = re.subn(r"\b\d+ games\b", f"{games} games", case.name)
    return replace(case, name=name if found else f"{case.name}, {games} games", games=games, targets=(),
                   spec_warpdrive_ms=None, setup_probe=False)  # fmt: skip


def register_cap(text: str) -> int | str | None:
    """``--max-registers``: an integer in [16, 255], ``none`` or ``auto``."""
    if text in ("auto", "none"):
        return None if text == "none" else text
    if text.isdecimal() and 16 <= int(text) <= 255:
        return int(text)
    raise argparse.ArgumentTypeError(f"expected an integer in [16, 255], 'none' or 'auto', got {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", nargs="+", choices=sorted(PRESETS), help="default: targets on cuda, cpu on cpu")
    parser.add_argument("--backend", choices=("cuda", "cpu"), help="default: cuda when available")
    parser.add_argument("--peers", action="store_true", help="also run WarpDrive and VMAS (GPU)")
    parser.add_argument("--peer-timeout", type=float, default=180.0, help="seconds allowed to each peer's workers")
    parser.add_argument(
        "--warpdrive-full-setup",
        action="store_true",
        help="set WarpDrive up with its own placeholder helper (one Python reset per game: slow)",
    )
    parser.add_argument("--no-baseline", action="store_true", help="on the CPU, skip SyncVectorEnv")
    parser.add_argument("--out", type=Path, help="write bench_step.json and bench_step.txt (and .md) here")
    parser.add_argument("--markdown", action="store_true", help="also print and write the README summary table")
    parser.add_argument(
        "--scale-total-agents",
        type=int,
        default=SCALE_TOTAL_AGENTS,
        help="agents of all games together in the scale and index presets (a CPU needs fewer)",
    )
    parser.add_argument(
        "--scale-agents",
        type=int,
        nargs="+",
        default=list(SCALE_AGENTS),
        metavar="N",
        help=f"agents per game of the scale and index presets (default: {' '.join(map(str, SCALE_AGENTS))})",
    )
    parser.add_argument(
        "--cases", nargs="+", metavar="TEXT", help="keep only the presets' cases whose name contains one of these"
    )
    parser.add_argument(
        "--copy", choices=("true", "false"), help="keep only the cases that step with this copy (default: both)"
    )
    parser.add_argument(
        "--max-registers",
        type=register_cap,
        default="auto",
        metavar="N",
        help="compile WarpTag-v0's kernel of every case under this register cap: 16-255, 'none' (the compiler's"
        " choice) or 'auto' (WarpTag-v0's default, as without this option); peers unchanged",
    )
    parser.add_argument(
        "--game-work",
        choices=("serial", "staged"),
        help="run WarpTag-v0's per-game work (index sort, runner count) so in every case (default: its default)",
    )
    parser.add_argument(
        "--direct-write-bytes",
        type=int,
        metavar="N",
        help="the env's direct_write_bytes in every case: copy=True outputs of N bytes or more are written by the"
        " kernel into the fresh tensors (0: always); default: the device's default",
    )
    parser.add_argument(
        "--block-scratch-bytes",
        type=int,
        metavar="N",
        help="WarpTag-v0's block_scratch_bytes in every case: the shared memory a game's CUDA block may take for"
        " the step's scratch arrays (0: none, all in the state buffers); default: its default",
    )
    parser.add_argument(
        "--index-cells",
        type=int,
        metavar="N",
        help="WarpTag-v0's index_cells (the spatial index's cells per side) in every case whose games hold more"
        " than N*N agents (a case without the index ignores it); default: its default",
    )
    parser.add_argument(
        "--threads-per-block",
        type=int,
        metavar="N",
        help="the CUDA threads of a game's block in every case (1-1024; the CPU backend has none); default: the"
        " env's default",
    )
    parser.add_argument(
        "--actions-in-place",
        action="store_true",
        help="draw WarpTag-v0's actions into its action_buffer, which step reads where they are (as WarpDrive's"
        " policies write into its data manager's arrays), instead of a tensor of the benchmark's own that step"
        " copies",
    )
    parser.add_argument(
        "--games",
        type=int,
        nargs="+",
        metavar="N",
        help="run each selected case with each of these numbers of games instead of its own (another number than"
        " the case's drops its targets); e.g. 1980 2000 2640 show the cost of a partial last wave of blocks",
    )
    parser.add_argument("--setup-probe", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setup_probe:
        run_setup_probe(args.setup_probe)
        return
    if min(args.scale_agents) < 2:
        parser.error("--scale-agents: every game needs at least 2 agents (a tagger and a runner),"
                     f" got {min(args.scale_agents)}")  # fmt: skip
    if args.scale_total_agents < max(args.scale_agents):
        parser.error(f"--scale-total-agents must be at least the largest --scale-agents, {max(args.scale_agents)},"
                     f" got {args.scale_total_agents}")  # fmt: skip

    backend = args.backend or ("cuda" if torch.cuda.is_available() else "cpu")
    if backend == "cuda" and not torch.cuda.is_available():
        parser.error("--backend cuda: torch sees no CUDA device")
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "cuda" else torch.device("cpu")
    presets = args.preset or (["targets"] if backend == "cuda" else ["cpu"])
    cases = [
        case
        for name in presets
        for case in (
            PRESETS[name](args.scale_total_agents, tuple(args.scale_agents))
            if name in SIZED_PRESETS
            else PRESETS[name]()
        )  # fmt: skip
    ]
    if args.max_registers != "auto":
        cases = [replace(case, max_registers=args.max_registers) for case in cases]
    if args.game_work:
        cases = [replace(case, game_work=args.game_work) for case in cases]
    if args.block_scratch_bytes is not None:
        cases = [replace(case, block_scratch_bytes=args.block_scratch_bytes) for case in cases]
    if args.index_cells is not None:
        if args.index_cells < 1:
            parser.error(f"--index-cells must be at least 1, got {args.index_cells}")
        cases = [replace(case, index_cells=args.index_cells) for case in cases]
    if args.threads_per_block is not None:
        if not 1 <= args.threads_per_block <= 1024:
            parser.error(f"--threads-per-block must be in [1, 1024], got {args.threads_per_block}")
        cases = [replace(case, threads_per_block=args.threads_per_block) for case in cases]
    if args.direct_write_bytes is not None:
        if args.direct_write_bytes < 0:
            parser.error(f"--direct-write-bytes must be >= 0, got {args.direct_write_bytes}")
        cases = [replace(case, direct_write_bytes=args.direct_write_bytes) for case in cases]
    if args.cases:
        cases = [case for case in cases if any(text in case.name for text in args.cases)]
        if not cases:
            parser.error(f"--cases {' '.join(args.cases)}: no case of the presets {', '.join(presets)} matches")
    if args.copy:
        cases = [case for case in cases if case.copy == (args.copy == "true")]
        if not cases:
            kept = " kept by --cases" if args.cases else ""
            parser.error(f"--copy {args.copy}: no case of the presets {', '.join(presets)}{kept} has it")
    if args.games:
        if min(args.games) < 1:
            parser.error(f"--games: every number of games must be at least 1, got {min(args.games)}")
        cases = [with_games(case, games) for case in cases for games in args.games]
    timing = TIMING["quick"] if presets == ["quick"] else TIMING[backend]
    meta: dict[str, Any] = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": strip_paths(" ".join([Path(sys.executable).name, *sys.argv])),
        "backend": backend,
        "presets": presets,
        "scale_total_agents": args.scale_total_agents,
        "scale_agents": args.scale_agents,
        "timing": asdict(timing),
        "actions": "drawn into action_buffer" if args.actions_in_place else "copied into the env by step",
        **machine(device),
    }
    started = time.perf_counter()
    bandwidth = copy_bandwidth(device)
    meta["copy_bandwidth"] = bandwidth
    print(f"copy bandwidth (read + write): {bandwidth['GB_per_s']:.0f} GB/s on {meta.get('device_name', 'the CPU')}")

    rows = []
    for case in cases:
        print(
            f"[ours] {case.name}: {case.games} games of {case.agents}, {case.obs_label}, copy={case.copy}", flush=True
        )
        rows.append(measure_ours(case, device, timing, actions_in_place=args.actions_in_place))

    setup_probes: dict[str, Any] = {}
    for case in cases:
        if case.setup_probe and backend == "cuda":
            with tempfile.TemporaryDirectory(prefix="gpu_vecenv_cache_") as cache:
                setup_probes[case.key] = {"cold": probe_setup(case, cache), "warm": probe_setup(case, cache)}
            print(f"[set-up probe] {case.name}: {setup_probes[case.key]}", flush=True)

    peers: dict[str, dict[str, Any]] = {}
    work = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench_step_"))
    work.mkdir(parents=True, exist_ok=True)
    report(cases, rows, peers, setup_probes, meta, started, args.out, args.markdown, final=False)
    if backend == "cuda" and args.peers:
        for peer in ("warpdrive", "vmas"):
            jobs = peer_jobs(cases, peer, backend)
            if args.warpdrive_full_setup and peer == "warpdrive":
                for job in jobs:
                    job["full_setup"] = True
            if jobs:
                print(f"[{peer}] {len(jobs)} configurations in a worker process", flush=True)
                peers[peer] = run_peer(peer, jobs, work, args.peer_timeout)
    if backend == "cpu" and not args.no_baseline:
        results = {}
        for case in cases:
            if "sync_reference" in case.peers and case.key not in results:
                print(f"[SyncVectorEnv] {case.name}", flush=True)
                results[case.key] = measure_sync_reference(case, timing, first_obs(case))
        peers["sync_reference"] = {"results": results}
    report(cases, rows, peers, setup_probes, meta, started, args.out, args.markdown, final=True)


def report(cases: list[Case], rows: list[dict[str, Any]], peers: dict[str, dict[str, Any]],
           setup_probes: dict[str, Any], meta: dict[str, Any], started: float, out: Path | None, markdown: bool,
           final: bool) -> None:  # fmt: skip
    """Ratios and targets for every row; the tables printed (final) and the files written.

    Called once before the peers run (files marked ``"partial": true``, so that a run cut short by a
    time limit still leaves our figures) and once at the end.
    """
    bandwidth = meta["copy_bandwidth"]
    for case, row in zip(cases, rows, strict=True):
        attach_peers(row, peers, case)
        if case.key in setup_probes:
            row["setup_probe"] = setup_probes[case.key]
            row["setup_cold_s"] = setup_probes[case.key]["cold"].get("setup_s")
            row["setup_warm_s"] = setup_probes[case.key]["warm"].get("setup_s")
        evaluate_targets(row, case, bandwidth["GB_per_s"] * 1e9)
    meta["partial"] = not final
    meta["wall_s"] = time.perf_counter() - started
    meta["load_average_end"] = os.getloadavg()
    if meta["backend"] == "cpu":
        import numba

        meta["numba_threading_layer"] = numba.threading_layer()

    table = text_tables(rows, meta["scale_total_agents"])
    summary = markdown_summary(rows, meta)
    header = (f"{meta['command']}\n{meta['date']}  {meta.get('device_name', meta['cpu_model'])}  "
              f"copy bandwidth {bandwidth['GB_per_s']:.0f} GB/s  torch {meta['versions']['torch']}  "
              f"numba-cuda {meta['versions']['numba-cuda']}  wall {meta['wall_s']:.0f} s"
              + ("" if final else "  (partial: before the peers)") + "\n")  # fmt: skip
    if final:
        print("\n" + header + "\n" + table)
        if markdown:
            print("\n" + summary)
    if out:
        meta["peer_versions"] = {p: found["results"].get("_versions") for p, found in peers.items()}
        document = {"meta": meta, "rows": rows, "peers": peers}
        (out / "bench_step.json").write_text(json.dumps(document, indent=1, default=str))
        (out / "bench_step.txt").write_text(header + "\n" + table + "\n")
        if markdown:
            (out / "bench_step.md").write_text(summary)
        if final:
            print(f"wrote {out}/bench_step.json, bench_step.txt" + (", bench_step.md" if markdown else ""))


if __name__ == "__main__":
    main()
