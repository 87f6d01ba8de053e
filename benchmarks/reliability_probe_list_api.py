"""Probes of resources and bad API input (classes 7 and 8 of benchmarks/reliability_probes.py);
`add(P)` appends them through the probe list's constructor."""

# ruff: noqa: E501  (probe snippets are data: one statement a line reads best)
from __future__ import annotations

PROG = """
A = tw.placeholder((8, 8), "float32", name="A")
B = tw.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
s = tw.create_schedule(B)
"""
BUILD = PROG + "k = tw.build(s, [A, B]); a = rand((8, 8)); b = np.zeros((8, 8), 'float32')\n"
BUILD_CHECK = BUILD + "k(a, b); same(b, a * 2.0)\n"
FRESH = ("import numpy as np, tilewright as tw\n" + PROG + "k = tw.build(s, [A, B]); a = np.ones((8, 8), 'float32')\n"
         "b = np.zeros((8, 8), 'float32'); k(a, b); assert (b == 2).all(), b\n")


def resources(P):
    P("cache_dir_is_file", "resources", """
        (TMP / "f").write_text("x"); os.environ["TILEWRIGHT_CACHE_DIR"] = str(TMP / "f")
        """ + PROG.replace("\n", "\n        ") + """tw.build(s, [A, B]); accepted("built")""", "error", "TILEWRIGHT_CACHE_DIR")
    P("cache_dir_under_file", "resources", """
        (TMP / "f").write_text("x"); os.environ["TILEWRIGHT_CACHE_DIR"] = str(TMP / "f" / "sub")
        """ + PROG.replace("\n", "\n        ") + """tw.build(s, [A, B]); accepted("built")""", "error", "TILEWRIGHT_CACHE_DIR")
    P("cache_dir_in_proc", "resources", """
        os.environ["TILEWRIGHT_CACHE_DIR"] = "/proc/twprobe_cache"
        """ + PROG.replace("\n", "\n        ") + """tw.build(s, [A, B]); accepted("built")""", "error", "/proc/twprobe_cache")
    P("cache_dir_readonly", "resources", """
        d = TMP / "ro"; d.mkdir(); d.chmod(0o555); os.environ["TILEWRIGHT_CACHE_DIR"] = str(d)
        """ + BUILD_CHECK.replace("\n", "\n        "), "either", "TILEWRIGHT_CACHE_DIR")
    P("kernels_dir_is_file", "resources", """
        (TMP / "cache").mkdir(exist_ok=True); (TMP / "cache" / "kernels").write_text("in the way")
        """ + BUILD_CHECK.replace("\n", "\n        "), "error", "kernels")
    P("disk_full_fsize_limit", "resources", """
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN); resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))
        """ + BUILD_CHECK.replace("\n", "\n        "), "error", "kernels")
    P("logs_dir_is_file", "resources", """
        (TMP / "cache").mkdir(exist_ok=True); (TMP / "cache" / "logs").write_text("in the way")
        """ + PROG.replace("\n", "\n        ") + """tw.tune([A, B], trials=2, progress=False); accepted("tuned")""",
      "error", "logs", timeout=120)
    P("records_db_is_directory", "resources", """
        (TMP / "cache").mkdir(exist_ok=True); (TMP / "cache" / "records.sqlite").mkdir()
        """ + PROG.replace("\n", "\n        ") + """tw.tune([A, B], trials=2, progress=False); accepted("tuned")""",
      "error", "records.sqlite", timeout=120)
    for cname, cc, match in [("true", "true", "'true'"), ("nonexistent", "/nonexistent", "/nonexistent"),
                             ("false", "false", "false"), ("echo", "echo", "echo")]:
        P(f"CC_{cname}", "resources", BUILD_CHECK, "error", match, env={"CC": cc, "TILEWRIGHT_CC": ""})
    P("CC_writes_empty_so", "resources", """
        sh = TMP / "fakecc"; sh.write_text('#!/bin/sh\\nwhile [ $# -gt 0 ]; do if [ "$1" = -o ]; then : > "$2"; fi; shift; done\\n')
        sh.chmod(0o755); os.environ["TILEWRIGHT_CC"] = str(sh)
        """ + BUILD_CHECK.replace("\n", "\n        "), "error", "fakecc")
    for dname, damage in [("empty", 'b""'), ("truncated", "data[: len(data) // 2]"), ("garbage", 'b"#!/bin/sh\\n" * 50'),
                          ("elf_header_only", "data[:64]")]:
        for fresh in (False, True):
            P(f"cached_so_{dname}" + ("_fresh_process" if fresh else ""), "resources", BUILD_CHECK + f"""
path = k.build_result.library; data = path.read_bytes()
tmp = path.with_suffix(".damaged"); tmp.write_bytes({damage}); os.replace(tmp, path)
if {fresh}:
    out = subprocess.run([PY, "-c", {FRESH!r}], capture_output=True, text=True, env=os.environ, timeout=120)
    if out.returncode < 0: raise RuntimeError(f"the rebuild in a fresh process died by signal {{-out.returncode}}")
    if out.returncode: raise RuntimeError("the rebuild in a fresh process failed: " + out.stderr.strip().splitlines()[-1])
else:
    k2 = tw.build(s, [A, B]); b2 = np.zeros((8, 8), "float32"); k2(a, b2); same(b2, a * 2.0)
if path.read_bytes() != data: raise WrongResult("the damaged library is still in the cache")""")
    P("huge_tune", "resources", """
        A = tw.placeholder((1000000, 1000000), "float32", name="Huge")
        B = tw.compute((1000000, 1000000), lambda i, j: A[i, j] * 2.0, name="B")
        tw.tune([A, B], trials=2, progress=False); accepted("tuned")""", "error", "Huge", timeout=120)
    P("huge_evaluate_output", "resources", """
        C = tw.compute((1000000, 1000000), lambda i, j: tw.cast(i + j, "float32"), name="HugeOut")
        tw.evaluate(C, {}); accepted("evaluated 10^12 elements")""", "error", "HugeOut", timeout=120)
    P("huge_evaluate_input_mismatch", "resources", """
        A = tw.placeholder((1000000, 1000000), "float32", name="Huge")
        B = tw.compute((4,), lambda i: A[i, i] * 2.0, name="B")
        tw.evaluate(B, {A: np.zeros((4, 4), "float32")}); accepted("evaluated")""", "error", "Huge")
    P("huge_build", "resources", """
        A = tw.placeholder((1000000, 1000000), "float32", name="Huge")
        B = tw.compute((1000000, 1000000), lambda i, j: A[i, j] * 2.0, name="B")
        s = tw.create_schedule(B); tw.build(s, [A, B])
        src = tw.build(s, [A, B]).source
        if "int32_t i" in src or " int i" in src: raise WrongResult("10^12 elements indexed with 32-bit loop variables")""",
      "either", "Huge")


