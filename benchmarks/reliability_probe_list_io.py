"""Probes of hostile names and records (classes 4 and 6 of benchmarks/reliability_probes.py);
`add(P)` appends them through the probe list's constructor."""

# ruff: noqa: E501  (probe snippets are data: one statement a line reads best)
from __future__ import annotations

import json
import textwrap

NAMES = {
    "comment_close": 'x */ __attribute__((constructor)) static void pwn(void) { puts("PWNED"); } /*',
    "hash_define": "y\n#define main nope\n", "newline": "a\nb", "dquote": 'say "hi"', "squote": "it's",
    "kw_int": "int", "kw_return": "return", "main": "main", "unicode": "Ä÷λ_名", "long5000": "n" * 5000,
    "backslash": "a\\", "trigraph": "w ??/ */ /*", "empty": "", "space": "a b", "digit_first": "9lives",
    "nul": "a\x00b",
}
RISKY = {"empty", "nul"}  # a clear rejection is as good as sanitizing
NOT_RUN = 'if "PWNED" in k.source and "puts(\\"PWNED\\")" in k.source: raise WrongResult("injection in kernel.source")'


def names(P):
    for nname, text in NAMES.items():
        t = repr(text)
        expect = "either" if nname in RISKY else "ok"
        P(f"tensor_{nname}", "names", f"""
            A = tw.placeholder((8,), "float32", name={t}); B = tw.placeholder((8,), "float32", name="B")
            C = tw.compute((8,), lambda i: A[i] + B[i] * 2.0, name="C")
            k = run_vs_ref(tw.create_schedule(C), [A, B, C], [rand(8), rand(8, seed=1)])
            {NOT_RUN}""", expect, "name")
        P(f"kernel_{nname}", "names", f"""
            A = tw.placeholder((8,), "float32", name="A"); C = tw.compute((8,), lambda i: A[i] - 1.0, name="C")
            k = run_vs_ref(tw.create_schedule(C), [A, C], [rand(8)], name={t})
            {NOT_RUN}""", expect, "name")
        if nname in ("comment_close", "hash_define", "unicode", "long5000", "kw_int", "empty"):
            P(f"output_axis_{nname}", "names", f"""
                A = tw.placeholder((8, 4), "float32", name="A"); r = tw.reduce_axis(4, name={t})
                C = tw.compute((8,), lambda i: tw.sum(A[i, r], axis=r), name={t})
                s = tw.create_schedule(C); o, i = s[C].split(C.op.axis[0], factor=4)
                k = run_vs_ref(s, [A, C], [rand((8, 4))])
                print(tw.lower(s, [A, C]))
                {NOT_RUN}""", expect, "name")
            P(f"export_cc_{nname}", "names", f"""
                A = tw.placeholder((4,), "float32", name={t} + "A"); B = tw.placeholder((4,), "float32", name={t})
                C = tw.compute((4,), lambda i: A[i] + B[i], name={t} + "C")
                k = run_vs_ref(tw.create_schedule(C), [A, B, C], [rand(4), rand(4, seed=1)], name={t})
                out = k.export(TMP / "export"); hs = list(out.glob("*.h"))
                if len(hs) != 1 or hs[0].parent != out: raise WrongResult(f"export wrote headers {{hs}}")
                main = TMP / "main.c"
                main.write_text('#include <stdio.h>\\n#include "' + hs[0].name + '"\\nint main(void) {{ puts("main ran"); return 0; }}\\n')
                cc = subprocess.run(["cc", "-I", str(out), str(main), str(hs[0].with_suffix(".so")), "-Wl,-rpath," + str(out),
                                     "-o", str(TMP / "main")], capture_output=True, text=True)
                if cc.returncode: raise WrongResult("a C program including the exported header does not compile: "
                                                    + cc.stderr.strip().splitlines()[0])
                run = subprocess.run([str(TMP / "main")], capture_output=True, text=True, timeout=30)
                if run.stdout != "main ran\\n": raise WrongResult("injected code ran: " + repr(run.stdout))""",
              expect, "name")
    P("sanitized_collision", "names", """
        A = tw.placeholder((4,), "float32", name="a-b"); B = tw.placeholder((4,), "float32", name="a_b")
        C = tw.compute((4,), lambda i: A[i] - B[i], name="a.b")
        run_vs_ref(tw.create_schedule(C), [A, B, C], [rand(4), rand(4, seed=1)])""", "either", "a_b")
    P("duplicate_names", "names", """
        A = tw.placeholder((4,), "float32", name="X"); B = tw.placeholder((4,), "float32", name="X")
        C = tw.compute((4,), lambda i: A[i] - B[i] * 3.0, name="X")
        run_vs_ref(tw.create_schedule(C), [A, B, C], [rand(4), rand(4, seed=1)])""", "either", "'X'")
    for nname in ("comment_close", "newline", "long5000", "unicode"):
        t = repr(NAMES[nname])
        P(f"records_{nname}", "names", f"""
            A = tw.placeholder((16, 16), "float32", name={t}); C = tw.compute((16, 16), lambda i, j: A[j, i] + 1.0, name={t} + "C")
            with tw.records(TMP / "r.sqlite") as store:
                r = tw.tune([A, C], target="cpu", trials=2, seed=0, progress=False, records=store)
                rows = store.query()
                if len(rows) < len(r.history): raise RecordLost(f"{{len(r.history)}} measured, {{len(rows)}} stored")
                k = tw.build([A, C]); a = rand((16, 16)); c = np.zeros((16, 16), "float32"); k(a, c); same(c, a.T + 1.0)
                out = subprocess.run([PY, "-m", "tilewright.cli", "records", "list", "--records", str(TMP / "r.sqlite")],
                                     capture_output=True, text=True, timeout=60)
                if out.returncode or "Traceback" in out.stderr: raise RuntimeError("records list: " + out.stderr[-300:])""",
          "ok", timeout=180)


