#!/usr/bin/env bash
# Issue 14's third ISA class: the CPU of a lent GPU machine (device tool), pinned to 2 cores with
# taskset, beside PyTorch in the same process, 2 threads on both sides. TRIALS=0 times the untuned
# defaults. Run from the repository root there (python3 is the image's, with NumPy and PyTorch):
#     bash benchmarks/device_cpu.sh            # writes $OUT (or results/device_cpu)
#     SUITES=r50 bash benchmarks/device_cpu.sh  # the ResNet-50 layers only (DEP: the depthwise set)
set -u
out=${OUT:-results/device_cpu}
trials=${TRIALS:-0}
suites=${SUITES:-dep r50}
mkdir -p "$out/dep" "$out/r50"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{
  lscpu | grep -E "Model name|Flags|L1d|L2|L3|^CPU\(s\)"
  cc --version | head -1
  python3 -c "import numpy, torch; print('numpy', numpy.__version__, 'torch', torch.__version__)"
  taskset -c 0,1 python3 -c "from tilewright.targets import as_target; print(as_target('cpu'))"
  case " $suites " in *" dep "*)
    taskset -c 0,1 python3 -m tilewright.cli bench flextensor --ops DEP --trials "$trials" --threads 2 \
      --records /tmp/device_cpu.db --out "$out/dep";; esac
  case " $suites " in *" r50 "*)
    taskset -c 0,1 python3 -m tilewright.cli bench resnet50 --trials "$trials" --threads 2 \
      --records /tmp/device_cpu.db --out "$out/r50";; esac
} 2>&1 | tee "$out/log.txt"
