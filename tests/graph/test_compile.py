import math

import numpy as np
import pytest
from graph_cases import attention, conv_bias_relu, random_inputs, residual_block, torch_reference
from synthetic_targets import AVX2, host_runs

import tilewright as tw
from tilewright.graph.compile import compile as tw_compile


@pytest.mark.parametrize("make", [conv_bias_relu, residual_block, attention])
def test_compile_graph_default_schedules(make, tmp_path):
    graph = make()
    module = tw_compile(graph, trials=0, records=tmp_path / "r.db")
    inputs = random_inputs(graph)
    np.testing.assert_allclose(module(*inputs), torch_reference(graph, inputs)[0], rtol=1e-4, atol=1e-4)
    assert len(module.steps) <= len([n for n in graph.nodes if n.op != "constant"])


def test_compile_torch_module(tmp_path):
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(4)
            self.fc = torch.nn.Linear(4, 5)

        def forward(self, x):
            y = torch.relu(self.bn(self.conv(x)))
            return self.fc(y.mean((2, 3)))

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(1, 3, 6, 6)
    module = tw_compile(net, (x,), trials=0, records=tmp_path / "r.db", progress=False)
    with torch.no_grad():
        want = net(x).numpy()
    np.testing.assert_allclose(module(x.numpy()), want, rtol=1e-4, atol=1e-4)


def _pinned():
    """The synthetic AVX2 target the tests below compile for (skipped where the host cannot run it)."""
    if not host_runs(AVX2):
        pytest.skip("the host cannot run AVX2 kernels")
    return AVX2


def _small_net(torch):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(4 * 6 * 6, 5)).eval()
    x = torch.randn(1, 3, 6, 6)
    with torch.no_grad():
        return net, x, net(x).numpy()


def test_compile_an_exported_program(tmp_path):
    torch = pytest.importorskip("torch")
    net, x, want = _small_net(torch)
    module = tw_compile(torch.export.export(net, (x,)), trials=0, records=tmp_path / "r.db", progress=False,
                        target=_pinned())
    np.testing.assert_allclose(module(x.numpy()), want, rtol=1e-4, atol=1e-4)


def test_torch_tensors_in_and_out(tmp_path):
    torch = pytest.importorskip("torch")
    net, x, want = _small_net(torch)
    module = tw_compile(net, (x,), trials=0, records=tmp_path / "r.db", progress=False, target=_pinned())
    y = module(x.clone().requires_grad_(True))
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4)
    assert isinstance(module(x.numpy()), np.ndarray)
    with pytest.raises(tw.ShapeError, match="input '.*' is on meta; this module runs on the CPU"):
        module(torch.empty(1, 3, 6, 6, device="meta"))


def test_compile_an_onnx_file_or_model_proto(tmp_path):
    torch = pytest.importorskip("torch")
    onnx = pytest.importorskip("onnx")
    net, x, want = _small_net(torch)
    path = tmp_path / "net.onnx"
    torch.onnx.export(net, (x,), str(path), dynamo=False, opset_version=17)
    for model in (path, str(path), onnx.load(str(path))):
        module = tw_compile(model, trials=0, records=tmp_path / "r.db", progress=False, target=_pinned())
        np.testing.assert_allclose(module(x.numpy()), want, rtol=1e-4, atol=1e-4)


def test_compile_rejects_other_objects_and_bad_files(tmp_path):
    with pytest.raises(tw.ShapeError, match="a tilewright Graph, a torch.nn.Module, a torch ExportedProgram, an ONNX"):
        tw_compile(object())
    with pytest.raises(tw.ShapeError, match=r"must name an ONNX file \(\*.onnx\), got '.*model.txt'"):
        tw_compile(tmp_path / "model.txt")
    with pytest.raises(tw.ShapeError, match="no ONNX file at '.*missing.onnx'"):
        tw_compile(tmp_path / "missing.onnx")
    pytest.importorskip("onnx")
    (tmp_path / "truncated.onnx").write_bytes(b"\x08\x07\x12\x05junk\xff\xff")
    with pytest.raises(tw.ShapeError, match="could not read the ONNX model '.*truncated.onnx'"):
        tw_compile(tmp_path / "truncated.onnx")


