"""The embedding of an intrinsic's scalar dataflow graph into an operator's, as
a CP-SAT model (Rieber et al. section 4, reformulated for a solver without
custom propagators).

The axis-parallel hyper-rectangle is parametrized (embed_plans.py): each
intrinsic axis picks one *plan*, a literal per plan; each operator axis is
used by one plan at most (the rectangle's dimension choice); the origin is
fixed. Every node of the intrinsic graph is then a point of the operator's
instance space determined by the plans of the axes it lies on, so the
dataflow edges (every multiply that reads one intrinsic data node reads one
operator data node; every partial sum of one accumulator lands on one output
element) and AllDifferent (over each operand's data nodes; over multiplies it
follows from distinct axes) are evaluated exactly on the nodes, per operand
over the plan combinations of the intrinsic axes that touch it, and given to
the solver as allowed-assignment tables. A stencil dimension (h*s + kh) whose
window a plan cuts must be unrolled (im2col, Stencil unroll); its data nodes
are then told apart in the unrolled layout. The objective is the paper's
selection rule w . [O_MAC, O_Data]: multiply-accumulates and tensor elements
over the unpadded minimum, exact integers in 64-bit domains, linear in one
literal per complete plan combination. Top-k: solve to optimality, forbid
that combination, solve again. `embed_check.py` states the same constraints
for z3 at the scalar level, as a cross-check."""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass

import numpy as np

from .affine_form import Access, AffineForm, EmbeddingError
from .embed_plans import Plan, macs, operand_elements, plans_for, stencil_dims, unroll_cause

# up to this many complete plan combinations the objective is linear in one literal per combination;
# past it, MACs are a product constraint and element counts element constraints (slower to prove optimal)
LINEAR_OBJECTIVE_LIMIT = 200_000


@dataclass(frozen=True)
class Options:
    pad: bool = True
    dense: bool = False  # forbid strides (Image pack)
    unroll: bool = True  # allow Stencil unroll
    weights: tuple[int, int] = (1, 1)  # (O_MAC, O_Data)
    top_k: int = 5
    time_limit: float = 5.0
    workers: int = 2
    outputs_first: bool = True  # branch on the output-side axes' plans first (the paper's variable order)


@dataclass(frozen=True)
class Solution:
    plans: tuple[Plan, ...]  # per intrinsic axis
    unrolled: tuple[tuple[int, int], ...]  # (read index, tensor dim) pairs unrolled
    macs: int
    data: int
    data_min: int
    objective: int
    seconds: float


