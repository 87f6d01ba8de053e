"""The probes of benchmarks/reliability_probes.py, by class. Each expectation is the documented
contract (README, docstrings, issue 13's "What to build"), not what the code happens to do.
Snippets run after the harness's prelude: `tw`, `np`, `TMP` (the probe's own directory; the
cache is TMP/cache), `rand`, `same`, `run_vs_ref`, `accepted`, `WrongResult`, `RecordLost`."""

# ruff: noqa: E501  (probe snippets are data: one statement a line reads best)
from __future__ import annotations

import textwrap

import reliability_probe_list_api
import reliability_probe_list_io
from reliability_probes import Probe

CLASSES = ["bounds", "aliasing", "division", "names", "nan", "records", "resources", "api"]
PROBES: list[Probe] = []


def P(name, cls, code, expect="ok", match=None, timeout=60.0, env=None):
    code = textwrap.dedent(code).strip() + "\n"
    compile(code, f"{cls}/{name}", "exec")  # a probe's own syntax error is the harness's bug, not tilewright's
    PROBES.append(Probe(f"{cls}/{name}", cls, code, expect, match, timeout, env or {}))


# ---------------------------------------------------------------- 1. out-of-bounds indices
F32 = "float32"
OOB = {  # name: (program defining INS and C, the tensor the message must name)
    "minus3": ("A = tw.placeholder((16,), F, name='A'); INS = [A]\n"
               "C = tw.compute((16,), lambda i: A[i - 3], name='C')", "'A'"),
    "plus1": ("A = tw.placeholder((16,), F, name='A'); INS = [A]\n"
              "C = tw.compute((16,), lambda i: A[i + 1], name='C')", "'A'"),
    "reduce_long": ("A = tw.placeholder((16,), F, name='A'); INS = [A]; k = tw.reduce_axis(20, name='k')\n"
                    "C = tw.compute((4,), lambda i: tw.sum(A[k], axis=k), name='C')", "'A'"),
    "reduce_shifted": ("A = tw.placeholder((16,), F, name='A'); INS = [A]; k = tw.reduce_axis((2, 18), name='k')\n"
                       "C = tw.compute((4,), lambda i: tw.sum(A[k] * 2.0, axis=k), name='C')", "'A'"),
    "reduce_minus1": ("A = tw.placeholder((16,), F, name='A'); INS = [A]; k = tw.reduce_axis(16, name='k')\n"
                      "C = tw.compute((4,), lambda i: tw.sum(A[k - 1], axis=k), name='C')", "'A'"),
    "2d_j_plus1": ("A = tw.placeholder((8, 6), F, name='A'); INS = [A]\n"
                   "C = tw.compute((8, 6), lambda i, j: A[i, j + 1] * 2.0, name='C')", "'A'"),
    "transpose_extent": ("A = tw.placeholder((8, 4), F, name='A'); INS = [A]\n"
                         "C = tw.compute((8, 8), lambda i, j: A[j, i], name='C')", "'A'"),
    "scaled_2i": ("A = tw.placeholder((16,), F, name='A'); INS = [A]\n"
                  "C = tw.compute((16,), lambda i: A[2 * i], name='C')", "'A'"),
    "mod_17": ("A = tw.placeholder((16,), F, name='A'); INS = [A]\n"
               "C = tw.compute((16,), lambda i: A[(i + 1) % 17], name='C')", "'A'"),
    "intermediate": ("A = tw.placeholder((16,), F, name='A'); INS = [A]\n"
                     "Pm = tw.compute((16,), lambda i: A[i] + 1.0, name='Pm')\n"
                     "C = tw.compute((16,), lambda i: Pm[i + 1], name='C')", "'Pm'"),
    "guard_short": ("A = tw.placeholder((16,), F, name='A'); INS = [A]\n"
                    "C = tw.compute((16,), lambda i: tw.if_then_else(i >= 2, A[i - 3], 0.0), name='C')", "'A'"),
    "matmul_k9": ("A = tw.placeholder((4, 8), F, name='A'); B = tw.placeholder((8, 4), F, name='B'); INS = [A, B]\n"
                  "k = tw.reduce_axis(9, name='k')\n"
                  "C = tw.compute((4, 4), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name='C')", "'A'"),
    "conv_no_pad": ("A = tw.placeholder((10,), F, name='A'); W = tw.placeholder((3,), F, name='W'); INS = [A, W]\n"
                    "r = tw.reduce_axis(3, name='r')\n"
                    "C = tw.compute((10,), lambda i: tw.sum(A[i + r] * W[r], axis=r), name='C')", "'A'"),
}
for oname, (prog, who) in OOB.items():
    prog = f"F = {F32!r}\n{prog}"
    P(f"eval_{oname}", "bounds", prog + """
tw.evaluate(C, {t: rand(t.shape) for t in INS})
accepted("tw.evaluate returned")""", "error", who)
    for sched, split in (("build", ""), ("build_split", "s[C].split(C.op.axis[0], factor=3)\n")):
        P(f"{sched}_{oname}", "bounds", prog + f"""
s = tw.create_schedule(C)
{split}
k = tw.build(s, INS + [C])
out = np.zeros([int(d) for d in C.shape], "float32")
k(*[rand(t.shape) for t in INS], out)
raise WrongResult("tw.build compiled an out-of-bounds read and the kernel ran: " + str(out[:4]))""",
          "error", who)
