"""Registers, stack frame and PTX size of an env's CUDA step kernel, compiled for a GPU that need not be here.

    python benchmarks/ptx_report.py WarpTag-v0 --param num_taggers=100 --param num_runners=900 [--cc 9.0]
    python benchmarks/ptx_report.py WarpTag-v0 --max-registers 64     # what a register cap would spill
    python benchmarks/ptx_report.py WarpTag-v0 --param max_registers=None   # the compiler's own choice

Numba compiles the generated kernel to PTX through NVRTC (the ``nvidia-cuda-nvrtc`` wheel is enough; no
driver, no GPU), and ``ptxas -v`` from a CUDA toolkit, when one is on ``PATH`` or under ``CUDA_HOME``,
reports what the GPU would run: registers per thread (they set the occupancy), stack frame bytes (local
memory) and spills. Prints one line; ``--ptx FILE`` keeps the PTX. The env is made on the CPU, so a
default that depends on the device (WarpTag-v0's search between 256 and 511 agents) is the CPU's: name
it with ``--param spatial_index=false`` to see the GPU's kernel there; likewise WarpTag-v0's default
register cap, which on a GPU is dropped where every game fits uncapped, is kept here (the kernel of a
step with many games). The env's own register cap (``--param max_registers=...``, else its default)
applies unless ``--max-registers`` overrides it.
These are static figures: they rank kernel variants (see ``benchmarks/NOTES.md``), they do not time
them.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import types
from pathlib import Path
from types import ModuleType

import gymnasium as gym
import numba
import numba.cuda.dispatcher
from numba import cuda

import gpu_vecenv  # noqa: F401  (registers the envs)
from gpu_vecenv.backends import _kernel_tensors
from gpu_vecenv.check import parse_param
from gpu_vecenv.codegen import load_kernel_module


def ptx_of(env_id: str, params: dict, cc: tuple[int, int], ring_outputs: bool = False,
           lineinfo: bool = False) -> tuple[str, int | None]:  # fmt: skip
    """The PTX of the env's CUDA step kernel (``ring_outputs``: its form that writes the slot a ring names,
    a GPU's ``copy=True`` kernel), and the register cap its definition asks for. ``lineinfo``: with line
    information, as the kernel compiled under ``GPU_VECENV_LINEINFO=1``."""
    return kernel_ptx(env_id, params, cc, ring_outputs, lineinfo)[:2]


def kernel_ptx(env_id: str, params: dict, cc: tuple[int, int], ring_outputs: bool = False,
               lineinfo: bool = False) -> tuple[str, int | None, ModuleType]:  # fmt: skip
    """:func:`ptx_of`, and the generated module the kernel is in."""
    envs = gym.make_vec(env_id, num_envs=2, device="cpu", **params).unwrapped
    previous = os.environ.get("GPU_VECENV_LINEINFO")
    os.environ["GPU_VECENV_LINEINFO"] = "1" if lineinfo else "0"
    try:
        module = load_kernel_module(envs.definition, "cuda", ring_games=envs.num_games if ring_outputs else None)
    finally:
        if previous is None:
            del os.environ["GPU_VECENV_LINEINFO"]
        else:
            os.environ["GPU_VECENV_LINEINFO"] = previous
    tensors = _kernel_tensors(envs._buffers, envs._params, envs._actions, envs._arena.kernel)
    arrays = tuple(numba.typeof(t.numpy()) for t in tensors)
    if ring_outputs:  # the ring (int64) and the block counter (int32) in place of the four outputs
        arrays = arrays[:-4] + (numba.int64[::1], numba.int32[::1])
    signature = arrays + (numba.int64,)
    # Device functions that are real calls (@shared(inline=False)) are compiled for "the current device";
    # with no driver there is none, so name the target here.
    numba.cuda.dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=cc)
    ptx, _ = cuda.compile_ptx(module.run.py_func, signature, cc=cc, lineinfo=lineinfo)
    return ptx, envs.definition.max_registers, module


def cuda_tool(name: str) -> str | None:
    """The path of a CUDA toolkit program (``ptxas``, ``nvdisasm``): on ``PATH``, else under ``CUDA_HOME``."""
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    return shutil.which(name) or (str(Path(home, "bin", name)) if Path(home, "bin", name).exists() else None)


def ptxas_report(ptx: str, cc: tuple[int, int], max_registers: int | None = None) -> str:
    ptxas = cuda_tool("ptxas")
    if ptxas is None:
        return "ptxas not found (set CUDA_HOME)"
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp, "kernel.ptx")
        source.write_text(ptx)
        # The same cap as numba-cuda's max_registers= (there applied when the driver compiles the PTX).
        cap = ["--maxrregcount", str(max_registers)] if max_registers else []
        command = [ptxas, f"-arch=sm_{cc[0]}{cc[1]}", "-v", *cap, str(source), "-o", str(Path(tmp, "k.cubin"))]
        out = subprocess.run(command, capture_output=True, text=True, check=True).stderr
    registers = re.search(r"Used (\d+) registers", out)
    frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores", out)
    stack, spilled = frame.groups() if frame else ("?", "?")
    return f"{registers.group(1) if registers else '?'} registers, {stack} B stack frame, {spilled} B spilled"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env_id")
    parser.add_argument("--param", type=parse_param, action="append", default=[], help="env parameter NAME=VALUE")
    parser.add_argument("--cc", default="9.0", help="compute capability (default 9.0, the H200)")
    parser.add_argument("--ptx", type=Path, help="also write the PTX here")
    parser.add_argument("--max-registers", type=int, help="cap the registers per thread (ptxas --maxrregcount)")
    parser.add_argument("--ring-outputs", action="store_true",
                        help="the kernel's form that writes the slot a ring names (copy=True on a GPU)")  # fmt: skip
    args = parser.parse_args()
    params = dict(args.param)
    asked = params.get("max_registers")
    if asked not in (None, "auto") and (isinstance(asked, bool) or not isinstance(asked, int)):
        parser.error(f"--param max_registers must be an integer, None or 'auto', got {asked!r}")
    if isinstance(asked, int) and not 16 <= asked <= 255:
        parser.error(f"--param max_registers must be between 16 and 255, got {asked}")
    if isinstance(asked, int) and args.max_registers is not None and asked != args.max_registers:
        parser.error(f"--param max_registers={asked} and --max-registers {args.max_registers} disagree; give one")
    if args.max_registers is not None and not 16 <= args.max_registers <= 255:
        parser.error(f"--max-registers must be between 16 and 255, got {args.max_registers}")
    cc = tuple(int(part) for part in args.cc.split("."))
    ptx, definition_cap = ptx_of(args.env_id, params, (cc[0], cc[1]), args.ring_outputs)
    # The env's cap sits in its kernel's decorator, which ptxas does not read: pass it on.
    if args.max_registers is None:
        args.max_registers = definition_cap
    if args.ptx:
        args.ptx.write_text(ptx)
    instructions = sum(1 for line in ptx.splitlines() if re.match(r"\s+[a-z@]", line))
    cap = f" (capped at {args.max_registers} registers)" if args.max_registers else ""
    form = " (ring outputs)" if args.ring_outputs else ""
    print(
        f"{args.env_id} {params}{form} sm_{cc[0]}{cc[1]}{cap}: "
        f"{ptxas_report(ptx, (cc[0], cc[1]), args.max_registers)}, {instructions} PTX instructions"
    )


if __name__ == "__main__":
    main()
