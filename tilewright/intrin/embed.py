"""`tw.intrin.embed(output, intrin)`: where and how an intrinsic fits an
operator, found by constraint programming rather than by matching loops
(Rieber et al.). Returns ranked `Embedding`s: the mapping of each intrinsic
axis onto operator axes, the multiply-accumulate and data overheads that
rank them, and the program and layout rewrites (the paper's Table 2) that
realize each one."""

from __future__ import annotations

from dataclasses import dataclass

from ..te.tensor import Tensor
from .affine_form import AffineForm, EmbeddingError, affine_form, pair_operands
from .declare import TensorIntrin
from .embed_model import Options, Solution, SolverMissing, SolverTimeout, solve
from .embed_plans import Digit


@dataclass(frozen=True)
class Rewrite:
    kind: str  # "stencil unroll", "image pack", "pad", "split", "reorder", "fuse"
    tensor: str  # the operand or "loops"
    detail: str

    def __str__(self) -> str:
        return f"{self.kind:<15} {self.tensor}: {self.detail}"


@dataclass(frozen=True)
class Embedding:
    rank: int
    intrin: str
    operator: str
    # per intrinsic axis: (its name, ((operator axis names, digit extent, stride), ...)) outer digit first
    mapping: tuple[tuple[str, tuple[tuple[tuple[str, ...], int, int], ...]], ...]
    macs: int
    macs_min: int
    data: int  # elements of every operand in the rewritten layouts
    data_min: int
    objective: int
    unrolled: tuple[tuple[str, int], ...]  # (operand, tensor dim) im2col-unrolled
    rewrites: tuple[Rewrite, ...]
    seconds: float  # CP-SAT time for this solution

    @property
    def mac_overhead(self) -> int:
        return self.macs - self.macs_min

    @property
    def data_overhead(self) -> int:
        return self.data - self.data_min

    @property
    def padded(self) -> bool:
        return any(r.kind == "pad" for r in self.rewrites)

    def axis_map(self) -> dict[str, tuple[str, ...]]:
        """Intrinsic axis -> the operator axes it covers."""
        return {a: tuple(n for names, _, _ in digits for n in names) for a, digits in self.mapping}

    def __str__(self) -> str:
        parts = []
        for a, digits in self.mapping:
            spell = " x ".join(("(" + "*".join(n) + ")" if len(n) > 1 else n[0]) + f":{f}"
                               + (f"/{s}" if s > 1 else "") for n, f, s in digits)
            parts.append(f"{a} -> {spell or '1'}")
        head = (f"#{self.rank} {self.intrin} in {self.operator}: {', '.join(parts)}  "
                f"MACs x{self.macs / self.macs_min:.3f}  data x{self.data / max(self.data_min, 1):.3f}  "
                f"(O_MAC {self.mac_overhead:,}, O_Data {self.data_overhead:,}; solved in {self.seconds * 1e3:.0f} ms)")
        return "\n".join([head, *(f"    {r}" for r in self.rewrites)])


def _digit_text(op: AffineForm, dg: Digit) -> tuple[tuple[str, ...], int, int]:
    return tuple(op.axes[d].name for d in dg.axes), dg.extent, dg.stride