class _Model:
    """Plan literals (one per intrinsic axis), each operator axis used once, and per operand a table of the
    plan combinations its scalar nodes allow (edges and AllDifferent evaluated on the nodes, exactly)."""

    def __init__(self, op: AffineForm, intr: AffineForm, pairing: list[int], opts: Options):
        try:
            from ortools.sat.python import cp_model
        except ImportError:
            raise SolverMissing("tw.intrin.embed solves with OR-Tools CP-SAT, which is not installed: "
                                 "pip install 'tilewright[embed]'") from None

        self.cp, self.op, self.intr, self.opts = cp_model, op, intr, opts
        self.m = m = cp_model.CpModel()
        self.plans = [plans_for(op, intr, pairing, a, pad=opts.pad, dense=opts.dense, unroll=opts.unroll)
                      for a in range(len(intr.axes))]
        for a, ps in zip(intr.axes, self.plans):
            if not ps:
                kind = "reduce" if a.reduce else "spatial"
                raise EmbeddingError(f"dimension choice: intrinsic axis '{a.name}' ({a.extent}, {kind}) has no "
                                     f"rectangle over operator axes read by the same operands"
                                     + ("" if opts.pad else " without padding (pad=True allows it)"))
        self.coords = [[_coord_table(p, ax.extent, op) for p in ps] for ps, ax in zip(self.plans, intr.axes)]
        self.lit = [[m.NewBoolVar(f"plan{a}_{k}") for k in range(len(ps))] for a, ps in enumerate(self.plans)]
        for lits in self.lit:
            m.AddExactlyOne(lits)
        self.used = []
        for d in range(len(op.axes)):  # each operator axis is one dimension of the rectangle at most
            users = [lit for ps, lits in zip(self.plans, self.lit) for p, lit in zip(ps, lits) if d in p.dims]
            if len(users) > 1:
                m.Add(sum(users) <= 1)
            self.used.append(sum(users) if users else 0)
        self.accesses = [(intr.reads[i], op.reads[k]) for i, k in enumerate(pairing)] + [(intr.write, op.write)]
        self.rejected = {"edges": 0, "alldiff": 0, "unroll": 0}
        self._idx: dict[int, object] = {}
        self.tables = [self._operand_table(ia, oa) for ia, oa in self.accesses]
        self._objective()

    def _operand_table(self, ia: Access, oa: Access):
        """(touching axes, {plan combination: (elements, unrolled dims)}) over the combinations whose scalar
        nodes keep the operand's dataflow: nodes reading one intrinsic element read one operator element
        (edges), distinct intrinsic elements read distinct operator elements (AllDifferent, told apart by the
        operator axes where a stencil is unrolled)."""
        op, intr = self.op, self.intr
        touching = [a for a in range(len(intr.axes)) if ia.uses(a)]
        for a in range(len(intr.axes)):  # moving along an axis the operand does not read must not move it
            if a not in touching:
                for k, tab in enumerate(self.coords[a]):
                    if np.any(np.asarray(oa.matrix) @ tab.T):
                        self.rejected["edges"] += 1
                        self.m.Add(self.lit[a][k] == 0)
        grid = np.array(list(itertools.product(*(range(intr.axes[a].extent) for a in touching))), dtype=np.int64)
        keys = grid @ np.asarray(ia.matrix)[:, touching].T if touching else np.zeros((1, 0), np.int64)
        table = {}
        stencil = stencil_dims(oa, op)
        for combo in itertools.product(*(range(len(self.plans[a])) for a in touching)):
            plans = [self.plans[a][k] for a, k in zip(touching, combo)]
            if len({d for p in plans for d in p.dims}) != sum(len(p.dims) for p in plans):
                continue  # two axes on one operator axis: excluded by the rectangle constraint anyway
            unrolled = {j for j, sp, rd in stencil if any(unroll_cause(p, oa, op, j, sp, rd) for p in plans)}
            if unrolled and not self.opts.unroll:
                self.rejected["unroll"] += 1
                continue
            pts = sum((self.coords[a][k][grid[:, n]] for n, (a, k) in enumerate(zip(touching, combo))),
                      np.zeros((len(grid), len(op.axes)), np.int64))
            idx = _data_index(oa, pts, unrolled)
            if not _functional(keys, idx):
                self.rejected["edges"] += 1
                continue
            if len(np.unique(idx, axis=0)) != len(np.unique(keys, axis=0)):
                self.rejected["alldiff"] += 1
                continue
            table[combo] = (operand_elements(oa, op, plans), tuple(sorted(unrolled)))
        if not table:
            return touching, table
        allowed = [list(c) for c in table]
        self.m.AddAllowedAssignments([self._index_var(a) for a in touching], allowed)
        return touching, table

    def _index_var(self, a: int):
        """The plan index of intrinsic axis a as one integer (for tables), made on first use."""
        if a not in self._idx:
            v = self.m.NewIntVar(0, len(self.plans[a]) - 1, f"plan{a}")
            self.m.Add(v == sum(k * lit for k, lit in enumerate(self.lit[a])))
            self._idx[a] = v
        return self._idx[a]

    def _objective(self):
        """w . [O_MAC, O_Data]: MACs are the product of each intrinsic axis' covered extent and the unused
        operator axes; an operand's elements are read from its table."""
        m, op = self.m, self.op
        every = list(range(len(self.plans)))
        if math.prod(len(ps) for ps in self.plans) <= LINEAR_OBJECTIVE_LIMIT:
            self._linear_objective(every)
            return
        self.macs = self._product(self._mac_factors())
        self.data_min = sum(operand_elements(oa, op, []) for _, oa in self.accesses)
        sizes = []
        for touching, table in self.tables:
            if not table:
                m.AddBoolOr([])  # no combination keeps this operand's dataflow: infeasible
                continue
            values = {c: n for c, (n, _) in table.items()}
            v = m.NewIntVar(min(values.values()), max(values.values()), "")
            m.AddElement(self._flat(touching), [values.get(c, 0) for c in self._all_combos(touching)], v)
            sizes.append(v)
        self.data = sum(sizes)
        wm, wd = self.opts.weights
        self.objective = wm * (self.macs - op.macs) + wd * (self.data - self.data_min)
        m.Minimize(self.objective)

    def _linear_objective(self, every):
        """One literal per complete plan combination that every operand's table allows, linked to the plan
        literals: the objective is then linear in them, with exact MAC and element counts."""
        m, op = self.m, self.op
        chosen, macs_terms, data_terms = [], [], []
        self.data_min = sum(operand_elements(oa, op, []) for _, oa in self.accesses)
        links: dict[tuple[int, int], list] = {}
        for c in self._all_combos(every):
            plans = [self.plans[a][k] for a, k in enumerate(c)]
            n = _combo_macs(op, plans)
            rows = [table.get(tuple(c[a] for a in touching)) for touching, table in self.tables]
            if not n or any(r is None for r in rows):
                continue
            x = m.NewBoolVar("")
            chosen.append(x)
            macs_terms.append(n * x)
            data_terms.append(sum(r[0] for r in rows) * x)
            for a, k in enumerate(c):
                links.setdefault((a, k), []).append(x)
        if not chosen:
            m.AddBoolOr([])
            self.macs = self.data = m.NewConstant(0)
            self.objective = 0
            return
        m.AddExactlyOne(chosen)
        for a, lits in enumerate(self.lit):
            for k, lit in enumerate(lits):
                m.Add(lit == sum(links.get((a, k), [])))
        self.macs, self.data = sum(macs_terms), sum(data_terms)
        wm, wd = self.opts.weights
        self.objective = wm * (self.macs - op.macs) + wd * (self.data - self.data_min)
        m.Minimize(self.objective)

    def _mac_factors(self):
        m, op, factors = self.m, self.op, []
        for ps, lits in zip(self.plans, self.lit):
            covs = [p.covered(op) for p in ps]
            if max(covs) > 1:
                v = m.NewIntVar(min(covs), max(covs), "")
                m.Add(v == sum(c * lit for c, lit in zip(covs, lits)))
                factors.append(v)
        for d, ax in enumerate(op.axes):
            if ax.extent > 1:
                v = m.NewIntVar(1, ax.extent, "")
                m.Add(v == ax.extent - (ax.extent - 1) * self.used[d])
                factors.append(v)
        return factors

    def _all_combos(self, touching):
        return list(itertools.product(*(range(len(self.plans[a])) for a in touching)))

    def _flat(self, touching):
        expr, w = 0, 1
        for a in reversed(touching):
            expr = expr + w * self._index_var(a)
            w *= len(self.plans[a])
        v = self.m.NewIntVar(0, w - 1, "")
        self.m.Add(v == expr)
        return v

    def _product(self, factors):
        if not factors:
            return self.m.NewConstant(1)
        if len(factors) == 1:
            return factors[0]
        top = math.prod(list(self.m.Proto().variables[f.Index()].domain)[-1] for f in factors)
        v = self.m.NewIntVar(1, top, "macs")
        self.m.AddMultiplicationEquality(v, factors)
        return v

    def unrolled(self, chosen: list[int]) -> tuple:
        out = []
        for k, (touching, table) in enumerate(self.tables):
            hit = table.get(tuple(chosen[a] for a in touching))
            if hit and hit[1] and k < len(self.accesses) - 1:
                out.extend((k, j) for j in hit[1])
        return tuple(out)


