#!/usr/bin/env bash
# Issue 14's third ISA class: the CPU of a lent GPU machine (device tool), pinned to 2 cores with
# taskset, beside PyTorch in the same process, 2 threads on both sides. TRIALS=0 times the untuned
# defaults. Tuning compiles on the machine's other cores (TILEWRIGHT_BUILD_CPUS), so that the
# kernels and PyTorch are timed on cores 0-1 alone. Run from the repository root there (python3 is
# the image's, with NumPy and PyTorch):
#     bash benchmarks/device_cpu.sh                    # writes $OUT (or results/device_cpu)
#     SUITES=r50 bash benchmarks/device_cpu.sh          # the ResNet-50 layers only (dep: the depthwise set)
#     TRIALS=100 SUITES=r50 CASES="l2_down conv1" bash benchmarks/device_cpu.sh
#         # chosen layers, one bench run each (a run cut short keeps the layers done: r50_<case>/)
# On the device tool: PACK=1 puts everything it wrote in one archive, $OUT/device_cpu.tgz (the tool
# returns only a few files of $OUT), and LIMIT_S=540 stops the benchmarks after 540 s so that the
# archive is still made within the call's time.
set -u
out=${OUT:-results/device_cpu}
trials=${TRIALS:-0}
suites=${SUITES:-dep r50}
cases=${CASES:-}
all=$(nproc --all)
if [ "$all" -gt 2 ]; then export TILEWRIGHT_BUILD_CPUS=${TILEWRIGHT_BUILD_CPUS:-2-$((all - 1))}; fi
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
end=$((SECONDS + ${LIMIT_S:-1000000}))
bench() {
  local left=$((end - SECONDS))
  [ "$left" -gt 5 ] || { echo "time limit reached: skipped bench $*"; return; }
  timeout "$left" taskset -c 0,1 python3 -m tilewright.cli bench "$@" --trials "$trials" --threads 2 \
    --records "$out/records.db"
}
{
  lscpu | grep -E "Model name|Flags|L1d|L2|L3|^CPU\(s\)"
  cc --version | head -1
  python3 -c "import numpy, torch; print('numpy', numpy.__version__, 'torch', torch.__version__)"
  taskset -c 0,1 python3 -c "from tilewright.targets import as_target; print(as_target('cpu'))"
  echo "compiles on CPUs ${TILEWRIGHT_BUILD_CPUS:-0,1}"
  case " $suites " in *" dep "*) bench flextensor --ops DEP --out "$out/dep";; esac
  case " $suites " in *" r50 "*)
    if [ -z "$cases" ]; then bench resnet50 --out "$out/r50"
    else for c in $cases; do bench resnet50 --cases "$c" --out "$out/r50_$c"; done; fi;; esac
} 2>&1 | tee "$out/log.txt"
if [ "${PACK:-0}" = 1 ]; then
  tar czf /tmp/device_cpu.tgz -C "$out" . && find "$out" -mindepth 1 -delete && mv /tmp/device_cpu.tgz "$out/"
fi
