"""Peer rollouts for ``bench_step.py``: WarpDrive 2.7.1's Numba Tag continuous and VMAS 1.5.2's ``simple_tag``.

Each peer runs in a worker process of its own, started by ``bench_step.py``::

    python benchmarks/peers.py {warpdrive,vmas} JOBS.json RESULTS.json

A job is one configuration; the worker appends one result (or the error text)
per job to RESULTS.json and, after an error, exits with status 3 so that the
remaining jobs run in a fresh process (a failed CUDA launch can poison the
process's context). Why a process per peer: WarpDrive writes its generated
configuration module into its own package directory and imports it once per
process, and neither peer should share a CUDA context with the env measured.

Both peers are stepped like ``WarpTag-v0`` in ``bench_step.py``: random actions
drawn on the device at every step (WarpDrive's in place, by
``rollout_timing.in_place_draw`` as for ``WarpTag-v0``), the step, and
(WarpDrive) the reset of finished games; timed between CUDA events with no
host sync inside.

- WarpDrive: ``EnvWrapper(TagContinuous(**config), env_backend="numba")``, its
  first ``reset_all_envs()``, then the observation, action and reward
  placeholders pushed through its data manager, ``step_all_envs()`` and
  ``reset_only_done_envs()``. Its own placeholder helper runs the Python reset
  once per game (that is most of its 58 s set-up for 2000 games of 110 agents);
  since all its games start from one identical state, the worker pushes that
  state's observation for every game instead, unless the job asks for
  ``full_setup``. Its data lives in Numba device arrays, so memory is read as
  the drop in free device memory.
- VMAS: ``vmas.make_env("simple_tag", num_good_agents=runners,
  num_adversaries=taggers, num_landmarks=0, continuous_actions=True)``,
  ``get_random_actions()`` and ``step``; ``simple_tag`` never ends a game and no
  ``max_steps`` is set, so there are no resets.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from dataclasses import fields
from pathlib import Path
from typing import Any

from rollout_timing import host_us_per_call, in_place_draw, synchronize, time_rollout

# TagConfig fields that WarpDrive's TagContinuous has under the same name; the other two are this project's options.
NOT_IN_WARPDRIVE = ("observe_own_type", "tagger_ids")


def warpdrive_kwargs(config: Any) -> dict[str, Any]:
    """WarpDrive ``TagContinuous`` keyword arguments for a :class:`~envs.tag_continuous.config.TagConfig`."""
    kwargs = {f.name: getattr(config, f.name) for f in fields(config) if f.name not in NOT_IN_WARPDRIVE}
    kwargs["seed"] = 0  # which agents are taggers (WarpDrive draws them)
    return kwargs


def _device():
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _free_device_bytes(device) -> int | None:
    import torch

    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    return int(torch.cuda.mem_get_info(device)[0])


def _timed(step, device, job: dict[str, Any]) -> dict[str, float]:
    return time_rollout(step, device, warmup=job["warmup"], min_steps=job["min_steps"], max_steps=job["max_steps"],
                        budget_s=job["budget_s"])  # fmt: skip


def run_warpdrive(job: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    from example_envs.tag_continuous.tag_continuous import TagContinuous
    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.training.utils.data_loader import create_and_push_data_placeholders
    from warp_drive.utils.constants import Constants
    from warp_drive.utils.data_feed import DataFeed

    device = _device()
    games, kwargs = job["games"], job["warpdrive_kwargs"]
    free_before = _free_device_bytes(device)
    t0 = time.perf_counter()
    env = EnvWrapper(env_obj=TagContinuous(**kwargs, env_backend="numba"), num_envs=games, env_backend="numba")
    first_obs = env.reset_all_envs()  # on the host, then the state of every game is pushed to the device
    n = env.n_agents
    if job.get("full_setup"):
        create_and_push_data_placeholders(env, action_sampler=None, push_data_batch_placeholders=False)
    else:
        one_game = np.stack([np.asarray(first_obs[a], np.float32) for a in range(n)])
        feed = DataFeed()
        feed.add_data(Constants.OBSERVATIONS, np.ascontiguousarray(np.broadcast_to(one_game, (games, *one_game.shape))),
                      save_copy_and_apply_at_reset=True)  # fmt: skip
        feed.add_data(Constants.ACTIONS, np.zeros((games, n, 2), np.int32))
        feed.add_data(Constants.REWARDS, np.zeros((games, n), np.float32))
        env.cuda_data_manager.push_data_to_device(feed, torch_accessible=True)
    synchronize(device)
    setup_s = time.perf_counter() - t0
    free_after = _free_device_bytes(device)

    manager = env.cuda_data_manager
    actions = manager.data_on_device_via_torch(Constants.ACTIONS)  # (games, agents, 2) int32
    levels = (kwargs["num_acceleration_levels"] + 1, kwargs["num_turn_levels"] + 1)
    draw_actions = in_place_draw(actions, levels)

    def env_step(_: object = None) -> None:
        env.step_all_envs()
        env.reset_only_done_envs()

    def rollout_step() -> None:
        draw_actions()
        env_step()

    timing = _timed(rollout_step, device, job)
    host_us = host_us_per_call(draw_actions, env_step, device, calls=min(200, 10 * timing["steps"]), burst=20)
    result = {
        "setup_s": setup_s,
        "setup": "full (its placeholder helper)" if job.get("full_setup") else "one reset observation for every game",
        "host_us": host_us,
        "obs_dim": int(manager.get_shape(Constants.OBSERVATIONS)[-1]),
        "threads_per_block": int(env.cuda_function_manager.block[0]),
        **timing,
    }
    if free_before is not None and free_after is not None:
        result["mem_per_game"] = (free_before - free_after) / games
    return result


def run_vmas(job: dict[str, Any]) -> dict[str, Any]:
    import vmas

    device = _device()
    free_before = _free_device_bytes(device)
    t0 = time.perf_counter()
    env = vmas.make_env(scenario="simple_tag", num_envs=job["games"], device=str(device), continuous_actions=True,
                        num_good_agents=job["runners"], num_adversaries=job["taggers"], num_landmarks=0,
                        seed=0)  # fmt: skip
    env.reset()
    synchronize(device)
    setup_s = time.perf_counter() - t0
    free_after = _free_device_bytes(device)
    timing = _timed(lambda: env.step(env.get_random_actions()), device, job)
    result = {"setup_s": setup_s, **timing}
    if free_before is not None and free_after is not None:
        result["mem_per_game"] = (free_before - free_after) / job["games"]
    return result


RUNNERS = {"warpdrive": run_warpdrive, "vmas": run_vmas}


def _versions(peer: str) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    names = {"warpdrive": ("rl-warp-drive", "gym", "numba", "numba-cuda", "torch"), "vmas": ("vmas", "torch")}[peer]
    found = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def main() -> None:
    peer, jobs_path, results_path = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    jobs = json.loads(jobs_path.read_text())
    results = json.loads(results_path.read_text()) if results_path.exists() else {}

    def save() -> None:
        tmp = results_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(results, indent=1))
        os.replace(tmp, results_path)

    try:
        results["_versions"] = _versions(peer)
        if peer == "warpdrive":
            import example_envs.tag_continuous.tag_continuous  # noqa: F401
            import warp_drive.env_wrapper  # noqa: F401
        else:
            import vmas  # noqa: F401
    except Exception as exc:  # noqa: BLE001  (a missing or broken peer is recorded, not fatal)
        for job in jobs:
            results.setdefault(job["key"], {"error": f"import failed: {type(exc).__name__}: {exc}"})
        save()
        return
    for job in jobs:
        if job["key"] in results:
            continue
        print(f"[{peer}] {job['key']}", flush=True)
        try:
            results[job["key"]] = RUNNERS[peer](job)
        except Exception as exc:  # noqa: BLE001
            results[job["key"]] = {"error": f"{type(exc).__name__}: {exc}",
                                   "traceback": traceback.format_exc()[-3000:]}  # fmt: skip
            save()
            sys.exit(3)
        save()


if __name__ == "__main__":
    main()