KERNEL_CALLS = [  # name, call after BUILD, expected message substring
    ("too_few_args", "k(a)", "takes"), ("too_many_args", "k(a, b, b)", "takes"),
    ("float64_input", "k(a.astype('float64'), b)", "'A'"), ("int32_output", "k(a, b.astype('int32'))", "'B'"),
    ("wrong_shape", "k(a[:4], b)", "'A'"), ("transposed_input", "k(a.T, b)", "'A'"),
    ("strided_input", "k(rand((16, 16))[::2, ::2], b)", "'A'"), ("fortran_output", "k(a, np.zeros((8, 8), 'float32', order='F'))", "'B'"),
    ("list_input", "k(a.tolist(), b)", "'A'"), ("none_input", "k(None, b)", "'A'"),
    ("readonly_output", "b.setflags(write=False); k(a, b)", "'B'"), ("scalar_input", "k(np.float32(1), b)", "'A'"),
    ("flat_input", "k(a.ravel(), b)", "'A'"), ("time_wrong_dtype", "k.time(a.astype('float16'), b, repeat=1)", "'A'"),
]
SCHEDULE_BAD = [  # name, primitive calls after PROG, expect, match
    ("split_factor_0", "s[B].split(B.op.axis[0], factor=0)", "error", "factor"),
    ("split_factor_neg", "s[B].split(B.op.axis[0], factor=-1)", "error", "factor"),
    ("split_factor_2_5", "s[B].split(B.op.axis[0], factor=2.5)", "error", "factor"),
    ("split_factor_str", "s[B].split(B.op.axis[0], factor='3')", "error", "factor"),
    ("split_factor_none", "s[B].split(B.op.axis[0])", "error", "split"),
    ("split_nparts_0", "s[B].split(B.op.axis[0], nparts=0)", "error", "nparts"),
    ("split_both", "s[B].split(B.op.axis[0], factor=2, nparts=4)", "error", "split"),
    ("split_factor_huge", "s[B].split(B.op.axis[0], factor=10**30)", "either", "factor"),
    ("split_factor_true", "s[B].split(B.op.axis[0], factor=True)", "either", "factor"),
    ("split_not_leaf", "s[B].split(B.op.axis[0], factor=2); s[B].split(B.op.axis[0], factor=2)", "error", "'B'"),
    ("split_foreign_axis", "C = tw.compute((8,), lambda i: A[i, 0], name='Cx'); s[B].split(C.op.axis[0], factor=2)",
     "error", "'B'"),
    ("reorder_duplicate", "s[B].reorder(B.op.axis[0], B.op.axis[0])", "error", "twice"),
    ("reorder_foreign", "C = tw.compute((8,), lambda i: A[i, 0], name='Cx'); s[B].reorder(C.op.axis[0], B.op.axis[0])",
     "error", "'B'"),
    ("fuse_one", "s[B].fuse(B.op.axis[0])", "error", "two"),
    ("fuse_reversed", "s[B].fuse(B.op.axis[1], B.op.axis[0])", "either", "fuse"),
    ("fuse_not_adjacent", "io, ii = s[B].split(B.op.axis[0], factor=2); s[B].fuse(io, B.op.axis[1])", "error", "fuse"),
    ("vectorize_foreign", "C = tw.compute((8,), lambda i: A[i, 0], name='Cx'); s[B].vectorize(C.op.axis[0])", "error", "'B'"),
    ("unknown_thread_tag", "s[B].bind(B.op.axis[0], tw.thread_axis('threadIdx.w'))", "error", "threadIdx.w"),
    ("thread_tag_warp", "tw.thread_axis('warp')", "error", "warp"),
    ("bind_on_cpu", "s[B].bind(B.op.axis[0], tw.thread_axis('blockIdx.x'))", "either", "blockIdx.x"),
    ("cache_read_texture", "s.cache_read(A, 'texture', [B])", "error", "texture"),
    ("cache_write_bogus", "s.cache_write(B, 'bogus')", "error", "bogus"),
    ("storage_align_offset", "s[B].storage_align(B.op.axis[0], 4, 9)", "error", "offset"),
]
REDUCE = """
A = tw.placeholder((8, 8), "float32", name="A"); r = tw.reduce_axis(8, name="r")
S = tw.compute((8,), lambda i: tw.sum(A[i, r], axis=r), name="S")
Pm = tw.compute((8,), lambda i: S[i] + 1.0, name="Pm"); Q = tw.compute((8,), lambda i: Pm[i] * 2.0, name="Q")
s = tw.create_schedule(Q)
"""
REDUCE_BAD = [
    ("fuse_spatial_reduce", "s[S].fuse(S.op.axis[0], r)", "error", "reduce"),
    ("compute_at_self", "s[Pm].compute_at(s[Pm], Pm.op.axis[0])", "error", "itself"),
    ("compute_at_cycle", "s[S].compute_at(s[Pm], Pm.op.axis[0]); s[Pm].compute_at(s[S], S.op.axis[0])", "error", "'Pm'"),
    ("compute_at_foreign_axis", "s[S].compute_at(s[Pm], Q.op.axis[0])", "error", "'S'"),
    ("compute_inline_reduce", "s[S].compute_inline()", "error", "'S'"),
    ("compute_inline_output", "s[Q].compute_inline()", "error", "'Q'"),
    ("bind_reduce_cpu", "s = tw.create_schedule(S); s[S].bind(r, tw.thread_axis('threadIdx.x')); tw.build(s, [A, S])", "error", "'r'"),
    ("bind_reduce_blockidx", "s[S].bind(r, tw.thread_axis('blockIdx.x')); tw.build(s, [A, Q], target='cuda -arch=sm_90')",
     "error", "'r'"),
    ("vectorize_sum_spatial", "s[S].vectorize_sum(S.op.axis[0])", "error", "spatial"),
    ("rfactor_spatial", "s.rfactor(S, S.op.axis[0])", "error", "'S'"),
    ("set_scope_l2", "s[Pm].set_scope('l2')", "error", "l2"),
]
TARGETS = [("tpu", "tpu"), ("cpu -isa=avx1024", "avx1024"), ("cuda -arch=sm_1", "sm_1"), ("", "target"),
           ("cpu -bogus=1", "bogus"), ("opencl -platform=99", "99"), ("cuda -device=-1", "-1"),
           ("CPU", "CPU"), (123, "123")]
