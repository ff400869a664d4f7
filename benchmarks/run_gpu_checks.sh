#!/usr/bin/env bash
# Run the GPU test suite, the quickstart and the host-overhead benchmark on a CUDA machine,
# writing logs and JSON into the directory given (default: benchmarks/results/latest).
#
#   bash benchmarks/run_gpu_checks.sh [OUTDIR] [PYTEST_ARGS...]
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
            "WarpCartPole-v1 --num-envs 128 --steps 600"; do
  echo "\$ python -m gpu_vecenv.check $spec --device cuda" >> "$out/checks.txt"
  python3 -m gpu_vecenv.check $spec --device cuda >> "$out/checks.txt" 2>&1
done
# First with an empty kernel cache: the set-up column then includes compiling the kernel.
GPU_VECENV_CACHE_DIR=$(mktemp -d) python3 examples/quickstart.py --games 2000 --steps 200 \
    --json "$out/quickstart_cold_cache.json" 2>&1 | tee "$out/quickstart.txt"
python3 examples/quickstart.py --json "$out/quickstart.json" 2>&1 | tee -a "$out/quickstart.txt"
python3 examples/quickstart.py --no-copy --json "$out/quickstart_nocopy.json" 2>&1 | tee -a "$out/quickstart.txt"
python3 benchmarks/bench_host.py --json "$out/bench_host.json" 2>&1 | tee "$out/bench_host.txt"
start=$(date +%s)
python3 -m pytest -q -p no:cacheprovider "${@:-tests}" 2>&1 | tee "$out/pytest.txt"
echo "pytest wall time: $(( $(date +%s) - start )) s" | tee -a "$out/pytest.txt"