def test_scheduler_spends_budget_and_reuses_records(tmp_path, capsys):
    from graph_cases import dense_gelu, partition

    from tilewright.graph.scheduler import tune_tasks
    from tilewright.graph.tasks import extract_tasks

    graph = dense_gelu()
    tasks = extract_tasks(partition(graph))
    db = tmp_path / "r.db"
    out = tune_tasks(tasks, "cpu", trials=6, records=db, slice_trials=2, seed=0, model="mlp")
    assert out["trials"] <= 6 and out["trials"] > 0
    assert all(math.isfinite(t.best_cost) for t in tasks)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tuning mlp" in err  # one progress line per model
    again = extract_tasks(partition(graph))
    out2 = tune_tasks(again, "cpu", trials=6, records=db, progress=False)  # the same budget again: all reused
    assert out2["trials"] == 0 and out2["reused"] >= out["trials"]
    assert all(math.isfinite(t.best_cost) for t in again)
    # another model sharing these tasks and adding an untuned one gets its whole budget
    bigger = extract_tasks(partition(graph)) + extract_tasks(partition(conv_bias_relu()))
    out3 = tune_tasks(bigger, "cpu", trials=4, records=db, slice_trials=2, progress=False)
    assert out3["trials"] == 4 and out3["reused"] >= out["trials"]
    # the store counts what each model spent: the same budget again measures nothing, a larger one the rest
    assert tune_tasks(bigger, "cpu", trials=4, records=db, progress=False)["trials"] == 0
    assert tune_tasks(bigger, "cpu", trials=7, records=db, slice_trials=2, progress=False)["trials"] == 3


def test_the_command_compiles_an_onnx_file(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    from tilewright.cli import main

    net, x, want = _small_net(torch)
    torch.onnx.export(net, (x,), str(tmp_path / "net.onnx"), dynamo=False, opset_version=17)
    out = tmp_path / "lib"
    assert main(["compile", str(tmp_path / "net.onnx"), "--out", str(out), "--records", str(tmp_path / "r.db"),
                 "--quiet"]) == 0
    assert (out / "model.h").is_file() and "0 new trials" in capsys.readouterr().out
    if host_runs(AVX2):  # the Linear layer on a template, exported with its packed weights
        tpl = tmp_path / "lib_templates"
        assert main(["compile", str(tmp_path / "net.onnx"), "--out", str(tpl), "--records", str(tmp_path / "r.db"),
                     "--quiet", "--kernels", "templates"]) == 0
        np.testing.assert_allclose(tw.load(tpl)(x.numpy()), want, rtol=1e-4, atol=1e-4)
        capsys.readouterr()
    assert main(["compile", str(tmp_path / "absent.onnx"), "--out", str(out)]) == 2
    assert "no ONNX file at" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith(f"tilewright {tw.__version__}")


def test_rounding_and_trigonometric_ops_from_torch(tmp_path):
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def forward(self, x):
            y = torch.abs(x) + 0.5
            return torch.log(y) + torch.floor(x) * torch.ceil(x) + torch.round(x * 3) + torch.sin(x) * torch.cos(x) \
                + torch.reciprocal(y)

    x = torch.randn(2, 3, 8) * 2
    module = tw_compile(Net(), (x,), trials=0, records=tmp_path / "r.db", progress=False, target=_pinned())
    np.testing.assert_allclose(module(x.numpy()), Net()(x).numpy(), rtol=1e-5, atol=1e-5)


def test_float_only_ops_refuse_integers():
    from tilewright.graph.infer import infer_node
    from tilewright.graph.ir import Node, TensorType

    with pytest.raises(tw.ShapeError, match="takes floating-point input, got int32"):
        infer_node(Node("log", ("x",), ("y",), {}, name="l"), [TensorType((3,), "int32")])


@pytest.mark.parametrize("kw", [dict(stride=2, padding=1, output_padding=1), dict(stride=1, dilation=2, groups=2)])
def test_transposed_convolution_from_torch(kw, tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.ConvTranspose2d(4, 6, 3, **kw), torch.nn.ReLU()).eval()
    x = torch.randn(1, 4, 5, 7)
    module = tw_compile(net, (x,), trials=0, records=tmp_path / "r.db", progress=False, target=_pinned())
    with torch.no_grad():
        np.testing.assert_allclose(module(x.numpy()), net(x).numpy(), rtol=1e-4, atol=1e-5)


def test_constant_subgraphs_are_folded_by_torch(tmp_path):
    """An arange and index arithmetic on buffers (position ids, as transformers models write them)
    read no input: torch evaluates them at import and they become constants."""
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.randn(10, 6))

        def forward(self, x):
            pos = torch.arange(2, 8)
            rows = torch.gather(self.table, 0, pos[:, None].expand(6, 6))
            return x * rows + torch.arange(6, dtype=torch.float32)

    net, x = Net().eval(), torch.randn(6, 6)
    module = tw_compile(net, (x,), trials=0, records=tmp_path / "r.db", progress=False, target=_pinned())
    np.testing.assert_allclose(module(x.numpy()), net(x).numpy(), rtol=1e-6)


