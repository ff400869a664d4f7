#!/usr/bin/env bash
# Nsight Compute's full report of one step kernel of each WarpTag-v0 configuration below
# (benchmarks/step_loop.py: the 11th launch, i.e. the 10th step, of a warm env, or with STEP=N the N-th
# step; clocks left alone). The configurations named *_rollout draw the actions afresh each step
# (step_loop.py --redraw), as a rollout of random play does: STEP=250 profiles a step of games that
# have emptied and been reset as those of bench_step.py's rollout have.
#
#   bash benchmarks/ncu_profile.sh OUTDIR [NAME...]
#   STEP=250 bash benchmarks/ncu_profile.sh OUTDIR index_100x900_rollout
#   NCU_METRICS=dram__bytes_read.sum,dram__bytes_write.sum PARAMS="--param max_registers=64" \
#       bash benchmarks/ncu_profile.sh OUTDIR index_100x900
#
# Writes OUTDIR/NAME.txt per configuration: every section of `ncu --set full`, as text, or with
# NCU_METRICS only those metrics (a comma-separated list; `ncu --query-metrics` lists them). PARAMS adds
# step_loop.py arguments (`--param KEY=VALUE`) to every configuration. The kernel cache is filled by a run
# without the profiler first, so the profiled process only loads the kernel.
# SOURCE=1 generates the kernel module of GPU_VECENV_LINEINFO=1, keeps the report (OUTDIR/NAME.ncu-rep)
# and writes its source page as SASS, instructions executed and stall samples per machine instruction, as
# CSV (OUTDIR/NAME.sass.csv); benchmarks/ncu_sass_lines.py gives them their source lines and sums them per
# phase function (its docstring has the command).
set -uo pipefail
out=${1:?usage: bash benchmarks/ncu_profile.sh OUTDIR [NAME...]}
shift
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
[ -n "$ncu" ] || { echo "ncu not found" >&2; exit 1; }
declare -A configs=(
  [k10_2000]="--games 2000"
  [k10_100]="--games 100"
  [full_5x100]="--games 2000 --param num_taggers=5 --param use_full_observation=true"
  [index_100x900]="--games 2000 --param num_taggers=100 --param num_runners=900"
  [index_100x900_rollout]="--games 2000 --param num_taggers=100 --param num_runners=900 --redraw"
)
step=${STEP:-10}
what=(--set full)
[ -z "${NCU_METRICS:-}" ] || what=(--metrics "$NCU_METRICS")
if [ "${SOURCE:-0}" = 1 ]; then
  export GPU_VECENV_LINEINFO=1
fi
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(k10_2000 full_5x100 index_100x900)
for name in "${names[@]}"; do
  args="${configs[$name]:?unknown configuration $name (known: ${!configs[*]})} ${PARAMS:-}"
  python3 "$here/step_loop.py" $args --steps 2 > /dev/null
  keep=()
  [ "${SOURCE:-0}" = 1 ] && keep=(--import-source yes -f -o "$out/$name")
  "$ncu" --clock-control none "${what[@]}" "${keep[@]}" -k regex:run --launch-skip "$step" --launch-count 1 \
      python3 "$here/step_loop.py" $args --steps $((step + 2)) > "$out/$name.txt" 2>&1
  echo "$name: ncu exit status $?, $(grep -c . "$out/$name.txt") lines"
  if [ "${SOURCE:-0}" = 1 ]; then
    "$ncu" -i "$out/$name.ncu-rep" --page details > "$out/$name.txt" 2>&1
    "$ncu" -i "$out/$name.ncu-rep" --page source --csv --print-source sass > "$out/$name.sass.csv" 2>&1
    echo "$name: SASS source page exit status $?, $(grep -c . "$out/$name.sass.csv") lines"
  fi
done
