"""CleanRL-style PPO on WarpTag-v0, entirely on the device: taggers and runners learn at the same time.

    python examples/cleanrl_ppo_tag.py --device cuda --out runs/ppo_tag                  # two policies
    python examples/cleanrl_ppo_tag.py --device cuda --shared-policy --out runs/shared    # one policy, every slot
    python examples/cleanrl_ppo_tag.py --eval-only --checkpoint runs/ppo_tag/checkpoints/final.pt --out runs/eval
    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
        torchrun --standalone --nproc_per_node=4 examples/cleanrl_ppo_tag.py --distributed --out runs/ppo_tag_4gpu
    tensorboard --logdir runs

What stays on the device: the env (one kernel launch per step), the rollout
storage, action sampling, GAE, the minibatches and the updates. Inside the
training loop nothing is copied to the host: episode statistics and losses
are summed in device tensors and fetched in one transfer every
``--log-every`` iterations (and a checkpoint, every ``--save-every``
iterations, copies the weights). On the CPU (small sizes) the same code runs
unchanged.

Two policies (default) use the multi-agent view: ``envs.per_game(x)`` turns
slot-major tensors into ``(games, agents, ...)``, ``envs.roles`` holds the
tagger and runner ids, and the actions go back as ``(games, agents, 2)``.
``--shared-policy`` trains one policy on every agent slot (the observation's
last entry, the agent's own type, tells the roles apart).

Bookkeeping of the multi-agent game, with the env's default NEXT_STEP autoreset:

* a sample counts in the loss only if its agent was in the game during the
  step (``infos["active"]``: tagged runners drop out) and the step was not the
  autoreset step that follows a finished game (whose actions the env ignores);
* an agent's episode ends when its game ends or when it leaves the game (a
  tagged runner), read from ``envs.state["alive"]`` after the step; GAE does
  not carry advantages across either. The game's own time limit is part of
  the game (the observation carries ``t / episode_length``), so it is a true
  termination; a truncation (``--env-kwarg max_episode_steps=N``, a limit the
  observation does not show) is not, and its last observation's value is
  bootstrapped: in NEXT_STEP mode the ending step returns that observation
  (the reset one comes a step later).
* Games start staggered over one episode (``--stagger-episodes``, on by
  default), so that one rollout holds games at every stage of an episode.

Defaults: 1000 games of WarpTag-v0's default configuration (10 taggers + 100
runners), 32 steps per rollout (3.5 M agent-samples), 2 epochs of 8
minibatches per policy, 80 M game-steps; ``--time-budget-s`` caps the wall
time.

Several GPUs (``--distributed``, started by ``torchrun``): every process
steps its own shard of ``n = --num-envs / WORLD_SIZE`` games on its own
device (``cuda:LOCAL_RANK``, or the CPU) and keeps its own rollout; each
policy is wrapped in ``DistributedDataParallel`` (NCCL on GPUs, gloo on the
CPU), which averages the gradients of every minibatch over the processes.
The loss is the masked mean over *all* processes' minibatch samples (see
:func:`ppo_loss`), so an update equals the single-process update on the
combined minibatch. Game ``g`` of the whole run is game ``g - r * n`` of rank
``r = g // n`` and has seed ``seed + g``, exactly as in one env of
``--num-envs`` games (the staggered start too). Only rank 0 writes outputs,
prints and shows the progress bar; the logged episode statistics and losses
are summed over the processes, the throughput is the sum of the processes'
rates. Host-side decisions (the time budget, hence the learning rate) are
rank 0's, broadcast over a gloo group without syncing the GPUs.

Counting: ``--num-envs`` is the number of games (of all processes
together); a *game-step* is one step of one game, an *agent-step* one step
of one agent (``games x agents`` per env step). ``--total-timesteps`` counts
game-steps. After training, the policies are evaluated against each other
and against random play (see :func:`evaluate_matchups`); the figures go to
``evaluation.json``.

Outputs under ``--out``: ``command.txt``, ``tb/`` (TensorBoard),
``checkpoints/`` (``iter_N.pt``, ``final.pt``), ``curves.json`` and
``learning_curves.png``, ``evaluation.json``, ``summary.json`` (throughput;
with ``--distributed`` also one entry per process: device, games, first seed,
its own rate and a hash of its final weights).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import math
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
import torch.distributed as dist
import torch.nn as nn
from gymnasium.vector import AutoresetMode
from tqdm import tqdm

import gpu_vecenv  # noqa: F401  (registers WarpTag-v0)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = p.add_argument
    flag = argparse.BooleanOptionalAction
    add("--exp-name", default="ppo_tag", help="name shown in the logs")
    add("--seed", type=int, default=1, help="seed of torch and of the games")
    add("--device", default=None,
        help="'cuda', 'cuda:N' or 'cpu' (default: cuda if available); with --distributed 'cuda' or 'cpu'")  # fmt: skip
    add("--distributed", action="store_true",
        help="data-parallel over the processes started by torchrun: a shard of the games and a GPU each")  # fmt: skip
    add("--out", default=None, help="output folder (default: runs/<exp-name>_<seed>_<time>)")
    add("--track-tensorboard", action=flag, default=True, help="write TensorBoard scalars under OUT/tb")
    add("--env-id", default="WarpTag-v0")
    add("--env-kwarg", action="append", default=[], metavar="KEY=VALUE",
        help="a WarpTag parameter, e.g. num_taggers=5 (repeatable; values are Python literals)")  # fmt: skip
    add("--num-envs", type=int, default=1000, help="number of games stepped in parallel (by all processes)")
    add("--num-steps", type=int, default=32, help="steps of every game per rollout")
    add("--total-timesteps", type=int, default=80_000_000, help="game-steps to train for")
    add("--time-budget-s", type=float, default=None,
        help="also stop training after this many seconds; the learning rate then anneals over the budget")  # fmt: skip
    add("--stagger-episodes", action=flag, default=True, help="start the games at staggered episode times")
    add("--shared-policy", action="store_true", help="one policy for all agent slots instead of one per role")
    add("--hidden-size", type=int, default=128, help="width of the two hidden layers of actor and critic")
    add("--learning-rate", type=float, default=1e-3)
    add("--anneal-lr", action=flag, default=True, help="anneal the learning rate linearly to 0")
    add("--gamma", type=float, default=0.99)
    add("--gae-lambda", type=float, default=0.95)
    add("--reward-scale", type=float, default=0.1, help="rewards are multiplied by this for learning (not logging)")
    add("--num-minibatches", type=int, default=8)
    add("--update-epochs", type=int, default=2)
    add("--norm-adv", action=flag, default=True, help="normalize advantages per minibatch (active samples)")
    add("--clip-coef", type=float, default=0.2)
    add("--clip-vloss", action=flag, default=True)
    add("--ent-coef", type=float, default=0.001)
    add("--vf-coef", type=float, default=0.5)
    add("--max-grad-norm", type=float, default=0.5)
    add("--log-every", type=int, default=10, help="iterations between fetches of the logged scalars")
    add("--save-every", type=int, default=200, help="iterations between checkpoints (0: only the final one)")
    add("--eval-games", type=int, default=500, help="games per matchup in the final evaluation (0: skip it)")
    add("--eval-greedy", action="store_true", help="evaluate the policies' most likely actions, not samples")
    add("--eval-only", action="store_true", help="only evaluate --checkpoint and write OUT/evaluation.json")
    add("--checkpoint", default=None, help="checkpoint to evaluate with --eval-only")
    add("--check-no-sync", action="store_true",
        help="CUDA only: raise if the loop syncs with the device (log and checkpoint steps excepted)")  # fmt: skip
    args = p.parse_args(argv)
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    args.env_kwargs = parse_env_kwargs(args.env_kwarg)
    if args.out is None:
        args.out = f"runs/{args.exp_name}_{args.seed}_{int(time.time())}"
    if args.eval_only and not args.checkpoint:
        p.error("--eval-only needs --checkpoint")
    if args.distributed and args.eval_only:
        p.error("--eval-only runs in one process; leave out --distributed")
    if args.distributed and args.device not in ("cuda", "cpu"):
        p.error(f"--distributed needs --device cuda (each process takes cuda:LOCAL_RANK) or cpu, got {args.device!r}")
    for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs", "log_every", "hidden_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.time_budget_s is not None and args.time_budget_s <= 0:
        p.error(f"--time-budget-s must be > 0 (leave it out for no budget), got {args.time_budget_s}")
    # The loop's bookkeeping (autoreset steps, copies) is written for these; --device sets the device.
    fixed = sorted({"autoreset_mode", "copy", "device", "num_envs"} & set(args.env_kwargs))
    if fixed:
        p.error(f"--env-kwarg cannot set {fixed}: the training loop steps NEXT_STEP autoresets with copy=False "
                "(use --device and --num-envs for those)")  # fmt: skip
    return args


def parse_env_kwargs(items: list[str]) -> dict[str, Any]:
    """``["num_taggers=5", ...]`` -> ``{"num_taggers": 5}`` (values are Python literals)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--env-kwarg expects KEY=VALUE, got {item!r}")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


