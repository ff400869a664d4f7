#!/usr/bin/env bash
# Data-parallel scaling of PPO on WarpTag-v0 (examples/cleanrl_ppo_tag.py --distributed, started by torchrun):
# for each number of GPUs, train for a fixed wall time with a fixed number of games per GPU, and record
# env-steps/s and training steps/s.
#
#   bash benchmarks/run_scaling.sh OUTDIR                  # 1, 2, 4, 8 GPUs, as many as the host has
#   GPUS="1 2 4" SECONDS_PER_RUN=60 GAMES_PER_GPU=1000 bash benchmarks/run_scaling.sh OUTDIR
#   DEVICE=cpu TINY=1 GPUS="1 2" SECONDS_PER_RUN=3 bash benchmarks/run_scaling.sh OUTDIR    # CPU dry run (gloo)
#
#   OUTDIR/gpus_N/            the run on N GPUs: summary.json, curves.json, command.txt, log.txt
#   OUTDIR/scaling.json       per GPU count: the exact command, game-steps/s (end to end and in the rollout),
#                             agent-steps/s, optimizer steps/s, PPO iterations/s, speed-up and efficiency
#   OUTDIR/scaling.md         the same as a table, next to WarpDrive's published figures for its Tag gridworld
#
# Settings (environment variables): GPUS (process counts), SECONDS_PER_RUN (training time of each run, default
# 60; set-up and compilation come on top), GAMES_PER_GPU (default 1000, the example's default game count, so the
# work per GPU stays the same: weak scaling), DEVICE (cuda or cpu), TINY=1 (2 taggers + 5 runners, 4 games per
# process, 8-step rollouts: for the CPU dry run), EXTRA (more arguments for the example).
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and the two others below), as it must on shared hosts.
set -uo pipefail
out=${1:?usage: bash benchmarks/run_scaling.sh OUTDIR}
cd "$(dirname "$0")/.."
mkdir -p "$out"
device=${DEVICE:-cuda}
seconds=${SECONDS_PER_RUN:-60}
export PYTHONUNBUFFERED=1 TQDM_DISABLE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} NUMBA_NUM_THREADS=${NUMBA_NUM_THREADS:-1}
# One kernel cache for all runs, outside OUTDIR: the first run compiles, the others load.
export GPU_VECENV_CACHE_DIR=${GPU_VECENV_CACHE_DIR:-${TMPDIR:-/tmp}/gpu_vecenv_scaling_cache}

if [ -z "${GPUS:-}" ]; then
  if [ "$device" = cpu ]; then
    GPUS="1 2"
  else
    have=$(nvidia-smi -L | grep -c '^GPU')
    GPUS=""
    for n in 1 2 4 8; do [ "$n" -le "$have" ] && GPUS="$GPUS $n"; done
  fi
fi
if [ "${TINY:-0}" = 1 ]; then
  games_per_gpu=${GAMES_PER_GPU:-4}
  sizes="--num-steps 8 --hidden-size 16 --env-kwarg num_taggers=2 --env-kwarg num_runners=5
         --env-kwarg num_other_agents_observed=3 --env-kwarg episode_length=15 --env-kwarg grid_length=5.0
         --env-kwarg tagging_distance=0.1"
else
  games_per_gpu=${GAMES_PER_GPU:-1000}
  sizes=""
fi

