"""Data-parallel PPO (``examples/cleanrl_ppo_tag.py --distributed``) on the CPU, over gloo with two processes.

* The gradients two processes get from ``ppo_loss`` on the two halves of a
  minibatch, averaged by DistributedDataParallel, equal the gradients of one
  process on the whole minibatch, though the halves hold different numbers of
  valid samples and differently spread advantages (the naive average of two
  local losses does not, which the test also checks).
* The shards of a distributed run start in exactly the states of one env of
  all the games: the same seeds, the same staggered start.
* ``torchrun --nproc_per_node=2 ... --distributed`` trains two iterations;
  only rank 0 writes, the processes end with the same weights, and the
  logged statistics and rates are sums over both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from conftest import SMALL_TAG

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))
import cleanrl_ppo_tag as example  # noqa: E402

TINY = [f"--env-kwarg={key}={value}" for key, value in SMALL_TAG.items()]  # 2 taggers + 5 runners, 15-step games
# One thread each for torch and Numba: on a small shared CPU their two thread pools otherwise contend.
SINGLE_THREADED = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")


# -- gradients: two processes on the halves == one process on the whole -------------------------------------------
def fixed_minibatch(policy: example.Policy, half: int) -> dict[str, torch.Tensor]:
    """``2 * half`` samples whose halves differ: 90% vs 40% valid, advantages around +0.5 (spread 1) vs -1 (spread 3);
    old log-probabilities and values are off enough that ratio and value clipping both bite."""
    g = torch.Generator().manual_seed(7)
    n = 2 * half
    obs = torch.randn(n, policy.actor[0].in_features, generator=g)
    actions = torch.stack([torch.randint(0, k, (n,), generator=g) for k in policy.nvec], dim=-1)
    with torch.no_grad():
        logprobs, _, values = policy.evaluate(obs, actions)
    advantages = torch.cat([0.5 + torch.randn(half, generator=g), -1.0 + 3.0 * torch.randn(half, generator=g)])
    valid = torch.cat([torch.rand(half, generator=g) < 0.9, torch.rand(half, generator=g) < 0.4]).float()
    return {
        "obs": obs,
        "actions": actions,
        "logprobs": logprobs + 0.3 * torch.randn(n, generator=g),
        "values": values + 0.5 * torch.randn(n, generator=g),
        "advantages": advantages,
        "returns": values + torch.randn(n, generator=g),
        "valid": valid,
    }


def gradients(policy: example.Policy) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in policy.named_parameters()}


def ddp_half_gradients(rank: int, world_size: int, rendezvous: str, weights: dict, minibatch: dict, args,
                       out: str) -> None:  # fmt: skip
    """One of ``world_size`` processes: ``ppo_loss`` of its slice of ``minibatch`` through DistributedDataParallel."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world_size)
    try:
        policy = example.Policy(**weights["sizes"])
        policy.load_state_dict(weights["state"])
        model = torch.nn.parallel.DistributedDataParallel(policy)
        n = minibatch["obs"].shape[0] // world_size
        part = {key: value[rank * n : (rank + 1) * n] for key, value in minibatch.items()}
        loss, stats = example.ppo_loss(model, part, args, world_size)
        loss.backward()
        torch.save({"gradients": gradients(policy), "stats": stats}, Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_two_processes_get_the_gradients_of_one_process_on_the_combined_minibatch(tmp_path):
    args = example.parse_args(["--device", "cpu"])  # defaults: advantages normalized, value loss clipped
    torch.manual_seed(0)
    sizes = {"obs_dim": 12, "nvec": [21, 21], "hidden": 16}
    policy = example.Policy(**sizes)
    minibatch = fixed_minibatch(policy, half=48)

    loss, whole_stats = example.ppo_loss(policy, minibatch, args)
    loss.backward()
    whole = gradients(policy)
    assert all(g.abs().max() > 0 for g in whole.values())

    weights = {"sizes": sizes, "state": policy.state_dict()}
    mp.spawn(ddp_half_gradients, args=(2, str(tmp_path / "rendezvous"), weights, minibatch, args, str(tmp_path)),
             nprocs=2, join=True)  # fmt: skip
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    for rank in ranks:
        for name, g in whole.items():
            torch.testing.assert_close(rank["gradients"][name], g, rtol=1e-4, atol=1e-6, msg=name)
    # Each process returns its share of the means: together they are the whole minibatch's figures.
    torch.testing.assert_close(ranks[0]["stats"] + ranks[1]["stats"], whole_stats, rtol=1e-5, atol=1e-6)

    # The test can tell: averaging two losses, each with its own means and normalization, gives other gradients.
    naive = {name: torch.zeros_like(g) for name, g in whole.items()}
    for half in (slice(0, 48), slice(48, 96)):
        policy.zero_grad()
        example.ppo_loss(policy, {k: v[half] for k, v in minibatch.items()}, args)[0].backward()
        for name, g in gradients(policy).items():
            naive[name] += g / 2
    gap = max(((naive[n] - whole[n]).norm() / whole[n].norm()).item() for n in whole)
    assert gap > 0.05


# -- seeds: the shards together are one env of all the games -----------------------------------------------------
def test_shards_start_in_the_states_of_one_env_of_all_the_games():
    args = example.parse_args(["--device", "cpu", "--num-envs", "6", *TINY])
    groups = 4  # not a divisor of the 3 games per shard: shard 1's games are groups 3, 0, 1
    whole, _ = example.make_env_shard(args)
    whole_obs, whole_pending = example.staggered_start(whole, args.seed, groups, 0, args.num_envs)
    shards = [example.make_env_shard(args, rank, 2) for rank in range(2)]
    assert [first_game for _, first_game in shards] == [0, 3]
    starts = [example.staggered_start(envs, args.seed, groups, first, args.num_envs) for envs, first in shards]

    shard_obs = [envs.per_game(obs) for (envs, _), (obs, _) in zip(shards, starts, strict=True)]
    assert torch.equal(torch.cat(shard_obs), whole.per_game(whole_obs))
    assert torch.equal(torch.cat([pending for _, pending in starts]), whole_pending)
    for key, value in whole.state.items():
        game_axis = 1 if value.dim() == 3 else 0  # (k, games, agents) arrays hold the games second
        joined = torch.cat([envs.state[key] for envs, _ in shards], dim=game_axis)
        torch.testing.assert_close(joined, value, rtol=0, atol=0, equal_nan=True, msg=key)  # unused arrays: NaN
    assert whole.state["seed"].tolist() == [args.seed + g for g in range(6)]
    assert not torch.equal(whole.state["x"][0], whole.state["x"][3])  # the games differ, so the match means something
    assert whole.state["t"].unique().numel() > 1  # and they are staggered


def test_games_that_do_not_split_evenly_are_refused():
    args = example.parse_args(["--device", "cpu", "--num-envs", "6", *TINY])
    with pytest.raises(ValueError, match="multiple of the 4 processes, got 6"):
        example.make_env_shard(args, 0, 4)


# -- a run started by torchrun ------------------------------------------------------------------------------------
def test_torchrun_two_processes_train_in_step_and_only_rank_0_writes(tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               str(EXAMPLES / "cleanrl_ppo_tag.py"), "--distributed", "--device", "cpu", "--num-envs", "4",
               "--num-steps", "8", "--total-timesteps", "64", "--log-every", "1", "--save-every", "1",
               "--eval-games", "0", "--hidden-size", "16", *TINY,
               "--env-kwarg=episode_length=6",  # every process's games end whole episodes in 16 steps
               "--out", str(out)]  # fmt: skip
    proc = subprocess.run(command, env=SINGLE_THREADED, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    # Rank 1 has no output folder at all (a write would fail the run): one command, one TensorBoard file, one print.
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert [f for f in files if not f.startswith("tb/")] == ["checkpoints/final.pt", "checkpoints/iter_1.pt",
                                                               "command.txt", "curves.json", "learning_curves.png",
                                                               "summary.json"]  # fmt: skip
    assert len(list((out / "tb").glob("events.out.tfevents.*"))) == 1
    assert proc.stdout.count("trained 6.400e+01 game-steps") == 1
    assert (out / "command.txt").read_text().startswith("torchrun --standalone --nproc_per_node=2 ")

    summary = json.loads((out / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["games"] == 4 and summary["game_steps"] == 64
    shards = summary["shards"]
    assert [(s["rank"], s["games"], s["first_game"], s["first_seed"]) for s in shards] == [(0, 2, 0, 1), (1, 2, 2, 3)]
    assert shards[0]["weights_sha256"] == shards[1]["weights_sha256"]  # the gradients were shared at every step
    assert summary["end_to_end_game_steps_per_s"] == pytest.approx(sum(s["game_steps_per_s"] for s in shards))
    curves = json.loads((out / "curves.json").read_text())
    assert [c["game_steps"] for c in curves] == [32, 64]  # 4 games of both processes x 8 steps per iteration
    assert sum(c["episodes"] for c in curves) == sum(s["episodes"] for s in shards) > 0
    assert all(shard["episodes"] > 0 for shard in shards)  # so the sum holds both processes' games

    checkpoint = torch.load(out / "checkpoints" / "final.pt", weights_only=False)
    assert set(checkpoint["policies"]) == {"tagger", "runner"} and checkpoint["game_steps"] == 64


@pytest.mark.gpu
def test_torchrun_on_gpus_trains_over_nccl_and_meets_at_the_host_barrier(tmp_path):
    # One process a GPU, two where there are two: the gradients over NCCL, the host floats and the barrier
    # before the process group is torn down (Processes.wait_for_all) over the second, gloo group.
    processes = min(2, torch.cuda.device_count())
    out = tmp_path / "run"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
               str(EXAMPLES / "cleanrl_ppo_tag.py"), "--distributed", "--device", "cuda", "--num-envs", "4",
               "--num-steps", "8", "--total-timesteps", str(32 * processes), "--log-every", "1",
               "--eval-games", "0", "--hidden-size", "16", *TINY, "--out", str(out)]  # fmt: skip
    proc = subprocess.run(command, env=SINGLE_THREADED, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["processes"] == processes and summary["game_steps"] == 32 * processes
    assert len({shard["weights_sha256"] for shard in summary["shards"]}) == 1


def test_distributed_outside_torchrun_says_how_to_start_it(tmp_path):
    env = {k: v for k, v in SINGLE_THREADED.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    proc = subprocess.run([sys.executable, str(EXAMPLES / "cleanrl_ppo_tag.py"), "--distributed", "--device", "cpu",
                           "--out", str(tmp_path)], env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode != 0
    assert "--distributed expects to be started by torchrun, which sets RANK, LOCAL_RANK, WORLD_SIZE" in proc.stderr


# -- the scaling benchmark's CPU dry run ----------------------------------------------------------------------------
def test_scaling_script_dry_run_on_the_cpu_collects_one_row_per_process_count(tmp_path):
    script = EXAMPLES.parent / "benchmarks" / "run_scaling.sh"
    env = dict(SINGLE_THREADED, DEVICE="cpu", TINY="1", GPUS="1 2", SECONDS_PER_RUN="1")
    proc = subprocess.run(["bash", str(script), str(tmp_path)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = json.loads((tmp_path / "scaling.json").read_text())["runs"]
    assert [(r["gpus"], r["games"]) for r in runs] == [(1, 4), (2, 8)]  # 4 games per process
    for r in runs:
        assert r["command"].startswith("NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 "
                                       f"torchrun --standalone --nproc_per_node={r['gpus']} ")  # fmt: skip
        assert r["env_steps_per_s"] > 0 and r["optimizer_steps_per_s"] > 0 and r["same_weights_on_every_process"]
        assert len(r["per_process_env_steps_per_s"]) == r["gpus"]
    assert runs[0]["speedup"] == 1.0 and runs[1]["warpdrive_tag_gridworld_env_steps_per_s"] == 2.57e6
    assert "| 2 | 8 |" in (tmp_path / "scaling.md").read_text()
