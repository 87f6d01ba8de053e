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
# The whole network tuned takes about 30 minutes on 2 cores; a lent machine gives 15. WORKERS=n
# (with TRIALS > 0, SUITES=r50) first tunes the layers in n parallel bench runs, each pinned to its
# own pair of cores (cores 0-1, 2-3, ...; compiles there too) with its own record store, for at
# most TUNE_S seconds (default: half of LIMIT_S); then merges the stores and times every layer on
# cores 0-1 alone with nothing else running (bench --reuse: records re-timed, nothing tuned). The
# tuning's own measurements share the L3 and memory with the other workers, so they rank points a
# little noisier than a quiet run; every reported time comes from the quiet second phase.
#     PACK=1 LIMIT_S=540 WORKERS=8 TRIALS=100 SUITES=r50 bash benchmarks/device_cpu.sh   # 16 cores
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
workers=${WORKERS:-0}
first=${FIRST_CORE:-0}  # the first worker's pair starts here (the timing on cores 0-1 waits for them all)
reuse=()
bench() {
  local left=$((end - SECONDS))
  [ "$left" -gt 5 ] || { echo "time limit reached: skipped bench $*"; return; }
  timeout "$left" taskset -c 0,1 python3 -m tilewright.cli bench "$@" --trials "$trials" --threads 2 \
    --records "$out/records.db" "${reuse[@]}"
}
tune_in_parallel() {  # phase one of WORKERS=n: each worker tunes its share of the layers on its own cores
  local names limit w
  names=${cases:-$(python3 -c "from tilewright.workloads import suite; print(' '.join(c['name'] for c in suite()['R50']['cases']))")}
  # the Winograd layers (3x3, stride 1: two searches each) first, dealt out round robin
  names="$(printf '%s\n' $names | grep -E '_3x3$') $(printf '%s\n' $names | grep -vE '_3x3$')"
  limit=${TUNE_S:-$(( ${LIMIT_S:-1000000} / 2 ))}
  local -a share
  local i=0
  for c in $names; do share[$((i % workers))]+="${share[$((i % workers))]:+,}$c"; i=$((i + 1)); done
  for w in $(seq 0 $((workers - 1))); do
    [ -n "${share[$w]:-}" ] || continue
    echo "worker $w on cores $((first + 2 * w)),$((first + 2 * w + 1)): ${share[$w]}"
    env -u TILEWRIGHT_BUILD_CPUS timeout "$limit" taskset -c $((first + 2 * w)),$((first + 2 * w + 1)) \
      python3 -m tilewright.cli bench resnet50 --cases "${share[$w]}" --trials "$trials" --threads 2 \
      --records "$out/records_w$w.db" --out "$out/tune_w$w" > "$out/tune_w$w.log" 2>&1 &
  done
  wait
  for w in $(seq 0 $((workers - 1))); do
    [ -f "$out/records_w$w.db" ] || continue
    python3 -m tilewright.cli records export "$out/records_w$w.jsonl" --records "$out/records_w$w.db"
    python3 -m tilewright.cli records import "$out/records_w$w.jsonl" --records "$out/records.db"
    grep -aE "^R50 |tilewright .* ms|rror" "$out/tune_w$w.log" | tr '\r' '\n' | grep -v '^$' | sed "s/^/  w$w /"
  done
  reuse=(--reuse)
}
{
  lscpu | grep -E "Model name|Flags|L1d|L2|L3|^CPU\(s\)"
  cc --version | head -1
  python3 -c "import numpy, torch; print('numpy', numpy.__version__, 'torch', torch.__version__)"
  taskset -c 0,1 python3 -c "from tilewright.targets import as_target; print(as_target('cpu'))"
  echo "compiles on CPUs ${TILEWRIGHT_BUILD_CPUS:-0,1}"
  case " $suites " in *" dep "*) bench flextensor --ops DEP --out "$out/dep";; esac
  case " $suites " in *" r50 "*)
    if [ "$workers" -gt 0 ] && [ "$trials" -gt 0 ]; then
      tune_in_parallel
      bench resnet50 ${cases:+--cases "$(echo $cases | tr ' ' ',')"} --out "$out/r50"
    elif [ -z "$cases" ]; then bench resnet50 --out "$out/r50"
    else for c in $cases; do bench resnet50 --cases "$c" --out "$out/r50_$c"; done; fi;; esac
} 2>&1 | tee "$out/log.txt"
if [ "${PACK:-0}" = 1 ]; then
  tar czf /tmp/device_cpu.tgz -C "$out" . && find "$out" -mindepth 1 -delete && mv /tmp/device_cpu.tgz "$out/"
fi