# -- environment ----------------------------------------------------------------------------------------------------
def make_env_shard(args: argparse.Namespace, rank: int = 0, world_size: int = 1, **options: Any):
    """The games process ``rank`` of ``world_size`` steps: ``args.num_envs // world_size`` games on ``args.device``.

    Also returns the index of the shard's first game in the whole run,
    ``rank * games``: its games are games ``first_game, first_game + 1, ...``
    of one env of ``args.num_envs`` games, and are seeded as those
    (``args.seed + g`` for game ``g``, see :func:`staggered_start`).
    """
    if args.num_envs % world_size or args.num_envs < world_size:
        raise ValueError(f"--num-envs must be a positive multiple of the {world_size} processes, got {args.num_envs}")
    games = args.num_envs // world_size
    envs = gym.make_vec(args.env_id, num_envs=games, device=args.device, **args.env_kwargs, **options)
    return envs, rank * games


def staggered_start(envs, seed: int, groups: int, first_game: int = 0,
                    total_games: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Reset the games with seeds ``seed + g``, then play random actions for one episode, resetting a group of games
    every ``1/groups`` of it.

    ``g`` is a game's index in the whole run: the env holds games
    ``first_game, ..., first_game + envs.num_games - 1`` of ``total_games``
    (default: all of them). Afterwards group ``k`` of ``groups`` (games with
    ``g % groups == k``) is ``(groups - 1 - k) / groups`` of an episode into
    its game, so a rollout sees every stage of an episode. The random actions
    are drawn for all ``total_games`` from a generator seeded with ``seed``
    and this env's games take theirs, so the shards of a distributed run start
    in exactly the states of one env of all the games. Runs before training
    (it syncs). Returns the observation and, per game, whether its next step
    is an autoreset step.
    """
    games = envs.num_games
    total_games = games if total_games is None else total_games
    obs, _ = envs.reset(seed=seed + first_game)
    pending = torch.zeros(games, dtype=torch.bool, device=envs.device)
    episode_length = int(envs.definition.constants["episode_length"])
    group = (first_game + torch.arange(games, device=envs.device)) % groups
    generator = torch.Generator(device=envs.device).manual_seed(seed)
    for k in range(groups if groups > 1 else 0):
        for _ in range(episode_length // groups):
            actions = random_actions(envs, generator, total_games)[first_game : first_game + games]
            obs, _, terminated, truncated, _ = envs.step(actions)
            pending = envs.per_game(terminated | truncated)[:, 0]
        mask = group == k
        obs, _ = envs.reset(options={"reset_mask": mask})
        pending = pending & ~mask
    return obs, pending


def random_actions(envs, generator: torch.Generator | None = None, games: int | None = None) -> torch.Tensor:
    """Uniform MultiDiscrete actions ``(games, agents, components)`` drawn on the env's device (``games``: default
    the env's)."""
    nvec = torch.as_tensor(envs.single_action_space.nvec, device=envs.device)
    shape = (envs.num_games if games is None else games, envs.num_agents, len(nvec))
    return (torch.rand(shape, generator=generator, device=envs.device) * nvec).long()


# -- several processes: torchrun starts one per GPU ---------------------------------------------------------------
@dataclass
class Processes:
    """This process's place in the run. Without ``--distributed``: rank 0 of 1, and the methods do nothing."""

    rank: int = 0
    world_size: int = 1
    distributed: bool = False
    host_group: Any = None  # gloo group for host floats (None: the default group, when that is gloo)

    @property
    def main(self) -> bool:
        """Rank 0: the process that logs, prints and writes the outputs."""
        return self.rank == 0

    def rank0_value(self, value: float) -> float:
        """Rank 0's ``value``, on every process (a broadcast of one host float over gloo; the GPU does not wait)."""
        if not self.distributed:
            return value
        t = torch.tensor([value], dtype=torch.float64)
        dist.broadcast(t, src=0, group=self.host_group)
        return float(t.item())

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sums of host floats over the processes (over gloo)."""
        if not self.distributed:
            return values
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, group=self.host_group)
        return t.tolist()

    def gather(self, item: Any) -> list[Any]:
        """Every process's ``item`` (picklable), in rank order."""
        if not self.distributed:
            return [item]
        items: list[Any] = [None] * self.world_size
        dist.all_gather_object(items, item, group=self.host_group)
        return items

    def wait_for_all(self) -> None:
        """Return once every process got here (a barrier over gloo; the GPU does not wait)."""
        if self.distributed:
            dist.barrier(group=self.host_group)


def start_processes(args: argparse.Namespace) -> Processes:
    """With ``--distributed``, join the processes torchrun started and take this one's device.

    ``--device cuda``: process ``LOCAL_RANK`` takes ``cuda:LOCAL_RANK`` and
    the gradients go over NCCL; ``--device cpu``: gloo. Host floats always go
    over gloo (a second group when the first is NCCL). Sets ``args.device``.
    """
    if not args.distributed:
        return Processes()
    missing = [name for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE") if name not in os.environ]
    if missing:
        raise SystemExit(
            f"--distributed expects to be started by torchrun, which sets {', '.join(missing)}; run: "
            "torchrun --standalone --nproc_per_node=N examples/cleanrl_ppo_tag.py --distributed"
        )
    rank, local_rank, world_size = (int(os.environ[name]) for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
    if args.device == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise SystemExit(f"process LOCAL_RANK={local_rank} needs cuda:{local_rank}, "
                             f"but {torch.cuda.device_count()} GPUs are visible")  # fmt: skip
        args.device = f"cuda:{local_rank}"
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device(args.device))
        host_group = dist.new_group(backend="gloo")
    else:
        dist.init_process_group("gloo")
        host_group = None
    return Processes(rank, world_size, True, host_group)


def sum_over_processes(t: torch.Tensor, world_size: int) -> torch.Tensor:
    """Sum ``t`` in place over the processes of the default group (NCCL: on the GPU, no host wait)."""
    if world_size > 1:
        dist.all_reduce(t)
    return t


# -- policy -------------------------------------------------------------------------------------------------------
def layer(n_in: int, n_out: int, std: float = math.sqrt(2)) -> nn.Linear:
    linear = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(linear.weight, std)
    nn.init.zeros_(linear.bias)
    return linear


class Policy(nn.Module):
    """Actor and critic MLPs over observations ``(..., obs_dim)``; one categorical head per action component."""

    def __init__(self, obs_dim: int, nvec: list[int], hidden: int) -> None:
        super().__init__()
        self.nvec = [int(n) for n in nvec]
        self.critic = nn.Sequential(
            layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(), layer(hidden, 1, std=1.0)
        )
        self.actor = nn.Sequential(
            layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(), layer(hidden, sum(self.nvec), 0.01)
        )

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`evaluate`; the update calls the policy (or its DistributedDataParallel wrapper) through this."""
        return self.evaluate(obs, actions)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def log_probs(self, obs: torch.Tensor) -> list[torch.Tensor]:
        """Per component, log-probabilities ``(..., nvec[k])``."""
        return [torch.log_softmax(z, dim=-1) for z in self.actor(obs).split(self.nvec, dim=-1)]

    def act(self, obs: torch.Tensor, greedy: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Actions ``(..., components)`` int64 (sampled, or the most likely), their log-probability and the value."""
        logps = self.log_probs(obs)
        if greedy:
            actions = torch.stack([lp.argmax(-1) for lp in logps], dim=-1)
        else:  # Gumbel-max: argmax(log p + Gumbel noise) is a draw from p, with no host round trip.
            actions = torch.stack([(lp - torch.log(-torch.log(torch.rand_like(lp)))).argmax(-1) for lp in logps], -1)
        return actions, self._joint_log_prob(logps, actions), self.value(obs)

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probability, entropy and value of ``actions`` in ``obs``."""
        logps = self.log_probs(obs)
        entropy = sum(-(lp.exp() * lp).sum(-1) for lp in logps)
        return self._joint_log_prob(logps, actions), entropy, self.value(obs)

    @staticmethod
    def _joint_log_prob(logps: list[torch.Tensor], actions: torch.Tensor) -> torch.Tensor:
        return sum(lp.gather(-1, actions[..., k : k + 1]).squeeze(-1) for k, lp in enumerate(logps))


def policy_actions(envs, policies: dict[str, Policy], obs: torch.Tensor, random_roles: tuple[str, ...] = (),
                   greedy: bool = False) -> torch.Tensor:  # fmt: skip
    """Actions ``(games, agents, 2)`` for slot-major ``obs``: each role from its policy, or random for ``random_roles``.

    ``policies`` is ``{"tagger": ..., "runner": ...}`` or ``{"shared": ...}``;
    ``greedy``: the policies' most likely actions instead of samples.
    """
    per_game = envs.per_game(obs)
    actions = random_actions(envs)
    with torch.no_grad():
        for role, ids in envs.roles.items():
            if role not in random_roles:
                policy = policies.get(role, policies.get("shared"))
                actions.index_copy_(1, ids, policy.act(per_game.index_select(1, ids), greedy)[0])
    return actions


# -- learners: one per policy, each with its rollout storage on the device --------------------------------------------
@dataclass
class Learner:
    """One policy, its optimizer and its rollout storage ``(num_steps, games, n)`` for its ``n`` agents."""

    name: str
    ids: torch.Tensor | None  # agent ids it acts for; None: every agent slot
    policy: Policy
    model: nn.Module  # what the update calls: the policy, or (--distributed) its DistributedDataParallel wrapper
    optimizer: torch.optim.Optimizer
    storage: dict[str, torch.Tensor] = field(default_factory=dict)
    loss_sums: torch.Tensor | None = None  # policy, value, entropy, approx_kl, clipfrac summed over minibatches

    def take(self, per_game: torch.Tensor) -> torch.Tensor:
        """This learner's agents of a ``(games, agents, ...)`` tensor."""
        return per_game if self.ids is None else per_game.index_select(1, self.ids)

    def allocate(self, num_steps: int, games: int, agents: int, obs_dim: int, components: int, device) -> None:
        n = agents if self.ids is None else len(self.ids)
        shape = (num_steps, games, n)
        self.storage = {
            "obs": torch.zeros(*shape, obs_dim, device=device),
            "actions": torch.zeros(*shape, components, dtype=torch.int64, device=device),
            "logprobs": torch.zeros(shape, device=device),
            "values": torch.zeros(shape, device=device),
            "rewards": torch.zeros(shape, device=device),
            "dones": torch.zeros(shape, device=device),  # the agent's episode ended at this step
            "terminal": torch.zeros(shape, device=device),  # ... and not by a truncation: no value after it
            "valid": torch.zeros(shape, device=device),  # the sample counts in the loss
        }
        self.loss_sums = torch.zeros(5, device=device)


def make_learners(args, envs, distributed: bool = False) -> list[Learner]:
    """A learner per role (or one shared); ``distributed``: each policy in DistributedDataParallel, which also
    copies rank 0's initial weights to every process."""
    obs_dim = envs.single_observation_space.shape[0]
    nvec = list(envs.single_action_space.nvec)
    groups = {"shared": None} if args.shared_policy else dict(envs.roles)
    learners = []
    for name, ids in groups.items():
        policy = Policy(obs_dim, nvec, args.hidden_size).to(envs.device)
        model: nn.Module = policy
        if distributed:
            device_ids = [envs.device.index] if envs.device.type == "cuda" else None
            model = nn.parallel.DistributedDataParallel(policy, device_ids=device_ids)
        optimizer = torch.optim.Adam(policy.parameters(), lr=args.learning_rate, eps=1e-5)
        learner = Learner(name, ids, policy, model, optimizer)
        learner.allocate(args.num_steps, envs.num_games, envs.num_agents, obs_dim, len(nvec), envs.device)
        learners.append(learner)
    return learners


def compute_advantages(storage: dict[str, torch.Tensor], next_value: torch.Tensor, gamma: float, lam: float):
    """GAE over the rollout: no advantage carried past an agent's episode end, and no value after a terminal one;
    after a truncated end the next value is that of the episode's last observation (NEXT_STEP mode returns it
    at the end, and the step after it is an autoreset step, not counted). Returns ``(advantages, returns)``."""
    rewards, values = storage["rewards"], storage["values"]
    advantages = torch.zeros_like(rewards)
    last = torch.zeros_like(next_value)
    for t in reversed(range(rewards.shape[0])):
        following = next_value if t == rewards.shape[0] - 1 else values[t + 1]
        delta = rewards[t] + gamma * following * (1.0 - storage["terminal"][t]) - values[t]
        last = delta + gamma * lam * (1.0 - storage["dones"][t]) * last
        advantages[t] = last
    return advantages, advantages + values


def ppo_loss(model: nn.Module, minibatch: dict[str, torch.Tensor], args,
             world_size: int = 1) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Clipped PPO loss of one minibatch, its inactive samples weighted 0, and its statistics.

    ``minibatch``: ``obs (n, obs_dim)``, ``actions (n, components)`` int64 and
    ``(n,)`` ``logprobs``, ``values``, ``advantages``, ``returns``, ``valid``
    (1.0: the sample counts, 0.0: it does not), all on the model's device.
    Every mean is over the valid samples of *all* ``world_size`` processes'
    minibatches (counts and advantage moments summed over the processes), and
    each process's loss is ``world_size`` times its share of that mean: the
    gradient DistributedDataParallel averages is then exactly the gradient of
    the single-process loss on the combined minibatch, even when the processes
    hold different numbers of valid samples. Returns the loss to backpropagate
    and this process's shares of policy loss, value loss, entropy, approximate
    KL and clip fraction (summed over the processes, they are the means).
    """
    w, adv, returns, old_values = minibatch["valid"], minibatch["advantages"], minibatch["returns"], minibatch["values"]
    count_and_sum = sum_over_processes(torch.stack([w.sum(), (adv * w).sum()]), world_size)
    total = count_and_sum[0].clamp_min(1.0)

    def share(x: torch.Tensor) -> torch.Tensor:  # this process's part of the masked mean over all processes
        return (x * w).sum() / total

    if args.norm_adv:
        mean = count_and_sum[1] / total
        std = (sum_over_processes(share((adv - mean) ** 2), world_size)).sqrt()
        adv = (adv - mean) / (std + 1e-8)
    new_logprob, entropy, new_value = model(minibatch["obs"], minibatch["actions"])
    log_ratio = new_logprob - minibatch["logprobs"]
    ratio = log_ratio.exp()
    pg_loss = share(torch.max(-adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)))
    v_error = (new_value - returns) ** 2
    if args.clip_vloss:
        v_clipped = old_values + (new_value - old_values).clamp(-args.clip_coef, args.clip_coef)
        v_error = torch.max(v_error, (v_clipped - returns) ** 2)
    v_loss = 0.5 * share(v_error)
    entropy_share = share(entropy)
    loss = world_size * (pg_loss - args.ent_coef * entropy_share + args.vf_coef * v_loss)
    with torch.no_grad():
        approx_kl = share((ratio - 1) - log_ratio)
        clipfrac = share(((ratio - 1).abs() > args.clip_coef).float())
        stats = torch.stack([pg_loss, v_loss, entropy_share, approx_kl, clipfrac]).detach()
    return loss, stats


def ppo_update(learner: Learner, advantages: torch.Tensor, returns: torch.Tensor, args, world_size: int = 1) -> int:
    """PPO epochs over the learner's rollout in random minibatches (see :func:`ppo_loss`). Returns the optimizer
    steps."""
    s = learner.storage
    samples = {
        "obs": s["obs"].flatten(0, -2),
        "actions": s["actions"].flatten(0, -2),
        "logprobs": s["logprobs"].flatten(),
        "values": s["values"].flatten(),
        "valid": s["valid"].flatten(),
        "advantages": advantages.flatten(),
        "returns": returns.flatten(),
    }
    batch = samples["obs"].shape[0]
    minibatch = math.ceil(batch / args.num_minibatches)
    steps = 0
    for _ in range(args.update_epochs):
        order = torch.rand(batch, device=samples["obs"].device).argsort()  # a random permutation made on the device
        for start in range(0, batch, minibatch):
            idx = order[start : start + minibatch]
            loss, stats = ppo_loss(learner.model, {k: v[idx] for k, v in samples.items()}, args, world_size)
            learner.optimizer.zero_grad(set_to_none=True)
            loss.backward()  # with DistributedDataParallel, the gradients arrive averaged over the processes
            nn.utils.clip_grad_norm_(learner.policy.parameters(), args.max_grad_norm)
            learner.optimizer.step()
            learner.loss_sums += stats
            steps += 1
    return steps


# -- episode statistics, summed on the device -----------------------------------------------------------------------
class EpisodeTally:
    """Per finished game: mean tagger return, mean runner return, tags, mean steps a runner was in the game.

    Sums over finished games live in ``sums`` (episodes first) on the device; nothing syncs until they are fetched.
    Only whole episodes count: ``whole`` ``(games,)`` bool says which games' next end closes an episode seen from
    its start (not one begun before training, as the staggered start leaves most); after an end, every game's is.
    """

    FIELDS = ("episodes", "tagger_return", "runner_return", "tags_per_game", "runner_steps_alive")

    def __init__(self, envs, whole: torch.Tensor) -> None:
        dev, games, agents = envs.device, envs.num_games, envs.num_agents
        self.whole = whole.clone()
        self.taggers, self.runners = envs.roles["tagger"], envs.roles["runner"]
        self.returns = torch.zeros(games, agents, device=dev)
        self.tags = torch.zeros(games, device=dev)
        self.runner_steps = torch.zeros(games, device=dev)
        self.sums = torch.zeros(len(self.FIELDS), device=dev)

    def update(self, rewards, active, tagged_by, done, counted) -> None:
        """``(games, agents)`` rewards, active, tagged_by; ``(games,)`` done, counted (not an autoreset step)."""
        self.returns += rewards
        self.tags += ((tagged_by >= 0) & counted[:, None]).sum(1)
        self.runner_steps += (active.index_select(1, self.runners) & counted[:, None]).sum(1)
        d = (done & self.whole).float()
        self.whole |= done
        self.sums += torch.stack([
            d.sum(),
            (self.returns.index_select(1, self.taggers).mean(1) * d).sum(),
            (self.returns.index_select(1, self.runners).mean(1) * d).sum(),
            (self.tags * d).sum(),
            (self.runner_steps / len(self.runners) * d).sum(),
        ])  # fmt: skip
        keep = 1.0 - done.float()
        self.returns *= keep[:, None]
        self.tags *= keep
        self.runner_steps *= keep


# -- timing without syncs -----------------------------------------------------------------------------------------
class PhaseClock:
    """Times the rollout and update phases: CUDA events on the GPU (read only after a sync), a wall clock on the CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.marks: list[tuple[str, Any]] = []

    def mark(self, name: str) -> None:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append((name, event))
        else:
            self.marks.append((name, time.perf_counter()))

    def totals_ms(self) -> dict[str, float]:
        """Milliseconds spent from each mark to the next, summed by the name of the first; call after a sync."""
        out: dict[str, float] = {}
        for (name, a), (_, b) in zip(self.marks, self.marks[1:], strict=False):
            ms = a.elapsed_time(b) if self.cuda else 1e3 * (b - a)
            out[name] = out.get(name, 0.0) + ms
        self.marks = self.marks[-1:]
        return out


# -- checkpoints --------------------------------------------------------------------------------------------------
def save_checkpoint(path: Path, learners: list[Learner], args, envs, iteration: int, game_steps: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "policies": {l.name: l.policy.state_dict() for l in learners},
            "obs_dim": envs.single_observation_space.shape[0],
            "nvec": [int(n) for n in envs.single_action_space.nvec],
            "hidden_size": args.hidden_size,
            "env_id": args.env_id,
            "env_kwargs": args.env_kwargs,
            "iteration": iteration,
            "game_steps": game_steps,
            "args": {k: v for k, v in vars(args).items() if isinstance(v, (int, float, str, bool, type(None)))},
        },
        path,
    )


def load_policies(path: str | Path, device: str | torch.device) -> tuple[dict[str, Policy], dict[str, Any]]:
    """The policies of a checkpoint (``{"tagger", "runner"}`` or ``{"shared"}``) in eval mode, and the checkpoint."""
    checkpoint = torch.load(path, map_location=device, weights_only=False)
    policies = {}
    for name, weights in checkpoint["policies"].items():
        policy = Policy(checkpoint["obs_dim"], checkpoint["nvec"], checkpoint["hidden_size"]).to(device)
        policy.load_state_dict(weights)
        policies[name] = policy.eval()
    return policies, checkpoint


# -- evaluation: the evidence of learning -------------------------------------------------------------------------
MATCHUPS = {
    # name: roles that act at random
    "trained_taggers_vs_trained_runners": (),
    "random_taggers_vs_trained_runners": ("tagger",),
    "trained_taggers_vs_random_runners": ("runner",),
    "random_taggers_vs_random_runners": ("tagger", "runner"),
}


def evaluate_matchups(policies: dict[str, Policy], args, games: int, seed: int) -> dict[str, Any]:
    """Play one episode in each of ``games`` games per matchup, the same seeded starts for every matchup.

    Per matchup: tags per game, mean steps a runner stays in the game (its
    survival time; ``episode_length`` if never tagged), mean returns per role,
    each as mean and standard error over games. The evidence compares
    (a) trained vs (b) random taggers against the trained runners, and (c)
    trained vs (d) random runners against the trained taggers, by tags per
    game and by runner survival. Trained policies sample their actions, as in
    training, unless ``args.eval_greedy``.
    """
    eval_args = argparse.Namespace(**{**vars(args), "num_envs": games, "seed": seed})
    envs, _ = make_env_shard(eval_args, autoreset_mode=AutoresetMode.DISABLED, copy=False)
    episode_length = int(envs.definition.constants["episode_length"])
    taggers, runners = envs.roles["tagger"], envs.roles["runner"]
    results: dict[str, Any] = {}
    for name, random_roles in MATCHUPS.items():
        obs, _ = envs.reset(seed=seed)
        playing = torch.ones(games, dtype=torch.bool, device=envs.device)
        tags = torch.zeros(games, device=envs.device)
        runner_steps = torch.zeros(games, device=envs.device)
        returns = torch.zeros(games, envs.num_agents, device=envs.device)
        for _ in range(episode_length):  # every game is over by then; finished games stay frozen (DISABLED)
            actions = policy_actions(envs, policies, obs, random_roles, args.eval_greedy)
            obs, rewards, terminated, truncated, infos = envs.step(actions)
            counted = playing[:, None]
            tags += ((envs.state["tagged_by"] >= 0) & counted).sum(1)
            runner_steps += (envs.per_game(infos["active"]).index_select(1, runners) & counted).sum(1)
            returns += envs.per_game(rewards) * counted
            playing &= ~envs.per_game(terminated | truncated)[:, 0]
        per_game = torch.stack([
            tags,
            runner_steps / len(runners),
            returns.index_select(1, taggers).mean(1),
            returns.index_select(1, runners).mean(1),
        ]).double()  # fmt: skip
        mean = per_game.mean(1).tolist()
        sem = (per_game.std(1) / math.sqrt(games)).tolist() if games > 1 else [0.0] * len(mean)
        keys = ("tags_per_game", "runner_steps_alive", "tagger_return", "runner_return")
        results[name] = {k: {"mean": m, "sem": s} for k, m, s in zip(keys, mean, sem, strict=True)}
    envs.close()

    def compare(first: str, second: str, labels: tuple[str, str]) -> dict[str, dict[str, float | None]]:
        out = {}
        for key in ("tags_per_game", "runner_steps_alive"):
            a, b = results[first][key]["mean"], results[second][key]["mean"]
            out[key] = {labels[0]: a, labels[1]: b, "ratio": a / b if b else None}
        return out

    return {
        "games_per_matchup": games,
        "episode_length": episode_length,
        "seed": seed,
        "actions": "greedy" if args.eval_greedy else "sampled",
        "matchups": results,
        "evidence": {
            "taggers_vs_trained_runners": compare(
                "trained_taggers_vs_trained_runners", "random_taggers_vs_trained_runners",
                ("a_trained_taggers", "b_random_taggers")),
            "runners_vs_trained_taggers": compare(
                "trained_taggers_vs_trained_runners", "trained_taggers_vs_random_runners",
                ("c_trained_runners", "d_random_runners")),
        },
    }  # fmt: skip


# -- learning curves --------------------------------------------------------------------------------------------------
def plot_curves(history: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("tagger_return", "mean episodic return, taggers"),
        ("runner_return", "mean episodic return, runners"),
        ("tags_per_game", "tags per game"),
        ("runner_steps_alive", "steps a runner stays in the game"),
        ("agent_steps_per_s", "agent-steps/s (end to end)"),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4))
    for ax, (key, label) in zip(axes, panels, strict=True):
        points = [(h["game_steps"], h[key]) for h in history if h.get(key) is not None]
        if points:
            x, y = zip(*points, strict=True)
            ax.plot(x, y, lw=1.5)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("game-steps")
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- training -----------------------------------------------------------------------------------------------------
def train(args: argparse.Namespace, procs: Processes) -> None:
    out = Path(args.out) if procs.main else None  # the other processes write nothing
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "command.txt").write_text(command_line(procs) + "\n")
    # Rank 0's initial weights reach every process through DistributedDataParallel; distinct seeds per process
    # give distinct action samples and minibatch orders.
    torch.manual_seed(args.seed + procs.rank)
    torch.set_float32_matmul_precision("high")  # TF32 matmuls on GPUs that have them
    device = torch.device(args.device)
    writer = None
    if args.track_tensorboard and out is not None:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(str(out / "tb"))
        writer.add_text("hyperparameters", "\n".join(f"|{k}|{v}|" for k, v in sorted(vars(args).items())))

    t_setup = time.perf_counter()
    # copy=False: the outputs are views of the env's buffers; every one is consumed before the next step.
    envs, first_game = make_env_shard(args, procs.rank, procs.world_size, copy=False,
                                      autoreset_mode=AutoresetMode.NEXT_STEP)  # fmt: skip
    groups = min(args.num_envs, 16) if args.stagger_episodes else 1
    next_obs, autoreset_next = staggered_start(envs, args.seed, groups, first_game, args.num_envs)
    learners = make_learners(args, envs, procs.distributed)
    tally = EpisodeTally(envs, whole=(envs.state["t"] == 0) | autoreset_next)
    clock = PhaseClock(envs.device)
    games, agents = envs.num_games, envs.num_agents
    steps_per_iteration = args.num_envs * args.num_steps  # game-steps of all processes
    num_iterations = max(1, args.total_timesteps // steps_per_iteration)
    setup_s = time.perf_counter() - t_setup
    if procs.main:
        print(f"{envs}{f' on each of {procs.world_size} processes' if procs.distributed else ''}: {agents} agents "
              f"per game, {args.num_envs * agents} agent slots, learners {[l.name for l in learners]}, "
              f"{num_iterations} iterations of {steps_per_iteration} game-steps; set-up {setup_s:.1f} s")  # fmt: skip

    history: list[dict[str, Any]] = []
    game_steps = 0  # of all processes
    sgd_steps = 0
    window = {"start": time.perf_counter(), "game_steps": 0, "sgd_steps": 0, "episodes_here": 0.0}
    train_start = time.perf_counter()

    def elapsed_s() -> float:  # rank 0's clock, so that every process anneals and stops at the same iteration
        return procs.rank0_value(time.perf_counter() - train_start)

    check_sync = args.check_no_sync and device.type == "cuda"
    progress = tqdm(total=num_iterations, desc=args.exp_name, unit="it", dynamic_ncols=True, disable=not procs.main)
    iteration = 0
    while iteration < num_iterations:
        done_fraction = iteration / num_iterations
        if args.time_budget_s is not None:
            done_fraction = max(done_fraction, elapsed_s() / args.time_budget_s)
            if done_fraction >= 1.0:
                break
        iteration += 1
        if args.anneal_lr:
            for learner in learners:
                learner.optimizer.param_groups[0]["lr"] = (1.0 - done_fraction) * args.learning_rate
        if check_sync:
            torch.cuda.set_sync_debug_mode("error")

        clock.mark("rollout")
        # The policies write their actions straight into the env's own action tensor, which step then reads
        # where it is (no copy a step); every agent's entry is written each step, by its role's policy.
        actions = envs.action_buffer.view(games, agents, 2)
        for step in range(args.num_steps):
            obs = envs.per_game(next_obs)
            with torch.no_grad():
                for learner in learners:
                    s = learner.storage
                    s["obs"][step] = learner.take(obs)
                    a, s["logprobs"][step], s["values"][step] = learner.policy.act(s["obs"][step])
                    s["actions"][step] = a
                    if learner.ids is None:
                        actions.copy_(a)
                    else:
                        actions.index_copy_(1, learner.ids, a)
            next_obs, rewards, terminated, truncated, infos = envs.step(actions)
            rewards, active = envs.per_game(rewards), envs.per_game(infos["active"])
            game_done = envs.per_game(terminated | truncated)[:, 0]
            game_terminated = envs.per_game(terminated)[:, 0]
            counted = ~autoreset_next  # an autoreset step carries no transition
            left = envs.state["alive"] == 0  # tagged runners have left the game (read before the next step)
            for learner in learners:
                s = learner.storage
                s["rewards"][step] = learner.take(rewards) * args.reward_scale
                s["valid"][step] = (learner.take(active) & counted[:, None]).float()
                s["dones"][step] = (learner.take(left) | game_done[:, None]).float()
                s["terminal"][step] = (learner.take(left) | game_terminated[:, None]).float()
            tally.update(rewards, active, envs.state["tagged_by"], game_done, counted)
            autoreset_next = game_done
        game_steps += steps_per_iteration

        clock.mark("update")
        with torch.no_grad():
            obs = envs.per_game(next_obs)
            bootstrap = [learner.policy.value(learner.take(obs)) for learner in learners]
        for learner, next_value in zip(learners, bootstrap, strict=True):
            advantages, returns = compute_advantages(learner.storage, next_value, args.gamma, args.gae_lambda)
            sgd_steps += ppo_update(learner, advantages, returns, args, procs.world_size)
        clock.mark("other")
        if check_sync:
            torch.cuda.set_sync_debug_mode("default")
        progress.update(1)

        last = iteration == num_iterations or (args.time_budget_s is not None and elapsed_s() >= args.time_budget_s)
        if iteration % args.log_every == 0 or last:
            history.append(log_window(args, procs, writer, learners, tally, clock, window, game_steps, sgd_steps,
                                      agents, progress))  # fmt: skip
            if out is not None:
                (out / "curves.json").write_text(json.dumps(history, indent=1))
        if out is not None and args.save_every and iteration % args.save_every == 0 and not last:
            save_checkpoint(out / "checkpoints" / f"iter_{iteration}.pt", learners, args, envs, iteration, game_steps)
    progress.close()
    if not history or history[-1]["game_steps"] != game_steps:
        history.append(log_window(args, procs, writer, learners, tally, clock, window, game_steps, sgd_steps, agents,
                                  progress))  # fmt: skip
    train_s = time.perf_counter() - train_start
    weights = b"".join(p.detach().cpu().numpy().tobytes() for l in learners for p in l.policy.parameters())
    shards = procs.gather({
        "rank": procs.rank,
        "device": str(device),
        "games": games,
        "first_game": first_game,
        "first_seed": args.seed + first_game,
        "episodes": window["episodes_here"],
        "game_steps_per_s": game_steps / procs.world_size / train_s,
        "weights_sha256": hashlib.sha256(weights).hexdigest(),
    })  # fmt: skip
    if out is None:
        envs.close()
        return
    save_checkpoint(out / "checkpoints" / "final.pt", learners, args, envs, iteration, game_steps)
    envs.close()

    game_steps_per_s = sum(shard["game_steps_per_s"] for shard in shards)
    summary = {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
        "torch": torch.__version__,
        "processes": procs.world_size,
        "games": args.num_envs,
        "agents_per_game": agents,
        "policies": [l.name for l in learners],
        "iterations": iteration,
        "game_steps": game_steps,
        "agent_steps": game_steps * agents,
        "optimizer_steps": sgd_steps,
        "setup_s": setup_s,
        "train_s": train_s,
        "end_to_end_game_steps_per_s": game_steps_per_s,
        "end_to_end_agent_steps_per_s": game_steps_per_s * agents,
        "optimizer_steps_per_s": sgd_steps / train_s,
        "rollout_fraction_of_time": _mean([h["rollout_fraction"] for h in history]),
        "note": "end to end = rollout (env + policy) + GAE + PPO updates, wall clock of the training loop, summed "
        "over the processes' rates; a game-step is one step of one game, an agent-step one step of one agent; "
        "optimizer steps are per policy copy (every process takes the same steps at the same time)",
    }
    if procs.distributed:
        summary["shards"] = shards
    (out / "curves.json").write_text(json.dumps(history, indent=1))
    plot_curves(history, out / "learning_curves.png",
                f"PPO on {args.env_id}, {args.num_envs} games x {agents} agents, "
                f"{'shared policy' if args.shared_policy else 'taggers and runners'}"
                f"{f', {procs.world_size} processes' if procs.distributed else ''}")  # fmt: skip
    print(f"trained {game_steps:.3e} game-steps ({game_steps * agents:.3e} agent-steps) in {train_s:.1f} s: "
          f"{game_steps_per_s:.3e} game-steps/s, {game_steps_per_s * agents:.3e} agent-steps/s end to end")  # fmt: skip
    if args.eval_games > 0:
        policies = {l.name: l.policy.eval() for l in learners}
        evaluation = evaluate_matchups(policies, args, args.eval_games, seed=args.seed + 10_000_000)
        (out / "evaluation.json").write_text(json.dumps(evaluation, indent=2))
        print_evidence(evaluation)
        summary["evidence"] = evaluation["evidence"]
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    if writer is not None:
        writer.close()


def command_line(procs: Processes) -> str:
    """The command that started this run (torchrun's for a distributed one)."""
    if not procs.distributed:
        return "python " + shlex.join(sys.argv)
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", procs.world_size))
    nodes = procs.world_size // per_node
    where = "--standalone" if nodes == 1 else f"--nnodes={nodes}"
    return f"torchrun {where} --nproc_per_node={per_node} " + shlex.join(sys.argv)


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def log_window(args, procs, writer, learners, tally, clock, window, game_steps, sgd_steps, agents, progress) -> dict:
    """Fetch the summed statistics (one device-to-host transfer), sum them over the processes (over gloo), write them
    to TensorBoard (rank 0), reset the sums. Every process calls it at the same iterations."""
    fetched = torch.cat([tally.sums] + [l.loss_sums for l in learners]).tolist()
    now = time.perf_counter()
    phases = clock.totals_ms()
    tally.sums.zero_()
    for learner in learners:
        learner.loss_sums.zero_()
    elapsed = now - window["start"]
    window["episodes_here"] += fetched[0]
    here = [
        (game_steps - window["game_steps"]) / procs.world_size / elapsed,  # this process's game-steps/s
        (sgd_steps - window["sgd_steps"]) / elapsed,
        phases.get("rollout", 0.0) / max(sum(phases.values()), 1e-9),
    ]
    *fetched, game_steps_per_s, sgd_steps_per_s, rollout_fraction = procs.sum(fetched + here)
    entry: dict[str, Any] = {
        "game_steps": game_steps,
        "agent_steps": game_steps * agents,
        "game_steps_per_s": game_steps_per_s,  # sum over the processes
        "agent_steps_per_s": game_steps_per_s * agents,
        "sgd_steps_per_s": sgd_steps_per_s / procs.world_size,  # the processes step together: their mean
        "rollout_fraction": rollout_fraction / procs.world_size,
    }
    episodes = fetched[0]
    for i, key in enumerate(EpisodeTally.FIELDS[1:], start=1):
        entry[key] = fetched[i] / episodes if episodes else None
    entry["episodes"] = episodes
    updates_per_learner = max(1, (sgd_steps - window["sgd_steps"]) // len(learners))
    for k, learner in enumerate(learners):
        base = len(EpisodeTally.FIELDS) + 5 * k
        for j, key in enumerate(("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")):
            entry[f"{learner.name}/{key}"] = fetched[base + j] / updates_per_learner
    window.update(start=now, game_steps=game_steps, sgd_steps=sgd_steps)
    if writer is not None:
        for key, value in entry.items():
            if value is not None and key not in ("game_steps", "agent_steps"):
                group = "losses" if "/" in key else ("perf" if "per_s" in key or "fraction" in key else "episode")
                writer.add_scalar(f"{group}/{key}", value, game_steps)
        writer.add_scalar("charts/learning_rate", learners[0].optimizer.param_groups[0]["lr"], game_steps)
    if procs.main:
        shown = {"agent-steps/s": f"{entry['agent_steps_per_s']:.3g}"}
        if entry["tags_per_game"] is not None:
            shown["tags/game"] = f"{entry['tags_per_game']:.1f}"
            shown["runner alive"] = f"{entry['runner_steps_alive']:.0f}"
        progress.set_postfix(shown)
    return entry


def print_evidence(evaluation: dict[str, Any]) -> None:
    print(f"evaluation, {evaluation['games_per_matchup']} games per matchup, {evaluation['actions']} actions:")
    for label, figures in evaluation["evidence"].items():
        for key, unit in (("tags_per_game", "tags per game"), ("runner_steps_alive", "steps a runner stays in")):
            (name_a, a), (name_b, b), _ = figures[key].items()
            print(f"  {label}, {unit}: {name_a} {a:.2f}, {name_b} {b:.2f}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.eval_only:
        policies, checkpoint = load_policies(args.checkpoint, args.device)
        args.env_id, args.env_kwargs = checkpoint["env_id"], checkpoint["env_kwargs"]
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "command.txt").write_text("python " + shlex.join(sys.argv) + "\n")
        evaluation = evaluate_matchups(policies, args, args.eval_games, seed=args.seed + 10_000_000)
        evaluation["checkpoint"] = str(args.checkpoint)
        (out / "evaluation.json").write_text(json.dumps(evaluation, indent=2))
        print_evidence(evaluation)
        return
    procs = start_processes(args)
    try:
        train(args, procs)
        # Every process leaves together: a process that tore its process group down while rank 0 was still
        # writing the outputs aborted now and then at exit ("terminate called without an active exception").
        procs.wait_for_all()
    finally:
        if procs.distributed:
            dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
