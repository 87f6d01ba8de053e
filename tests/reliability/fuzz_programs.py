"""A Csmith-style differential fuzzer: random small te programs x random legal CPU schedules, built
with `tw.build` and compared with `tw.evaluate` (integers exactly, floats within a tolerance scaled
by a bound on the magnitudes involved, NaN positions exactly).

Programs: 1-3 stages over float32/float64/int32/int8 tensors of 1-3 small dims; elementwise trees of
arithmetic, min/max, integer division and modulo (by constants and by data that holds zeros),
bitwise ops and float intrinsics; reads that are direct, reversed, transposed, broadcast, or offset
and guarded by if_then_else; sum/max/min reductions (whole axis or a guarded window). Schedules:
cache_read, cache_write, rfactor, split/fuse/reorder, inline/root/compute_at, parallel, vectorize,
unroll. Magnitudes are tracked so that no integer overflows (C and NumPy wrap differently before a
store) and float comparisons see only exact input values.

Many cases share one kernel (one compile); every group runs in a child process so that a crash is a
reported failure, not the end of the run; a failing group is re-run case by case to name the case.
Case `i` of seed `s` is reproducible alone: `--seed s --only i`.

    python -m tests.reliability.fuzz_programs --cases 10000 --seed 1 --jobs 2
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time

import numpy as np

GROUP = 40  # cases per kernel
INT_LIMIT = {"int32": 1 << 28, "int8": 100}


class ProgramGen:
    def __init__(self, tw, rng: random.Random, tag: str):
        self.tw, self.rng, self.tag = tw, rng, tag
        self.dtype = rng.choice(["float32", "float32", "float64", "int32", "int32", "int8"])
        self.is_float = self.dtype.startswith("float")
        self.shape = tuple(rng.randint(1, 7) for _ in range(rng.randint(1, 3)))
        self.placeholders: list = []
        self.bound: dict[int, float] = {}  # id(tensor) -> max |value|
        self.exact: set[int] = set()  # tensors whose values are inputs (exact: safe to compare/floor)

    def placeholder(self, shape):
        t = self.tw.placeholder(shape, self.dtype, name=f"{self.tag}_in{len(self.placeholders)}")
        self.placeholders.append(t)
        self.bound[id(t)] = 1.0 if self.is_float else (5 if self.dtype == "int8" else 100)
        self.exact.add(id(t))
        return t

    def fits(self, bound: float) -> bool:
        return bound < (1e6 if self.is_float else INT_LIMIT[self.dtype])

    # ---- leaves: reads of a tensor of the program's shape ----------------------------------------
    def read(self, tensors, idx):
        rng, tw, n = self.rng, self.tw, self.shape
        t = rng.choice(tensors)
        b, exact = self.bound[id(t)], id(t) in self.exact
        kind = rng.choice(["direct", "direct", "offset", "reverse", "transpose", "broadcast", "const"])
        if kind == "const":
            v = rng.choice([0.5, -1.5, 2.0]) if self.is_float else rng.randint(-3, 3)
            return tw.const(v, self.dtype), abs(v), True
        if kind == "broadcast":
            dims = sorted(rng.sample(range(len(n)), rng.randint(1, len(n))))
            p = self.placeholder(tuple(n[d] for d in dims))
            return p[tuple(idx[d] for d in dims)], self.bound[id(p)], True
        if kind == "transpose" and len(n) > 1:
            perm = list(range(len(n)))
            rng.shuffle(perm)
            p = self.placeholder(tuple(n[d] for d in perm))
            return p[tuple(idx[d] for d in perm)], self.bound[id(p)], True
        if kind == "reverse":
            d = rng.randrange(len(n))
            return t[tuple(n[d] - 1 - i if e == d else i for e, i in enumerate(idx))], b, exact
        if kind == "offset":
            d, c = rng.randrange(len(n)), rng.randint(1, 3)
            fill = tw.const(0, self.dtype)
            if rng.random() < 0.5:
                at = tuple(i - c if e == d else i for e, i in enumerate(idx))
                return tw.if_then_else(idx[d] >= c, t[at], fill), b, exact
            at = tuple(i + c if e == d else i for e, i in enumerate(idx))
            return tw.if_then_else(idx[d] + c < n[d], t[at], fill), b, exact
        return t[tuple(idx)], b, exact

    # ---- expression trees --------------------------------------------------------------------------
    def expr(self, tensors, idx, depth):
        if depth == 0 or self.rng.random() < 0.3:
            return self.read(tensors, idx)
        if self.rng.random() < 0.3:
            return self.unary(tensors, idx, depth)
        return self.binary(tensors, idx, depth)

    def unary(self, tensors, idx, depth):
        tw, rng = self.tw, self.rng
        a, b, exact = self.expr(tensors, idx, depth - 1)
        if not self.is_float:
            return (tw.abs(a) if rng.random() < 0.5 else -a), b, exact
        choice = rng.choice(["exp", "tanh", "sigmoid", "sin", "cos", "abs", "sqrt", "log", "floor", "cast"])
        if choice == "exp" and b < 10:
            return tw.exp(a), float(np.exp(b)), False
        if choice in ("floor", "ceil") and exact:
            return getattr(tw, choice)(a), b + 1, True
        if choice == "sqrt":
            return tw.sqrt(tw.abs(a)), b ** 0.5 + 1, False
        if choice == "log":
            return tw.log(tw.abs(a) + 0.5), abs(np.log(b + 0.5)) + 1, False
        if choice == "cast":
            other = "float64" if self.dtype == "float32" else "float32"
            return tw.cast(tw.cast(a, other), self.dtype), b, exact
        if choice in ("tanh", "sigmoid", "sin", "cos"):
            return getattr(tw, choice)(a), 1.0, False
        return tw.abs(a), b, exact

    def binary(self, tensors, idx, depth):
        tw, rng = self.tw, self.rng
        a, ba, ea = self.expr(tensors, idx, depth - 1)
        c, bc, ec = self.expr(tensors, idx, depth - 1)
        ops = ["+", "-", "min", "max", "select"] + (["*"] if self.fits(ba * bc) else [])
        ops += ["/"] if self.is_float else ["//c", "%c", "//", "%", "&", "^", "|"]
        op = rng.choice(ops)
        if op == "+":
            return a + c, ba + bc, False
        if op == "-":
            return a - c, ba + bc, False
        if op == "*":
            return a * c, ba * bc, False
        if op in ("min", "max"):
            return getattr(tw, op)(a, c), max(ba, bc), ea and ec
        if op == "/":
            return a / (tw.abs(c) + 0.5), ba * 2, False
        if op == "select":
            x, bx, ex = self.read(tensors, idx)
            y, by, ey = self.read(tensors, idx)
            if not (ex and ey):  # compare exact values only: rounding must not flip a branch
                return tw.max(a, c), max(ba, bc), False
            return tw.if_then_else(x > y, a, c), max(ba, bc), ea and ec
        if op in ("//c", "%c"):
            k = rng.choice([-5, -3, -2, -1, 2, 3, 4, 7])
            return (a // k, ba, False) if op == "//c" else (a % k, abs(k), False)
        if op in ("//", "%"):
            try:  # c may be zero in the data (x // 0 == 0, x % 0 == x), but not a constant zero:
                return (a // c, ba, False) if op == "//" else (a % c, max(ba, bc), False)
            except tw.ExprError:  # a divisor that folds to the constant 0 is refused at construction
                return a - c, ba + bc, False
        width = 1 << int(max(ba, bc)).bit_length()
        if not self.fits(width * 2):
            return a - c, ba + bc, False
        return {"&": a & c, "^": a ^ c, "|": a | c}[op], width * 2, False

    # ---- stages --------------------------------------------------------------------------------------
    def elementwise(self, tensors, name, top):
        tw = self.tw
        state = {}

        def body(*idx):
            e, b, exact = self.expr(tensors, idx, self.rng.randint(1, 3))
            if top and self.is_float and self.rng.random() < 0.15:  # NaN positions must match exactly
                e, exact = tw.sqrt(e), False
            state["b"], state["exact"] = b + 1, exact
            return e

        t = tw.compute(self.shape, body, name=name)
        self.bound[id(t)] = state["b"]
        if state["exact"]:
            self.exact.add(id(t))
        return t

    def reduce(self, tensors, name):
        tw, rng, n = self.tw, self.rng, self.shape
        src = rng.choice(tensors)
        d = rng.randrange(len(n))
        reducer = rng.choice(["sum", "max", "min"] if self.dtype != "int8" else ["max", "min"])
        window = rng.random() < 0.5
        k = tw.reduce_axis(rng.randint(1, 4) if window else n[d], name=f"{name}_k")
        fill = tw.const(0, self.dtype)

        def body(*idx):
            if window:  # a guarded sliding window along d
                at = tuple(i + k if e == d else i for e, i in enumerate(idx))
                value = tw.if_then_else(idx[d] + k < n[d], src[at], fill)
            else:
                value = src[tuple(k if e == d else i for e, i in enumerate(idx))]
            return getattr(tw, reducer)(value, axis=k)

        t = tw.compute(n, body, name=name)
        grow = k.extent if reducer == "sum" else 1
        self.bound[id(t)] = self.bound[id(src)] * grow + 1
        return t

    def program(self):
        tensors = [self.placeholder(self.shape)]
        if self.rng.random() < 0.5:
            tensors.append(self.placeholder(self.shape))
        stages = []
        count = self.rng.randint(1, 3)
        for s in range(count):
            name = f"{self.tag}_s{s}"
            top = s == count - 1
            if self.rng.random() < 0.3 and self.fits(max(self.bound[id(t)] for t in tensors) * 8):
                t = self.reduce(tensors, name)
            else:
                t = self.elementwise(tensors, name, top)
            stages.append(t)
            tensors = [x for x in tensors if self.fits(self.bound[id(x)] * 16)] or [t]
            if t not in tensors:
                tensors.append(t)
        outputs = [stages[-1]]
        if len(stages) > 1 and self.rng.random() < 0.15:
            outputs.insert(0, stages[0])
        return outputs


# ---- random legal schedules (the ideas of tests/lower/test_random_schedules.py, drawn from an rng) ----

def _try(tw, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except tw.ScheduleError:
        return None  # an illegal draw: skip that primitive


def draw_schedule(tw, rng: random.Random, s, prefix: str) -> None:
    from tilewright.ir.expr import AxisKind

    def mine():
        return [st for st in s.stages if st.name.startswith(prefix)]

    inputs = [t for t in s.program.inputs if t.name.startswith(prefix)]
    if inputs and rng.random() < 0.2:
        t = rng.choice(inputs)
        readers = [st for st in mine() if any(u is t for u in st.op.input_tensors)]
        if readers:
            _try(tw, s.cache_read, t, rng.choice(["local", "global"]), readers)
    reductions = [st for st in mine() if st.is_reduction]
    if reductions and rng.random() < 0.25:
        _try(tw, s.cache_write, rng.choice(reductions).tensor, "local")
    reductions = [st for st in mine() if st.is_reduction]
    if reductions and rng.random() < 0.25:
        st = rng.choice(reductions)
        red = [a for a in st.leaf_iter_vars if a.kind is AxisKind.REDUCE]
        axis = rng.choice(red)
        if axis.extent > 1 and rng.random() < 0.5:
            parts = _try(tw, st.split, axis, factor=rng.randint(1, axis.extent))
            axis = rng.choice(parts) if parts else axis
        _try(tw, s.rfactor, st.tensor, axis, rng.randint(0, len(st.op.axis)))
    for st in mine():
        for _ in range(rng.randint(0, 3)):
            leaves = st.leaf_iter_vars
            move = rng.choice(["split", "split", "fuse", "reorder"])
            if move == "split":
                axis = rng.choice(leaves)
                if rng.random() < 0.5:
                    _try(tw, st.split, axis, factor=rng.randint(1, axis.extent + 2))
                else:
                    _try(tw, st.split, axis, nparts=rng.randint(1, axis.extent))
            elif move == "fuse":
                pairs = [(a, b) for a, b in zip(leaves, leaves[1:]) if a.kind is b.kind]
                if pairs:
                    _try(tw, st.fuse, *rng.choice(pairs))
            elif len(leaves) > 1:
                order = list(leaves)
                rng.shuffle(order)
                _try(tw, st.reorder, *order)
    for st in reversed(mine()):  # consumers first: attach only to stages that stay loops
        if st.is_output:
            continue
        readers = s.reading_stages(st)
        options = ["root"] + ([] if st.is_reduction else ["inline"]) + (["at"] if len(readers) == 1 else [])
        choice = rng.choice(options)
        if choice == "inline":
            _try(tw, st.compute_inline)
        elif choice == "at":
            _try(tw, st.compute_at, readers[0], rng.choice(readers[0].leaf_iter_vars))
    for st in mine():
        if st.attach.value == "inline":
            continue
        leaves, used = st.leaf_iter_vars, set()
        if leaves[0].kind is AxisKind.SPATIAL and rng.random() < 0.3:
            if _try(tw, st.parallel, leaves[0]) is not False:
                used.add(id(leaves[0]))
        inner = leaves[-1]
        if len(leaves) > 1 and inner.kind is AxisKind.SPATIAL and id(inner) not in used and rng.random() < 0.5:
            _try(tw, st.vectorize, inner)
            used.add(id(inner))
        short = [a for a in leaves if id(a) not in used and a.extent <= 6]
        if short and rng.random() < 0.3:
            _try(tw, st.unroll, rng.choice(short))


# ---- running: many cases per kernel, compared case by case ------------------------------------------

def make_case(tw, seed: int, i: int):
    rng = random.Random(f"{seed}:{i}")
    gen = ProgramGen(tw, rng, f"c{i}")
    return gen, gen.program(), rng


def _inputs(gen, rng: np.random.Generator) -> dict:
    out = {}
    for p in gen.placeholders:
        if gen.is_float:
            out[p] = rng.uniform(-1, 1, p.shape).astype(gen.dtype)
        else:
            b = int(gen.bound[id(p)])
            out[p] = rng.integers(-b, b + 1, p.shape).astype(gen.dtype)
    return out


def compare(gen, got, want) -> str | None:
    got, want = np.asarray(got), np.asarray(want)
    if not gen.is_float:
        bad = got != want
        if not bad.any():
            return None
        return f"{int(bad.sum())} of {bad.size} wrong, e.g. got {got[bad][:4]} want {want[bad][:4]}"
    if (np.isnan(got) != np.isnan(want)).any():
        return (f"NaN positions differ: got {np.argwhere(np.isnan(got))[:4].tolist()} "
                f"want {np.argwhere(np.isnan(want))[:4].tolist()}")
    fin = np.isfinite(want)
    if (np.isinf(got) != np.isinf(want)).any() or (got[~fin & ~np.isnan(want)] != want[~fin & ~np.isnan(want)]).any():
        return "infinity positions differ"
    eps = float(np.finfo(gen.dtype).eps)
    scale = max(1.0, min(gen.bound.get("out", 1.0), 1e6))
    g, w = got[fin].astype(np.float64), want[fin].astype(np.float64)
    bad = np.abs(g - w) > 64 * eps * scale + 64 * eps * np.abs(w)
    if not bad.any():
        return None
    return f"{int(bad.sum())} of {bad.size} beyond tolerance, e.g. got {g[bad][:3]} want {w[bad][:3]}"


def run_cases(seed: int, indices: list[int]) -> list[dict]:
    """Build the cases into one kernel, run it, compare each case; a build error re-runs case by case."""
    import tilewright as tw

    cases = [make_case(tw, seed, i) for i in indices]
    outputs = [o for _, outs, _ in cases for o in outs]
    s = tw.create_schedule(outputs)
    for (gen, _, rng), i in zip(cases, indices):
        draw_schedule(tw, rng, s, f"c{i}_")
        gen.bound["out"] = max(gen.bound[id(o)] for o in cases[indices.index(i)][1])
    args = [p for gen, _, _ in cases for p in gen.placeholders] + outputs
    try:
        kernel = tw.build(s, args, name=f"fuzz_{seed}_{indices[0]}")
    except tw.TilewrightError as exc:
        if len(indices) > 1:
            return [r for i in indices for r in run_cases(seed, [i])]
        return [{"case": indices[0], "ok": False, "kind": "build", "message": f"{type(exc).__name__}: {exc}",
                 "trace": s.trace.to_json()}]
    nprng = np.random.default_rng(seed * 1_000_003 + indices[0])
    inputs = [_inputs(gen, nprng) for gen, _, _ in cases]
    arrays = [inp[p] for (gen, _, _), inp in zip(cases, inputs) for p in gen.placeholders]
    outs = []
    for o in outputs:
        fill = np.nan if o.dtype.is_float else np.iinfo(o.dtype.name).min + 7
        outs.append(np.full(o.shape, fill, dtype=o.dtype.name))
    kernel(*arrays, *outs)
    got = dict(zip(map(id, outputs), outs))
    results = []
    for (gen, case_outs, _), inp, i in zip(cases, inputs, indices):
        want = tw.evaluate(case_outs, inp)
        msgs = [m for o, w in zip(case_outs, want) if (m := compare(gen, got[id(o)], w))]
        results.append({"case": i, "ok": not msgs, "kind": "wrong" if msgs else "", "message": "; ".join(msgs)})
    return results


def _child(seed: int, indices: list[int], timeout: float) -> list[dict]:
    """Run cases in a child process: a crash or a hang becomes a result, bisected down to its case."""
    cmd = [sys.executable, "-m", "tests.reliability.fuzz_programs", "--seed", str(seed), "--child",
           ",".join(map(str, indices))]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        lines = [x for x in proc.stdout.splitlines() if x.startswith("[")]
        if proc.returncode == 0 and lines:
            return json.loads(lines[-1])
        why = f"exit {proc.returncode}: {proc.stderr.strip()[-400:]}"
    except subprocess.TimeoutExpired:
        why = f"timeout after {timeout:.0f} s"
    if len(indices) > 1:
        half = len(indices) // 2
        return _child(seed, indices[:half], timeout) + _child(seed, indices[half:], timeout)
    return [{"case": indices[0], "ok": False, "kind": "crash", "message": why}]


def fuzz(cases: int, seed: int, jobs: int = 1, group: int = GROUP, timeout: float = 300.0,
         log=None) -> list[dict]:
    from concurrent.futures import ThreadPoolExecutor

    chunks = [list(range(a, min(a + group, cases))) for a in range(0, cases, group)]
    results: list[dict] = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for res in pool.map(lambda c: _child(seed, c, timeout), chunks):
            results += res
            if log:
                bad = [r for r in results if not r["ok"]]
                log(f"{len(results)}/{cases} cases, {len(bad)} failing")
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--group", type=int, default=GROUP)
    ap.add_argument("--only", type=int, help="run one case in this process and print its program")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(run_cases(a.seed, [int(x) for x in a.child.split(",")])))
        return 0
    if a.only is not None:
        import tilewright as tw

        _, outs, _ = make_case(tw, a.seed, a.only)
        print(outs[-1])
        print(json.dumps(run_cases(a.seed, [a.only]), indent=1))
        return 0
    start = time.time()
    results = fuzz(a.cases, a.seed, a.jobs, a.group, log=lambda m: print(m, file=sys.stderr, flush=True))
    bad = [r for r in results if not r["ok"]]
    for r in bad:
        print(f"case {r['case']} ({r['kind']}): {r['message'][:600]}")
    print(f"fuzz: {len(results)} program x schedule cases, seed {a.seed}, {len(bad)} mismatches/crashes/errors, "
          f"{time.time() - start:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
