"""tw.compile(..., dynamic=): a batch run in slices on a few compiled sizes, a sequence specialized per
size, both matching eager at sizes never compiled up front; ONNX inputs named with open dimensions;
torch.compile(dynamic=True) built per size; every bad size a ShapeError naming the input and axis."""

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

torch = pytest.importorskip("torch")

import tilewright as tw  # noqa: E402
from tilewright.errors import ShapeError  # noqa: E402

pytestmark = pytest.mark.skipif(not host_runs(AVX2), reason="the host cannot run AVX2 kernels")


class Attention(torch.nn.Module):
    """Self-attention over the sequence (axis 1) of each batch entry, then a per-row projection."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.o = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16), torch.nn.Linear(16, 8)
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x):
        a = torch.softmax(self.q(x) @ self.k(x).transpose(-1, -2) * 0.25, dim=-1)
        return self.o(self.norm(a @ x + x))


@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    torch.manual_seed(0)
    model = Attention().eval()
    batch, seq = tw.Dim("batch", 1, 8), tw.Dim("seq", 4, 32, sizes=(10,))
    module = tw.compile(model, (torch.randn(2, 10, 16),), dynamic={0: {0: batch, 1: seq}}, target=AVX2,
                        records=tmp_path_factory.mktemp("r") / "r.db", progress=False)
    return model, module


def _close(got, want):
    np.testing.assert_allclose(np.asarray(got), want.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_batch_runs_in_slices_on_bucket_kernels(attention):
    model, module = attention
    assert module.split is not None and module.split.name == "batch"
    assert sorted(module.modules) == [(1, 10), (2, 10), (4, 10), (8, 10)]
    for b in (1, 3, 5, 7, 8):
        x = torch.randn(b, 10, 16)
        _close(module(x), model(x))
    assert sorted(module.modules) == [(1, 10), (2, 10), (4, 10), (8, 10)]  # no batch size compiled again
    assert isinstance(module(torch.randn(3, 10, 16)), torch.Tensor)  # torch in, torch out
    _close(module(np.ones((3, 10, 16), np.float32)), model(torch.ones(3, 10, 16)))


def test_a_new_sequence_length_is_compiled_once_and_kept(attention):
    model, module = attention
    x = torch.randn(3, 17, 16)
    plan = module.plan((3, 17))  # from the bucket times at sequence 10
    _close(module(x), model(x))
    assert sorted(k for k in module.modules if k[1] == 17) == sorted({(b, 17) for b, _ in plan})
    n = len(module.modules)
    _close(module(x), model(x))
    assert len(module.modules) == n


def test_threads_reach_every_specialization(attention):
    model, module = attention
    module.set_num_threads(1)
    try:
        x = torch.randn(2, 23, 16)  # a new sequence length, compiled after the call above
        _close(module(x), model(x))
        with pytest.raises(ShapeError, match="positive int"):
            module.set_num_threads(0)
    finally:
        module.set_num_threads(2)


def test_plan_follows_the_measured_bucket_times(attention):
    _, module = attention
    seconds = dict(module.seconds)
    try:
        module.seconds.update({(1, 10): 1.0, (2, 10): 2.0, (4, 10): 4.0, (8, 10): 10.0})
        assert sorted(module.plan((7, 10))) == [(1, 1), (2, 2), (4, 4)]  # batch 8 is slow here: split 7
        module.seconds.update({(8, 10): 5.0})
        assert module.plan((7, 10)) == [(8, 7)]  # one padded call beats three
    finally:
        module.seconds.clear()
        module.seconds.update(seconds)


@pytest.mark.parametrize("shape, match", [
    ((9, 10, 16), r"input 'input0' axis 0 \(batch\) has 9 entries, outside the declared range \[1, 8\]"),
    ((2, 10, 15), r"input 'input0' axis 2 has 15 entries; it is static \(16\)"),
    ((2, 10), "input 'input0' has 2 axes, expected 3"),
])
def test_bad_sizes_are_named(attention, shape, match):
    with pytest.raises(ShapeError, match=match):
        attention[1](np.zeros(shape, np.float32))


def test_dims_shared_by_two_inputs_must_agree(tmp_path):
    class Add(torch.nn.Module):
        def forward(self, a, b):
            return torch.relu(a + b)

    batch = tw.Dim("batch", 1, 4)
    module = tw.compile(Add(), (torch.ones(2, 3), torch.ones(2, 3)), dynamic={0: {0: batch}, 1: {0: batch}},
                        target=AVX2, records=tmp_path / "r.db", progress=False)
    a, b = np.random.rand(3, 3).astype(np.float32), np.random.rand(3, 3).astype(np.float32)
    np.testing.assert_allclose(module(a, b), np.maximum(a + b, 0), rtol=1e-6)
    with pytest.raises(ShapeError, match="input 'input1' axis 0 has 2 entries, but another input's batch has 3"):
        module(a, b[:2])


def test_a_mixing_model_is_specialized_exactly_and_says_why(tmp_path):
    class Center(torch.nn.Module):  # subtracts the mean over the batch: slices depend on each other
        def forward(self, x):
            return x - x.mean(dim=0, keepdim=True)

    module = tw.compile(Center(), (torch.randn(2, 4),), dynamic={0: {0: (1, 6)}}, target=AVX2,
                        records=tmp_path / "r.db", progress=False)
    assert module.split is None and "reduces over the dimension" in module.split_reason
    x = torch.randn(5, 4)
    _close(module(x), Center()(x))
    assert sorted(module.modules) == [(2,), (5,)]


@pytest.mark.parametrize("dynamic, match", [
    ({3: {0: (1, 4)}}, "the model's inputs are 0: input0"),
    ({0: {5: (1, 4)}}, "axis 5 of input 'input0', which has 2 axes"),
    ({0: {0: (0, 4)}}, "1 <= low <= high"),
    ([1, 2], "dynamic= takes"),
])
def test_bad_declarations_are_named(dynamic, match, tmp_path):
    with pytest.raises(ShapeError, match=match):
        tw.compile(torch.nn.ReLU(), (torch.ones(2, 3),), dynamic=dynamic, target=AVX2, records=tmp_path / "r.db",
                   progress=False)


def test_dim_sizes_must_lie_in_its_range():
    with pytest.raises(ShapeError, match=r"Dim 'b': sizes \[8\] must be non-empty and within \[1, 4\]"):
        tw.Dim("b", 1, 4, sizes=(8,))
    assert tw.Dim("b", 1, 12).buckets() == (1, 2, 4, 8, 12)
    assert tw.Dim("s", 3, 20).buckets() == (4, 8, 16, 20)


def test_onnx_model_with_open_dimensions(tmp_path):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Softmax", ["h"], ["y"], axis=-1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 4])], [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    module = tw.compile(model, dynamic={"x": {0: tw.Dim("batch", 1, 4), 1: tw.Dim("seq", 2, 9, sizes=(3,))}},
                        target=AVX2, records=tmp_path / "r.db", progress=False)
    assert sorted(module.modules) == [(1, 3), (2, 3), (4, 3)]
    x = np.random.default_rng(1).standard_normal((3, 7, 8)).astype(np.float32)
    h = x @ w
    want = np.exp(h - h.max(-1, keepdims=True))
    np.testing.assert_allclose(module(x), want / want.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    with pytest.raises(ShapeError, match="open axis 1 that dynamic= does not declare"):
        tw.compile(model, dynamic={"x": {0: (1, 4)}}, target=AVX2, records=tmp_path / "r.db", progress=False)


def test_onnx_inputs_sharing_a_dim_param_share_the_declared_dim(tmp_path):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "mask"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    module = tw.compile(model, dynamic={"x": {0: (1, 4), 1: tw.Dim("seq", 2, 8, sizes=(5,))}}, target=AVX2,
                        records=tmp_path / "r.db", progress=False)
    x, mask = np.random.rand(3, 6).astype(np.float32), np.random.rand(3, 6).astype(np.float32)
    np.testing.assert_allclose(module(x, mask), x * mask, rtol=1e-6)
    with pytest.raises(ShapeError, match="input 'mask' axis 1 has 5 entries, but another input's seq has 6"):
        module(x, mask[:, :5])


def test_torch_compile_dynamic_builds_one_module_per_size(tmp_path):
    import warnings

    from tilewright.graph import torch_backend

    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()
    built = []

    def backend(gm, example_inputs):
        run = torch_backend.tilewright_backend(gm, example_inputs, {"records": str(tmp_path / "r.db")})
        built.append(run)
        return run

    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend, dynamic=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", tw.TilewrightWarning)
        for shape in [(3, 5, 8), (4, 7, 8), (3, 5, 8)]:
            x = torch.randn(*shape)
            _close(compiled(x), model(x))
    assert len(built) == 1 and len(built[0].specializations) == 2
    assert all(getattr(r, "tilewright_partitions", 0) == 1 for r in built[0].specializations.values())


def test_an_output_merging_batch_and_sequence_is_cut_by_its_own_shape(tmp_path):
    class Rows(torch.nn.Module):  # [B, S, 16] -> [B * S, 8]: the batch's inner factor is the sequence
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(16, 8)

        def forward(self, x):
            return self.lin(x).reshape(-1, 8)

    torch.manual_seed(0)
    model = Rows().eval()
    module = tw.compile(model, (torch.randn(2, 4, 16),), dynamic={0: {0: tw.Dim("b", 1, 4), 1: tw.Dim("s", 1, 9)}},
                        target=AVX2, records=tmp_path / "r.db", progress=False)
    for b, s in ((3, 4), (3, 7)):
        x = torch.randn(b, s, 16)
        _close(module(x), model(x))


def test_an_exported_program_brings_its_own_dynamic_dims(tmp_path):
    from torch.export import Dim

    torch.manual_seed(0)
    model = Attention().eval()
    ep = torch.export.export(model, (torch.randn(2, 6, 16),),
                             dynamic_shapes=({0: Dim("batch", min=1, max=4), 1: Dim("seq", min=2, max=32)},))
    module = tw.compile(ep, target=AVX2, records=tmp_path / "r.db", progress=False)
    assert [(d.low, d.high) for d in module.dims] == [(1, 4), (2, 32)] and module.split is module.dims[0]
    x = torch.randn(3, 9, 16)
    _close(module(x), model(x))
    unbounded = torch.export.export(model, (torch.randn(2, 6, 16),), dynamic_shapes=({0: Dim("b")},))
    with pytest.raises(ShapeError, match="has no upper bound; export with Dim"):
        tw.compile(unbounded, target=AVX2, records=tmp_path / "r.db", progress=False)