def _combo_macs(op: AffineForm, plans) -> int:
    dims = [d for p in plans for d in p.dims]
    if len(dims) != len(set(dims)):
        return 0  # excluded by the rectangle constraint
    return macs(op, plans)


def _coord_table(plan: Plan, extent: int, op: AffineForm) -> np.ndarray:
    tab = np.zeros((extent, len(op.axes)), np.int64)
    for v in range(extent):
        for d, c in plan.coords(v, op).items():
            tab[v, d] = c
    return tab


def _data_index(oa: Access, pts: np.ndarray, unrolled: set[int]) -> np.ndarray:
    cols = []
    mat = np.asarray(oa.matrix, np.int64)
    for j, row in enumerate(mat):
        if j in unrolled:
            cols.extend(pts[:, d] for d in np.nonzero(row)[0])
        else:
            cols.append(pts @ row + oa.offset[j])
    return np.stack(cols, axis=1) if cols else np.zeros((len(pts), 0), np.int64)


def _functional(keys: np.ndarray, idx: np.ndarray) -> bool:
    """Nodes with one intrinsic element read one operator element."""
    pairs = np.unique(np.concatenate([keys, idx], axis=1), axis=0)
    return len(pairs) == len(np.unique(keys, axis=0))


class SolverTimeout(EmbeddingError):
    """CP-SAT found no answer within the time limit."""


