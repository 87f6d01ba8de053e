"""`torch.compile(model, backend="tilewright")`: the dynamo backend.

Dynamo hands over an fx graph whose parameters and buffers are graph inputs;
they are frozen into constants (inference: the weights are assumed not to
change after compiling). The frozen graph is exported at core ATen level and
cut into the parts the PyTorch frontend maps (float32 tensors only) and the
rest; each supported part becomes one tilewright Module, the rest runs in
PyTorch. Anything tilewright cannot do falls back to PyTorch with one
TilewrightWarning naming the ops and the errors, never an exception.

Options (`torch.compile(..., options={...})`): what `tw.compile` takes
(trials, default 0: default schedules; target, default "cpu"; records;
progress, default on when tuning; layout, winograd, kernels, fuse_b2b) and
the tuning options (seed, timeout, ...); a misspelled name is an error
naming the valid ones. `trials` is one budget for the whole graph, shared
among its tilewright partitions by their size. Or `mode=`: "default" and
"reduce-overhead" tune nothing, "max-autotune" (and "-no-cudagraphs") tune
with MAX_AUTOTUNE_TRIALS. Registered through the `torch_dynamo_backends`
entry point."""

from __future__ import annotations

import operator
import warnings

from ..errors import TilewrightWarning

MAX_AUTOTUNE_TRIALS = 300  # a model's budget under mode="max-autotune"
MODES = {"default": 0, "reduce-overhead": 0, "max-autotune": MAX_AUTOTUNE_TRIALS,
         "max-autotune-no-cudagraphs": MAX_AUTOTUNE_TRIALS}
COMPILE_OPTIONS = ("trials", "target", "records", "progress", "layout", "winograd", "kernels", "fuse_b2b")
_FROZEN_MARKS = ("_parameters_", "_buffers_")
# Ops that move no data: a part made only of them is left to PyTorch.
_NON_COMPUTE = ("view", "reshape", "_unsafe_view", "squeeze", "unsqueeze", "permute", "transpose", "t",
                "clone", "alias", "detach", "expand", "lift_fresh_copy", "_to_copy", "flatten", "contiguous")


def _is_frozen(node, example) -> bool:
    """Whether a dynamo placeholder is a parameter or buffer (dynamo inlines nn modules and lifts them)."""
    import torch

    return isinstance(example, torch.nn.Parameter) or any(m in node.name for m in _FROZEN_MARKS)


def _op_name(node) -> str | None:
    packet = getattr(node.target, "overloadpacket", None)
    return getattr(packet, "__name__", None) if packet is not None else None


def _is_float32(val) -> bool:
    import torch

    return isinstance(val, torch.Tensor) and val.dtype == torch.float32


def _node_supported(node) -> bool:
    """The frontend maps the node and every tensor it reads or makes is float32."""
    from .frontend.torch import HANDLERS, MULTI_OUTPUT, SKIPPED

    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        src, index = node.args
        return index == 0 and _op_name(src) in MULTI_OUTPUT and _is_float32(node.meta.get("val"))
    name = _op_name(node)
    if name in SKIPPED:
        return True
    if name not in HANDLERS:
        return False
    val = node.meta.get("val")
    if name in MULTI_OUTPUT:
        if not all(u.target is operator.getitem and u.args[1] == 0 for u in node.users):
            return False
        val = val[0] if isinstance(val, (tuple, list)) else val
    if not _is_float32(val):
        return False
    return all(_is_float32(a.meta.get("val")) for a in node.all_input_nodes)


def _operator_support():
    from torch.fx.passes.operator_support import OperatorSupportBase

    class _Support(OperatorSupportBase):
        def is_node_supported(self, submodules, node) -> bool:
            return _node_supported(node)

    return _Support()


