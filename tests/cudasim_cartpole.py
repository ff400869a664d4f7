"""WarpCartPole's real CUDA kernel under Numba's CUDA simulator, checked against its reference and Gymnasium.

Run by tests/test_cartpole_simulator.py in a process of its own (the simulator
is chosen at import time): ``NUMBA_ENABLE_CUDASIM=1 python tests/cudasim_cartpole.py [NAME ...]``.
Prints one report per scenario, ending in ``OK`` or ``MISMATCH``, and exits
non-zero if any scenario fails. Two games and a few dozen steps each: the
simulator runs every CUDA thread as a Python thread.
"""

from __future__ import annotations

import sys
import traceback

import numpy as np
from cartpole_helpers import lockstep_with_gymnasium

from envs.cartpole.env import make_warp_cartpole
from gpu_vecenv.oracle import compare_with_reference
from gpu_vecenv.shared import SIMULATOR

SIM = dict(device="cpu", backend="cuda")

# name -> (make_warp_cartpole options, steps); every scenario must see a game end.
ORACLE_SCENARIOS = {
    # max_episode_steps=8 truncates before random actions can tip the pole over: truncations only.
    "next_step": ({"max_episode_steps": 8}, 20),
    "same_step": ({"autoreset_mode": "SameStep", "max_episode_steps": 8}, 20),
    "disabled": ({"autoreset_mode": "Disabled", "max_episode_steps": 8}, 20),
    # No time limit: the games end by falling (random episodes last 8 to ~40 steps).
    "terminations": ({}, 40),
}
SCENARIOS = [*ORACLE_SCENARIOS, "gymnasium"]


def run_oracle(name: str) -> tuple[str, bool]:
    options, steps = ORACLE_SCENARIOS[name]
    envs = make_warp_cartpole(num_envs=2, **SIM, **options)
    report = compare_with_reference(envs, steps, seed=7)
    ok = report.ok and report.game_ends > 0
    text = report.table()
    if report.game_ends == 0:
        text += "\nno game ended: the scenario does not test what it should"
    return text, ok


def run_gymnasium() -> tuple[str, bool]:
    """Both games next to Gymnasium's CartPole-v1 until each ends (by falling), then once more with new seeds."""
    envs = make_warp_cartpole(num_envs=2, **SIM)
    rng = np.random.default_rng(0)
    lines = []
    for seed in (3, 40):
        r = lockstep_with_gymnasium(envs, seed=seed, rng=rng, max_steps=200)
        lines.append(
            f"seed {seed}: {r.steps} game-steps, {r.terminated} terminated, max |obs diff| {r.max_obs_abs_diff:.3e}"
        )
    return "\n".join(lines), True


def main(names: list[str]) -> int:
    if not SIMULATOR:
        print("run with NUMBA_ENABLE_CUDASIM=1")
        return 2
    failures = 0
    for name in names or SCENARIOS:
        try:
            text, ok = run_gymnasium() if name == "gymnasium" else run_oracle(name)
        except Exception:  # report and go on with the other scenarios
            print(f"== {name}\n{traceback.format_exc()}\nERROR\n", flush=True)
            failures += 1
            continue
        print(f"== {name}\n{text}\n{'OK' if ok else 'MISMATCH'}\n", flush=True)
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