def _rewrites(op: AffineForm, intr: AffineForm, pairing: list[int], sol: Solution) -> list[Rewrite]:
    out: list[Rewrite] = []
    for k, j in sol.unrolled:
        acc = op.reads[k]
        names = [op.axes[d].name for d, c in enumerate(acc.matrix[j]) if c]
        out.append(Rewrite("stencil unroll", acc.tensor, f"dim {j} ({' + '.join(names)}) -> one axis each "
                                                         f"({', '.join(names)}): im2col"))
    for ax, plan in zip(intr.axes, sol.plans):
        for dg in plan.digits:
            names = [op.axes[d].name for d in dg.axes]
            real, covered = dg.real(op), dg.covered(op)
            label = "*".join(names)
            if dg.fused:
                out.append(Rewrite("fuse", "loops", f"({', '.join(names)}) -> {label} ({real})"))
            if covered != real:
                out.append(Rewrite("pad", "loops", f"{label} {real} -> {covered}"))
            if dg.stride > 1:
                out.append(Rewrite("image pack", "loops", f"{label} ({covered}) -> {dg.extent} lanes of "
                                                          f"{dg.stride}-long strips, into intrinsic axis '{ax.name}'"))
            elif covered > dg.extent:
                out.append(Rewrite("split", "loops", f"{label} ({covered}) -> {covered // dg.extent} x "
                                                     f"{dg.extent}, the inner part on '{ax.name}'"))
        if len(plan.digits) > 1:
            spell = ", ".join("*".join(op.axes[d].name for d in dg.axes) for dg in plan.digits)
            out.append(Rewrite("fuse", "loops", f"inner parts of ({spell}) -> intrinsic axis '{ax.name}' "
                                                f"({ax.extent})"))
    for n, k in enumerate(pairing):
        ia = intr.reads[n]
        inner = [intr.axes[a].name for row in ia.matrix for a, c in enumerate(row) if c]
        out.append(Rewrite("reorder", op.reads[k].tensor, f"the parts on intrinsic axes ({', '.join(inner)}) "
                                                          f"become the innermost layout dims, as "
                                                          f"'{ia.tensor}' reads them"))
    return out


def embed(output: Tensor, intrin: TensorIntrin, *, pad: bool = True, top_k: int = 5, dense: bool = False,
          unroll: bool = True, weights: tuple[int, int] = (1, 1), time_limit: float = 5.0,
          workers: int = 2) -> list[Embedding]:
    """The `top_k` best embeddings of `intrin` into the reduction `output`, ranked by
    weights . [MAC overhead, data overhead] (the paper's selection rule, w = [1, 1]).
    `pad`: allow padding axes; `dense`: forbid strided rectangles (Image pack); `unroll`:
    allow Stencil unroll (im2col). Raises EmbeddingError naming the constraint class
    that fails, or SolverTimeout after `time_limit` seconds."""
    if not isinstance(intrin, TensorIntrin):
        raise EmbeddingError(f"embed: intrin must be a TensorIntrin (tw.decl_tensor_intrin), got "
                             f"{type(intrin).__name__}")
    if top_k < 1 or time_limit <= 0 or workers < 1:
        raise EmbeddingError(f"embed: top_k ({top_k}), time_limit ({time_limit}) and workers ({workers}) must be "
                             f"positive")
    op = affine_form(output, "operator")
    intr = affine_form(intrin.output, f"intrinsic '{intrin.name}'")
    pairing = pair_operands(op, intr)
    opts = Options(pad=pad, dense=dense, unroll=unroll, weights=tuple(weights), top_k=top_k,
                   time_limit=time_limit, workers=workers)
    sols = solve(op, intr, pairing, opts)
    return [Embedding(
        rank=n, intrin=intrin.name, operator=op.name,
        mapping=tuple((ax.name, tuple(_digit_text(op, dg) for dg in p.digits)) for ax, p in zip(intr.axes, s.plans)),
        macs=s.macs, macs_min=op.macs, data=s.data, data_min=s.data_min, objective=s.objective,
        unrolled=tuple((op.reads[k].tensor, j) for k, j in s.unrolled),
        rewrites=tuple(_rewrites(op, intr, pairing, s)), seconds=s.seconds) for n, s in enumerate(sols, 1)]


def embedding_hint(output: Tensor, intrin: TensorIntrin, time_limit: float = 2.0) -> str:
    """What the embedder says where the tensorize matcher could not place `intrin` in `output`: its
    best embedding with the rewrites that realize it, or why there is none ('' where the solver
    is not installed or runs out of time)."""
    try:
        best = embed(output, intrin, top_k=1, time_limit=time_limit, workers=1)[0]
    except (SolverTimeout, SolverMissing):
        return ""
    except EmbeddingError as exc:
        return f"the embedder finds no embedding either: {exc}"
    return ("the embedder (tw.intrin.embed) places it after these rewrites:\n" + str(best)
            + "\n(tw.tune on a CPU target applies the split, pad and reorder rewrites itself)")


__all__ = ["Embedding", "EmbeddingError", "Rewrite", "SolverMissing", "SolverTimeout", "embed", "embedding_hint"]