TUNE_BAD = [("trials_neg", "trials=-1", "trials"), ("trials_float", "trials=2.5", "trials"),
            ("trials_str", "trials='3'", "trials"), ("method_x", "method='x'", "'x'"),
            ("timeout_neg", "trials=2, timeout=-1", "timeout"),
            ("seed_str", "trials=2, seed='a'", "seed"), ("seed_neg", "trials=2, seed=-5", "seed"),
            ("target_tpu", "trials=2, target='tpu'", "tpu"), ("method_none", "trials=2, method=None", "method")]
TUNE_LENIENT = [("trials_0", "trials=0", "trials"), ("timeout_0", "trials=2, timeout=0", "timeout"), ("batch_0", "trials=2, batch=0", "batch"),
                ("early_stop_1", "trials=3, early_stop=1", "early_stop"), ("warmup_neg", "trials=2, warmup=-1", "warmup")]
BUILD_BAD = [("args_missing_output", "tw.build(s, [A])", "'B'"),
             ("args_duplicate", "tw.build(s, [A, A, B])", "'A'"), ("args_none", "tw.build(s, None)", "args"),
             ("build_other_schedule", "C = tw.compute((8, 8), lambda i, j: A[i, j] + 1.0, name='Cz'); tw.build(s, [A, C])", "'Cz'"),
             ("evaluate_missing_input", "tw.evaluate(B, {})", "'A'"),
             ("evaluate_wrong_shape", "tw.evaluate(B, {A: rand((4, 4))})", "'A'"),
             ("evaluate_unknown_name", "tw.evaluate(B, {'A': rand((8, 8)), 'Nope': rand(3)})", "Nope"),
             ("evaluate_none", "tw.evaluate(None, {})", "output"),
             ("placeholder_bad_dtype", "tw.placeholder((4,), 'float128', name='Q')", "float128"),
             ("mixed_dtype", "Bi = tw.placeholder((8, 8), 'int32', name='Bi'); tw.compute((8, 8), lambda i, j: A[i, j] + Bi[i, j], name='M')", "cast")]


