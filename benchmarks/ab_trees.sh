#!/usr/bin/env bash
# Time several source trees of the project against each other in one run on one machine, alternating
# them (A B A B ...) so that drift of the machine shows as a difference between rounds of one tree,
# not as a difference between trees.
#
#   bash benchmarks/ab_trees.sh OUTDIR ROUNDS NAME=TREE [NAME=TREE ...] -- BENCH_STEP_ARGS...
#
# e.g., with the variant checked out beside the working tree (`git worktree add .ab/topk BRANCH`):
#   bash benchmarks/ab_trees.sh ab 2 main=. topk=.ab/topk -- --preset targets --cases 10+100 5+100 1+3
#
# A tree may carry bench_step arguments of its own after `::`, so that one tree is timed against itself
# with another option:
#   bash benchmarks/ab_trees.sh ab 2 serial=. "staged=.::--game-work staged" -- --preset targets --cases 100+900
#
# Each run is `python TREE/benchmarks/bench_step.py BENCH_STEP_ARGS --out OUTDIR/NAME_ROUND` with the
# tree first on PYTHONPATH, so that its package and envs are imported. The kernel cache
# (GPU_VECENV_CACHE_DIR) can be shared: kernel modules are named by a digest of the sources that made
# them. Prints each run's table; OUTDIR/summary.txt has ms/step and kernel us per case, tree and round.
# ROUNDS 0 runs nothing and only (re)writes OUTDIR/summary.txt from the runs already there.
set -uo pipefail
out=${1:?usage: bash benchmarks/ab_trees.sh OUTDIR ROUNDS NAME=TREE ... -- BENCH_STEP_ARGS...}
rounds=${2:?ROUNDS}
shift 2
trees=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do trees+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ "$rounds" -eq 0 ] || [ ${#trees[@]} -ge 2 ] || { echo "ab_trees.sh: give at least two NAME=TREE" >&2; exit 2; }
mkdir -p "$out"
for round in $(seq 1 "$rounds"); do
  for spec in "${trees[@]}"; do
    name=${spec%%=*}
    rest=${spec#*=}
    extra=()
    if [[ $rest == *::* ]]; then read -r -a extra <<< "${rest#*::}"; rest=${rest%%::*}; fi
    tree=$(cd "$rest" && pwd) || exit 2
    echo "== $name (round $round): $tree ${extra[*]}"
    PYTHONPATH="$tree${PYTHONPATH:+:$PYTHONPATH}" python3 "$tree/benchmarks/bench_step.py" "$@" "${extra[@]}" \
        --out "$out/${name}_$round" > "$out/${name}_$round.log" 2>&1
    echo "exit status $?"
  done
done
python3 - "$out" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
lines = []
for path in sorted(out.glob("*/bench_step.json")):
    doc = json.loads(path.read_text())
    for row in doc["rows"]:
        lines.append(f"{row['name']:<32} {path.parent.name:<16} {row['ms_per_step']:9.4f} ms  {row['kernel_us']:9.1f} us"
                     f"  sources {doc['meta'].get('sources_sha256', '?')[:12]}")
text = "\n".join(sorted(lines)) + "\n"
(out / "summary.txt").write_text(text)
print(text)
PY
