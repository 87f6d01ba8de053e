"""A second solver for the embedding model: z3 over the same space of plans,
with the constraints written out independently at the scalar level (every
multiply's operator coordinates as if-then-else over the plan choices, the
dataflow edges as equalities between the nodes that share an intrinsic
element, AllDifferent as z3 Distinct over the multiplies and over each
operand's data nodes, unrolled where a plan cuts a stencil). CP-SAT compiles
the same constraints into tables; on small instances both must find the
same set of plan combinations."""

from __future__ import annotations

import itertools

from ..te.tensor import Tensor
from .affine_form import affine_form, pair_operands
from .declare import TensorIntrin
from .embed_model import Options, _Model
from .embed_plans import stencil_dims, unroll_cause


def cpsat_solutions(output: Tensor, intrin: TensorIntrin, **options) -> set[tuple[int, ...]]:
    """Every feasible plan combination (plan index per intrinsic axis) CP-SAT finds."""
    op, intr = affine_form(output), affine_form(intrin.output, "intrinsic")
    model = _Model(op, intr, pair_operands(op, intr), Options(**options))
    model.m.ClearObjective()
    found: set[tuple[int, ...]] = set()
    cp = model.cp

    class Collect(cp.CpSolverSolutionCallback):
        def on_solution_callback(self):
            found.add(tuple(next(k for k, lit in enumerate(lits) if self.BooleanValue(lit)) for lits in model.lit))

    solver = cp.CpSolver()
    solver.parameters.enumerate_all_solutions = True
    solver.parameters.num_workers = 1
    solver.Solve(model.m, Collect())
    return found


def z3_solutions(output: Tensor, intrin: TensorIntrin, **options) -> set[tuple[int, ...]]:
    import z3

    opts = Options(**options)
    op, intr = affine_form(output), affine_form(intrin.output, "intrinsic")
    pairing = pair_operands(op, intr)
    base = _Model(op, intr, pairing, opts)  # for the plan lists only: the constraints below are z3's own
    plans = base.plans
    choice = [z3.Int(f"plan{a}") for a in range(len(plans))]
    s = z3.Solver()
    for a, ps in enumerate(plans):
        s.add(choice[a] >= 0, choice[a] < len(ps))

    def pick(a: int, values):
        expr = z3.IntVal(values[-1])
        for k in range(len(values) - 2, -1, -1):
            expr = z3.If(choice[a] == k, values[k], expr)
        return expr

    n_ax = len(op.axes)
    for d in range(n_ax):
        s.add(z3.Sum([pick(a, [int(d in p.dims) for p in ps]) for a, ps in enumerate(plans)]) <= 1)
    nodes = list(itertools.product(*(range(ax.extent) for ax in intr.axes)))
    coord = {}
    for nd in nodes:
        coord[nd] = [z3.Sum([pick(a, [p.coords(v, op).get(d, 0) for p in plans[a]]) for a, v in enumerate(nd)])
                     for d in range(n_ax)]
    bound = [ax.extent for ax in op.axes]
    for ps, ax in zip(plans, intr.axes):
        for p in ps:
            for v in range(ax.extent):
                for d, c in p.coords(v, op).items():
                    bound[d] = max(bound[d], c + 1)

    def linear(comps, bounds):
        total, w = 0, 1
        for c, b in zip(reversed(comps), reversed(bounds)):
            total, w = total + w * c, w * b
        return total

    s.add(z3.Distinct([linear(coord[nd], bound) for nd in nodes]))
    accesses = [(intr.reads[i], op.reads[k]) for i, k in enumerate(pairing)] + [(intr.write, op.write)]
    for ia, oa in accesses:
        groups: dict = {}
        for nd in nodes:
            groups.setdefault(tuple(sum(r * x for r, x in zip(row, nd)) for row in ia.matrix), []).append(nd)
        stencil = {j: (sp, rd) for j, sp, rd in stencil_dims(oa, op)}
        unroll = {j: z3.Or([z3.Or([choice[a] == k for k, p in enumerate(ps) if unroll_cause(p, oa, op, j, sp, rd)]
                                  or [z3.BoolVal(False)]) for a, ps in enumerate(plans)])
                  for j, (sp, rd) in stencil.items()}
        if not opts.unroll:
            s.add(*(z3.Not(u) for u in unroll.values()))
        span = [2 * (sum(abs(c) * (b - 1) for c, b in zip(row, bound)) + abs(off)) + 1
                for row, off in zip(oa.matrix, oa.offset)]
        reps = []
        for members in groups.values():
            index = [[sum(row[d] * coord[nd][d] for d in range(n_ax) if row[d]) + off
                      for row, off in zip(oa.matrix, oa.offset)] for nd in members]
            for other in index[1:]:  # edges: one intrinsic element, one operator element
                s.add(*(_eq(z3, a_, b_) for a_, b_ in zip(other, index[0])))
            comps, bounds = [], []
            for j, e in enumerate(index[0]):
                if j in stencil:
                    dims = [d for d, c in enumerate(oa.matrix[j]) if c]
                    unrolled = linear([coord[members[0]][d] for d in dims], [bound[d] for d in dims])
                    top = 1
                    for d in dims:
                        top *= bound[d]
                    width = 2 * max(span[j], top) + 1
                    comps.append(z3.If(unroll[j], unrolled, e))
                    bounds.append(width)
                else:
                    comps.append(e)
                    bounds.append(span[j])
            reps.append(linear(comps, bounds))
        if len(reps) > 1:
            s.add(z3.Distinct(reps))
    out: set[tuple[int, ...]] = set()
    while s.check() == z3.sat:
        m = s.model()
        sol = tuple(m.eval(c).as_long() for c in choice)
        out.add(sol)
        s.add(z3.Or([c != v for c, v in zip(choice, sol)]))
    return out


def _eq(z3, a, b):
    if isinstance(a, int) and isinstance(b, int):
        return z3.BoolVal(a == b)
    return z3.IntVal(a) == b if isinstance(a, int) else a == b


__all__ = ["cpsat_solutions", "z3_solutions"]