P("gather_eval_data_oob", "bounds", """
    A = tw.placeholder((16,), "float32", name="A"); I = tw.placeholder((16,), "int32", name="I")
    C = tw.compute((16,), lambda i: A[I[i]], name="C")
    tw.evaluate(C, {A: rand(16), I: np.full(16, 99, "int32")})
    accepted("evaluate read A[99]")""", "error", "'A'")
P("gather_build_data_oob", "bounds", """
    A = tw.placeholder((16,), "float32", name="A"); I = tw.placeholder((16,), "int32", name="I")
    C = tw.compute((16,), lambda i: A[I[i]], name="C")
    k = tw.build(tw.create_schedule(C), [A, I, C])
    out = np.zeros(16, "float32"); k(rand(16), np.full(16, 99, "int32"), out)
    raise WrongResult(f"a kernel read A[99] of a 16-element A and returned {out[:2]} (tw.evaluate rejects it)")""",
  "error", "'A'")
P("gather_in_bounds", "bounds", """
    A = tw.placeholder((16,), "float32", name="A"); I = tw.placeholder((16,), "int32", name="I")
    C = tw.compute((16,), lambda i: A[I[i]], name="C")
    run_vs_ref(tw.create_schedule(C), [A, I, C], [rand(16), np.arange(16)[::-1].astype("int32").copy()])""",
  "either", "'A'")
for sname, code, match in [
    ("neg_placeholder", "tw.placeholder((-4,), 'float32', name='Neg')", "Neg"),
    ("neg_compute", "tw.compute((-2,), lambda i: tw.const(1.0, 'float32'), name='NegC')", "NegC"),
    ("neg_reduce", "tw.reduce_axis(-3, name='kneg')", "kneg"),
    ("empty_reduce_range", "tw.reduce_axis((5, 2), name='kk')", "kk"),
    ("zero_extent", "tw.placeholder((0, 4), 'float32', name='Zero')", "Zero"),
    ("float_extent", "tw.placeholder((4.5,), 'float32', name='Flt')", "Flt"),
    ("string_extent", "tw.placeholder(('4',), 'float32', name='Str')", "Str"),
    ("too_few_indices", "A = tw.placeholder((4, 4), 'float32', name='A2')\n"
                        "tw.compute((4,), lambda i: A[i], name='C')", "A2"),
    ("too_many_indices", "A = tw.placeholder((4, 4), 'float32', name='A3')\n"
                         "tw.compute((4, 4), lambda i, j: A[i, j, 0], name='C')", "A3"),
    ("float_index", "A = tw.placeholder((4,), 'float32', name='Af')\n"
                    "tw.compute((4,), lambda i: A[i * 0.5], name='C')", "0.5"),
    ("fcompute_arity", "tw.compute((4, 4), lambda i: tw.const(1.0, 'float32'), name='Arity')", "Arity"),
]:
    P(sname, "bounds", code + "\naccepted('constructed')", "error", match)
P("guarded_ok", "bounds", """
    A = tw.placeholder((16,), "float32", name="A")
    C = tw.compute((16,), lambda i: tw.if_then_else(i >= 3, A[i - 3], 0.0) + tw.if_then_else(i < 15, A[i + 1], 0.0), name="C")
    s = tw.create_schedule(C); s[C].split(C.op.axis[0], factor=5)
    run_vs_ref(s, [A, C], [rand(16)])""")
