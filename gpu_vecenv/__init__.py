"""gpu_vecenv: Numba-CUDA multi-agent simulations as Gymnasium vector environments on the GPU.

Importing the package registers its environments, e.g. ``WarpTag-v0``::

    import gymnasium as gym, gpu_vecenv
    envs = gym.make_vec("WarpTag-v0", num_envs=2000, device="cuda")
"""

from __future__ import annotations

from gpu_vecenv.codegen import KernelCompileError
from gpu_vecenv.definition import EnvDefinition, Phase, StateArray
from gpu_vecenv.registration import register
from gpu_vecenv.shared import shared

__version__ = "0.1.0"

__all__ = [
    "EnvDefinition",
    "GpuVectorEnv",
    "KernelCompileError",
    "Phase",
    "StateArray",
    "register",
    "shared",
    "__version__",
]


def __getattr__(name: str):
    # GpuVectorEnv pulls in torch and the backends; importing it lazily keeps `import gpu_vecenv` light.
    if name == "GpuVectorEnv":
        from gpu_vecenv.vector_env import GpuVectorEnv

        return GpuVectorEnv
    raise AttributeError(f"module 'gpu_vecenv' has no attribute {name!r}")


register("WarpTag-v0", vector_entry_point="envs.tag_continuous.env:make_warp_tag")
register("WarpCartPole-v1", vector_entry_point="envs.cartpole.env:make_warp_cartpole", max_episode_steps=500)
