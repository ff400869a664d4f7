#!/usr/bin/env bash
# compute-sanitizer's memcheck, racecheck and synccheck over WarpTag-v0's step and reset kernels
# (benchmarks/sanitize_driver.py: five sizes, agents over threads per block included, every autoreset mode).
#
#   bash benchmarks/sanitize.sh OUTDIR [DRIVER_ARGS...]
#
# Writes OUTDIR/summary.txt (per tool: exit status, seconds, the sanitizer's ERROR SUMMARY line and the
# driver's last line) and OUTDIR/logs.txt (every tool's full log, one after the other). A first run without
# the sanitizer compiles the kernels into the cache, so the sanitized runs only load them. Launches are
# direct (no CUDA graph); one more memcheck run replays CUDA graphs (--graphs, two sizes). Each tool run is
# limited to SANITIZE_TOOL_SECONDS (default 600; exit 124 when cut). Exit status: 0 when every tool ran and
# reported 0 errors.
#
# --report-api-errors no: without it memcheck counts every CUDA_ERROR_INVALID_VALUE that the driver returns
# to cuGetProcAddress while the CUDA Python bindings probe for driver entry points this driver lacks (34 such
# host-side reports per run on the H200, none from a kernel); they are not memory errors of any kernel.
#
# racecheck analyses shared-memory accesses: those of WarpTag-v0's step scratch, which the generated kernel
# keeps in each block's shared memory (its block-local arrays; every size here has some), between phases
# separated by cuda.syncthreads(). A clean racecheck does not say that global memory is race-free: the
# agent-order check of gpu_vecenv.check (phases run last agent first) and the reference tests cover that.
set -uo pipefail
out=${1:?usage: bash benchmarks/sanitize.sh OUTDIR [DRIVER_ARGS...]}
shift
mkdir -p "$out"
summary="$out/summary.txt"
logs="$out/logs.txt"
: > "$logs"
export PYTHONUNBUFFERED=1
export GPU_VECENV_CACHE_DIR=${GPU_VECENV_CACHE_DIR:-$(mktemp -d)}
here=$(cd "$(dirname "$0")" && pwd)
driver="$here/sanitize_driver.py"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
{
  echo "compute-sanitizer over benchmarks/sanitize_driver.py $*"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1
  echo "sanitizer: ${sanitizer:-NOT FOUND}"
  [ -n "$sanitizer" ] && "$sanitizer" --version | tail -1
} > "$summary"

start=$(date +%s)
python3 "$driver" "$@" > "$out/warmup.log" 2>&1
status=$?
echo "warm-up without the sanitizer (compiles the kernels): exit $status, $(( $(date +%s) - start )) s, $(tail -1 "$out/warmup.log")" >> "$summary"
{ echo "===== warm-up (no sanitizer)"; cat "$out/warmup.log"; } >> "$logs"
rm -f "$out/warmup.log"
if [ -z "$sanitizer" ] || [ $status -ne 0 ]; then
  cat "$summary"
  exit 2
fi

failed=0
run() {  # run NAME TOOL [DRIVER_ARGS...]
  local name=$1 tool=$2
  shift 2
  local log="$out/$name.log" t0
  t0=$(date +%s)
  timeout "${SANITIZE_TOOL_SECONDS:-600}" "$sanitizer" --tool "$tool" --error-exitcode 99 --print-limit 50 --report-api-errors no \
      --log-file "$log" python3 "$driver" "$@" > "$out/$name.stdout" 2>&1
  local code=$?
  local errors
  # racecheck ends with a RACECHECK SUMMARY line (hazards) instead of an ERROR SUMMARY line.
  errors=$(grep -hE "(ERROR|RACECHECK) SUMMARY" "$log" | tail -1)
  printf '%-16s exit %-3s %5s s  %-40s %s\n' "$name" "$code" "$(( $(date +%s) - t0 ))" \
      "${errors:-no ERROR SUMMARY line (see logs.txt)}" "$(tail -1 "$out/$name.stdout")" >> "$summary"
  { echo "===== $name: compute-sanitizer --tool $tool, driver $*"; cat "$log" "$out/$name.stdout"; } >> "$logs"
  rm -f "$log" "$out/$name.stdout"
  if [ $code -ne 0 ] || [ -z "$errors" ] || ! grep -qE "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)" <<< "$errors"; then
    failed=1
  fi
}
run memcheck memcheck "$@"
run racecheck racecheck "$@"
run synccheck synccheck "$@"
run memcheck_graphs memcheck --graphs --only default-110-agents 300-agents-over-256-threads "$@"
echo "all tools clean: $([ $failed -eq 0 ] && echo yes || echo NO)" >> "$summary"
cat "$summary"
exit $failed