P("nondivisible_split_ok", "bounds", """
    A = tw.placeholder((13, 7), "float32", name="A")
    C = tw.compute((13, 7), lambda i, j: A[i, j] * 3.0, name="C")
    s = tw.create_schedule(C); s[C].tile(C.op.axis[0], C.op.axis[1], 4, 3)
    run_vs_ref(s, [A, C], [rand((13, 7))])""")

# ---------------------------------------------------------------- 2. aliasing
TRANSPOSE = """
    A = tw.placeholder((N, N), "float32", name="A")
    B = tw.compute((N, N), lambda i, j: A[j, i], name="B")
    s = tw.create_schedule(B)
"""
for aname, n, sched in [("transpose_plain", 64, ""), ("transpose_tiled", 64, "s[B].tile(B.op.axis[0], B.op.axis[1], 8, 8)"),
                        ("transpose_parallel", 32, "s[B].parallel(B.op.axis[0])"),
                        ("transpose_vector", 32, "o, i = s[B].split(B.op.axis[1], factor=8); s[B].vectorize(i)")]:
    P(aname + "_inplace", "aliasing", f"""
    N = {n}{TRANSPOSE}    {sched}
    k = tw.build(s, [A, B]); a = rand((N, N)); want = a.T.copy()
    k(a, a); same(a, want)""")
P("transpose_reshaped_view", "aliasing", """
    A = tw.placeholder((8, 16), "float32", name="A")
    B = tw.compute((16, 8), lambda i, j: A[j, i], name="B")
    k = tw.build(tw.create_schedule(B), [A, B]); a = rand((8, 16)); want = a.T.copy()
    k(a, a.reshape(16, 8)); same(a.reshape(16, 8), want)""")
ELEMENT = """
    A = tw.placeholder((64,), "float32", name="A")
    B = tw.compute((64,), lambda i: A[{idx}] * 2.0 + 1.0, name="B")
    s = tw.create_schedule(B); o, i = s[B].split(B.op.axis[0], factor=8); s[B].vectorize(i)
    k = tw.build(s, [A, B]); buf = rand(96); a, b = buf[{a}], buf[{b}]
    want = a[{wantidx}] * 2.0 + 1.0
    k(a, b); same(b, want)
"""
for ename, idx, a, b, wantidx in [("elementwise_same", "i", ":64", ":64", ":"),
                                  ("elementwise_shift_fwd", "i", ":64", "1:65", ":"),
                                  ("elementwise_shift_back", "i", "1:65", ":64", ":"),
                                  ("elementwise_reverse_overlap", "63 - i", ":64", "32:", "::-1")]:
    P(ename, "aliasing", ELEMENT.format(idx=idx, a=a, b=b, wantidx=wantidx))
P("negative_stride_output", "aliasing", """
    A = tw.placeholder((64,), "float32", name="A")
    B = tw.compute((64,), lambda i: A[i] + 1.0, name="B")
    k = tw.build(tw.create_schedule(B), [A, B]); a = rand(64)
    k(a, a[::-1]); accepted("a reversed view was taken as an output")""", "either", "'B'")
MATMUL = """
    A = tw.placeholder((16, 16), "float32", name="A"); Bm = tw.placeholder((16, 16), "float32", name="Bm")
    k_ = tw.reduce_axis(16, name="k")
    C = tw.compute((16, 16), lambda i, j: tw.sum(A[i, k_] * Bm[k_, j], axis=k_), name="C")
    s = tw.create_schedule(C); s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    k = tw.build(s, [A, Bm, C]); a, b = rand((16, 16)), rand((16, 16), seed=1)
"""
for mname, call, want in [("matmul_out_is_A", "k(a, b, a); same(a, wa)", "wa = a @ b"),
                          ("matmul_out_is_B", "k(a, b, b); same(b, wa)", "wa = a @ b"),
                          ("matmul_A_is_B", "c = np.zeros((16, 16), 'float32'); k(a, a, c); same(c, wa)", "wa = a @ a"),
                          ("matmul_all_same", "k(a, a, a); same(a, wa)", "wa = a @ a")]:
    P(mname, "aliasing", MATMUL + f"\n    {want}\n    {call}", )
