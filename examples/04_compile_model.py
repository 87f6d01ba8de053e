"""Lesson 4: compile a whole model and run it beside PyTorch and ONNX Runtime.

    module = tw.compile(model, [x], trials=200)   # torch.export -> graph -> fuse -> tune -> kernels
    y = module(x.numpy())

The model (one of `tilewright.models`, ResNet-18 by default, batch 1) goes
through the PyTorch frontend, batch norm is folded into the convolutions, each
conv or dense takes its elementwise epilogue (bias, ReLU, residual add) into
its own kernel, identical layers become one task, and the trial budget is
spread over the tasks by expected gain. Records are kept: a second run with
the same budget measures nothing and starts at once. The compiled model is
checked against PyTorch eager on an input it was not compiled on, then timed
beside every labelled variant of PyTorch eager (NCHW, channels_last),
torch.compile (default, frozen, max-autotune; each layout) and ONNX Runtime
(TorchScript and dynamo exporters) in alternating rounds, same input, same
threads; the fastest variant is the baseline.

Run: python examples/04_compile_model.py [--model resnet18] [--trials 120] [--threads N]
"""

from __future__ import annotations

import argparse

from tilewright.bench.models import run_model, table
from tilewright.models import MODELS
from tilewright.records import Records
from tilewright.targets import as_target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18", choices=sorted(MODELS))
    parser.add_argument("--trials", type=int, default=120, help="tuning budget for the whole model")
    parser.add_argument("--threads", type=int, default=None, help="threads for us and the baselines (all cores)")
    parser.add_argument("--records", default=None, help="SQLite records (default: user cache dir)")
    parser.add_argument("--no-torch-compile", dest="torch_compile", action="store_false",
                        help="leave out torch.compile's variants (default, frozen, max-autotune; about 2 min "
                             "of compiling for ResNet-18 on 2 cores)")
    args = parser.parse_args()

    threads = args.threads or as_target("cpu").cores
    shape = MODELS[args.model].input_shape
    print(f"compiling {args.model} (input {list(shape)}), {args.trials} trials over its tasks, {threads} threads")
    baselines = ("eager", "compile", "ort") if args.torch_compile else ("eager", "ort")
    row = run_model(args.model, args.trials, threads, Records(args.records), baselines=baselines)
    print()
    print("\n".join(table([row])))
    for name, why in row.notes.items():
        print(f"  {name} not timed: {why}")


if __name__ == "__main__":
    main()
