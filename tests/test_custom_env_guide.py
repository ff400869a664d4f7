"""Every code block of docs/custom_env.md runs, in order, as the guide says.

Blocks whose first line is ``# ring_gather.py`` together form the module
``ring_gather.py`` (written to a temporary directory on ``sys.path``); the
other Python blocks run in one shared namespace; bash blocks run in a shell
with that directory on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "custom_env.md"
MODULE_MARK = "# ring_gather.py"


def guide_blocks() -> list[tuple[str, str]]:
    return re.findall(r"```(python|bash)\n(.*?)```", GUIDE.read_text(), flags=re.S)


@pytest.fixture(scope="module")
def guide_module(tmp_path_factory):
    directory = tmp_path_factory.mktemp("guide")
    module_code = [code for lang, code in guide_blocks() if lang == "python" and code.startswith(MODULE_MARK)]
    (directory / "ring_gather.py").write_text("\n\n".join(module_code))
    sys.path.insert(0, str(directory))
    yield directory
    sys.path.remove(str(directory))
    sys.modules.pop("ring_gather", None)


def test_the_guide_has_the_blocks_it_promises():
    kinds = [lang for lang, _ in guide_blocks()]
    assert kinds.count("python") >= 10 and "bash" in kinds


def test_every_python_block_runs_in_order(guide_module):
    namespace: dict = {"__name__": "guide"}
    for lang, code in guide_blocks():
        if lang == "python" and not code.startswith(MODULE_MARK):
            exec(compile(code, f"{GUIDE.name} block", "exec"), namespace)
    assert "uses_plain_python" in namespace["broken"].update_phases[0].name  # the guide ran to its last block


def test_every_bash_block_runs(guide_module):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(guide_module), os.environ.get("PYTHONPATH", "")]))
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    for lang, code in guide_blocks():
        if lang == "bash":
            proc = subprocess.run(["bash", "-c", code.replace("python ", f"{sys.executable} ")], env=env,
                                  capture_output=True, text=True, timeout=600)  # fmt: skip
            assert proc.returncode == 0, proc.stdout + proc.stderr
            assert "OK" in proc.stdout, proc.stdout


@pytest.mark.gpu
def test_the_guide_env_passes_the_checker_on_the_gpu(guide_module):
    import gpu_vecenv
    from gpu_vecenv.check import check

    gpu_vecenv.register("Gather-v0", vector_entry_point="ring_gather:make_gather")
    report = check("Gather-v0", device="cuda", steps=300, num_envs=64, num_agents=40)
    print(report.table())
    assert report.ok, report.table()


@pytest.mark.gpu
def test_the_guides_staged_sum_matches_the_reference_on_the_gpu(guide_module):
    from ring_gather import staged_gather_definition

    from gpu_vecenv import GpuVectorEnv
    from gpu_vecenv.oracle import compare_with_reference

    # 40 agents, 6 stages, on blocks of 16 threads: each thread sums for several agents at each stage.
    env = GpuVectorEnv(staged_gather_definition(num_agents=40), num_games=64, device="cuda", threads_per_block=16)
    report = compare_with_reference(env, steps=120)
    assert report.ok, report.table()