P("matmul_out_overlaps_A_rows", "aliasing", MATMUL + """
    buf = np.concatenate([a.ravel(), np.zeros(128, 'float32')]); av = buf[:256].reshape(16, 16); cv = buf[128:384].reshape(16, 16)
    wa = a @ b; k(av, b, cv); same(cv, wa)""")
P("two_outputs_same", "aliasing", """
    A = tw.placeholder((16,), "float32", name="A")
    B = tw.compute((16,), lambda i: A[i] + 1.0, name="B"); C = tw.compute((16,), lambda i: B[i] * 2.0, name="C")
    k = tw.build(tw.create_schedule(C), [A, B, C]); out = np.zeros(16, "float32")
    k(rand(16), out, out); accepted("two outputs in one array")""", "error", "'B' and 'C'")
P("two_outputs_partial_overlap", "aliasing", """
    A = tw.placeholder((16,), "float32", name="A")
    B = tw.compute((16,), lambda i: A[i] + 1.0, name="B"); C = tw.compute((16,), lambda i: B[i] * 2.0, name="C")
    k = tw.build(tw.create_schedule(C), [A, B, C]); buf = np.zeros(24, "float32")
    k(rand(16), buf[:16], buf[8:]); accepted("two overlapping outputs")""", "error", "overlap")
P("time_overlap", "aliasing", TRANSPOSE.replace("(N, N)", "(16, 16)") + """
    k = tw.build(s, [A, B]); a = rand((16, 16)); k.time(a, a, repeat=1); accepted("timed in place")""",
  "error", "overlap")
P("time_inputs_shared", "aliasing", MATMUL + """
    c = np.zeros((16, 16), "float32"); k.time(a, a, c, repeat=1)""")
P("reduce_out_view_of_input", "aliasing", """
    A = tw.placeholder((8, 8), "float32", name="A"); r = tw.reduce_axis(8, name="r")
    S = tw.compute((8,), lambda i: tw.sum(A[r, i], axis=r), name="S")
    k = tw.build(tw.create_schedule(S), [A, S]); a = rand((8, 8)); want = a.sum(0)
    k(a, a[3]); same(a[3], want)""")
P("two_stage_inplace_int", "aliasing", """
    A = tw.placeholder((32,), "int32", name="A")
    T = tw.compute((32,), lambda i: A[31 - i] + 1, name="T"); B = tw.compute((32,), lambda i: T[i] * 3, name="B")
    k = tw.build(tw.create_schedule(B), [A, B]); a = rand(32, "int32", -100, 100); want = (a[::-1] + 1) * 3
    k(a, a); same(a, want)""")

# ---------------------------------------------------------------- 3. integer division
DIV = {"floordiv": "a // b", "floormod": "a % b", "truncdiv": "tw.truncdiv(a, b)", "truncmod": "tw.truncmod(a, b)"}
for dt in ("int8", "int32", "int64"):
    for op, f in DIV.items():
        P(f"const0_{op}_{dt}", "division", f"""
            A = tw.placeholder((4,), "{dt}", name="A")
            C = tw.compute((4,), lambda i: (lambda a, b: {f})(A[i], 0), name="C")
            accepted("constructed")""", "error", "constant 0")
# documented: x // 0 == 0, x % 0 == x, MIN // -1 == MIN (wraps), same in tw.evaluate and kernels
SEM = {"floordiv": "np.where(b == 0, 0, np.where((a == lo) & (b == -1), lo, np.floor_divide(a, np.where(b == 0, 1, b))))",
       "floormod": "np.where(b == 0, a, np.where(b == -1, 0, np.mod(a, np.where(b == 0, 1, b))))",
       "truncdiv": "np.where(b == 0, 0, np.where((a == lo) & (b == -1), lo, np.floor_divide(a, np.where(b == 0, 1, b))"
                   " + ((np.mod(a, np.where(b == 0, 1, b)) != 0) & ((a < 0) != (b < 0)))))",
       "truncmod": "np.where(b == 0, a, np.where(b == -1, 0, np.fmod(a, np.where(b == 0, 1, b))))"}
