#!/usr/bin/env bash
# The CPU tables of docs/results.md, regenerated from scratch at HEAD on this host, one benchmark at a time:
# every step runs with its own empty cache directory (no tuning records, no compiled kernels).
#   bash benchmarks/cpu_tables.sh [OUT]        (OUT default: results/cpu_tables)
# STEPS selects steps (default: all): makerun spread suite r50
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-results/cpu_tables}
STEPS=${STEPS:-"makerun spread suite r50"}
PY=.venv/bin/python
mkdir -p "$OUT"
fresh() { TILEWRIGHT_CACHE_DIR=$(mktemp -d /tmp/tw_cache_XXXX) "$@"; }
for step in $STEPS; do
  start=$(date +%s)
  case $step in
    makerun)  # make run's two jobs, with their budgets
      fresh $PY examples/02_tune_conv2d.py --trials 60 2>&1 | tee "$OUT/makerun_conv8.txt"
      fresh $PY examples/04_compile_model.py --model resnet18 --trials 120 2>&1 | tee "$OUT/makerun_resnet18.txt" ;;
    spread)   # ResNet-18 at make run's budget in 3 separate processes, each from an empty cache
      $PY -m tilewright.bench.spread --processes 3 --out "$OUT/spread_resnet18" -- \
          bench models --models resnet18 --trials 120 ;;
    suite)    # untuned defaults of the small-operator cases, timed from Python on every side
      fresh $PY -m tilewright.cli bench flextensor --ops GEMM,GEMV,BIL,C2D --trials 0 --out "$OUT/suite" ;;
    r50)      # ResNet-50's conv layers, untuned defaults, Winograd layers beside their direct kernels
      fresh $PY -m tilewright.cli bench resnet50 --trials 0 --out "$OUT/r50" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
  echo "step $step: $(( $(date +%s) - start )) s" | tee -a "$OUT/steps.txt"
done
