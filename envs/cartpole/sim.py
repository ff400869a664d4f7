"""The phases of CartPole, one source for the GPU kernel and the CPU backend.

One game is one cart (``num_agents == 1``, so ``a`` is always 0) with four
float64 state arrays ``x``, ``x_dot``, ``theta``, ``theta_dot``, each indexed
``[g, a]``. The dynamics are Gymnasium's ``CartPole-v1`` (Euler integrator),
written with the same float64 operations in the same order, so that the
float32 observations agree with Gymnasium's to float32 precision.

The physics constants are module-level ``np.float64`` globals rather than
:class:`~gpu_vecenv.definition.EnvDefinition` constants: those reach the
kernel as float32, while Numba freezes float64 globals into the compiled code
as they are.
"""

from __future__ import annotations

import math

import numpy as np

from gpu_vecenv import shared
from gpu_vecenv.counter_rng import uniform01

# Gymnasium CartPoleEnv.__init__, value for value; derived ones are computed the same way.
GRAVITY = np.float64(9.8)
MASSCART = np.float64(1.0)
MASSPOLE = np.float64(0.1)
TOTAL_MASS = np.float64(0.1 + 1.0)  # masspole + masscart
LENGTH = np.float64(0.5)  # half the pole's length
POLEMASS_LENGTH = np.float64(0.1 * 0.5)  # masspole * length
FORCE_MAG = np.float64(10.0)
TAU = np.float64(0.02)  # seconds between state updates
FOUR_THIRDS = np.float64(4.0 / 3.0)
THETA_THRESHOLD_RADIANS = np.float64(12 * 2 * math.pi / 360)
X_THRESHOLD = np.float64(2.4)

# Initial state: every variable uniform in [RESET_LOW, RESET_HIGH) = [-0.05, 0.05), unless a reset's options
# ``low``/``high`` gave other bounds (held for the autoresets after it, as Gymnasium's vector CartPole). The kernel
# reads them from the state arrays reset_low and reset_span (envs/cartpole/env.py writes them).
RESET_LOW = np.float64(-0.05)
RESET_HIGH = np.float64(0.05)

ONE = np.float32(1.0)


@shared
def push_cart(g, a, action, x, x_dot, theta, theta_dot):
    """One Euler step of Gymnasium's CartPole: action 1 pushes right, 0 (or anything else) left."""
    force = FORCE_MAG if action[0, g, a] == 1 else -FORCE_MAG
    th = theta[g, a]
    th_dot = theta_dot[g, a]
    costheta = math.cos(th)
    sintheta = math.sin(th)
    # Gymnasium's expressions, grouped as Python evaluates them (left to right).
    temp = (force + POLEMASS_LENGTH * (th_dot * th_dot) * sintheta) / TOTAL_MASS
    thetaacc = (GRAVITY * sintheta - costheta * temp) / (
        LENGTH * (FOUR_THIRDS - MASSPOLE * (costheta * costheta) / TOTAL_MASS)
    )
    xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS
    old_x_dot = x_dot[g, a]
    x[g, a] = x[g, a] + TAU * old_x_dot
    x_dot[g, a] = old_x_dot + TAU * xacc
    theta[g, a] = th + TAU * th_dot
    theta_dot[g, a] = th_dot + TAU * thetaacc


@shared
def observe_cart(g, a, obs, x, x_dot, theta, theta_dot):
    """``obs[g, a, :]`` = ``(x, x_dot, theta, theta_dot)`` rounded to float32, like Gymnasium's."""
    obs[g, a, 0] = np.float32(x[g, a])
    obs[g, a, 1] = np.float32(x_dot[g, a])
    obs[g, a, 2] = np.float32(theta[g, a])
    obs[g, a, 3] = np.float32(theta_dot[g, a])


@shared
def reward_step(g, a, rewards):
    """1.0 for every step, the terminating one included (Gymnasium's default reward)."""
    rewards[g, a] = ONE


@shared
def end_if_fallen(g, x, theta, terminated):
    """Terminate when the cart leaves [-2.4, 2.4] or the pole leaves +-12 degrees (strict bounds, as Gymnasium).

    A game phase, since ``terminated`` is per game; the cart is agent 0.
    """
    cx = x[g, 0]
    th = theta[g, 0]
    if cx < -X_THRESHOLD or cx > X_THRESHOLD or th < -THETA_THRESHOLD_RADIANS or th > THETA_THRESHOLD_RADIANS:
        terminated[g] = 1


@shared
def draw_initial_state(g, a, seed, episode, x, x_dot, theta, theta_dot, reset_span):
    """First half of a reset: draws 0..3 of this reset scaled to ``span * u`` (float64): x, x_dot, theta, theta_dot;
    ``span`` is the reset's ``high - low`` (0.1 by default).

    The offset is added by the next phase, :func:`offset_initial_state`. On a
    GPU, NVVM contracts ``-0.05 + 0.1 * u`` into one fused multiply-add by
    default (numba-cuda passes no ``-fma=0``), which rounds once instead of
    twice and so differs from the reference, and from the CPU, in the last bit
    about half the time; the barrier between two phases keeps the two
    roundings apart.
    """
    s = seed[g]
    e = episode[g]
    span = reset_span[g]
    x[g, a] = span * np.float64(uniform01(s, e, 0))
    x_dot[g, a] = span * np.float64(uniform01(s, e, 1))
    theta[g, a] = span * np.float64(uniform01(s, e, 2))
    theta_dot[g, a] = span * np.float64(uniform01(s, e, 3))


@shared
def offset_initial_state(g, a, x, x_dot, theta, theta_dot, reset_low):
    """Second half of a reset: ``low + span * u``, each variable uniform in [low, high) ([-0.05, 0.05) by default)."""
    low = reset_low[g]
    x[g, a] = low + x[g, a]
    x_dot[g, a] = low + x_dot[g, a]
    theta[g, a] = low + theta[g, a]
    theta_dot[g, a] = low + theta_dot[g, a]