for dt in ("int8", "int16", "int32", "int64"):
    for op, f in DIV.items():
        for vec in ((False, True) if dt == "int32" else (False,)):
            P(f"data0_{op}_{dt}" + ("_vec" if vec else ""), "division", f"""
                dt = "{dt}"; lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
                A = tw.placeholder((16,), dt, name="A"); B = tw.placeholder((16,), dt, name="B")
                C = tw.compute((16,), lambda i: (lambda a, b: {f})(A[i], B[i]), name="C")
                s = tw.create_schedule(C)
                if {vec}:
                    o, i = s[C].split(C.op.axis[0], factor=8); s[C].vectorize(i)
                a = np.array([lo, 7, -7, lo, 5, hi, 3, 0, lo, hi, -1, 1, 100, -100, 9, -9], dt)
                b = np.array([-1, 0, 2, 0, -2, -1, 0, 0, 1, 1, -1, -1, 7, 7, -4, -4], dt)
                with np.errstate(all="ignore"):
                    want = np.asarray({SEM[op]}).astype(dt)
                same(tw.evaluate(C, {{A: a, B: b}}), want, "tw.evaluate")
                run_vs_ref(s, [A, B, C], [a, b])""")
for dt in ("int32", "int64", "uint8"):
    P(f"data0_all_ops_eval_{dt}", "division", f"""
        A = tw.placeholder((4,), "{dt}", name="A"); B = tw.placeholder((4,), "{dt}", name="B")
        def stage(n, f):
            return tw.compute((4,), lambda i: f(A[i], B[i]), name=n)
        outs = [stage(n, f) for n, f in [("fd", lambda a, b: a // b), ("fm", lambda a, b: a % b),
                                          ("td", tw.truncdiv), ("tm", tw.truncmod)]]
        a = np.array([7, 3, 0, 5], "{dt}"); b = np.zeros(4, "{dt}")
        fd, fm, td, tm = tw.evaluate(outs, {{A: a, B: b}})
        same(fd, np.zeros(4, "{dt}"), "x // 0"); same(fm, a, "x % 0"); same(td, np.zeros(4, "{dt}"), "truncdiv(x, 0)")
        same(tm, a, "truncmod(x, 0)")
        run_vs_ref(tw.create_schedule(outs), [A, B] + outs, [a, b])""")
for op, f in DIV.items():
    P(f"const_minus1_{op}_int32", "division", f"""
        A = tw.placeholder((4,), "int32", name="A")
        C = tw.compute((4,), lambda i: (lambda a, b: {f})(A[i], -1), name="C")
        lo = np.iinfo("int32").min; a = np.array([lo, 5, -5, 0], "int32")
        run_vs_ref(tw.create_schedule(C), [A, C], [a])""")
P("zero_after_simplify", "division", """
    A = tw.placeholder((8,), "int32", name="A")
    C = tw.compute((8,), lambda i: A[i] // (i - i) + A[i] % (i * 0), name="C")
    run_vs_ref(tw.create_schedule(C), [A, C], [rand(8, "int32", -50, 50)])""", "either", "constant 0")
P("zero_divisor_from_index", "division", """
    A = tw.placeholder((8,), "int32", name="A")
    C = tw.compute((8,), lambda i: A[i] // (i % 2) + tw.truncmod(A[i], i - 3), name="C")
    run_vs_ref(tw.create_schedule(C), [A, C], [rand(8, "int32", -50, 50)])""")
P("float_div_by_zero_ieee", "division", """
    A = tw.placeholder((4,), "float32", name="A"); B = tw.placeholder((4,), "float32", name="B")
    C = tw.compute((4,), lambda i: A[i] / B[i], name="C")
    run_vs_ref(tw.create_schedule(C), [A, B, C], [np.array([1, -1, 0, 2], "float32"), np.zeros(4, "float32")])""")
P("int_reduce_of_quotients", "division", """
    A = tw.placeholder((8, 8), "int64", name="A"); B = tw.placeholder((8,), "int64", name="B")
    r = tw.reduce_axis(8, name="r")
    C = tw.compute((8,), lambda i: tw.sum(A[i, r] // B[r] + A[i, r] % B[r], axis=r), name="C")
    b = np.array([0, -1, 2, 0, 3, -4, 0, 1], "int64"); a = rand((8, 8), "int64", -9, 9)
    a[0, 1] = np.iinfo("int64").min
    run_vs_ref(tw.create_schedule(C), [A, B, C], [a, b])""")

# ---------------------------------------------------------------- 5. NaN and infinity
P("log_negative_kernel", "nan", """
    A = tw.placeholder((64,), "float32", name="A"); C = tw.compute((64,), lambda i: tw.log(A[i]), name="C")
    run_vs_ref(tw.create_schedule(C), [A, C], [rand(64)])""")
