"""The `tilewright` command.

  tilewright tune conv2d --shape x=1,64,56,56 --shape w=64,64,3,3 --opt padding=1 --trials 200
  tilewright tune --case C2D:yolo_conv2 --trials 200 --method q
  tilewright records list | show WORKLOAD | export FILE | import FILE
  tilewright compile model.onnx --trials 300 --out model_lib
  tilewright bench flextensor --target cuda --ops C2D --cases yolo_conv2 --trials 200 --records gpu.db --out results
  tilewright bench models --models resnet18,bert_layer --compile-variants default,frozen --memory --no-winograd
"""

from __future__ import annotations

import argparse
import ast
import math
import sys

from .errors import TilewrightError


def _value(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _program(args) -> list:
    from . import ops, te
    from .workloads.builders import suite_program

    if args.case:
        if ":" not in args.case:
            raise TilewrightError("--case takes OPERATOR:CASE, e.g. C2D:yolo_conv2")
        op, name = args.case.split(":", 1)
        return suite_program(op, name, args.dtype)
    if not args.op:
        raise TilewrightError("give an operator (e.g. `tilewright tune conv2d --shape ...`) or --case")
    fn = getattr(ops, args.op, None)
    if fn is None or args.op not in ops.__all__:
        raise TilewrightError(f"unknown operator {args.op!r}; operators: {', '.join(sorted(ops.__all__))}")
    inputs = []
    for spec in args.shape:
        if "=" not in spec:
            raise TilewrightError(f"--shape takes NAME=d0,d1,..., got {spec!r}")
        name, dims = spec.split("=", 1)
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            raise TilewrightError(f"--shape {spec!r}: dimensions must be integers") from None
        inputs.append(te.placeholder(shape, args.dtype, name=name))
    opts = {}
    for spec in args.opt:
        if "=" not in spec:
            raise TilewrightError(f"--opt takes KEY=VALUE, got {spec!r}")
        key, val = spec.split("=", 1)
        opts[key] = _value(val)
    return [*inputs, fn(*inputs, **opts)]


def _executor(address: str | None, target):
    """The RayExecutor of `--ray ADDRESS` ('local': a cluster on 127.0.0.1 with a runner slot for `target`)."""
    if address is None:
        return None
    from .search.ray_executor import RayExecutor

    return RayExecutor(address=None if address == "local" else address, devices=(target,))


def cmd_tune(args) -> int:
    from .api import tune
    from .targets import as_target

    tensors = _program(args)
    executor = _executor(args.ray, as_target(args.target))
    try:
        result = tune(tensors, target=args.target, trials=args.trials, method=args.method, timeout=args.timeout,
                      seed=args.seed, records=args.records, progress=True, cost_model=args.cost_model,
                      executor=executor)
    finally:
        if executor is not None:
            executor.shutdown()
    print(result.report())
    return 0 if math.isfinite(result.best_cost) else 1


def cmd_records(args) -> int:
    from .records import Records

    store = Records(args.records)
    if args.action == "list":
        rows = store.workloads()
        if not rows:
            print(f"no records in {store.path}")
        for workload, target, desc, count, best in rows:
            best_text = f"{best * 1e3:.4f} ms" if best is not None else "no success"
            print(f"{workload}  {desc:40s}  {count:5d} measurements  best {best_text}  [{target[:60]}]")
    elif args.action == "show":
        matches = [r for r in store.workloads() if r[0].startswith(args.arg or "")]
        if not matches:
            print(f"no workload starting with {args.arg!r}")
            return 1
        for workload, target, desc, _count, _ in matches:
            print(f"{workload} {desc} on {target}")
            for r in store.best(workload, target, k=args.top):
                print(f"  {r.cost * 1e3:.4f} ms  {r.method:6s}  {r.point}")
    elif args.action == "export":
        print(f"exported {store.export_jsonl(args.arg)} records to {args.arg}")
    elif args.action == "import":
        print(f"imported {store.import_jsonl(args.arg)} new records from {args.arg}")
    return 0


def _split(v):
    return [x.strip() for x in v.split(",") if x.strip()] if v else None


def cmd_bench(args) -> int:
    if args.target != "cpu":
        if args.ray is not None:
            raise TilewrightError(f"--ray: bench tunes on a Ray cluster for --target cpu only, not {args.target}")
        return cmd_bench_gpu(args)
    from .bench.flextensor import bench_target

    executor = _executor(args.ray, bench_target(args.threads, args.isa))
    try:
        if args.suite == "models":
            return cmd_bench_models(args, executor)
        return cmd_bench_suite(args, executor)
    finally:
        if executor is not None:
            executor.shutdown()


def cmd_bench_suite(args, executor) -> int:
    from .bench import run_suite

    split = _split
    ops = ["R50"] if args.suite == "resnet50" else split(args.ops)
    result = run_suite(ops=ops, cases=split(args.cases), trials=args.trials, threads=args.threads,
                       out=args.out, records=args.records, method=args.method, reuse=args.reuse,
                       progress=sys.stderr.isatty(), isa=args.isa, name=args.suite, winograd=args.winograd,
                       executor=executor)
    print(f"wrote {args.out}/{args.suite}.json, .md and .png")
    return 1 if result["failures"] else 0


def cmd_bench_gpu(args) -> int:
    from .bench.flextensor_gpu import GPU_KINDS, run_gpu_suite

    if args.target not in GPU_KINDS:
        raise TilewrightError(f"--target {args.target!r}: bench runs on cpu, {', '.join(GPU_KINDS)}")
    if args.suite != "flextensor":
        raise TilewrightError(f"`tilewright bench {args.suite}` runs on the CPU only; on --target {args.target} "
                              "the benchmark is `tilewright bench flextensor` (slices with --ops/--cases)")
    name = f"flextensor_{args.target}"
    result = run_gpu_suite(args.target, ops=_split(args.ops), cases=_split(args.cases), trials=args.trials,
                           out=args.out, records=args.records, method=args.method, reuse=args.reuse,
                           progress=sys.stderr.isatty(), name=name)
    print(f"wrote {args.out}/{name}.json, .md and .png ({len(result['rows'])} cases in the merged table)")
    return 1 if result["failures"] else 0


def cmd_bench_models(args, executor=None) -> int:
    from .bench.model_baselines import Choice
    from .bench.models import run_models

    def names(text) -> tuple:
        return tuple(_split(text) or ())

    try:  # an unknown name fails here, before any model is compiled
        choice = Choice(families=names(args.baselines), compile_modes=names(args.compile_variants),
                        compile_layouts=names(args.compile_layouts), exporters=names(args.onnx_exporters))
    except ValueError as exc:
        raise TilewrightError(f"bench models: {exc}") from None
    if args.rounds < 1:
        raise TilewrightError(f"bench models: --rounds must be at least 1, got {args.rounds}")
    result = run_models(models=_split(args.models), trials=args.trials, threads=args.threads, out=args.out,
                        records=args.records, reduced=args.reduced, progress=sys.stderr.isatty(), name=args.suite,
                        layout=args.layout, winograd=args.winograd, choice=choice, rounds=args.rounds,
                        memory=args.memory, executor=executor)
    print(f"wrote {args.out}/{args.suite}.json, .md and .png")
    return 1 if result["failures"] else 0


def cmd_compile(args) -> int:
    """Compile an ONNX file (tuned with `--trials` over the whole model), export it to `--out`."""
    from .graph.compile import compile as compile_model

    module = compile_model(args.model, target=args.target, trials=args.trials, records=args.records,
                           progress=not args.quiet, kernels=args.kernels, fuse_b2b=args.fuse_b2b)
    module.export(args.out)
    print(f"{args.model}: {len(module.steps)} kernels, {module.tuning.get('trials', 0)} new trials; wrote "
          f"{args.out}/ (libmodel.so, weights.bin, model.h)")
    for decision in module.templates + module.b2b:
        print(f"  {decision.line()}")
    return 0


def parser() -> argparse.ArgumentParser:
    from . import __version__

    p = argparse.ArgumentParser(prog="tilewright", description="tensor compiler and schedule explorer")
    p.add_argument("--version", action="version", version=f"tilewright {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="compile an ONNX model for the CPU and export it as a C library")
    c.add_argument("model", help="path to a .onnx file")
    c.add_argument("--trials", type=int, default=0, help="tuning budget for the whole model (0: default schedules)")
    c.add_argument("--target", default="cpu", help="a CPU target string, e.g. 'cpu -isa=avx2'")
    c.add_argument("--records", help="SQLite record file (default: the user cache dir)")
    c.add_argument("--out", required=True, help="directory for libmodel.so, weights.bin and model.h")
    c.add_argument("--kernels", default="search", choices=["search", "templates", "auto"],
                   help="dense layers on Bolt-style templates ('templates'), or the faster of template and "
                        "searched kernel per layer ('auto'); default: searched kernels only")
    c.add_argument("--no-fuse-b2b", dest="fuse_b2b", action="store_false",
                   help="with templates: keep pairs of dense layers as two kernels (default: fuse them back to "
                        "back where the fused kernel builds, and with 'auto' where it is faster)")
    c.add_argument("--quiet", action="store_true", help="no progress lines")
    c.set_defaults(fn=cmd_compile)
    t = sub.add_parser("tune", help="tune an operator of tw.ops or a suite case")
    t.add_argument("op", nargs="?", help="operator name in tw.ops (conv2d, matmul, ...)")
    t.add_argument("--shape", action="append", default=[], help="NAME=d0,d1,... for each input, in order")
    t.add_argument("--opt", action="append", default=[], help="KEY=VALUE keyword of the operator")
    t.add_argument("--case", help="a case of the FlexTensor suite, OPERATOR:CASE (e.g. C2D:yolo_conv2)")
    t.add_argument("--dtype", default="float32")
    t.add_argument("--target", default="cpu")
    t.add_argument("--trials", type=int, default=200)
    t.add_argument("--method", default="q", choices=["q", "p", "random"])
    t.add_argument("--timeout", type=float, default=10.0)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--cost-model", default="auto", choices=["auto", "on", "off"],
                   help="pre-screen candidates with the learned model (auto: once the target has enough records)")
    t.add_argument("--records", help="SQLite record file (default: the user cache dir)")
    t.add_argument("--ray", metavar="ADDRESS", help="build and run candidates on the Ray cluster at ADDRESS "
                   "('local': start one on 127.0.0.1); needs tilewright[ray]")
    t.set_defaults(fn=cmd_tune)
    b = sub.add_parser("bench", help="benchmark a suite against PyTorch")
    b.add_argument("suite", choices=["flextensor", "resnet50", "models"])
    b.add_argument("--models", help="models: comma-separated names of tilewright.models (default: all)")
    b.add_argument("--baselines", default="eager,compile,ort",
                   help="models: which of eager, compile (torch.compile), ort (ONNX Runtime) to time")
    b.add_argument("--compile-variants", default="default,frozen,max-autotune",
                   help="models: torch.compile variants to time (default: weights not frozen; frozen: inductor "
                        "freezing; max-autotune: that mode plus freezing, slowest to compile)")
    b.add_argument("--compile-layouts", default="NCHW,channels_last",
                   help="models: input layouts of each torch.compile variant (channels_last: 4-d inputs only)")
    b.add_argument("--onnx-exporters", default="torchscript,dynamo",
                   help="models: torch.onnx exporters whose models ONNX Runtime runs (torchscript at opset 17, "
                        "dynamo at opset 18; a transformer also through ORT's BERT optimizer)")
    b.add_argument("--memory", action="store_true",
                   help="models: also measure each side's total footprint (weights included), one fresh "
                        "process per side")
    b.add_argument("--rounds", type=int, default=5, help="models: alternating timing rounds per model")
    b.add_argument("--reduced", action="store_true", help="models: the reduced sizes of the tests")
    b.add_argument("--layout", default="auto", choices=["auto", "NCHW", "NCHWc", "depthwise"],
                   help="models: which convolutions run on packed NCHW{b}c data (tw.compile's layout option; "
                        "auto: the faster of NCHW and NCHWc, measured on the model before tuning)")
    b.add_argument("--ops", help="comma-separated suite operators (default: all with a PyTorch baseline; "
                                 "resnet50: its conv layers)")
    b.add_argument("--isa", default="native", help="restrict our kernels to an ISA level (avx2 on an AVX-512 "
                                                  "host); PyTorch is not restricted")
    b.add_argument("--no-winograd", dest="winograd", action="store_false",
                   help="flextensor/resnet50: time only the direct kernel of each conv layer (by default the "
                        "layers the Winograd rule takes are also compiled as a one-layer model); models: compile "
                        "with winograd=False (every convolution direct)")
    b.add_argument("--cases", help="comma-separated case names (default: every case of the chosen operators)")
    b.add_argument("--target", default="cpu", choices=["cpu", "cuda", "opencl"],
                   help="flextensor on a GPU: tune there and compare with PyTorch on that GPU (cuDNN/cuBLAS); "
                        "slices run into the same --out merge into one table <out>/flextensor_<target>.*")
    b.add_argument("--trials", type=int, default=300, help="trials per case (GPU: 0 times the untuned default)")
    b.add_argument("--threads", type=int, help="threads for us and PyTorch (default: all cores)")
    b.add_argument("--method", default="q", choices=["q", "p", "random"])
    b.add_argument("--records", help="SQLite record file (default: the user cache dir)")
    b.add_argument("--reuse", action="store_true", help="skip tuning where the records already hold the case")
    b.add_argument("--out", default="results", help="directory for <suite>.json/.md/.png")
    b.add_argument("--ray", metavar="ADDRESS", help="tune on the Ray cluster at ADDRESS ('local': start one on "
                   "127.0.0.1); every side is still timed in this process; cpu only; needs tilewright[ray]")
    b.set_defaults(fn=cmd_bench)
    r = sub.add_parser("records", help="list, show, export or import tuning records")
    r.add_argument("action", choices=["list", "show", "export", "import"])
    r.add_argument("arg", nargs="?", help="workload prefix (show) or JSONL file (export/import)")
    r.add_argument("--records", help="SQLite record file (default: the user cache dir)")
    r.add_argument("--top", type=int, default=5)
    r.set_defaults(fn=cmd_records)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.cmd == "records" and args.action in ("export", "import") and not args.arg:
        print(f"tilewright records {args.action} needs a JSONL file", file=sys.stderr)
        return 2
    try:
        return args.fn(args)
    except TilewrightError as exc:
        print(f"tilewright: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted; every measurement so far is in the records", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
