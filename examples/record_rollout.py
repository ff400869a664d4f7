"""Record a WarpTag-v0 rollout as an animated GIF: trained policies from a checkpoint, or random actions.

    python examples/record_rollout.py --checkpoint runs/ppo_tag/checkpoints/final.pt --games 4 --out tag.gif
    python examples/record_rollout.py --games 1 --steps 200 --out random.gif --still random.png --still-step 100

The env renders itself (``render_mode="rgb_array"``): taggers red, runners
blue, tagged runners grey, the game's time as a bar under the arena; several
games are tiled. Frames are drawn on the host from one small copy of the
drawn games' state per frame; the games themselves step on the device. With
a checkpoint of ``examples/cleanrl_ppo_tag.py`` the game uses the
checkpoint's WarpTag parameters and both roles act from their policies
(sampling, as in training); without one every agent acts at random.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from PIL import Image
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the training example, importable from anywhere
from cleanrl_ppo_tag import load_policies, parse_env_kwargs, policy_actions  # noqa: E402  (also registers WarpTag-v0)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", default=None, help="checkpoint of cleanrl_ppo_tag.py (default: random actions)")
    p.add_argument("--games", type=int, default=1, help="games played and drawn (tiled)")
    p.add_argument("--steps", type=int, default=None, help="steps to record (default: one episode)")
    p.add_argument("--out", required=True, help="the GIF to write")
    p.add_argument("--frame-every", type=int, default=2, help="keep every n-th step as a frame")
    p.add_argument("--fps", type=float, default=25.0)
    p.add_argument("--arena-pixels", type=int, default=256, help="pixels across one game's arena")
    p.add_argument("--still", default=None, help="also write the frame of --still-step to this PNG")
    p.add_argument("--still-step", type=int, default=None, help="step of the still (default: the middle)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default=None, help="'cuda', 'cuda:N' or 'cpu' (default: cuda if available)")
    p.add_argument("--env-kwarg", action="append", default=[], metavar="KEY=VALUE",
                   help="WarpTag parameter for random play (a checkpoint brings its own)")  # fmt: skip
    args = p.parse_args(argv)
    for name in ("games", "frame_every"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")

    policies, env_id, env_kwargs = {}, "WarpTag-v0", parse_env_kwargs(args.env_kwarg)
    if args.checkpoint:
        policies, checkpoint = load_policies(args.checkpoint, device)
        env_id, env_kwargs = checkpoint["env_id"], checkpoint["env_kwargs"]
    # DISABLED: a finished game stays on its last frame instead of starting again.
    envs = gym.make_vec(env_id, num_envs=args.games, device=device, render_mode="rgb_array",
                        autoreset_mode=AutoresetMode.DISABLED, copy=False, **env_kwargs)  # fmt: skip
    envs.render_games = list(range(args.games))
    envs.render_options = {"arena_pixels": args.arena_pixels}
    steps = args.steps if args.steps is not None else int(envs.definition.constants["episode_length"])
    still_step = args.still_step if args.still_step is not None else steps // 2
    if not 0 <= still_step <= steps:
        p.error(f"--still-step must lie in [0, {steps}] (the recorded steps), got {still_step}")

    obs, _ = envs.reset(seed=args.seed)
    frames = [envs.render()]
    still = frames[0] if still_step == 0 else None
    random_roles = () if policies else tuple(envs.roles)
    for step in tqdm(range(1, steps + 1), desc="recording", unit="step"):
        obs, *_ = envs.step(policy_actions(envs, policies, obs, random_roles))
        if step % args.frame_every == 0 or step == steps or step == still_step:
            frame = envs.render()
            if step % args.frame_every == 0 or step == steps:
                frames.append(frame)
            if step == still_step:
                still = frame
    envs.close()

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(f) for f in frames]
    images[0].save(out, save_all=True, append_images=images[1:], duration=round(1000 / args.fps), loop=0)
    print(f"wrote {out}: {len(frames)} frames of {frames[0].shape[1]}x{frames[0].shape[0]} px, {steps} steps of "
          f"{args.games} game(s), {'policies of ' + args.checkpoint if policies else 'random actions'}")  # fmt: skip
    if args.still:
        Image.fromarray(np.asarray(still)).save(args.still)
        print(f"wrote {args.still}: step {still_step}")


if __name__ == "__main__":
    main()