REC = ("from tilewright.records import Record, Records\n"
       "def rec(cost, point='{\"t\": [2, 4]}', t=1.0, kind='none', costs=None):\n"
       "    costs = costs if costs is not None else ((cost,) if cost else ())\n"
       "    return Record('w1', 't1', point, '[]', costs, kind, '', 'q', 0, 'r1', '0.1.0', t, 'desc')\n"
       "def hold(db, seconds):\n"
       "    code = ('import sqlite3, sys, time\\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\\n'\n"
       "            'c.execute(\"BEGIN EXCLUSIVE\")\\nprint(\"locked\", flush=True)\\ntime.sleep(float(sys.argv[2]))\\n'\n"
       "            'c.execute(\"COMMIT\")\\n')\n"
       "    p = subprocess.Popen([PY, '-c', code, str(db), str(seconds)], stdout=subprocess.PIPE, text=True)\n"
       "    assert p.stdout.readline().strip() == 'locked'\n"
       "    return p\n")


def with_rec(code):
    """The records helpers, then the snippet `code` at the same depth."""
    return REC + textwrap.dedent(code)

TUNE_SCRIPT = ("import tilewright as tw\n"
               "A = tw.placeholder((24, 24), 'float32', name='A'); B = tw.placeholder((24, 24), 'float32', name='B')\n"
               "k = tw.reduce_axis(24, name='k')\n"
               "C = tw.compute((24, 24), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name='C')\n"
               "tw.tune([A, B, C], target='cpu', trials=60, seed=0, progress=False, log={log!r}, method='random')\n")
GOOD = {"workload": "w1", "target": "t1", "point": '{"t": [2, 4]}', "trace": "[]", "costs": [0.001],
        "error_kind": "none", "error_msg": "", "method": "q", "seed": 0, "run_id": "r1", "version": "0.1.0",
        "time": 1.0, "description": "desc"}
BAD = {
    "dict_point": {"point": {"t": [2, 4]}}, "list_description": {"description": ["a", "b"]},
    "seed_1e30": {"seed": 10 ** 30}, "float_splits_zero_time": {"point": '{"t": [2.5, 4]}', "costs": [0.0]},
    "string_point": {"point": '"[1,2]"'}, "nested_lists": {"point": '{"t": [[1, 2], [3]]}'},
    "list_point": {"point": "[1, 2]"}, "null_costs": {"costs": None}, "negative_cost": {"costs": [-1.0]},
    "string_cost": {"costs": ["0.1"]}, "bool_seed": {"seed": True}, "unknown_kind": {"error_kind": "fine"},
    "time_string": {"time": "yesterday"}, "extra_field": {"evil": 1}, "bool_split": {"point": '{"t": [true, 4]}'},
    "negative_split": {"point": '{"t": [-2, 4]}'},
}


