"""Stable-Baselines3 adapter: a gpu_vecenv vector env as an SB3 ``VecEnv``.

    import gymnasium as gym, gpu_vecenv
    from stable_baselines3 import PPO
    from gpu_vecenv.sb3 import SB3VecEnv

    venv = SB3VecEnv(gym.make_vec("WarpCartPole-v1", num_envs=64, autoreset_mode="same_step"))
    PPO("MlpPolicy", venv).learn(100_000)

Every slot of the env is one SB3 env (so a multi-agent game is trained by one
shared policy over all its agents). Outputs are numpy arrays on the host: one
device-to-host copy per step carries observations, rewards, flags and the
final observations together. SB3 resets a finished env inside ``step``, so the
wrapped env must run in Gymnasium's ``SAME_STEP`` autoreset mode.

Needs stable-baselines3 (``pip install "gpu_vecenv[sb3]"``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from gpu_vecenv.vector_env import parse_autoreset_mode

try:
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import VecEnv
    from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices
except ImportError as err:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "gpu_vecenv.sb3 needs stable-baselines3, which is an optional dependency of gpu_vecenv; "
        'install it with: pip install "gpu_vecenv[sb3]"  (or: pip install stable-baselines3)'
    ) from err


class _EmptySlotInfo(dict):
    """The info of a slot with nothing to report this step: one shared, read-only, empty dict.

    Building a fresh dict for each of millions of slots every step would cost
    more than the step; SB3 itself only writes into the infos of finished
    slots, which get dicts of their own. ``dict(info)`` or ``info.copy()``
    gives a writable copy.
    """

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "this slot's info is a shared read-only empty dict (the slot did not finish an episode this step); "
            "copy it with dict(info) before adding keys"
        )

    __setitem__ = __delitem__ = __ior__ = _refuse  # type: ignore[assignment]
    update = setdefault = pop = popitem = clear = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (_EmptySlotInfo, ())


_EMPTY_INFO = _EmptySlotInfo()


def _wrapper_chain(env: VectorEnv) -> list[VectorEnv]:
    """``env``, the env it wraps, and so on down to the unwrapped env."""
    chain = [env]
    while isinstance(chain[-1], VectorWrapper):
        chain.append(chain[-1].env)
    return chain


class SB3VecEnv(VecEnv):
    """A ``stable_baselines3`` ``VecEnv`` over a gpu_vecenv vector env (or a Gymnasium wrapper of one).

    Args:
        env: a Gymnasium vector env whose ``step``/``reset`` return torch
            tensors (a :class:`~gpu_vecenv.vector_env.GpuVectorEnv`, possibly
            wrapped), made with ``autoreset_mode="same_step"``; observations
            a float32 ``Box``. ``copy=False`` saves one device copy per step.

    What SB3 sees (``n = env.num_envs`` slots, ``d`` observation entries):

    - ``reset()`` -> ``obs`` ``(n, d)`` float32.
    - ``step(actions)`` -> ``obs`` ``(n, d)`` float32, ``rewards`` ``(n,)``
      float32, ``dones`` ``(n,)`` bool, ``infos``: a list of ``n`` dicts.
      ``actions`` are the numpy arrays SB3 produces: ``(n,)`` for a
      ``Discrete`` action space, ``(n, k)`` for ``MultiDiscrete``.
    - The info of a slot whose episode ended holds ``terminal_observation``
      (its last observation, ``(d,)`` float32; ``obs`` already holds the first
      observation of its next episode), ``TimeLimit.truncated`` (ended by the
      time limit and not by termination) and ``episode`` = ``{"r": return,
      "l": length, "t": seconds since this adapter was made}``, as SB3's
      ``Monitor`` writes it. The infos of the other slots are one shared,
      read-only empty dict.

    Because every slot reports its ``episode`` as ``Monitor`` does,
    ``env_is_wrapped(Monitor)`` answers True (``evaluate_policy`` then reads
    the true episode returns, even under ``VecNormalize``). Slots are not
    separate envs: attributes and methods belong to the one wrapped env that
    all slots share.
    """

    def __init__(self, env: VectorEnv) -> None:
        if not isinstance(env, VectorEnv):
            raise TypeError(
                f"SB3VecEnv wraps a Gymnasium VectorEnv such as gym.make_vec('WarpCartPole-v1', ...), "
                f"got {type(env).__name__}"
            )
        mode = env.metadata.get("autoreset_mode")
        if mode is not AutoresetMode.SAME_STEP:
            got = mode.name if isinstance(mode, AutoresetMode) else repr(mode)
            raise ValueError(
                f"SB3VecEnv needs an env in the SAME_STEP autoreset mode (SB3 resets a finished env within the "
                f"step and passes its last observation in infos[i]['terminal_observation']); got {got}. "
                "The mode is fixed when the env is made, so make it with "
                "gym.make_vec(env_id, num_envs=..., autoreset_mode='same_step'), or use SB3VecEnv.make(env_id, ...)"
            )
        obs_space = env.single_observation_space
        if not (isinstance(obs_space, spaces.Box) and obs_space.dtype == np.float32):
            raise TypeError(f"SB3VecEnv needs a float32 Box observation space, got {obs_space}")
        self.env = env
        self._obs_shape = obs_space.shape
        self._obs_size = int(np.prod(obs_space.shape))
        # Slots of one game share its seed: SB3's per-env seeds are given per game.
        self._agents_per_game = int(getattr(env.unwrapped, "num_agents", 1))
        self._actions: Any = None
        self._t_start = time.time()
        super().__init__(env.num_envs, obs_space, env.single_action_space)
        self.reset_infos = [_EMPTY_INFO] * self.num_envs
        self._episode_returns = np.zeros(self.num_envs, np.float64)
        self._episode_lengths = np.zeros(self.num_envs, np.int64)

    @classmethod
    def make(cls, env_id: str, num_envs: int, **kwargs: Any) -> SB3VecEnv:
        """``SB3VecEnv(gym.make_vec(env_id, num_envs, autoreset_mode="same_step", copy=False, **kwargs))``.

        ``num_envs`` is the number of games (``num_envs * num_agents`` slots). Actions out of range are
        reported at the next reset, as by the env itself; ``strict=True`` refuses them at the step.
        """
        kwargs.setdefault("copy", False)
        mode = kwargs.pop("autoreset_mode", AutoresetMode.SAME_STEP)
        if parse_autoreset_mode(mode) is not AutoresetMode.SAME_STEP:
            raise ValueError(
                f"SB3VecEnv.make makes its env in the SAME_STEP autoreset mode, which SB3 needs; got autoreset_mode="
                f"{mode!r} (leave it out)"
            )
        return cls(gym.make_vec(env_id, num_envs=num_envs, autoreset_mode=AutoresetMode.SAME_STEP, **kwargs))

    # -- stepping ------------------------------------------------------------------------------------
    def reset(self) -> np.ndarray:
        """Reset every game (or those of a ``reset_mask`` option); seeds and options set by
        ``seed``/``set_options`` are passed to this reset only (an env may keep what an option set, as
        WarpTag-v0 keeps ``initial_positions`` for its autoresets until a reset without it)."""
        # gpu_vecenv envs take a list of per-game seeds.
        obs, infos = self.env.reset(seed=self._games_seeds(), options=self._shared_options())  # type: ignore[arg-type]
        self._reset_seeds()
        self._reset_options()
        self._actions = None
        self.reset_infos = [_EMPTY_INFO] * self.num_envs
        # Only the slots reset start new episodes: after a masked reset the others go on counting.
        reset_slots = infos.get("_active")
        was_reset = slice(None) if reset_slots is None else torch.as_tensor(reset_slots).cpu().numpy()
        self._episode_returns[was_reset] = 0.0
        self._episode_lengths[was_reset] = 0
        # copy=True: on the CPU the env may hand out its own output buffer, which the next step overwrites.
        return obs.detach().to("cpu", torch.float32, copy=True).numpy().reshape(self.num_envs, *self._obs_shape)

    def step_async(self, actions: np.ndarray) -> None:
        if actions is None:
            raise TypeError(f"SB3VecEnv.step_async needs the actions of all {self.num_envs} slots, got None")
        self._actions = actions

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        if self._actions is None:
            raise RuntimeError("SB3VecEnv.step_wait() was called without a step_async(actions) before it")
        actions, self._actions = self._actions, None
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        n, d = self.num_envs, self._obs_size
        final_obs = infos.get("final_obs")
        # One device-to-host copy: [obs | final_obs | rewards | terminated | truncated], promoted to float32.
        parts = [obs.reshape(-1), rewards, terminated, truncated]
        if final_obs is not None:
            parts.insert(1, final_obs.reshape(-1))
        # torch.cat makes a fresh tensor, so the arrays handed to SB3 are never overwritten by a later step.
        host = torch.cat(parts).to("cpu", torch.float32).numpy()
        obs_np = host[: n * d].reshape(n, *self._obs_shape)
        offset = n * d
        final_np = None
        if final_obs is not None:
            final_np = host[offset : offset + n * d].reshape(n, *self._obs_shape)
            offset += n * d
        rewards_np = host[offset : offset + n]
        terminated_np = host[offset + n : offset + 2 * n] != 0
        truncated_np = host[offset + 2 * n : offset + 3 * n] != 0
        dones = terminated_np | truncated_np

        self._episode_returns += rewards_np
        self._episode_lengths += 1
        slot_infos: list[dict[str, Any]] = [_EMPTY_INFO] * n
        finished = np.flatnonzero(dones)
        if finished.size:
            if final_np is None:
                raise RuntimeError(
                    "SB3VecEnv: slots finished but the env's infos have no 'final_obs'; "
                    "is it a SAME_STEP env whose wrappers keep the final observations?"
                )
            elapsed = round(time.time() - self._t_start, 6)
            for i in finished.tolist():
                slot_infos[i] = {
                    "terminal_observation": final_np[i].copy(),
                    "TimeLimit.truncated": bool(truncated_np[i] and not terminated_np[i]),
                    "episode": {
                        "r": round(float(self._episode_returns[i]), 6),
                        "l": int(self._episode_lengths[i]),
                        "t": elapsed,
                    },
                }
            self._episode_returns[finished] = 0.0
            self._episode_lengths[finished] = 0
        return obs_np, rewards_np, dones, slot_infos

    def close(self) -> None:
        self.env.close()

    # -- seeds and options -----------------------------------------------------------------------------
    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Seed the next ``reset``: game ``g`` gets ``seed + g``; returns each slot's (its game's) seed."""
        if seed is None:
            seed = int(np.random.randint(0, np.iinfo(np.uint32).max, dtype=np.uint32))
        games = np.arange(self.num_envs) // self._agents_per_game
        self._seeds = [int(seed) + int(g) for g in games]
        return self._seeds

    def _games_seeds(self) -> list[int] | None:
        if all(s is None for s in self._seeds):
            return None
        if any(s is None for s in self._seeds):
            raise ValueError("SB3VecEnv: either every slot has a seed for the next reset or none has")
        return [int(s) for s in self._seeds[:: self._agents_per_game]]  # type: ignore[arg-type]

    def _shared_options(self) -> dict[str, Any] | None:
        first = self._options[0]
        if all(o is first for o in self._options) or not any(self._options):
            return dict(first) or None
        raise ValueError(
            "SB3VecEnv: all slots share one env, which takes one options dict for all games; "
            "pass a single dict to set_options()"
        )

    # -- attributes and methods of the shared env -----------------------------------------------------
    def _slot_indices(self, indices: VecEnvIndices) -> list[int]:
        """The slots ``indices`` names, negative ones counted from the end as DummyVecEnv's list does."""
        slots = list(self._get_indices(indices))
        bad = [i for i in slots if not -self.num_envs <= int(i) < self.num_envs]
        if bad:
            raise IndexError(f"SB3VecEnv: slot indices must be in [-{self.num_envs}, {self.num_envs}), got {bad[:5]}")
        return [int(i) % self.num_envs for i in slots]

    def _owner_of(self, attr_name: str) -> VectorEnv | None:
        """The outermost env of the wrapper chain that has ``attr_name``."""
        for env in _wrapper_chain(self.env):
            if hasattr(env, attr_name):
                return env
        return None

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The wrapped env's attribute, once per requested slot (all slots share it)."""
        slots = self._slot_indices(indices)
        owner = self._owner_of(attr_name)
        if owner is None:
            raise AttributeError(f"SB3VecEnv: the wrapped env {self.env} has no attribute {attr_name!r}")
        return [getattr(owner, attr_name)] * len(slots)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set an attribute of the wrapped env; since all slots share it, ``indices`` must name every slot."""
        slots = self._slot_indices(indices)
        if sorted(set(slots)) != list(range(self.num_envs)):
            raise ValueError(
                f"SB3VecEnv: all {self.num_envs} slots share one env, so set_attr({attr_name!r}) changes every "
                f"slot; pass indices=None instead of {len(set(slots))} slot(s)"
            )
        setattr(self._owner_of(attr_name) or self.env, attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        """Call a method of the wrapped env once (not at all for no slot); its result is repeated for each
        requested slot."""
        slots = self._slot_indices(indices)
        if not slots:
            return []
        method = self.get_attr(method_name, [0])[0]
        result = method(*method_args, **method_kwargs)
        return [result] * len(slots)

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        """Whether the wrapped env is (or is wrapped by) ``wrapper_class``; True for SB3's ``Monitor``.

        The adapter writes each finished slot's ``episode`` info as ``Monitor`` does.
        """
        slots = self._slot_indices(indices)
        wrapped = wrapper_class is Monitor or any(isinstance(env, wrapper_class) for env in _wrapper_chain(self.env))
        return [wrapped] * len(slots)

    def get_images(self) -> Sequence[np.ndarray | None]:
        """The frames the wrapped env renders (``render_mode="rgb_array"``), one per rendered game, not per slot."""
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"SB3VecEnv.get_images() needs render_mode='rgb_array', the env has {self.render_mode!r}",
                stacklevel=2,
            )
            return [None] * self.num_envs
        frames: Any = self.env.render()
        if frames is None:
            return []
        if isinstance(frames, np.ndarray) and frames.ndim == 3:
            return [frames]
        return list(frames) if isinstance(frames, Iterable) else [frames]

    def __repr__(self) -> str:
        return f"SB3VecEnv({self.env})"
