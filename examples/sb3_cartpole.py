"""Stable-Baselines3 PPO on WarpCartPole-v1, optionally side by side with Gymnasium's CartPole-v1.

    python examples/sb3_cartpole.py                                  # device auto: GPU if there is one
    python examples/sb3_cartpole.py --compare-gymnasium --out results/sb3_cartpole
    python examples/sb3_cartpole.py --smoke                          # two PPO iterations on the CPU (CI)

WarpCartPole-v1 runs every game in one kernel launch and reaches SB3 through
gpu_vecenv.sb3.SB3VecEnv (numpy in and out, one device-to-host copy per step).
The PPO hyperparameters are rl-baselines3-zoo's tuned ones for CartPole-v1.
The learning curve is SB3's own measure, the mean return of the last 100
training episodes (``rollout/ep_rew_mean``), after every rollout; CartPole-v1
is solved when it reaches 500, i.e. 100 episodes in a row last the full 500
steps. ``--compare-gymnasium`` trains the same way, with the same
hyperparameters and seed, on Gymnasium's CartPole-v1 (SB3's DummyVecEnv with
a Monitor per env) and prints both curves.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numba
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnv

import gpu_vecenv  # noqa: F401  (registers WarpCartPole-v1)
from gpu_vecenv.sb3 import SB3VecEnv

MAX_RETURN = 500.0  # CartPole-v1 truncates episodes at 500 steps, one reward per step


def linear(start: float):
    """SB3 schedule decaying linearly from ``start`` to 0 over training (rl-zoo's ``lin_`` prefix)."""
    return lambda progress_remaining: progress_remaining * start


# rl-baselines3-zoo's tuned PPO hyperparameters for CartPole-v1 (hyperparams/ppo.yml).
PPO_HYPERPARAMS: dict[str, Any] = dict(
    n_steps=32,
    batch_size=256,
    gae_lambda=0.8,
    gamma=0.98,
    n_epochs=20,
    ent_coef=0.0,
    learning_rate=linear(1e-3),
    clip_range=linear(0.2),
)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--total-timesteps", type=int, default=100_000, help="env steps (all games together) to train")
    p.add_argument("--num-envs", type=int, default=8, help="games stepped together (rl-zoo uses 8)")
    p.add_argument("--device", default="auto", help="device of WarpCartPole: auto, cpu, cuda, cuda:N")
    p.add_argument("--policy-device", default="cpu", help="device of the PPO networks (SB3 advises the CPU for MLPs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="CPU threads for torch and for the CPU backend")
    p.add_argument("--print-every", type=int, default=5000, help="env steps between rows of the printed table")
    p.add_argument("--compare-gymnasium", action="store_true", help="also train on Gymnasium's CartPole-v1")
    p.add_argument("--out", type=Path, default=None, help="folder for sb3_cartpole_curve.json and .png")
    p.add_argument("--smoke", action="store_true", help="two PPO iterations of 8 games on the CPU (a quick check)")
    args = p.parse_args()
    if args.smoke:
        args.num_envs, args.device = 8, "cpu"
        args.total_timesteps = 2 * PPO_HYPERPARAMS["n_steps"] * args.num_envs
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    return args


class LearningCurve(BaseCallback):
    """After each rollout: env steps so far, seconds (wall clock and this process's CPU time) and the
    mean return of the last 100 finished training episodes, as SB3 logs it (``rollout/ep_rew_mean``)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, float | None]] = []
        self.start_wall = self.start_cpu = 0.0

    def _on_training_start(self) -> None:
        self.start_wall, self.start_cpu = time.perf_counter(), time.process_time()

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        episodes = self.model.ep_info_buffer
        self.rows.append(
            {
                "env_steps": self.num_timesteps,
                "wall_seconds": round(time.perf_counter() - self.start_wall, 3),
                "cpu_seconds": round(time.process_time() - self.start_cpu, 3),
                "mean_return": float(np.mean([e["r"] for e in episodes])) if episodes else None,
            }
        )


def train(name: str, train_env: VecEnv, args: argparse.Namespace) -> dict[str, Any]:
    """Train PPO on ``train_env``; return its learning curve and when the mean return first reached the maximum."""
    model = PPO("MlpPolicy", train_env, seed=args.seed, device=args.policy_device, **PPO_HYPERPARAMS)
    curve = LearningCurve()
    model.learn(total_timesteps=args.total_timesteps, callback=curve)
    train_env.close()
    at_max = next((r for r in curve.rows if r["mean_return"] is not None and r["mean_return"] >= MAX_RETURN), None)
    return {"env": name, "rows": curve.rows, "first_at_max": at_max}


def print_table(runs: list[dict[str, Any]], every: int) -> None:
    """Env steps vs mean return of the last 100 training episodes, one column per run, about every ``every`` steps."""
    print(f"{'env steps':>10}" + "".join(f" | {r['env']:>16}" for r in runs))
    by_step = [{row["env_steps"]: row["mean_return"] for row in r["rows"]} for r in runs]
    steps = sorted(set().union(*by_step))
    shown = [s for i, s in enumerate(steps) if i == len(steps) - 1 or s // every != steps[i + 1] // every]
    for step in shown:
        cells = [rows.get(step) for rows in by_step]
        print(f"{step:>10}" + "".join(f" | {'' if c is None else f'{c:.1f}':>16}" for c in cells))
    for r in runs:
        hit = r["first_at_max"]
        when = (
            "not reached"
            if hit is None
            else f"{hit['env_steps']} env steps ({hit['wall_seconds']:.1f} s wall, {hit['cpu_seconds']:.1f} s CPU)"
        )
        print(f"{r['env']}: mean return of the last 100 episodes first {MAX_RETURN:.0f} at {when}")


def write_outputs(out: Path, runs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    out.mkdir(parents=True, exist_ok=True)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    hyper = {k: (f"linear from {v(1.0)}" if callable(v) else v) for k, v in PPO_HYPERPARAMS.items()}
    (out / "sb3_cartpole_curve.json").write_text(
        json.dumps({"settings": settings, "ppo": hyper, "runs": runs}, indent=1)
    )
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: wrote the JSON curve only")
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in runs:
        points = [(row["env_steps"], row["mean_return"]) for row in r["rows"] if row["mean_return"] is not None]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, label=r["env"])
    ax.axhline(MAX_RETURN, color="gray", linewidth=0.5)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("mean return, last 100 episodes")
    ax.set_title(f"SB3 PPO, {args.num_envs} envs, seed {args.seed}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "sb3_cartpole_curve.png", dpi=120)
    print(f"wrote {out / 'sb3_cartpole_curve.json'} and {out / 'sb3_cartpole_curve.png'}")


def main() -> None:
    args = parse_args()
    runs = []
    # One thread each for torch and for the CPU backend's parallel loop over games: the policy is a 64 x 64 MLP
    # on batches of 256 and there are a few games, so extra threads cost more in wake-ups than they save, and on a
    # busy machine a parallel region waits for descheduled threads (measured here: 8 games took 0.08 ms a step
    # on one Numba thread, 5-13 ms on two).
    torch.set_num_threads(args.threads)
    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))

    # WarpCartPole-v1: all games in one env, SAME_STEP autoreset as SB3 expects.
    warp_env = SB3VecEnv.make("WarpCartPole-v1", args.num_envs, device=args.device)
    warp_env.seed(args.seed)
    runs.append(train("WarpCartPole-v1", warp_env, args))

    if args.compare_gymnasium:
        # SB3's usual setup: one CartPole-v1 per env, each in a Monitor, stepped in turn by a DummyVecEnv.
        gym_env = make_vec_env("CartPole-v1", n_envs=args.num_envs, seed=args.seed)
        runs.append(train("CartPole-v1", gym_env, args))

    print_table(runs, every=args.print_every)
    if args.out is not None:
        write_outputs(args.out, runs, args)


if __name__ == "__main__":
    main()
