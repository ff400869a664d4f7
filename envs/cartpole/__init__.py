"""Gymnasium's CartPole-v1 on gpu_vecenv, registered as ``WarpCartPole-v1``."""

from envs.cartpole.env import cartpole_definition, make_warp_cartpole

__all__ = ["cartpole_definition", "make_warp_cartpole"]