status=0
for n in $GPUS; do
  run="$out/gpus_$n"
  rm -rf "$run"
  mkdir -p "$run"
  # Enough timesteps that the time budget ends the run; no evaluation, no checkpoints but the final one.
  command="torchrun --standalone --nproc_per_node=$n examples/cleanrl_ppo_tag.py --distributed --device $device
    --num-envs $((n * games_per_gpu)) --total-timesteps 1000000000000 --time-budget-s $seconds --log-every 10
    --save-every 0 --eval-games 0 --no-track-tensorboard $sizes ${EXTRA:-} --out $run"
  command=$(echo $command)  # one line
  echo "NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 $command" > "$run/run_command.txt"
  echo "== $n process(es): $command"
  start=$(date +%s)
  # shellcheck disable=SC2086  # the command is split into its words on purpose
  timeout $((seconds + ${SETUP_SECONDS:-300})) python3 -m torch.distributed.run ${command#torchrun } \
    > "$run/log.txt" 2>&1
  rc=$?
  echo "   exit status $rc after $(( $(date +%s) - start )) s; $(grep -m1 '^trained' "$run/log.txt")"
  [ $rc -eq 0 ] || { status=1; tail -20 "$run/log.txt"; }
done

python3 - "$out" $GPUS <<'EOF' || status=1
"""Collect OUTDIR/gpus_N/summary.json into scaling.json and scaling.md."""
import json
import sys
from pathlib import Path

out, counts = Path(sys.argv[1]), [int(n) for n in sys.argv[2:]]
# WarpDrive's multi-GPU tutorial, Tag gridworld (a discrete game, not this continuous Tag): env-steps/s as published.
WARPDRIVE = {1: 1.38e6, 2: 2.57e6, 4: 5.12e6}
rows = []
for n in counts:
    run = out / f"gpus_{n}"
    summary_file = run / "summary.json"
    if not summary_file.exists():
        rows.append({"gpus": n, "error": f"no summary.json: see {run.name}/log.txt"})
        continue
    s = json.loads(summary_file.read_text())
    rollout = s["rollout_fraction_of_time"]
    rows.append({
        "gpus": n,
        "command": (run / "run_command.txt").read_text().strip(),
        "device_name": s["device_name"],
        "games": s["games"],
        "agents_per_game": s["agents_per_game"],
        "train_s": s["train_s"],
        "game_steps": s["game_steps"],
        "iterations": s["iterations"],
        "env_steps_per_s": s["end_to_end_game_steps_per_s"],
        "agent_steps_per_s": s["end_to_end_agent_steps_per_s"],
        "rollout_env_steps_per_s": s["end_to_end_game_steps_per_s"] / rollout if rollout else None,
        "optimizer_steps_per_s": s["optimizer_steps_per_s"],
        "iterations_per_s": s["iterations"] / s["train_s"],
        "per_process_env_steps_per_s": [shard["game_steps_per_s"] for shard in s.get("shards", [])],
        "same_weights_on_every_process": len({shard["weights_sha256"] for shard in s.get("shards", [])}) <= 1,
        "warpdrive_tag_gridworld_env_steps_per_s": WARPDRIVE.get(n),
    })
base = next((r for r in rows if r["gpus"] == 1 and "error" not in r), None)
for r in rows:
    if base and "error" not in r:
        r["speedup"] = r["env_steps_per_s"] / base["env_steps_per_s"]
        r["efficiency"] = r["speedup"] / r["gpus"]
result = {
    "what": "PPO on WarpTag-v0, data-parallel over GPUs (torchrun, DistributedDataParallel), a fixed number of "
    "games per GPU; env-steps = game-steps (one step of one game) of all GPUs, end to end (rollout + GAE + PPO "
    "updates) unless named rollout_ (rollout phase only: env steps and action sampling); optimizer steps per "
    "policy copy (every GPU takes the same steps together)",
    "warpdrive_reference": "WarpDrive's multi-GPU tutorial figures for its Tag gridworld (discrete moves), "
    "env-steps/s on 1, 2, 4 GPUs as published, not measured here; a different game and trainer",
    "runs": rows,
}
(out / "scaling.json").write_text(json.dumps(result, indent=2))


def fmt(x, spec=".3g"):
    return "-" if x is None else format(x, spec)


lines = [
    "| GPUs | games | env-steps/s | rollout env-steps/s | agent-steps/s | optimizer steps/s | iterations/s "
    "| speed-up | efficiency | WarpDrive Tag gridworld env-steps/s |",
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
]
for r in rows:
    if "error" in r:
        lines.append(f"| {r['gpus']} | {r['error']} |")
        continue
    lines.append(
        f"| {r['gpus']} | {r['games']} | {fmt(r['env_steps_per_s'])} | {fmt(r['rollout_env_steps_per_s'])} "
        f"| {fmt(r['agent_steps_per_s'])} | {fmt(r['optimizer_steps_per_s'])} | {fmt(r['iterations_per_s'])} "
        f"| {fmt(r.get('speedup'), '.2f')} | {fmt(r.get('efficiency'), '.2f')} "
        f"| {fmt(r['warpdrive_tag_gridworld_env_steps_per_s'])} |"
    )
table = "\n".join(lines)
commands = "\n".join(f"    {r['command']}" for r in rows if "command" in r)
(out / "scaling.md").write_text(f"{result['what']}.\n\n{table}\n\nWarpDrive column: {result['warpdrive_reference']}."
                                f"\n\nCommands:\n\n{commands}\n")
print(table)
if any("error" in r or not r["same_weights_on_every_process"] for r in rows):
    sys.exit(1)
EOF
exit $status