def test_embedding_rows_and_ids_checked_before_any_kernel(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Embedding(50, 8), torch.nn.Linear(8, 3)).eval()
    ids = torch.tensor([[3, 0, 49, 7]])
    module = tw_compile(net, (ids,), trials=0, records=tmp_path / "r.db", progress=False, target=_pinned())
    with torch.no_grad():
        np.testing.assert_allclose(module(ids.numpy()), net(ids).numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(tw.ShapeError, match="holds id 50, outside \\[0, 50\\) of the 50-row table"):
        module(np.array([[3, 0, 50, 7]]))


def test_masked_softmax_gives_zero_rows_and_other_rows_unchanged():
    x = tw.placeholder((3, 5), "float32", name="x")
    y = tw.ops.softmax(x, 1, masked_rows_zero=True)
    plain = tw.ops.softmax(x, 1, name="plain")
    a = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    a[1] = -np.inf
    a[2, :3] = -np.inf
    got, want = np.zeros((3, 5), np.float32), np.zeros((3, 5), np.float32)
    tw.build([x, y], target="cpu")(a, got)
    tw.build([x, plain], target="cpu")(a, want)
    assert np.array_equal(got[1], np.zeros(5)) and np.isnan(want[1]).all()
    np.testing.assert_array_equal(got[[0, 2]], want[[0, 2]])
    np.testing.assert_allclose(got, tw.evaluate(y, {x: a}), rtol=1e-6)


def test_a_boolean_mask_outside_the_attention_guard_is_refused(tmp_path):
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.where(x == float("-inf"), torch.zeros_like(x), x)

    with pytest.raises(tw.TilewrightError, match="only as the fully-masked-row guard of an attention softmax"):
        tw_compile(Net(), (torch.randn(2, 3),), trials=0, records=tmp_path / "r.db", progress=False, target=_pinned())


def test_small_integer_powers_are_products(tmp_path):
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.pow(x, 3.0) + torch.pow(x, 2) + torch.pow(x, 1.5)

    x = torch.rand(2, 8) + 0.5
    module = tw_compile(Net(), (x,), trials=0, records=tmp_path / "r.db", progress=False, target=_pinned())
    assert sum(n.op == "pow" for n in module.graph.nodes) == 1  # only x ** 1.5 calls pow
    np.testing.assert_allclose(module(x.numpy()), Net()(x).numpy(), rtol=1e-6)


def test_compile_tunes_into_the_enclosing_records_context(tmp_path):
    graph = conv_bias_relu()
    db = tmp_path / "ctx.db"
    with tw.records(db):
        module = tw_compile(graph, trials=4, progress=False, cost_model="off")
    assert module.tuning["trials"] == 4
    assert tw.records(db).count() >= 4  # not the user cache
