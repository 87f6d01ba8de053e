"""from_torch: every in-tree model (reduced) becomes a graph of opset ops whose
NumPy reference run matches PyTorch eager; transposes fold into dense weights;
an unsupported op is an error naming it."""

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tilewright.graph.frontend import UnsupportedOpError, from_torch  # noqa: E402
from tilewright.graph.infer import infer_types  # noqa: E402
from tilewright.graph.reference import run_reference  # noqa: E402
from tilewright.models import MODELS  # noqa: E402


def _eager(module, *xs):
    with torch.no_grad():
        out = module(*xs)
    return [o.numpy() for o in (out if isinstance(out, (tuple, list)) else (out,))]


def _check(graph, module, *xs, rtol=1e-4):
    graph.check()
    inferred = infer_types(graph)
    assert {v: inferred.types[v] for v in graph.types} == graph.types
    got = run_reference(graph, [x.numpy() for x in xs])
    for g, want in zip(got, _eager(module, *xs), strict=True):
        assert g.shape == want.shape
        np.testing.assert_allclose(g, want, rtol=rtol, atol=rtol * np.abs(want).max())


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_eager(name):
    spec = MODELS[name]
    model, x = spec.build(reduced=True), spec.example_input(reduced=True)
    graph = from_torch(model, (x,))
    assert graph.inputs == ("input0",)
    assert graph.types["input0"].shape == spec.reduced_shape
    for v, a in graph.constants.items():
        assert a.dtype == np.float32, v
    _check(graph, model, x)


@pytest.mark.parametrize("name", ["resnet18", "bert_layer"])
def test_export_ops_without_decomposition(name):
    spec = MODELS[name]
    model, x = spec.build(reduced=True), spec.example_input(reduced=True)
    _check(from_torch(model, x, decompose=False), model, x)


def test_dense_weight_transpose_is_folded_and_identities_dropped():
    spec = MODELS["mobilenet_v2"]
    graph = from_torch(spec.build(reduced=True), (spec.example_input(reduced=True),))
    ops = [n.op for n in graph.nodes]
    assert "permute" not in ops  # addmm's weight.t() folds into dense's [N, K] weight
    dense = next(n for n in graph.nodes if n.op == "dense")
    assert graph.is_constant(dense.inputs[1]) and graph.types[dense.inputs[1]].shape == (10, 64)
    assert ops.count("conv2d") == 13 and ops.count("batch_norm") == 13 and ops.count("clip") == 9
    conv = next(n for n in graph.nodes if n.op == "conv2d")
    assert conv.attr("padding") == (1, 1, 1, 1) and conv.attr("stride") == (2, 2)


class _Mixed(torch.nn.Module):
    def forward(self, x, y):
        a = torch.add(x, y, alpha=2.0) * 0.5 - 1.0
        b = torch.nn.functional.leaky_relu(a, 0.2) / 3.0 + torch.clamp(y, -0.5, 0.5)
        c = torch.cat([b, torch.sigmoid(x)], dim=1).transpose(1, 2)
        d = torch.nn.functional.pad(c, (1, 0, 0, 2)) ** 2
        e = torch.nn.functional.avg_pool2d(x.unsqueeze(0), 2)
        return torch.tanh(d).mean(dim=-1), e, torch.nn.functional.gelu(x, approximate="tanh")


def test_scalars_alpha_and_multiple_inputs_outputs():
    m = _Mixed()
    x, y = torch.randn(2, 4, 6), torch.randn(2, 4, 6)
    graph = from_torch(m, (x, y))
    assert graph.inputs == ("input0", "input1") and len(graph.outputs) == 3
    _check(graph, m, x, y)


class _Buffers(torch.nn.Module):
    """In-place ops, a non-persistent buffer, a tensor made in forward, 'same' padding, composite ops."""

    def __init__(self):
        super().__init__()
        self.conv, self.relu = torch.nn.Conv2d(3, 4, 3, padding="same"), torch.nn.ReLU(inplace=True)
        self.register_buffer("k", torch.randn(4, generator=torch.Generator().manual_seed(0)), persistent=False)

    def forward(self, x):
        y = self.relu(self.conv(x))
        y += torch.tensor([1.0, 2.0, 3.0, 4.0]).view(1, 4, 1, 1)
        z = y.float() * self.k.view(1, 4, 1, 1) * torch.rsqrt(y.abs() + 1)
        return z.sum(dim=(2, 3)), x.sum()


def test_inplace_buffers_lifted_constants_and_composites():
    m, x = _Buffers(), torch.randn(1, 3, 8, 8)
    graph = from_torch(m, (x,))
    assert sum(n.op == "constant" for n in graph.nodes) >= 4
    _check(graph, m, x)


class _Slices(torch.nn.Module):
    """Python slicing: strides, negative and open ends, a full slice (dropped)."""

    def forward(self, x):
        return x[:, :, ::2, 1::3] * 2, x[:, 1:-1, :, :]


def test_slicing_becomes_slice_ops():
    m, x = _Slices(), torch.randn(1, 4, 7, 8)
    graph = from_torch(m, (x,))
    assert [n.attr("step") for n in graph.nodes if n.op == "slice"].count((1, 1, 1, 3)) == 1
    _check(graph, m, x)


class _Sort(torch.nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=-1).values


class _FFT(torch.nn.Module):
    def forward(self, x):
        return torch.fft.rfft(x).abs()


@pytest.mark.parametrize("module,op", [(_Sort(), "aten.sort"), (_FFT(), "aten._fft_r2c")])
def test_unsupported_op_names_op_node_and_supported_set(module, op):
    with pytest.raises(UnsupportedOpError) as err:
        from_torch(module, (torch.randn(2, 8),))
    msg = str(err.value)
    assert op in msg and "node '" in msg and "supported:" in msg and "aten.convolution" in msg


def test_importing_tilewright_imports_neither_torch_nor_onnx():
    code = ("import sys, tilewright, tilewright.graph.frontend, tilewright.models; "
            "assert 'torch' not in sys.modules and 'onnx' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
