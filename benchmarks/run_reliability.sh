#!/usr/bin/env bash
# The GPU parts of the reliability checks (docs/reliability.md), writing their results under OUTDIR:
#
#   bash benchmarks/run_reliability.sh OUTDIR [tests] [sanitize] [long_run]      (default: all three)
#
#   OUTDIR/pytest_reliability.txt     the GPU-marked tests of the reliability test files
#   OUTDIR/sanitize/summary.txt       compute-sanitizer memcheck / racecheck / synccheck (benchmarks/sanitize.sh)
#   OUTDIR/sanitize/logs.txt          their full logs
#   OUTDIR/long_run/long_run.json     10**6 steps of the default game (or as many as LONG_RUN_SECONDS allow),
#   OUTDIR/long_run/long_run.txt      spot checks, memory slopes, 100 envs made and closed
#
# On one H200: about 3 min for the tests, 3 min for the sanitizer, 3.5 min for the long run. Each phase is
# bounded (timeout) so that a hang shows as a timeout in its file instead of stopping the others.
set -uo pipefail
out=${1:?usage: bash benchmarks/run_reliability.sh OUTDIR [tests] [sanitize] [long_run]}
shift
phases=${*:-tests sanitize long_run}
cd "$(dirname "$0")/.."
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TQDM_DISABLE=1
# One kernel cache for all phases, outside OUTDIR: what the tests compile, the others load.
export GPU_VECENV_CACHE_DIR=${GPU_VECENV_CACHE_DIR:-${TMPDIR:-/tmp}/gpu_vecenv_reliability_cache}
status=0
for phase in $phases; do
  start=$(date +%s)
  case $phase in
    tests)
      { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
        timeout "${TESTS_SECONDS:-300}" python3 -m pytest -q -p no:cacheprovider -m gpu -rs \
          tests/test_bad_input.py tests/test_determinism.py tests/test_concurrency.py tests/test_gpu.py
        echo "exit status $?"; } > "$out/pytest_reliability.txt" 2>&1
      tail -3 "$out/pytest_reliability.txt"
      grep -q "exit status 0" "$out/pytest_reliability.txt" || status=1 ;;
    sanitize)
      SANITIZE_TOOL_SECONDS=${SANITIZE_TOOL_SECONDS:-120} bash benchmarks/sanitize.sh "$out/sanitize" || status=1 ;;
    long_run)
      timeout "${LONG_RUN_TIMEOUT:-330}" python3 benchmarks/long_run.py --out "$out/long_run" \
        --steps 1000000 --max-seconds "${LONG_RUN_SECONDS:-170}" || status=1 ;;
    *) echo "unknown phase $phase (tests, sanitize, long_run)"; exit 2 ;;
  esac
  echo "== $phase: $(( $(date +%s) - start )) s"
done
exit $status