class SolverMissing(EmbeddingError):
    """OR-Tools is not installed (the `embed` extra)."""


def _infeasible_reason(op: AffineForm, intr: AffineForm, pairing: list[int], opts: Options) -> str:
    """Which constraint class makes the model infeasible: re-solved with each relaxed in turn."""
    if not opts.pad and _feasible(op, intr, pairing, Options(pad=True, dense=opts.dense, unroll=opts.unroll,
                                                              time_limit=opts.time_limit, top_k=1)):
        return "padding: every rectangle needs an operator axis padded (pad=True allows it)"
    if not opts.unroll and _feasible(op, intr, pairing, Options(pad=True, dense=opts.dense, unroll=True,
                                                                time_limit=opts.time_limit, top_k=1)):
        return "AllDifferent on data nodes: lanes share input elements unless a stencil is unrolled (unroll=True)"
    if opts.dense and _feasible(op, intr, pairing, Options(pad=True, dense=False, unroll=True,
                                                           time_limit=opts.time_limit, top_k=1)):
        return "dense: the rectangle needs a stride (Image pack; dense=False allows it)"
    return ("dataflow edges / AllDifferent: no assignment of the intrinsic's axes to distinct operator axes "
            "keeps every shared operand shared and every distinct one distinct")


def _feasible(op, intr, pairing, opts) -> bool:
    try:
        model = _Model(op, intr, pairing, opts)
    except EmbeddingError:
        return False
    solver = model.cp.CpSolver()
    solver.parameters.max_time_in_seconds = opts.time_limit
    solver.parameters.stop_after_first_solution = True
    return solver.Solve(model.m) in (model.cp.OPTIMAL, model.cp.FEASIBLE)


def solve(op: AffineForm, intr: AffineForm, pairing: list[int], opts: Options) -> list[Solution]:
    """The top-k embeddings by the objective, best first (each solved to optimality among those not yet
    returned). Raises EmbeddingError (with the infeasible constraint class) or SolverTimeout."""
    t0 = time.perf_counter()
    model = _Model(op, intr, pairing, opts)
    cp, m = model.cp, model.m
    if opts.outputs_first:
        order = sorted(range(len(intr.axes)), key=lambda a: intr.axes[a].reduce)
        m.AddDecisionStrategy([lit for a in order for lit in model.lit[a]], cp.CHOOSE_FIRST, cp.SELECT_MAX_VALUE)
    out: list[Solution] = []
    deadline = t0 + opts.time_limit
    while len(out) < opts.top_k:
        solver = cp.CpSolver()
        solver.parameters.num_workers = opts.workers
        solver.parameters.max_time_in_seconds = max(deadline - time.perf_counter(), 0.01)
        t1 = time.perf_counter()
        status = solver.Solve(m)
        if status == cp.INFEASIBLE:
            break
        if status not in (cp.OPTIMAL, cp.FEASIBLE):
            if out:
                break
            raise SolverTimeout(f"embedding '{intr.name}' into '{op.name}': no answer within "
                                f"{opts.time_limit:g} s (CP-SAT status {solver.StatusName(status)}); raise "
                                f"time_limit or restrict the model (dense=True, pad=False)")
        chosen = [next(k for k, lit in enumerate(lits) if solver.BooleanValue(lit)) for lits in model.lit]
        out.append(Solution(
            plans=tuple(ps[k] for ps, k in zip(model.plans, chosen)),
            unrolled=model.unrolled(chosen),
            macs=solver.Value(model.macs), data=int(solver.Value(model.data)), data_min=model.data_min,
            objective=int(solver.ObjectiveValue()), seconds=time.perf_counter() - t1))
        m.AddBoolOr([model.lit[a][k].Not() for a, k in enumerate(chosen)])
    if not out:
        raise EmbeddingError(f"'{intr.name}' cannot be embedded into '{op.name}': "
                             f"{_infeasible_reason(op, intr, pairing, opts)}")
    return out
