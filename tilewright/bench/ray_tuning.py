"""Tuning on Ray against the local loop (`python -m tilewright.bench.ray_tuning`), on this machine:
- `throughput`: FlexTensor suite layers (default: YOLO C2D), the same seed and budget tuned by the local loop
  and on a two-node Ray cluster simulated on 127.0.0.1 (`ray.cluster_utils.Cluster`: a head node with the
  builders' CPUs, a second node holding the CPU runner's resource); wall clock, the best kernel's median,
  whether any two measurements on the device overlapped (the runner actor's own timestamps), and the two
  best kernels checked against the reference and timed side by side in this process, alternating;
- `kill`: a seeded run whose runner actor is killed at trial `--kill-at`: records, duplicates, lost trials
  and the recovery time (the first measurement after the kill); with `--node`, the whole device node is
  removed once `--kill-at` records are committed (whatever it is doing then) and a new one joins 3 s later;
- `resume`: a driver process tuning on the simulated cluster is killed (SIGKILL) once `--kill-at` records are
  committed; a second driver with the same seed and records finishes the budget: records, duplicates, and
  whether every record of the killed driver is still there;
- `queue`: `--builders` tasks tune one GEMM at once (a driver thread each) through one device with a 1 s
  measurement timeout: every timeout is measured again alone, and one that takes less than the timeout
  alone is spurious (time queued or slowed by builds counted against it); `answered_past_timeout` counts the
  requests whose answer took longer than the timeout from the driver's side (queue included): the
  timeouts a deadline counted from the request would have declared.
Every number is one JSON line; each run starts from empty records and an empty compiled-kernel cache."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time


def _cluster(cpus: int):
    import ray
    from ray.cluster_utils import Cluster

    from ..search.ray_executor import RayExecutor

    ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus, "include_dashboard": False,
                                                             "node_ip_address": "127.0.0.1"})
    _device_node(cluster)
    cluster.wait_for_nodes()
    return cluster, RayExecutor(address=cluster.address)


def _device_node(cluster):
    from ..search.ray_executor import RayExecutor
    from ..targets import as_target

    return cluster.add_node(num_cpus=0, resources={RayExecutor.resource(as_target("cpu")): 1},
                            node_ip_address="127.0.0.1")


def _tune(tensors, trials: int, seed: int, records: str, executor=None):
    from ..backends import backend_for
    from ..search.options import TuneOptions
    from ..search.task import TuningTask
    from ..targets import as_target

    cpu = as_target("cpu")
    opts = TuneOptions(seed=seed, progress=False, early_stop=trials)  # both sides measure every trial
    start = time.perf_counter()
    with TuningTask(tensors, cpu, backend_for(cpu), opts, records, budget=trials, executor=executor) as task:
        task.tune(trials)
        best = task.retime()
        spans = task.measurer.runner.spans() if executor is not None else []
    return task, time.perf_counter() - start, best, spans


def throughput(cases: list[str], trials: int, seed: int) -> None:
    from ..workloads.builders import suite_program

    for case in cases:
        op, name = case.split(":", 1)
        row = {"case": case, "trials": trials, "seed": seed}
        results = {}
        for side in ("local", "ray"):
            with tempfile.TemporaryDirectory(prefix="tw-ray-bench-") as tmp:
                os.environ["TILEWRIGHT_CACHE_DIR"] = tmp  # nothing compiled before
                cluster = ex = None
                if side == "ray":
                    cluster, ex = _cluster(cpus=os.cpu_count() or 2)
                try:
                    task, wall, best, spans = _tune(suite_program(op, name), trials, seed,
                                                    os.path.join(tmp, "r.db"), ex)
                finally:
                    if ex is not None:
                        ex.shutdown()
                        cluster.shutdown()
            results[side] = task.result
            overlaps = sum(a[1] > b[0] for a, b in zip(spans, spans[1:]))
            row[side] = {"wall_s": round(wall, 2), "trials": task.trials, "stopped": task.stopped,
                         "best_ms": round(best * 1e3, 5), "build_s": round(task.build_s, 2),
                         "run_s": round(task.run_s, 2), "errors": task.result.errors}
            if side == "ray":
                row[side]["measurements"], row[side]["overlapping"] = len(spans), overlaps
        row["speedup"] = round(row["local"]["wall_s"] / row["ray"]["wall_s"], 3)
        row["best_ratio"] = round(row["ray"]["best_ms"] / row["local"]["best_ms"], 4)
        row["side_by_side_ratio"] = _side_by_side(results["ray"], results["local"], seed)
        print(json.dumps(row), flush=True)


def _side_by_side(first, second, seed: int, rounds: int = 7) -> float:
    """Median time of `first`'s best kernel over `second`'s, both built again, checked against the NumPy
    reference, then timed in alternating rounds."""
    import numpy as np

    from ..reference import evaluate
    from ..stats import median

    with tempfile.TemporaryDirectory(prefix="tw-ray-bench-") as tmp:
        os.environ["TILEWRIGHT_CACHE_DIR"] = tmp
        kernels = [first.build(), second.build()]
        rng = np.random.default_rng(seed)
        args = first.args
        ins = [rng.standard_normal(t.shape).astype(np.float32) for t in args[:-1]]
        want = evaluate(args[-1], dict(zip(args[:-1], ins)))
        out = np.zeros(args[-1].shape, np.float32)
        for k in kernels:
            out[...] = 0
            k(*ins, out)
            np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)
        times: list[list[float]] = [[], []]
        for _ in range(rounds):
            for i, k in enumerate(kernels):
                times[i].append(k.time(*ins, out, repeat=5).median)
    return round(median(times[0]) / median(times[1]), 4)


def kill(case: str, trials: int, kill_at: int, seed: int, node: bool = False) -> None:
    from ..backends import backend_for
    from ..records import Records
    from ..search.options import TuneOptions
    from ..search.task import TuningTask
    from ..targets import as_target
    from ..workloads.builders import suite_program

    op, name = case.split(":", 1)
    cpu = as_target("cpu")
    with tempfile.TemporaryDirectory(prefix="tw-ray-kill-") as tmp:
        os.environ["TILEWRIGHT_CACHE_DIR"] = tmp
        cluster, ex = _cluster(cpus=os.cpu_count() or 2)
        db = Records(os.path.join(tmp, "r.db"))
        try:
            with TuningTask(suite_program(op, name), cpu, backend_for(cpu), TuneOptions(seed=seed, progress=False,
                            batch=1, early_stop=trials), db, budget=trials, executor=ex) as task:
                if node:
                    recovery = _through_node_loss(cluster, task, db, trials, kill_at)
                else:
                    recovery = _through_actor_kill(ex, task, trials, kill_at)
                restarts = task.measurer.runner.restarts
        finally:
            ex.shutdown()
            cluster.shutdown()
        rows = [r for r in db.query(task.workload, cpu.key) if r.run_id == task.run_id and r.method == "q"]
        points = [r.point for r in rows]
        print(json.dumps({"case": case, "trials": trials, "measured": task.trials, "kill_at": kill_at,
                          "killed": "node" if node else "actor", "records": len(rows),
                          "duplicates": len(points) - len(set(points)), "lost": task.trials - len(set(points)),
                          "errors": task.result.errors, "restarts": restarts,
                          "recovery_s": round(recovery, 2)}), flush=True)


def _through_actor_kill(ex, task, trials: int, kill_at: int) -> float:
    """Kill the runner actor between trial `kill_at` and the next; seconds to the next measurement."""
    task.tune(kill_at)
    ex.ray.kill(task.measurer.runner.actor, no_restart=False)
    killed = time.perf_counter()
    first = task.tune(1)
    recovery = time.perf_counter() - killed
    task.tune(trials - kill_at - len(first))
    return recovery


def _through_node_loss(cluster, task, db, trials: int, kill_at: int) -> float:
    """Remove the device node (not gracefully) once `kill_at` records are committed, whatever it is doing,
    and add a new one 3 s later; seconds from the removal to the next committed measurement. The tuning
    runs in a thread: Ray adds nodes from the main thread only."""
    import threading

    tuning = threading.Thread(target=task.tune, args=(trials,))
    tuning.start()
    while db.count() < kill_at and tuning.is_alive():
        time.sleep(0.05)
    cluster.remove_node(cluster.list_all_nodes()[-1], allow_graceful=False)
    removed = time.time()
    time.sleep(3.0)
    _device_node(cluster)
    tuning.join()
    later = [r.time for r in db.query(task.workload) if r.time > removed]
    return min(later) - removed if later else float("nan")


def drive(address: str, case: str, trials: int, seed: int, records: str) -> None:
    """One driver: tune `case` on the cluster at `address` until `records` hold `trials` of its trials."""
    from ..backends import backend_for
    from ..records import Records
    from ..search.options import TuneOptions
    from ..search.ray_executor import RayExecutor
    from ..search.task import TuningTask
    from ..targets import as_target
    from ..workloads.builders import suite_program

    op, name = case.split(":", 1)
    cpu = as_target("cpu")
    db = Records(records)
    with RayExecutor(address=address) as ex, TuningTask(
            suite_program(op, name), cpu, backend_for(cpu), TuneOptions(seed=seed, progress=False, batch=1,
                                                                        early_stop=trials),
            db, budget=trials, executor=ex) as task:
        done = len([r for r in db.query(task.workload, cpu.key) if r.method == "q"])
        task.tune(trials - done)


def resume(case: str, trials: int, kill_at: int, seed: int) -> None:
    import signal
    import subprocess

    from ..records import Records

    with tempfile.TemporaryDirectory(prefix="tw-ray-resume-") as tmp:
        os.environ["TILEWRIGHT_CACHE_DIR"] = tmp
        records = os.path.join(tmp, "r.db")
        cluster, ex = _cluster(cpus=os.cpu_count() or 2)
        ex.shutdown()
        import ray

        ray.shutdown()  # the drivers are other processes; this one only keeps the cluster
        cmd = [sys.executable, "-m", "tilewright.bench.ray_tuning", "drive", "--address", cluster.address,
               "--cases", case, "--trials", str(trials), "--seed", str(seed), "--records", records]
        try:
            first = subprocess.Popen(cmd)
            db = Records(records)
            while db.count() < kill_at and first.poll() is None:
                time.sleep(0.2)
            first.send_signal(signal.SIGKILL)
            first.wait()
            before = {(r.point, r.run_id) for r in db.query()}
            start = time.perf_counter()
            second = subprocess.run(cmd)
            wall = time.perf_counter() - start
        finally:
            cluster.shutdown()
        rows = [r for r in db.query() if r.method == "q"]
        points = [r.point for r in rows]
        print(json.dumps({"case": case, "trials": trials, "killed_at_records": len(before),
                          "records": len(rows), "duplicates": len(points) - len(set(points)),
                          "kept": len(before & {(r.point, r.run_id) for r in rows}),
                          "runs": len({r.run_id for r in rows}), "second_exit": second.returncode,
                          "second_wall_s": round(wall, 2)}), flush=True)


def _gemm(n: int) -> list:
    from .. import ops, te

    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    return [a, b, ops.matmul(a, b)]


def queue(builders: int, trials: int, size: int, seed: int) -> None:
    import threading

    from ..backends import backend_for
    from ..records import Records
    from ..runtime.measure import Measurer
    from ..search.options import TuneOptions
    from ..search.task import TuningTask
    from ..targets import as_target

    cpu = as_target("cpu")
    with tempfile.TemporaryDirectory(prefix="tw-ray-queue-") as tmp:
        os.environ["TILEWRIGHT_CACHE_DIR"] = tmp
        db = Records(os.path.join(tmp, "r.db"))
        cluster, ex = _cluster(cpus=builders)
        tasks = []
        start = time.perf_counter()
        try:
            for k in range(builders):
                opts = TuneOptions(seed=seed + k, progress=False, batch=1, timeout=1.0, cost_model="off",
                                   early_stop=trials)
                tasks.append(TuningTask(_gemm(size), cpu, backend_for(cpu), opts, db, budget=trials, executor=ex))
            threads = [threading.Thread(target=t.tune, args=(trials,)) for t in tasks]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - start
            spans = sorted(s for t in tasks for s in t.measurer.runner.spans())
            answered = [a for t in tasks for a in t.measurer.runner.answered_s]
            retried = sum(ex.ray.get(t.measurer.runner.actor.retries.remote(t.measurer.runner.id)) for t in tasks)
        finally:
            for t in tasks:
                t.close()
            ex.shutdown()
            cluster.shutdown()
        timeouts = [(t, r) for t in tasks for r in t.result.history if r.error_kind == "timeout"]
        alone = []
        if timeouts:
            task = tasks[0]
            with Measurer(task.outputs, task.args, cpu, backend_for(cpu), timeout=30.0) as m:
                for t, r in timeouts:
                    got = m.measure(t.screen.instantiate([r.point]))[0]
                    alone.append(round(got.run_s, 3))
        durations = sorted(b - a for a, b in spans)
        print(json.dumps({"builders": builders, "trials_each": trials, "gemm": size, "wall_s": round(wall, 1),
                          "measurements": len(spans), "median_measurement_s": round(durations[len(durations) // 2], 3),
                          "max_measurement_s": round(durations[-1], 3),
                          "overlapping": sum(a[1] > b[0] for a, b in zip(spans, spans[1:])),
                          "timeouts": len(timeouts), "timeouts_alone_s": alone, "timeouts_retried": retried,
                          "answered_past_timeout": sum(a > 1.0 for a in answered),
                          "max_answer_s": round(max(answered, default=0.0), 2),
                          "spurious": sum(a < 1.0 for a in alone)}), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["throughput", "kill", "resume", "drive", "queue"])
    ap.add_argument("--cases", default="C2D:yolo_conv2,C2D:yolo_conv6")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--kill-at", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--builders", type=int, default=8, help="queue: tasks tuned at once")
    ap.add_argument("--size", type=int, default=1700, help="queue: the GEMM's n = k = m")
    ap.add_argument("--node", action="store_true", help="kill: remove the whole device node, not only its actor")
    ap.add_argument("--address", help="drive: the cluster's address")
    ap.add_argument("--records", help="drive: the records database")
    a = ap.parse_args(argv)
    case = a.cases.split(",")[0]
    if a.what == "throughput":
        throughput(a.cases.split(","), a.trials, a.seed)
    elif a.what == "kill":
        kill(case, a.trials, a.kill_at, a.seed, a.node)
    elif a.what == "queue":
        queue(a.builders, a.trials, a.size, a.seed)
    elif a.what == "resume":
        resume(case, a.trials, a.kill_at, a.seed)
    else:
        drive(a.address, case, a.trials, a.seed, a.records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
