#!/usr/bin/env bash
# Run the consistency checker, the quickstart, the test suite (GPU tests included) and the
# side-by-side throughput benchmark on a CUDA machine, writing logs and JSON into the directory
# given (default: benchmarks/results/latest).
#
#   bash benchmarks/run_gpu_checks.sh [OUTDIR] [PYTEST_ARGS...]
#
# PYTEST_ARGS default to the whole suite on 8 worker processes (pytest-xdist); the benchmark
# (benchmarks/bench_step.py --preset targets index --peers: the issue targets, then the K-nearest search by
# scan and by spatial index at 10 to 4096 agents) runs when BENCH_PRESETS is not empty.
set -uo pipefail
out=${1:-benchmarks/results/latest}
shift || true
mkdir -p "$out"
export TQDM_DISABLE=1 PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import sys, torch, numba, numpy, gymnasium; from importlib.metadata import version
nc = version("numba-cuda")
print("python", sys.version.split()[0], "| torch", torch.__version__, "| numba", numba.__version__,
      "| numba-cuda", nc, "| numpy", numpy.__version__, "| gymnasium", gymnasium.__version__)'
} > "$out/checks.txt" 2>&1
cat "$out/checks.txt"
# The consistency checker on the GPU: each env against its numpy reference, several episodes, resets included.
# (The reference is plain Python, one game at a time: sizes are kept small.)
for spec in "WarpTag-v0 --num-envs 8 --steps 250 --param episode_length=100" \
            "WarpTag-v0 --num-envs 4 --steps 130 --param use_full_observation=true --param num_taggers=5 --param episode_length=60" \
            "WarpTag-v0 --num-envs 3 --steps 60 --param num_runners=290 --param episode_length=25 --param spatial_index=true" \
            "WarpTag-v0 --num-envs 3 --steps 60 --param num_runners=290 --param episode_length=25 --param spatial_index=true --param game_work=staged" \
            "WarpCartPole-v1 --num-envs 128 --steps 600"; do
  echo "\$ python -m gpu_vecenv.check $spec --device cuda" >> "$out/checks.txt"
  python3 -m gpu_vecenv.check $spec --device cuda >> "$out/checks.txt" 2>&1
done
# The guide's env (docs/custom_env.md), built from the guide's own code blocks by the test, which prints the table.
echo "\$ python -m pytest -q -s tests/test_custom_env_guide.py::test_the_guide_env_passes_the_checker_on_the_gpu" >> "$out/checks.txt"
python3 -m pytest -q -s -p no:cacheprovider -W ignore \
    tests/test_custom_env_guide.py::test_the_guide_env_passes_the_checker_on_the_gpu >> "$out/checks.txt" 2>&1
# First with an empty kernel cache: the set-up column then includes compiling the kernel.
GPU_VECENV_CACHE_DIR=$(mktemp -d) python3 examples/quickstart.py --games 2000 --steps 200 \
    --json "$out/quickstart_cold_cache.json" 2>&1 | tee "$out/quickstart.txt"
python3 examples/quickstart.py --json "$out/quickstart.json" 2>&1 | tee -a "$out/quickstart.txt"
python3 examples/quickstart.py --no-copy --json "$out/quickstart_nocopy.json" 2>&1 | tee -a "$out/quickstart.txt"
start=$(date +%s)
if [ $# -eq 0 ]; then set -- -n 8 tests; fi
timeout "${PYTEST_SECONDS:-330}" python3 -m pytest -q -p no:cacheprovider -rs "$@" > "$out/pytest.txt" 2>&1
echo "pytest exit status $?, wall time: $(( $(date +%s) - start )) s" >> "$out/pytest.txt"
tail -5 "$out/pytest.txt"
presets=${BENCH_PRESETS-targets index}
if [ -n "$presets" ]; then
  timeout "${BENCH_SECONDS:-240}" python3 benchmarks/bench_step.py --preset $presets --peers --markdown \
      --out "$out/bench" > "$out/bench_step.log" 2>&1
  echo "bench_step exit status $?" >> "$out/bench_step.log"
  tail -3 "$out/bench_step.log"
fi
