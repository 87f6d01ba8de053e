"""RayExecutor: builders as Ray tasks, one runner actor per device, on clusters these tests start and stop
themselves on 127.0.0.1 (a local one, and two simulated nodes with ray.cluster_utils.Cluster)."""

import dataclasses
import math

import numpy as np
import pytest

import tilewright as tw
from tilewright.backends import backend_for
from tilewright.errors import TilewrightError
from tilewright.records import Records
from tilewright.search.options import TuneOptions
from tilewright.search.ray_executor import RayExecutor
from tilewright.search.task import TuningTask
from tilewright.targets import as_target

ray = pytest.importorskip("ray")


def gemm(n=32, k=24, m=48):
    A = tw.placeholder((n, k), "float32", name="A")
    B = tw.placeholder((k, m), "float32", name="B")
    return [A, B, tw.ops.matmul(A, B)]


def tune_at_once(tasks, trials: int) -> None:
    """Each task tuned for `trials` in its own thread, all at once (as one driver may)."""
    import threading

    threads = [threading.Thread(target=t.tune, args=(trials,)) for t in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def options(tmp_path, **kw):
    return TuneOptions(seed=0, progress=False, cost_model="off", log=str(tmp_path / "t.log"), **kw)


def test_an_unreachable_address_is_a_clear_error():
    assert not ray.is_initialized()
    with pytest.raises(TilewrightError, match="cannot reach the Ray cluster at '127.0.0.1:9'"):
        RayExecutor(address="127.0.0.1:9")
    ray.shutdown()


@pytest.fixture(scope="module")
def local():
    from tilewright.build.opencl import opencl_available

    devices = ("cpu",) if opencl_available() else ("cpu", "opencl")  # PoCL: an OpenCL device on this CPU
    with RayExecutor(num_cpus=2, devices=devices) as ex:
        yield ex


def test_tuning_on_a_local_cluster_finds_a_correct_kernel(local, tmp_path):
    tensors = gemm()
    r = tw.tune(tensors, trials=6, seed=0, records=tmp_path / "r.db", progress=False, cost_model="off",
                executor=local)
    assert len(r.history) == 6 and all(t.error_kind == "none" for t in r.history) and math.isfinite(r.best_cost)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(t.shape, dtype=np.float32) for t in tensors[:2])
    out = np.zeros((32, 48), np.float32)
    r.build()(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def test_a_killed_runner_actor_loses_no_measurement(local, tmp_path):
    cpu = as_target("cpu")
    db = Records(tmp_path / "r.db")
    program = gemm(256, 128, 256)  # inputs and reference past Ray's inline limit: restarts rebuild from the store
    with TuningTask(program, cpu, backend_for(cpu), options(tmp_path), db, budget=12, executor=local) as task:
        task.tune(6)
        ray.kill(task.measurer.runner.actor, no_restart=False)  # the device's runner dies between candidates
        task.tune(6)
        assert task.measurer.runner.restarts >= 1
    rows = [r for r in db.query(task.workload, cpu.key) if r.method == "q"]
    searched = [t for t in task.result.history]
    assert len(searched) == 12 and all(t.error_kind == "none" for t in searched)  # the candidate ran again
    assert len({t.point for t in searched}) == 12  # none measured twice, none lost
    assert len(rows) >= 12


def test_a_model_with_several_tasks_tunes_through_one_device(local, tmp_path):
    torch = pytest.importorskip("torch")
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16)).eval()
    x = torch.randn(4, 32)
    module = tw.compile(net, [x], trials=8, records=tmp_path / "r.db", progress=False, cost_model="off",
                        executor=local)  # each task's runner takes the device's one slot in turn
    assert module.tuning["trials"] == 8
    np.testing.assert_allclose(module(x.numpy()), net(x).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_tasks_measuring_at_once_share_the_device_and_never_time_out_in_its_queue(local, tmp_path):
    cpu = as_target("cpu")
    db = Records(tmp_path / "r.db")
    tasks = [TuningTask(gemm(32 + 16 * i), cpu, backend_for(cpu), options(tmp_path, timeout=2.0), db, budget=6,
                        executor=local) for i in range(3)]
    try:
        tune_at_once(tasks, 6)
        spans = sorted(s for t in tasks for s in t.measurer.runner.spans())
        pids = {local.ray.get(t.measurer.runner.actor.pid.remote()) for t in tasks}
    finally:
        for t in tasks:
            t.close()
    assert len(pids) == 1  # one actor for the device, serving every task
    assert all(len(t.result.history) == 6 and all(r.error_kind == "none" for r in t.result.history) for t in tasks)
    assert len(spans) >= 18 and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # timed one at a time


def test_one_driver_tunes_cpu_and_opencl_tasks_at_once_each_on_its_device(local, tmp_path):
    from tilewright.build.opencl import opencl_available

    if opencl_available() is not None:
        pytest.skip(f"no OpenCL: {opencl_available()}")
    db = Records(tmp_path / "r.db")
    targets = [as_target("cpu"), as_target("opencl")]
    tasks = [TuningTask(gemm(), t, backend_for(t), options(tmp_path), db, budget=4, executor=local) for t in targets]
    try:
        tune_at_once(tasks, 4)
        actors = {t.measurer.runner.resource: local.ray.get(t.measurer.runner.actor.pid.remote()) for t in tasks}
    finally:
        for t in tasks:
            t.close()
    assert len(set(actors.values())) == 2  # a runner actor for each device's resource
    for t in tasks:
        assert len(t.result.history) == 4 and all(r.error_kind == "none" for r in t.result.history), t.target.kind
        assert len(db.query(t.workload, t.target.key)) >= 4  # filed under its own target


def test_a_build_worker_with_another_compiler_is_refused_by_name(local, tmp_path):
    from tilewright.runtime.builder import LocalBuilder
    from tilewright.search.ray_executor import RayBuilder, compiler_mismatch

    cpu = as_target("cpu")
    assert compiler_mismatch(cpu) == ""
    other = dataclasses.replace(cpu, compiler_version="gcc (Imaginary) 0.1")
    A, B, C = gemm()
    builder = RayBuilder(ray, LocalBuilder(backend_for(other), other, [A, B, C]), tmp_path)
    with pytest.raises(TilewrightError, match=r"has compiler .* not 'cc' \(gcc \(Imaginary\) 0.1\)"):
        builder.build([tw.create_schedule(C)])


def test_a_target_the_cluster_cannot_run_is_refused_by_name(local, tmp_path):
    other = dataclasses.replace(as_target("cpu"), cores=as_target("cpu").cores + 7)  # another fingerprint
    with pytest.raises(TilewrightError, match="offers no runner for target .* resource 'tilewright-runner:cpu:"):
        TuningTask(gemm(), other, backend_for(other), options(tmp_path), Records(tmp_path / "r.db"),
                   executor=local)
    assert Records(tmp_path / "r.db").count() == 0  # nothing filed under a target no node runs


def test_two_nodes_build_and_one_runs_without_overlap(tmp_path):
    from ray.cluster_utils import Cluster

    ray.shutdown()
    cpu = as_target("cpu")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                             "node_ip_address": "127.0.0.1"})
    try:
        cluster.add_node(num_cpus=1, resources={RayExecutor.resource(cpu): 1}, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
        with RayExecutor(address=cluster.address) as ex:
            with TuningTask(gemm(48), cpu, backend_for(cpu), options(tmp_path), Records(tmp_path / "r.db"),
                            budget=8, executor=ex) as task:
                task.tune(8)
                spans = task.measurer.runner.spans()
            assert all(t.error_kind == "none" for t in task.result.history)
            assert len(spans) >= 8 and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # never overlapping
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_bench_tunes_on_the_cluster_and_times_here(local, tmp_path, capsys):
    from tilewright.cli import main

    db = tmp_path / "r.db"
    assert main(["bench", "flextensor", "--ops", "GEMM", "--cases", "gemm_32", "--trials", "3", "--ray", "local",
                 "--records", str(db), "--out", str(tmp_path), "--no-winograd"]) == 0
    assert Records(db).count() >= 3 and (tmp_path / "flextensor.json").exists()
    assert main(["bench", "flextensor", "--target", "opencl", "--ray", "local", "--out", str(tmp_path)]) == 2
    assert "--ray: bench tunes on a Ray cluster for --target cpu only" in capsys.readouterr().err
