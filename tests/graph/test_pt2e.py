"""PT2E-quantized PyTorch models (torchao's prepare_pt2e / convert_pt2e with the x86 quantizer): the
`quantized_decomposed` quantize / dequantize ops around each layer become the graph's, fold_qdq turns
each quantized convolution into one int8 `qconv2d`, and the compiled module matches the converted
model, which computes the same quantization in float."""

import collections
import importlib
import warnings

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

import tilewright as tw
from tilewright.graph.frontend.builder import UnsupportedOpError

torch = pytest.importorskip("torch")
pytest.importorskip("torchao")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq  # noqa: E402
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e  # noqa: E402

from tilewright.graph.frontend.torch import from_torch  # noqa: E402

optimize = importlib.import_module("tilewright.graph.optimize")
reference = importlib.import_module("tilewright.graph.reference")

runs_avx2 = pytest.mark.skipif(not host_runs(AVX2), reason="the host cannot run AVX2 kernels")


def _pt2e(model, shape, seed=0):
    torch.manual_seed(seed)
    x = torch.randn(*shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exported = torch.export.export(model.eval(), (x,)).module()
        quantizer = xiq.X86InductorQuantizer()
        quantizer.set_global(xiq.get_default_x86_inductor_quantization_config())
        prepared = prepare_pt2e(exported, quantizer)
        for _ in range(4):
            prepared(torch.randn(*shape))
        return convert_pt2e(prepared), x


def _cnn():
    return torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 1),
                               torch.nn.ReLU(), torch.nn.Conv2d(16, 8, 3, stride=2, padding=1), torch.nn.Flatten(),
                               torch.nn.Linear(8 * 5 * 5, 10))


def test_every_quantized_convolution_becomes_an_int8_kernel():
    converted, x = _pt2e(_cnn(), (1, 8, 9, 9))
    graph = from_torch(converted, (x,))
    ops = collections.Counter(n.op for n in optimize.optimize(graph).nodes)
    assert ops["qconv2d"] == 3 and ops["conv2d"] == 0, ops


@runs_avx2
@pytest.mark.parametrize("layout", ["NCHW", "NCHWc"])
def test_the_compiled_module_matches_the_converted_model(layout):
    converted, x = _pt2e(_cnn(), (1, 8, 9, 9), seed=1)
    graph = from_torch(converted, (x,))
    module = tw.compile(graph, [x.numpy()], target=AVX2, layout=layout, progress=False)
    for seed in (2, 3):
        xt = torch.randn(1, 8, 9, 9, generator=torch.Generator().manual_seed(seed))
        ours = np.asarray(module(xt.numpy()))
        want = reference.run_reference(optimize.optimize(graph), [xt.numpy()])[0]
        np.testing.assert_allclose(ours, want, rtol=0, atol=1e-5 * np.abs(want).max())
        theirs = converted(xt).detach().numpy()
        # PyTorch rounds x * (1 / scale), the graph x / scale: an element may land one step apart
        assert np.abs(ours - theirs).max() <= 0.05 * np.abs(theirs).max()


def test_a_reduced_quantization_range_is_refused_by_name():
    class Narrow(torch.nn.Module):
        def forward(self, x):
            q = torch.ops.quantized_decomposed.quantize_per_tensor(x, 0.1, 0, 0, 127, torch.uint8)
            return torch.ops.quantized_decomposed.dequantize_per_tensor(q, 0.1, 0, 0, 127, torch.uint8)

    with pytest.raises(UnsupportedOpError, match=r"clamps to \[0, 127\].*whole uint8 range"):
        from_torch(Narrow(), (torch.randn(2, 4),))


class _Residual(torch.nn.Module):
    """conv -> relu -> conv + x -> relu: PT2E's x86 quantizer puts no quantize between the second conv and
    the add, so that conv's kernel writes its dequantized float32 result and the add is its epilogue."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.b = torch.nn.Conv2d(16, 16, 1)

    def forward(self, x):
        return torch.relu(self.b(torch.relu(self.a(x))) + x)


@runs_avx2
def test_a_convolution_before_a_residual_add_runs_in_int8_with_a_float_epilogue():
    converted, x = _pt2e(_Residual(), (1, 16, 8, 8), seed=4)
    graph = from_torch(converted, (x,))
    folded = optimize.optimize(graph)
    convs = [n for n in folded.nodes if n.op == "qconv2d"]
    assert len(convs) == 2 and not any(n.op == "conv2d" for n in folded.nodes)
    assert sorted(n.attr("out_dtype") for n in convs) == ["float32", "uint8"]
    module = tw.compile(graph, [x.numpy()], target=AVX2, layout="NCHWc", progress=False)
    ours = np.asarray(module(x.numpy()))
    want = reference.run_reference(folded, [x.numpy()])[0]
    theirs = converted(x).detach().numpy()
    np.testing.assert_allclose(ours, want, rtol=0, atol=1e-4 * np.abs(want).max())
    assert np.abs(ours - theirs).max() <= 0.05 * np.abs(theirs).max()
