#!/usr/bin/env bash
# Nsight Compute's full report of one step kernel of each WarpTag-v0 configuration below
# (benchmarks/step_loop.py: the 11th launch, i.e. the 10th step, of a warm env; clocks left alone).
#
#   bash benchmarks/ncu_profile.sh OUTDIR [NAME...]
#   NCU_METRICS=dram__bytes_read.sum,dram__bytes_write.sum PARAMS="--param max_registers=64" \
#       bash benchmarks/ncu_profile.sh OUTDIR index_100x900
#
# Writes OUTDIR/NAME.txt per configuration: every section of `ncu --set full`, as text, or with
# NCU_METRICS only those metrics (a comma-separated list; `ncu --query-metrics` lists them). PARAMS adds
# step_loop.py arguments (`--param KEY=VALUE`) to every configuration. The kernel cache is filled by a run
# without the profiler first, so the profiled process only loads the kernel.
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
)
what=(--set full)
[ -z "${NCU_METRICS:-}" ] || what=(--metrics "$NCU_METRICS")
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(k10_2000 full_5x100 index_100x900)
for name in "${names[@]}"; do
  args="${configs[$name]:?unknown configuration $name (known: ${!configs[*]})} ${PARAMS:-}"
  python3 "$here/step_loop.py" $args --steps 2 > /dev/null
  "$ncu" --clock-control none "${what[@]}" -k regex:run --launch-skip 10 --launch-count 1 \
      python3 "$here/step_loop.py" $args --steps 12 > "$out/$name.txt" 2>&1
  echo "$name: ncu exit status $?, $(grep -c . "$out/$name.txt") lines"
done
