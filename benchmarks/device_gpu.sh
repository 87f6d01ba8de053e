#!/usr/bin/env bash
# Every GPU table in one sitting on a lent H100/H200 (device tool), in this order, each step's output
# saved under $OUT as it completes (a step cut short keeps what it wrote):
#   1. smoke    benchmarks/gpu_smoke.py: the whole CUDA path, OK/FAIL per step
#   2. sweep    benchmarks/gpu_space_sweep.py: points of every suite operator checked against NumPy
#   3. suite    tilewright bench flextensor --target cuda: a slice of C2D, DEP and GEMM against cuDNN/cuBLAS
#   4. model    benchmarks/gpu_models.py: ResNet-50 fp32 and fp16 against PyTorch eager and torch.compile
#   5. gemm     examples/03_gemm_on_gpu.py: the hand-scheduled GEMM 4096^3 against cuBLAS, TF32 off
#   6. templates tilewright.bench.gpu_templates: Bolt's templates (fp16 mma.sync) against cuBLAS, epilogue
#               fusion, b2b on Table 1 (not in the default STEPS: STEPS=templates runs it alone)
# Candidates compile in parallel on the machine's host cores (the measurer's default: every usable core).
# Budgets (environment): LIMIT_S total seconds (default 540: one call of the tool is at most 600),
# STEPS (default "smoke sweep suite model gemm"), SUITE_TRIALS (12), SUITE_CASES (one or two per operator),
# MODELS (resnet50), DTYPES (float32 float16), COMPILE_MODES (torch.compile modes: reduce-overhead; a
# second call with STEPS=model COMPILE_MODES=max-autotune adds PyTorch's autotuned kernels).
# Everything is packed into $OUT/device_gpu.tgz at the end (the tool returns only a few files), beside
# $OUT/summary.txt. On the device tool, from the repository root:
#     bash benchmarks/device_gpu.sh                                  # all five, 540 s
#     STEPS="model gemm" LIMIT_S=540 bash benchmarks/device_gpu.sh  # a second call for what was skipped
set -u
out=${OUT:-results/device_gpu}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
steps=${STEPS:-smoke sweep suite model gemm}
end=$((SECONDS + ${LIMIT_S:-540}))
summary="$out/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

run_step() {  # name, then the command; stops at the budget's end
  local name=$1; shift
  local left=$((end - SECONDS))
  if [ "$left" -lt 20 ]; then note "SKIPPED $name: the time budget is spent"; return; fi
  note "=== $name (at most ${left} s)"
  local t0=$SECONDS
  timeout "$left" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$out/$name.log" >> "$summary"
  note "=== $name: exit $rc after $((SECONDS - t0)) s$([ $rc -eq 124 ] && echo ' (cut by the time budget)')"
}

note "$(date -u) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | head -1)"
note "python $(python3 -c 'import sys, numpy, torch; print(sys.version.split()[0], "numpy", numpy.__version__, "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1)"
for step in $steps; do
  case $step in
    smoke) run_step smoke python3 benchmarks/gpu_smoke.py --target cuda --out "$out/smoke.txt" ;;
    sweep) run_step sweep python3 benchmarks/gpu_space_sweep.py --target cuda --random 2 ;;
    suite) run_step suite python3 -m tilewright.cli bench flextensor --target cuda --ops C2D,DEP,GEMM \
             --cases "${SUITE_CASES:-yolo_conv2,yolo_conv8,mbv2_dw_1,mbv2_dw_6,gemm_1024,gemm_2048}" \
             --trials "${SUITE_TRIALS:-12}" --records "$out/records.db" --out "$out/suite" ;;
    model) run_step model python3 benchmarks/gpu_models.py --models "${MODELS:-resnet50}" \
             --dtypes "${DTYPES:-float32 float16}" --compile-modes "${COMPILE_MODES:-reduce-overhead}" --out "$out/models" ;;
    gemm) run_step gemm python3 examples/03_gemm_on_gpu.py --target cuda --n 4096 ;;
    templates) run_step templates python3 -m tilewright.bench.gpu_templates --tiles "${TEMPLATE_TILES:-12}" \
             --out "$out/templates" ;;
    *) note "unknown step $step (valid: smoke sweep suite model gemm templates)" ;;
  esac
done
tar czf "$out/device_gpu.tgz" -C "$out" --exclude device_gpu.tgz . 2>/dev/null
note "packed $out/device_gpu.tgz after $SECONDS s"