def api(P):
    for name, call, match in KERNEL_CALLS:
        P(name, "api", BUILD + call + "\naccepted('the call ran')", "error", match)
    P("kernel_call_ok_after_errors", "api", BUILD + "try:\n    k(a)\nexcept tw.TilewrightError:\n    pass\nk(a, b); same(b, a * 2.0)")
    for name, calls, expect, match in SCHEDULE_BAD:
        tail = "\nk = tw.build(s, [A, B]); k(a, b); same(b, a * 2.0)" if expect == "either" else "\naccepted('accepted')"
        P(name, "api", PROG + "a = rand((8, 8)); b = np.zeros((8, 8), 'float32')\n" + calls + tail, expect, match)
    for name, calls, expect, match in REDUCE_BAD:
        P(name, "api", REDUCE + calls + "\naccepted('accepted')", expect, match)
    for target, match in TARGETS:
        P(f"target_{str(target).replace(' ', '_') or 'empty'}", "api",
          PROG + f"k = tw.build(s, [A, B], target={target!r}); a = rand((8, 8)); b = np.zeros((8, 8), 'float32'); k(a, b)\n"
          "accepted('built and ran')", "error", match)
    for name, args, match in TUNE_BAD:
        P(f"tune_{name}", "api", PROG + f"tw.tune([A, B], progress=False, {args}); accepted('tuned')", "error", match,
          timeout=120)
    P("tune_empty_tensors", "api", "tw.tune([], trials=2, progress=False); accepted('tuned')", "error", "tensors")
    for name, args, match in TUNE_LENIENT:  # a clear refusal or a correct result
        P(f"tune_{name}", "api", PROG + f"r = tw.tune([A, B], progress=False, {args})\n"
          "k = r.build(); a = rand((8, 8)); b = np.zeros((8, 8), 'float32'); k(a, b); same(b, a * 2.0)", "either", match,
          timeout=120)
    P("tune_only_input", "api", PROG + "tw.tune([A], trials=2, progress=False); accepted('tuned')", "error", "computed tensor")
    P("args_unrelated", "api", PROG + "Zz = tw.placeholder((3,), 'float32', name='Zz'); k = tw.build(s, [A, Zz, B])\n"
      "a = rand((8, 8)); b = np.zeros((8, 8), 'float32'); k(a, rand(3), b); same(b, a * 2.0)", "either", "'Zz'")
    P("target_cpu_isa_empty", "api", BUILD_CHECK.replace("tw.build(s, [A, B])", "tw.build(s, [A, B], target='cpu -isa=')"),
      "either", "isa")
    for name, code, match in BUILD_BAD:
        P(name, "api", PROG + code + "\naccepted('accepted')", "error", match)


def add(P):
    resources(P)
    api(P)