def records(P):
    for n in (1, 3, 6):
        P(f"kill_tune_after_{n}", "records", f"""
            import signal
            log = TMP / "tune.log"; script = {TUNE_SCRIPT!r}.format(log=str(log))
            proc = subprocess.Popen([PY, "-c", script], env=os.environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 150; logged = []
            while time.time() < deadline and proc.poll() is None:
                logged = [l for l in (log.read_text().splitlines() if log.exists() else []) if l[:1].isdigit()]
                if len(logged) >= {n}: break
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL); proc.wait(30)
            logged = [l for l in log.read_text().splitlines() if l[:1].isdigit()]
            if len(logged) < {n}: raise RuntimeError(f"the tuner logged {{len(logged)}} measurements before the deadline")
            from tilewright.records import Records
            rows = Records(TMP / "cache" / "records.sqlite").query()
            if len(rows) < len(logged): raise RecordLost(f"{{len(logged)}} measurements logged, {{len(rows)}} in the records")""",
          timeout=200)
    P("lock_held_2s_waits", "records", with_rec("""
        store = Records(TMP / "r.sqlite", lock_timeout=20); h = hold(store.path, 2)
        store.add(rec(1e-3)); h.wait(30)
        if store.count() != 1: raise RecordLost(f"{store.count()} records after one add")"""))
    P("lock_held_past_bound", "records", with_rec("""
        store = Records(TMP / "r.sqlite", lock_timeout=0.5); h = hold(store.path, 4)
        try:
            store.add(rec(1e-3))
        except tw.TilewrightError:
            h.wait(30)
            if store.import_jsonl(store.side_path) != 1: raise RecordLost("the side file did not hold the measurement")
            raise
        h.wait(30)
        if store.count() != 1: raise RecordLost("the measurement is neither stored nor saved aside")"""),
      "either", "unsaved")
    P("lock_held_during_tune", "records", with_rec("""
        store = Records(TMP / "r.sqlite", lock_timeout=1); h = hold(store.path, 6)
        A = tw.placeholder((16,), "float32", name="A"); C = tw.compute((16,), lambda i: A[i] * 2.0, name="C")
        try:
            r = tw.tune([A, C], target="cpu", trials=3, seed=0, progress=False, records=store); n = len(r.history)
        except tw.TilewrightError as e:
            n = int("saved" in str(e) or "unsaved" in str(e)); h.wait(30)
            side = store.side_path.read_text().splitlines() if store.side_path.exists() else []
            if store.count() + len(side) < n: raise RecordLost("the measurement in flight is lost")
            raise
        h.wait(30)
        side = store.side_path.read_text().splitlines() if store.side_path.exists() else []
        if store.count() + len(side) < n: raise RecordLost(f"{n} measured, {store.count()} stored, {len(side)} aside")"""),
      "either", "locked", timeout=120)
    P("lock_taken_mid_tune", "records", with_rec("""
        import sqlite3, threading
        store = Records(TMP / "r.sqlite", lock_timeout=1); holder = []
        def grab():
            while True:
                try:
                    if sqlite3.connect(store.path).execute("select count(*) from records").fetchone()[0] >= 1: break
                except sqlite3.Error: pass
                time.sleep(0.01)
            holder.append(hold(store.path, 5))
        threading.Thread(target=grab, daemon=True).start()
        A = tw.placeholder((24, 24), 'float32', name='A'); B = tw.placeholder((24, 24), 'float32', name='B')
        k = tw.reduce_axis(24, name='k')
        C = tw.compute((24, 24), lambda i, j: tw.sum(A[i, k] * B[k, j], axis=k), name='C')
        err = None
        try:
            tw.tune([A, B, C], target="cpu", trials=8, seed=0, progress=False, records=store, log=TMP / "t.log", method="random")
        except tw.TilewrightError as e:
            err = e
        while not holder: time.sleep(0.1)
        holder[0].wait(30)
        logged = [l for l in (TMP / "t.log").read_text().splitlines() if l[:1].isdigit()]
        side = store.side_path.read_text().splitlines() if store.side_path.exists() else []
        n = Records(TMP / "r.sqlite").count()
        if n + len(side) < len(logged) + (err is not None):
            raise RecordLost(f"{len(logged)} logged (+1 in flight), {n} stored, {len(side)} aside")
        if err: raise err"""), "either", "unsaved", timeout=150)
    P("two_writers", "records", with_rec("""
        code = ("import sys, time\\nfrom tilewright.records import Record, Records\\ns = Records(sys.argv[1])\\n"
                "for i in range(40): s.add(Record('w', 't', '{\\"n\\": %d}' % i, '', (1e-3,), 'none', '', 'q', 0, sys.argv[2], '0', time.time(), ''))\\n")
        ps = [subprocess.Popen([PY, "-c", code, str(TMP / "r.sqlite"), f"run{j}"]) for j in range(2)]
        for p in ps: p.wait(120)
        n = Records(TMP / "r.sqlite").count()
        if n != 80: raise RecordLost(f"2 writers x 40 records, {n} stored")"""), timeout=120)
    for bname, change in BAD.items():
        line = json.dumps({**GOOD, **change}) if bname != "extra_field" else json.dumps({**GOOD, **change})
        P(f"import_{bname}", "records", with_rec(f"""
            store = Records(TMP / "r.sqlite"); store.add(rec(5e-3, '{{"t": [4, 2]}}', t=9))
            path = TMP / "in.jsonl"; path.write_text({json.dumps(GOOD)!r} + "\\n" + {line!r} + "\\n")
            try:
                store.import_jsonl(path)
            finally:
                if [r.time for r in store.query()] != [9.0]: raise WrongResult("a rejected import changed the database")
            best = store.best("w1", "t1", k=5)
            raise WrongResult(f"imported; best is now {{best[0].point}} at {{best[0].cost}}")"""), "error", "in.jsonl:2")
    for bname, text in [("truncated_json", '{"workload": "w1", "point": '), ("json_list_line", "[1, 2]"),
                        ("missing_point", json.dumps({k: v for k, v in GOOD.items() if k != "point"})),
                        ("missing_costs", json.dumps({k: v for k, v in GOOD.items() if k != "costs"})),
                        ("nan_cost", json.dumps({**GOOD, "costs": [float("nan")]})),
                        ("inf_cost", json.dumps({**GOOD, "costs": [float("inf")]}))]:
        P(f"import_{bname}", "records", with_rec(f"""
            store = Records(TMP / "r.sqlite"); store.add(rec(5e-3, '{{"t": [4, 2]}}', t=9))
            path = TMP / "in.jsonl"; path.write_text({json.dumps(GOOD)!r} + "\\n" + {text!r} + "\\n")
            try:
                store.import_jsonl(path)
            finally:
                if [r.time for r in store.query()] != [9.0]: raise WrongResult("a rejected import changed the database")
            raise WrongResult("imported a malformed line")"""), "error", "in.jsonl:2")
    P("import_binary_garbage", "records", with_rec("""
        store = Records(TMP / "r.sqlite"); path = TMP / "in.jsonl"; path.write_bytes(b"\\xff\\xfe\\x00garbage\\n")
        store.import_jsonl(path); raise WrongResult("imported binary garbage")"""), "error", "in.jsonl")
    P("cli_import_bad_file", "records", f"""
        path = TMP / "in.jsonl"; path.write_text({json.dumps({**GOOD, "seed": 10 ** 30})!r} + "\\n")
        out = subprocess.run([PY, "-m", "tilewright.cli", "records", "import", str(path), "--records", str(TMP / "r.sqlite")],
                             capture_output=True, text=True, timeout=60)
        if "Traceback" in out.stderr: raise RuntimeError("tilewright records import: " + out.stderr.strip().splitlines()[-1])
        if out.returncode == 0: raise WrongResult("the bad import exited 0: " + out.stdout)
        raise tw.TilewrightError(out.stderr.strip())""", "error", "in.jsonl:1")
    P("cli_import_missing_file", "records", """
        out = subprocess.run([PY, "-m", "tilewright.cli", "records", "import", str(TMP / "nope.jsonl"), "--records",
                              str(TMP / "r.sqlite")], capture_output=True, text=True, timeout=60)
        if "Traceback" in out.stderr: raise RuntimeError("tilewright records import: " + out.stderr.strip().splitlines()[-1])
        raise tw.TilewrightError(out.stderr.strip() or out.stdout.strip())""", "error", "nope.jsonl")
    P("best_skips_wrong_result_later", "records", with_rec("""
        s = Records(TMP / "r.sqlite"); s.add(rec(1e-3, '{"t": [1, 8]}', t=1))
        s.add(rec(None, '{"t": [1, 8]}', t=2, kind="wrong_result")); s.add(rec(2e-3, '{"t": [2, 4]}', t=3))
        got = [r.point for r in s.best("w1", "t1", k=5)]
        if got != ['{"t": [2, 4]}']: raise WrongResult(f"best ranks {got}")"""))
    P("best_skips_wrong_result_first", "records", with_rec("""
        s = Records(TMP / "r.sqlite"); s.add(rec(None, '{"t": [1, 8]}', t=1, kind="wrong_result"))
        s.add(rec(1e-4, '{"t": [1, 8]}', t=2)); s.add(rec(1e-4, '{"t": [1, 8]}', t=3)); s.add(rec(2e-3, '{"t": [2, 4]}', t=4))
        got = [r.point for r in s.best("w1", "t1", k=5)]
        if got != ['{"t": [2, 4]}']: raise WrongResult(f"best ranks {got}")"""))
    P("best_all_wrong_is_empty", "records", with_rec("""
        s = Records(TMP / "r.sqlite"); s.add(rec(None, kind="wrong_result"))
        if s.best("w1", "t1", k=5): raise WrongResult("a wrong_result point ranks")"""))
    P("best_median_of_all", "records", with_rec("""
        s = Records(TMP / "r.sqlite"); s.add(rec(1e-4, '{"t": [1, 8]}', t=1))
        for t in (2, 3, 4): s.add(rec(9e-3, '{"t": [1, 8]}', t=t))
        s.add(rec(2e-3, '{"t": [2, 4]}', t=5))
        got = [r.point for r in s.best("w1", "t1", k=5)]
        if got[0] != '{"t": [2, 4]}': raise WrongResult(f"one lucky time outranks three slow ones: {got}")"""))
    P("db_not_sqlite", "records", with_rec("""
        (TMP / "r.sqlite").write_text("this is not a database\\n" * 100)
        Records(TMP / "r.sqlite").count(); accepted("opened a text file as records")"""), "error", "r.sqlite")
    P("db_is_directory", "records", with_rec("""
        (TMP / "r.sqlite").mkdir(); Records(TMP / "r.sqlite").add(rec(1e-3)); accepted("added")"""), "error", "r.sqlite")
    P("tune_history_all_stored", "records", """
        from tilewright.records import Records
        A = tw.placeholder((16, 16), "float32", name="A"); C = tw.compute((16, 16), lambda i, j: A[i, j] * A[j, i], name="C")
        r = tw.tune([A, C], target="cpu", trials=5, seed=0, progress=False, records=TMP / "r.sqlite")
        n = Records(TMP / "r.sqlite").count()
        if n < len(r.history): raise RecordLost(f"{len(r.history)} measured, {n} stored")""", timeout=180)
    P("unknown_knob_then_tune", "records", with_rec("""
        from tilewright.analysis.workload import workload_key
        A = tw.placeholder((16,), "float32", name="A"); C = tw.compute((16,), lambda i: A[i] * 2.0, name="C")
        wk, tk = workload_key([C]), tw.as_target("cpu").key
        s = Records(TMP / "r.sqlite")
        s.add(Record(wk, tk, '{"zzz": [1, 2]}', '[]', (1e-9,), 'none', '', 'q', 0, 'r1', '0.1.0', 1.0, 'desc'))
        r = tw.tune([A, C], target="cpu", trials=2, seed=0, progress=False, records=s)
        if "zzz" in str(r.best_point): raise WrongResult(f"a point of unknown knobs is the best: {r.best_point}")
        with tw.records(TMP / "r.sqlite"):
            k = tw.build([A, C])
        a = rand(16); c = np.zeros(16, "float32"); k(a, c); same(c, a * 2)"""), timeout=180)


def add(P):
    names(P)
    records(P)
