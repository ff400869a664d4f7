#!/usr/bin/env bash
# usage: bash prof_versions/run1.sh OUT
# SITE: a folder holding numpy 2.4 / gymnasium 1.4 installed with pip --target (the card's image lacks them)
# prof_versions/v0, v1: copies of gpu_vecenv/ and envs/ at earlier versions (see benchmarks/results/README.md)
set -u
OUT=$1; R=$PWD
export GPU_VECENV_CACHE_DIR="${GPU_VECENV_CACHE_DIR:-$(mktemp -d)}" PYTHONUNBUFFERED=1 TQDM_DISABLE=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv,noheader
  PYTHONPATH="$SITE" python3 -c 'import sys, torch, numba, numpy, gymnasium; from importlib.metadata import version
print("python", sys.version.split()[0], "| torch", torch.__version__, "| numba", numba.__version__, "| numba-cuda", version("numba-cuda"), "| numpy", numpy.__version__, "| gymnasium", gymnasium.__version__)'
} > $OUT/card.txt 2>&1
cat $OUT/card.txt
( export PYTHONPATH="$SITE":$R
  python3 -m gpu_vecenv.check WarpTag-v0 --num-envs 8 --steps 250 --param episode_length=100 --device cuda
  python3 -m gpu_vecenv.check WarpTag-v0 --num-envs 4 --steps 130 --param use_full_observation=true --param num_taggers=5 --param episode_length=60 --device cuda
) 2>&1 | grep -v -i warn > $OUT/checks.txt
grep -E "OK|FAIL|Error" $OUT/checks.txt
prof() { local dir=$1; shift; (cd $dir && PYTHONPATH="$SITE":$PWD timeout ${T:-200} python3 $R/benchmarks/profile_kernel.py "$@") 2>&1 | grep -v -i warn; }
prof $R --label v3 --out $OUT/v3.json --copy-bandwidth --host --variants max_registers=64,max_registers=80,threads=64,threads=256 | tee $OUT/log.txt
prof $R/prof_versions/v0 --label v0 --out $OUT/v0.json --host | tee -a $OUT/log.txt
T=60 prof $R/prof_versions/v1 --label v1 --out $OUT/v1.json --configs default100,default2000,full5x100 | tee -a $OUT/log.txt
T=120 prof $R --label v3s --out $OUT/v3_scaling.json --configs "" --scaling | tee -a $OUT/log.txt
