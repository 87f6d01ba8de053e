import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from graph_cases import (
    PASSTHROUGH_GROUPS,
    RESIDUAL_GROUPS,
    VIEW_READ_LATER_GROUPS,
    attention,
    conv_bias_relu,
    partition,
    passthrough,
    random_inputs,
    residual_block,
    torch_reference,
    view_output_read_later,
)
from synthetic_targets import AVX2, host_runs

from tilewright.graph.module import build_module

CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no system C compiler")


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    exe = tmp_path_factory.mktemp("runner") / "run_model"
    subprocess.run([CC, "-O1", str(Path(__file__).parent / "run_model.c"), "-o", str(exe), "-ldl"], check=True)
    return exe


def run_exported(runner, directory, graph, inputs):
    (directory / "inputs.bin").write_bytes(b"".join(np.ascontiguousarray(a).tobytes() for a in inputs))
    proc = subprocess.run([str(runner), str(directory / "libmodel.so"), str(directory / "inputs.bin"),
                           str(directory / "outputs.bin")], capture_output=True, text=True, cwd="/")
    assert proc.returncode == 0, proc.stderr
    flat = np.fromfile(directory / "outputs.bin", np.float32)
    outs, at = [], 0
    for v in graph.outputs:
        t = graph.type_of(v)
        outs.append(flat[at:at + t.size].reshape(t.shape))
        at += t.size
    return outs


@pytest.mark.parametrize("make,groups", [(residual_block, RESIDUAL_GROUPS), (attention, None),
                                         (passthrough, PASSTHROUGH_GROUPS),
                                         (view_output_read_later, VIEW_READ_LATER_GROUPS)])
def test_exported_library_matches_module_and_torch(tmp_path, runner, make, groups):
    graph = make()
    module = build_module(partition(graph, groups), "cpu")
    inputs = random_inputs(graph)
    want = module(*inputs)
    want = want if isinstance(want, list) else [want]
    d = module.export(tmp_path / "model")
    assert {p.name for p in d.iterdir()} >= {"libmodel.so", "weights.bin", "model.h"}
    assert "tw_model_run" in (d / "model.h").read_text()
    got = run_exported(runner, d, graph, inputs)
    for g, w, t in zip(got, want, torch_reference(graph, inputs)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(g, t, rtol=1e-4, atol=1e-4)


def test_missing_weights_is_an_error_code(tmp_path, runner):
    graph = residual_block()
    d = build_module(partition(graph, RESIDUAL_GROUPS), "cpu").export(tmp_path / "m")
    (d / "weights.bin").unlink()
    (d / "inputs.bin").write_bytes(random_inputs(graph)[0].tobytes())
    proc = subprocess.run([str(runner), str(d / "libmodel.so"), str(d / "inputs.bin"), str(d / "o.bin")],
                          capture_output=True, text=True)
    assert proc.returncode == 7 and "returned -3" in proc.stderr


def test_weights_packed_once_at_build_match_and_export(tmp_path, runner):
    """A conv whose default schedule packs its weights per output-channel block (on a
    pinned AVX2 target): the module packs them once when built and passes the packed
    copy as a constant; the kernel no longer packs, the module and the exported
    library (which carries the packed copy in weights.bin) match PyTorch."""
    if not host_runs(AVX2):
        pytest.skip("the pinned AVX2 target does not run on this host")
    graph = conv_bias_relu(c=32, o=64, h=14, w=14)
    module = build_module(partition(graph), AVX2)
    assert list(module.packed) == ["g2_conv2d.w.global_packed"], "the default point should pack the weight"
    assert "w_global = " not in module._step_kernels[0].source  # no per-call allocation of the pack
    inputs = random_inputs(graph)
    want = torch_reference(graph, inputs)[0]
    np.testing.assert_allclose(module(*inputs), want, rtol=1e-4, atol=1e-4)
    d = module.export(tmp_path / "model")
    (got,) = run_exported(runner, d, graph, inputs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_exported_views_read_their_offsets(tmp_path, runner):
    from graph_cases import slices_and_concat

    from tilewright.graph.fusion import fuse
    from tilewright.graph.reference import run_reference

    graph = slices_and_concat()
    module = build_module(fuse(graph), "cpu")
    assert module.plan.view_offsets  # the case this test is for
    inputs = random_inputs(graph)
    got = run_exported(runner, module.export(tmp_path / "model"), graph, inputs)
    np.testing.assert_allclose(got[0], module(*inputs), rtol=1e-6)
    np.testing.assert_allclose(got[0], run_reference(graph, inputs)[0], rtol=1e-6)


def test_kernel_temporaries_lie_in_the_arena(tmp_path, runner):
    """A conv whose default schedule pads its whole input first (pinned AVX2 target): the
    padded copy is a workspace argument placed by the memory plan, live for that kernel
    only, not allocated by the kernel on each call and not counted on top of the arena;
    the module and its export match PyTorch."""
    if not host_runs(AVX2):
        pytest.skip("the pinned AVX2 target does not run on this host")
    graph = conv_bias_relu(c=32, o=32, h=28, w=28)
    module = build_module(partition(graph), AVX2)
    (name, (_, nbytes)), = module._workspace.items()  # (its step, bytes)
    assert nbytes == 32 * 30 * 30 * 4 and name in module.plan.buffers and name in module.steps[0].values
    assert "aligned_alloc" not in module._step_kernels[0].source
    assert module.peak_bytes < module.plan.peak_bytes + sum(t.nbytes for t in module.output_types) + nbytes
    inputs = random_inputs(graph)
    want = torch_reference(graph, inputs)[0]
    np.testing.assert_allclose(module(*inputs), want, rtol=1e-4, atol=1e-4)
    (got,) = run_exported(runner, module.export(tmp_path / "model"), graph, inputs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_load_runs_what_export_wrote(tmp_path):
    import tilewright as tw

    graph = residual_block()
    module = build_module(partition(graph, RESIDUAL_GROUPS), "cpu")
    module.set_num_threads(1)
    loaded = tw.load(module.export(tmp_path / "m"))
    inputs = random_inputs(graph)
    np.testing.assert_array_equal(loaded(*inputs), module(*inputs))
    loaded.set_num_threads(2)
    torch = pytest.importorskip("torch")
    got = loaded(*(torch.from_numpy(a) for a in inputs))
    assert isinstance(got, torch.Tensor) and np.array_equal(got.numpy(), module(*inputs))
    with pytest.raises(tw.ShapeError, match="input '.*' is float32\\[1\\], expected float32"):
        loaded(*(np.zeros(1, np.float32) for _ in inputs))
    with pytest.raises(tw.ShapeError, match="not an exported model .* missing: libmodel.so, weights.bin, model.json"):
        tw.load(tmp_path)
