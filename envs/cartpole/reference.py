"""A plain numpy reference of CartPole: one game, written to be read.

The oracle the backends are tested against (:func:`gpu_vecenv.oracle.compare_with_reference`).
It shares nothing with the kernel phases except the counter-based random
draws (run here as plain Python) that define the initial states; the
dynamics follow Gymnasium's ``CartPoleEnv.step`` line by line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from gpu_vecenv.counter_rng import uniform01

F64 = np.float64
STATE_KEYS = ("x", "x_dot", "theta", "theta_dot")

GRAVITY = 9.8
MASSCART = 1.0
MASSPOLE = 0.1
TOTAL_MASS = MASSPOLE + MASSCART
LENGTH = 0.5
POLEMASS_LENGTH = MASSPOLE * LENGTH
FORCE_MAG = 10.0
TAU = 0.02
THETA_THRESHOLD_RADIANS = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4


def _python(fn: Any) -> Any:
    return getattr(fn, "py_func", fn)


class CartPoleReference:
    """One CartPole game. State arrays are float64 of shape ``(1,)`` (one cart); ``t`` counts steps."""

    def __init__(self) -> None:
        self.x = np.zeros(1, np.float64)
        self.x_dot = np.zeros(1, np.float64)
        self.theta = np.zeros(1, np.float64)
        self.theta_dot = np.zeros(1, np.float64)
        self.t = 0

    # -- state ---------------------------------------------------------------
    def get_state(self) -> dict[str, np.ndarray | int]:
        state: dict[str, np.ndarray | int] = {k: getattr(self, k).copy() for k in STATE_KEYS}
        state["t"] = self.t
        return state

    def set_state(self, state: Mapping[str, Any]) -> None:
        for k in STATE_KEYS:
            getattr(self, k)[:] = state[k]
        self.t = int(state["t"])

    # -- reset ---------------------------------------------------------------
    def reset(self, seed: int, episode: int, options: Mapping[str, Any] | None = None) -> np.ndarray:
        """Draw the initial state of reset number ``episode`` of a game seeded ``seed``.

        Draw ``i`` (0..3: x, x_dot, theta, theta_dot) is ``u`` in [0, 1)
        (float32), mapped to ``low + (high - low) * u`` in float64, with
        Gymnasium's CartPole reset options ``low`` (default -0.05) and ``high``
        (0.05). Returns the observation ``(1, 4)`` float32.
        """
        options = options or {}
        low, high = F64(options.get("low", -0.05)), F64(options.get("high", 0.05))
        draw = _python(uniform01)
        for i, k in enumerate(STATE_KEYS):
            getattr(self, k)[0] = low + (high - low) * F64(draw(seed, episode, i))
        self.t = 0
        return self.observe()

    # -- step ----------------------------------------------------------------
    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, bool]:
        """Advance one step. ``actions``: one integer (any shape of size 1); 1 pushes right, anything else left.

        An out-of-range action acts as 0, as the framework replaces it.
        Returns ``(obs (1, 4) float32, rewards (1,) float32, terminated)``.
        """
        action = int(np.asarray(actions).reshape(-1)[0])
        self.t += 1
        x, x_dot, theta, theta_dot = self.x[0], self.x_dot[0], self.theta[0], self.theta_dot[0]
        force = FORCE_MAG if action == 1 else -FORCE_MAG
        costheta = np.cos(theta)
        sintheta = np.sin(theta)
        temp = (force + POLEMASS_LENGTH * np.square(theta_dot) * sintheta) / TOTAL_MASS
        thetaacc = (GRAVITY * sintheta - costheta * temp) / (
            LENGTH * (4.0 / 3.0 - MASSPOLE * np.square(costheta) / TOTAL_MASS)
        )
        xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
        self.x[0] = x + TAU * x_dot
        self.x_dot[0] = x_dot + TAU * xacc
        self.theta[0] = theta + TAU * theta_dot
        self.theta_dot[0] = theta_dot + TAU * thetaacc
        x, theta = self.x[0], self.theta[0]
        terminated = bool(
            x < -X_THRESHOLD or x > X_THRESHOLD or theta < -THETA_THRESHOLD_RADIANS or theta > THETA_THRESHOLD_RADIANS
        )
        return self.observe(), np.ones(1, np.float32), terminated

    # -- observation ---------------------------------------------------------
    def observe(self) -> np.ndarray:
        """``(1, 4)`` float32: x, x_dot, theta, theta_dot."""
        return np.array([[self.x[0], self.x_dot[0], self.theta[0], self.theta_dot[0]]], dtype=np.float32)