def _frozen_module(gm, example_inputs, frozen: list[int]):
    """A module holding the frozen inputs as buffers; forward takes the others in order."""
    import torch

    class Frozen(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gm = gm
            self.frozen = frozen
            for k, i in enumerate(frozen):
                x = example_inputs[i]
                if isinstance(x, torch.Tensor):
                    self.register_buffer(f"c{k}", x.detach())
                else:  # a size dynamo passes as an argument, fixed in this specialization
                    setattr(self, f"c{k}", x)
            self.n = len(example_inputs)

        def forward(self, *xs):
            it, args = iter(xs), []
            for i in range(self.n):
                args.append(getattr(self, f"c{self.frozen.index(i)}") if i in self.frozen else next(it))
            return self.gm(*args)

    return Frozen()


class _Part:
    """A fused partition: its constant arguments bound, the rest given at call time."""

    def __init__(self, sub, consts: dict[int, object], n_args: int):
        self.sub, self.consts, self.n_args = sub, consts, n_args

    def module(self):
        import torch

        part = self

        class Part(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.sub = part.sub
                for i, t in part.consts.items():
                    self.register_buffer(f"c{i}", t.detach())

            def forward(self, *xs):
                it = iter(xs)
                return self.sub(*[getattr(self, f"c{i}") if i in part.consts else next(it)
                                  for i in range(part.n_args)])

        return Part()


class _TilewrightCall:
    """Runs one compiled partition; if tilewright fails at run time, warns once and uses PyTorch from then on."""

    def __init__(self, name: str, compiled, fallback, consts: dict[int, object], n_args: int):
        self.name, self.compiled, self.fallback = name, compiled, fallback
        self.consts, self.n_args = consts, n_args

    def __call__(self, *args):
        import torch

        if self.compiled is not None:
            try:
                xs = [args[i].detach().cpu().numpy() for i in range(self.n_args) if i not in self.consts]
                out = self.compiled(*xs)
                outs = out if isinstance(out, list) else [out]
                return tuple(torch.from_numpy(o.copy()).to(args[0].device if args else "cpu") for o in outs)
            except Exception as e:  # noqa: BLE001 - the user's model must keep running
                warnings.warn(f"tilewright backend: partition {self.name} failed at run time "
                              f"({type(e).__name__}: {e}); running it in PyTorch from now on",
                              TilewrightWarning, stacklevel=2)
                self.compiled = None
        return self.fallback(*args)


def _partition_inputs(parent, node_name: str):
    for n in parent.graph.nodes:
        if n.op == "call_module" and n.target == node_name:
            return n
    return None


def _example(val):
    import torch

    return torch.zeros(tuple(int(d) for d in val.shape), dtype=val.dtype)


def _compile_parts(gm, consts: dict[str, object], opts: dict, problems: list[str]):
    """Fuse the supported nodes of the exported `gm` into submodules and swap each for a tilewright call."""
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

    from .compile import compile as tw_compile

    partitioner = CapabilityBasedPartitioner(gm, _operator_support(), allows_single_node_partition=True,
                                             non_compute_ops=[f"aten.{n}" for n in _NON_COMPUTE])
    partitions = [p for p in partitioner.propose_partitions() if p.nodes]
    if not partitions:
        return gm, 0
    fused = fuse_by_partitions(gm, [dict(p.nodes) for p in partitions], prefix="tilewright_",
                               always_return_tuple=True)
    n_compiled = 0
    parts = [(name, sub) for name, sub in fused.named_children() if name.startswith("tilewright_")]
    budget = shares(opts["trials"], [_compute_nodes(sub) for _, sub in parts])  # one budget for the graph
    for (name, sub), trials in zip(parts, budget):
        call = _partition_inputs(fused, name)
        args = list(call.args)
        part_consts = {i: consts[a.name] for i, a in enumerate(args) if a.op == "placeholder" and a.name in consts}
        examples = [_example(a.meta["val"]) for i, a in enumerate(args) if i not in part_consts]
        if not examples:  # computes on weights only: PyTorch runs it, no kernel for a constant
            continue
        try:
            compiled = tw_compile(_Part(sub, part_consts, len(args)).module(), tuple(examples),
                                  **{**opts, "trials": trials}, name=name)
            n_compiled += 1
        except Exception as e:  # noqa: BLE001 - a partition tilewright cannot build runs in PyTorch
            problems.append(f"partition {name} ({len(sub.graph.nodes) - len(args) - 1} nodes) could not be "
                            f"compiled: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            continue
        setattr(fused, name, _callable_module(_TilewrightCall(name, compiled, sub, part_consts, len(args))))
    fused.recompile()
    return fused, n_compiled


def _compute_nodes(sub) -> int:
    return sum(1 for n in sub.graph.nodes if n.op == "call_function" and _op_name(n) not in _NON_COMPUTE)


def _callable_module(fn):
    import torch

    class Call(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fn = fn

        def forward(self, *args):
            return self.fn(*args)

    return Call()


def _fallback_summary(gm) -> tuple[list[str], int]:
    """The ATen ops of the nodes left to PyTorch (outside tilewright partitions) and how many nodes."""
    ops, count = set(), 0
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is not operator.getitem:
            count += 1
            if not _node_supported(n):
                ops.add(str(n.target))
    return sorted(ops), count


def backend_options(options: dict | None = None, mode: str | None = None) -> dict:
    """The options `tw.compile` gets for each partition: `options` checked by name (unknown names and bad
    tuning options are a TilewrightError naming the valid ones), or `mode`'s budget."""
    from ..errors import TilewrightError
    from ..search.options import TuneOptions, check_count

    if mode is not None and mode not in MODES:
        raise TilewrightError(f"tilewright backend: unknown mode {mode!r}; valid: {', '.join(MODES)}")
    opts = {"trials": MODES.get(mode or "default", 0), "target": "cpu", "records": None, **(options or {})}
    tuning = {k: v for k, v in opts.items() if k not in COMPILE_OPTIONS}
    try:
        TuneOptions.of(**tuning)
    except TilewrightError as e:
        raise TilewrightError(f"tilewright backend: {e}; or one of {', '.join(COMPILE_OPTIONS)}") from None
    check_count("trials", opts["trials"], lowest=0)
    opts.setdefault("progress", opts["trials"] > 0)
    return opts


def shares(total: int, sizes: list[int]) -> list[int]:
    """`total` trials split in proportion to `sizes` (largest remainders), summing to `total`."""
    weight = sum(sizes)
    if not sizes or weight <= 0:
        return [0] * len(sizes)
    exact = [total * s / weight for s in sizes]
    out = [int(e) for e in exact]
    for i in sorted(range(len(sizes)), key=lambda i: out[i] - exact[i])[:total - sum(out)]:
        out[i] += 1
    return out


def tilewright_backend(gm, example_inputs, options: dict | None = None, mode: str | None = None):
    """The dynamo backend: `gm` (a torch.fx.GraphModule) with `example_inputs` in, a callable with the same
    arguments out. Parameters and buffers are frozen as constants (inference only: later changes to the
    weights are not seen). `options` / `mode`: see the module's doc (bad ones raise; nothing else does)."""
    opts = backend_options(options, mode)
    if any(_is_symbolic(x) for x in example_inputs):
        return _specializing(gm, opts)
    try:
        return _build(gm, list(example_inputs), opts)
    except Exception as e:  # noqa: BLE001 - never break the user's model: run it as dynamo traced it
        warnings.warn(f"tilewright backend: the graph runs in PyTorch ({type(e).__name__}: "
                      f"{str(e).splitlines()[0] if str(e) else ''})", TilewrightWarning, stacklevel=2)
        return gm.forward


def _is_symbolic(x) -> bool:
    import torch

    if isinstance(x, torch.SymInt):
        return True
    return isinstance(x, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in x.shape)


def _specializing(gm, opts):
    """A dynamic graph (sizes as arguments, symbolic shapes): one tilewright build per set of sizes, made at
    its first call and kept; each build falls back to PyTorch on its own, as a static graph does."""
    import torch

    built: dict = {}

    def run(*args):
        key = tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args)
        if key not in built:
            try:
                built[key] = _build(gm, list(args), opts)
            except Exception as e:  # noqa: BLE001 - never break the user's model
                warnings.warn(f"tilewright backend: the graph for sizes {key} runs in PyTorch ({type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''})", TilewrightWarning, stacklevel=2)
                built[key] = gm.forward
        return built[key](*args)

    run.specializations = built  # for tests and curious users
    return run


def _build(gm, example_inputs, opts):
    import torch

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if any(not isinstance(x, (torch.Tensor, int)) for x in example_inputs):
        raise TypeError("non-tensor inputs other than sizes are not supported")
    frozen = [i for i, (n, x) in enumerate(zip(placeholders, example_inputs))
              if not isinstance(x, torch.Tensor) or _is_frozen(n, x)]
    user = [i for i in range(len(example_inputs)) if i not in frozen]
    module = _frozen_module(gm, example_inputs, frozen)
    user_examples = tuple(example_inputs[i] for i in user)
    with torch.no_grad():
        ep = torch.export.export(module, user_examples).run_decompositions()
    sig = ep.graph_signature
    if sig.buffers_to_mutate or sig.user_inputs_to_mutate:
        raise TypeError("the graph mutates its inputs or buffers (training mode?)")
    state = {**ep.state_dict, **ep.constants}
    lifted = {**sig.inputs_to_parameters, **sig.inputs_to_buffers, **sig.inputs_to_lifted_tensor_constants}
    consts = {name: state[target] for name, target in lifted.items()}
    problems: list[str] = []
    runner, n_compiled = _compile_parts(ep.graph_module, consts, opts, problems)
    ops, count = _fallback_summary(runner)
    if ops or problems:
        what = f"{count} nodes run in PyTorch" + (f" (unsupported: {', '.join(ops)})" if ops else "")
        warnings.warn(f"tilewright backend: {n_compiled} partition(s) compiled, {what}"
                      + "".join(f"; {p}" for p in problems), TilewrightWarning, stacklevel=3)
    slots = [consts.get(n.name) for n in runner.graph.nodes if n.op == "placeholder"]
    out_spec = ep.call_spec.out_spec

    def run(*args):
        it = iter([args[i] for i in user])
        flat = runner(*[s if s is not None else next(it) for s in slots])
        return torch.utils._pytree.tree_unflatten(list(flat), out_spec)

    run.tilewright_partitions, run.fallback_ops = n_compiled, ops  # for tests and curious users
    return run