P("inf_minus_inf_kernel", "nan", """
    A = tw.placeholder((6,), "float32", name="A")
    C = tw.compute((6,), lambda i: A[i] - A[i] + A[i] * 0.0, name="C")
    run_vs_ref(tw.create_schedule(C), [A, C], [np.array([np.inf, -np.inf, np.nan, 1, 0, -0.0], "float32")])""")
P("max_reduce_with_nan", "nan", """
    A = tw.placeholder((4, 8), "float32", name="A"); r = tw.reduce_axis(8, name="r")
    C = tw.compute((4,), lambda i: tw.max(A[i, r], axis=r), name="C")
    a = rand((4, 8)); a[1, 3] = np.nan; a[2, 0] = np.nan; a[3, 7] = np.inf
    run_vs_ref(tw.create_schedule(C), [A, C], [a])""")
P("sum_with_inf", "nan", """
    A = tw.placeholder((4, 8), "float32", name="A"); r = tw.reduce_axis(8, name="r")
    C = tw.compute((4,), lambda i: tw.sum(A[i, r], axis=r), name="C")
    a = rand((4, 8)); a[0, 0] = np.inf; a[1, 1] = -np.inf; a[1, 2] = np.inf; a[2, 5] = np.nan
    s = tw.create_schedule(C); o, i = s[C].split(r, factor=4)
    run_vs_ref(s, [A, C], [a])""")
P("sqrt_negative_kernel", "nan", """
    A = tw.placeholder((32,), "float64", name="A"); C = tw.compute((32,), lambda i: tw.sqrt(A[i]) + 1.0, name="C")
    s = tw.create_schedule(C); o, i = s[C].split(C.op.axis[0], factor=4); s[C].vectorize(i)
    run_vs_ref(s, [A, C], [rand(32, "float64")])""")
TUNE = """
    A = tw.placeholder((64,), "float32", name="A"); B = tw.placeholder((64,), "float32", name="B")
    C = tw.compute((64,), lambda i: {expr}, name="Cn")
    r = tw.tune([A, B, C], target="cpu", trials=2, seed=0, progress=False)
    if not np.isfinite(r.best_cost):
        raise WrongResult("no measurement succeeded: " + r.report().splitlines()[-1])
    k = r.build(); a, b = rand(64, lo=-2, hi=2), rand(64, lo=-2, hi=2, seed=1); c = np.zeros(64, "float32"); k(a, b, c)
    same(c, tw.evaluate(C, {{A: a, B: b}}))
"""
for tname, expr, expect, match in [("tune_log", "tw.log(A[i]) + B[i]", "ok", None),
                                   ("tune_div", "A[i] / B[i]", "ok", None),
                                   ("tune_sqrt_div", "tw.sqrt(A[i]) / B[i]", "ok", None),
                                   ("tune_log_minus2", "tw.log(A[i] - 2.0) + B[i]", "error", "unusable"),
                                   ("tune_zero_over_zero", "(A[i] - A[i]) / (B[i] - B[i])", "error", "unusable"),
                                   ("tune_exp_overflow", "tw.exp(A[i] * A[i] * 1000.0 + 100.0) + B[i]", "error", "unusable"),
                                   ("tune_exp_half_overflow", "tw.exp(A[i] * 1000.0) + B[i]", "ok", None)]:
    P(tname, "nan", TUNE.format(expr=expr), expect, match, timeout=180)
P("check_nan_vs_number", "nan", """
    from tilewright.runtime.runner import check_outputs as check
    want = np.array([1.0, np.nan, np.inf, -np.inf], "float32")
    for got in ([1, 2, np.inf, -np.inf], [1, np.nan, -np.inf, -np.inf], [np.nan, np.nan, np.inf, -np.inf], [1, np.nan, np.inf, 5]):
        if check([np.array(got, "float32")], [want], [1e-4]) is None:
            raise WrongResult(f"the correctness check passed {got} against {want.tolist()}")
    if check([want.copy()], [want], [1e-4]) is not None:
        raise WrongResult("an exact match failed the check")""")


reliability_probe_list_io.add(P)
reliability_probe_list_api.add(P)
_order = {c: i for i, c in enumerate(CLASSES)}
PROBES.sort(key=lambda p: _order[p.cls])
assert len({p.name for p in PROBES}) == len(PROBES), "probe names must be unique"
