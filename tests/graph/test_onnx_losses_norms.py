"""ONNX's losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) and normalizations (RMS, Instance, Group,
MeanVariance, Lp, LRN, Hardmax) compile and match ONNX's definitions: the spec's own NumPy generators for the
losses, LRN and LpNormalization (the reference evaluator's LRN walks the batch axis, its L1 norm drops the absolute
value), onnx's ReferenceEvaluator for the rest. Forms outside the spec are refused by name."""

import numpy as np
import pytest
from synthetic_targets import AVX2, host_runs

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.backend.test.case.node.negativeloglikelihoodloss import compute_negative_log_likelihood_loss  # noqa: E402
from onnx.backend.test.case.node.softmax_cross_entropy_loss import softmaxcrossentropy  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import tilewright as tw  # noqa: E402
from tilewright.graph.frontend import UnsupportedOpError, from_onnx  # noqa: E402

pytestmark = pytest.mark.skipif(not host_runs(AVX2), reason="the host cannot run AVX2 kernels")

_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
          np.dtype(np.int64): TensorProto.INT64, np.dtype(np.int32): TensorProto.INT32}


def _model(node, inputs: dict, n_out=1, opset=22, inits=()):
    """A one-node model whose inputs are `inputs` (name -> example array), outputs left to shape inference."""
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, _TYPES[v.dtype], v.shape)
                                        for k, v in inputs.items()],
                          [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in node.output[:n_out]],
                          [numpy_helper.from_array(a, k) for k, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _run(model, inputs: dict, tmp_path):
    module = tw.compile(model, list(inputs.values()), target=AVX2, records=tmp_path / "r.db", progress=False)
    got = module(*inputs.values())
    return got if isinstance(got, (list, tuple)) else [got]


def _reference(model, inputs: dict):
    return ReferenceEvaluator(model).run(None, inputs)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [None, 1, -3, 9])
def test_negative_log_likelihood_loss_matches_the_spec(reduction, weighted, ignore_index, tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 2, 3)).astype(np.float32)
    target = rng.integers(0, 4, (3, 2, 3)).astype(np.int64)
    if ignore_index is not None:
        target[0, 0, :] = ignore_index  # out-of-range ignore indices gather nothing
    inputs = {"x": x, "target": target}
    if weighted:
        inputs["w"] = rng.uniform(0.5, 2.0, 4).astype(np.float32)
    attrs = {"reduction": reduction} | ({} if ignore_index is None else {"ignore_index": ignore_index})
    node = helper.make_node("NegativeLogLikelihoodLoss", list(inputs), ["loss"], **attrs)
    (got,) = _run(_model(node, inputs), inputs, tmp_path)
    want = compute_negative_log_likelihood_loss(x, target, inputs.get("w"), reduction, ignore_index)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_labels_are_read_at_run_time(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    weight = np.array([1.0, 2.0, 0.5, 3.0, 1.5], np.float32)  # an initializer, as trained models store it
    first, second = np.array([0, 1, 2, 3], np.int32), np.array([4, -1, 4, 0], np.int32)
    inputs = {"x": x, "target": first}
    node = helper.make_node("NegativeLogLikelihoodLoss", ["x", "target", "w"], ["loss"], reduction="mean",
                            ignore_index=-1)
    model = _model(node, inputs, inits=[("w", weight)])
    module = tw.compile(model, [x, first], target=AVX2, records=tmp_path / "r.db", progress=False)
    for target in (first, second):
        want = compute_negative_log_likelihood_loss(x, target, weight, "mean", -1)
        np.testing.assert_allclose(module(x, target), want, rtol=1e-5)


@pytest.mark.parametrize("reduction,weighted,ignore_index,shape", [
    ("mean", False, None, (3, 5)), ("none", True, None, (3, 5)), ("sum", False, 2, (2, 4, 3)),
    ("mean", True, -1, (2, 4, 3, 2)), ("mean", False, 0, (3, 5, 2))])
@pytest.mark.parametrize("log_prob", [False, True])
def test_softmax_cross_entropy_loss_matches_the_spec(reduction, weighted, ignore_index, shape, log_prob, tmp_path):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    x.flat[0] = 90.0  # exp overflows float32 unless shifted by the maximum
    target = rng.integers(0, shape[1], (shape[0], *shape[2:])).astype(np.int64)
    if ignore_index is not None:
        target.flat[1] = ignore_index
    inputs = {"x": x, "target": target}
    if weighted:
        inputs["w"] = rng.uniform(0.5, 2.0, shape[1]).astype(np.float32)
    attrs = {"reduction": reduction} | ({} if ignore_index is None else {"ignore_index": ignore_index})
    outputs = ["loss", "log_prob"] if log_prob else ["loss"]
    node = helper.make_node("SoftmaxCrossEntropyLoss", list(inputs), outputs, **attrs)
    got = _run(_model(node, inputs, len(outputs), opset=13), inputs, tmp_path)
    # in float64: the spec's log(softmax) loses digits where a probability is denormal in float32
    w64 = inputs["w"].astype(np.float64) if weighted else None
    want = softmaxcrossentropy(x.astype(np.float64), target, w64, reduction, ignore_index, get_log_prob=log_prob)
    want = want if log_prob else (want,)
    assert len(got) == len(outputs)
    for g, w in zip(got, want):
        assert g.shape == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axis,epsilon,dtype", [(-1, 1e-5, np.float32), (1, 0.1, np.float32),
                                                (0, 1e-5, np.float32), (-2, 1e-5, np.float16)])
def test_rms_normalization_matches_onnx(axis, epsilon, dtype, tmp_path):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 3, 4)) * 3).astype(dtype)
    scale = rng.standard_normal(x.shape[axis:]).astype(dtype)
    inputs = {"x": x, "scale": scale}
    node = helper.make_node("RMSNormalization", ["x", "scale"], ["y"], axis=axis, epsilon=epsilon)
    model = _model(node, inputs, opset=23)
    (got,) = _run(model, inputs, tmp_path)
    assert got.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 5e-3
    np.testing.assert_allclose(got.astype(np.float32), _reference(model, inputs)[0].astype(np.float32), rtol=tol,
                               atol=tol)


@pytest.mark.parametrize("shape,epsilon", [((2, 3, 4, 5), 1e-5), ((1, 2, 6), 0.5)])
def test_instance_normalization_matches_onnx(shape, epsilon, tmp_path):
    rng = np.random.default_rng(4)
    inputs = {"x": (rng.standard_normal(shape) * 2 + 1).astype(np.float32),
              "s": rng.standard_normal(shape[1]).astype(np.float32),
              "b": rng.standard_normal(shape[1]).astype(np.float32)}
    model = _model(helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=epsilon), inputs)
    np.testing.assert_allclose(_run(model, inputs, tmp_path)[0], _reference(model, inputs)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("groups,opset,epsilon", [(2, 21, 1e-5), (3, 21, 0.1), (1, 21, 1e-5), (6, 21, 1e-5),
                                                  (2, 18, 1e-5)])
def test_group_normalization_matches_onnx(groups, opset, epsilon, tmp_path):
    rng = np.random.default_rng(5)
    per = 6 if opset >= 21 else groups  # opset 18 scales and shifts per group
    inputs = {"x": (rng.standard_normal((2, 6, 3, 2)) * 2 + 1).astype(np.float32),
              "s": rng.standard_normal(per).astype(np.float32), "b": rng.standard_normal(per).astype(np.float32)}
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups, epsilon=epsilon)
    model = _model(node, inputs, opset=opset)
    np.testing.assert_allclose(_run(model, inputs, tmp_path)[0], _reference(model, inputs)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axes,constant", [(None, np.s_[:, 1]), ([1], np.s_[0, :, 0, 0]), ([0, 2], np.s_[:, 0, :, 1])])
def test_mean_variance_normalization_matches_onnx(axes, constant, tmp_path):
    rng = np.random.default_rng(6)
    inputs = {"x": (rng.standard_normal((3, 2, 4, 2)) + 2).astype(np.float32)}
    inputs["x"][constant] = 2.5  # no variance: epsilon keeps 0 / 0 away
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"], **({} if axes is None else {"axes": axes}))
    model = _model(node, inputs, opset=13)
    np.testing.assert_allclose(_run(model, inputs, tmp_path)[0], _reference(model, inputs)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("p,axis", [(1, -1), (2, 0), (2, 1), (1, 1)])
def test_lp_normalization_matches_the_spec(p, axis, tmp_path):
    x = np.random.default_rng(7).standard_normal((3, 4, 2)).astype(np.float32)
    x[1, :, 0] = 0.0  # a zero norm along axis 1 gives zeros
    x[0, 0, :] = 0.0  # ... and along the last axis
    inputs = {"x": x}
    (got,) = _run(_model(helper.make_node("LpNormalization", ["x"], ["y"], p=p, axis=axis), inputs), inputs, tmp_path)
    norm = np.sum(np.abs(x) ** p, axis=axis, keepdims=True) ** (1.0 / p)
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.where(norm == 0, 0, x / norm)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _lrn(x, size, alpha, beta, bias):
    """The spec's LRN, as its node test computes it."""
    square_sum = np.zeros_like(x)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    for c in range(x.shape[1]):
        square_sum[:, c] = np.sum(x[:, max(0, c - lo):min(x.shape[1], c + hi + 1)] ** 2, axis=1)
    return x / (bias + alpha / size * square_sum) ** beta


@pytest.mark.parametrize("size,attrs", [(3, {}), (4, {"alpha": 0.3, "beta": 0.5, "bias": 2.0}),
                                        (1, {"alpha": 0.5}), (9, {"alpha": 0.2, "beta": 1.0})])
def test_lrn_matches_the_spec(size, attrs, tmp_path):
    x = np.random.default_rng(8).standard_normal((2, 5, 3, 2)).astype(np.float32)
    inputs = {"x": x}
    (got,) = _run(_model(helper.make_node("LRN", ["x"], ["y"], size=size, **attrs), inputs, opset=13), inputs, tmp_path)
    want = _lrn(x, size, attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_hardmax_marks_the_first_maximum(axis, tmp_path):
    x = np.random.default_rng(9).integers(0, 3, (3, 4, 3)).astype(np.float32)  # ties: the first one wins
    inputs = {"x": x}
    model = _model(helper.make_node("Hardmax", ["x"], ["y"], axis=axis), inputs, opset=13)
    (got,) = _run(model, inputs, tmp_path)
    np.testing.assert_array_equal(got, _reference(model, inputs)[0])
    assert got.sum() == x.size // x.shape[axis]


@pytest.mark.parametrize("node,inputs,opset,why", [
    (helper.make_node("LpNormalization", ["x"], ["y"], p=3), {"x": np.ones((2, 3), np.float32)}, 22,
     r"p 3 \(valid: 1 or 2\)"),
    (helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=4),
     {"x": np.ones((1, 6, 2), np.float32), "s": np.ones(6, np.float32), "b": np.ones(6, np.float32)}, 21,
     "num_groups 4 .* must divide the channels"),
    (helper.make_node("RMSNormalization", ["x", "s"], ["y"], stash_type=11),
     {"x": np.ones((2, 3), np.float32), "s": np.ones(3, np.float32)}, 23, r"stash_type 11 \(float64\)"),
    (helper.make_node("Hardmax", ["x"], ["y"], axis=2), {"x": np.ones((2, 3), np.float32)}, 13,
     r"axis 2 of a 2-axis input \(valid: -2 to 1\)"),
    (helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], reduction="average"),
     {"x": np.ones((2, 3), np.float32), "t": np.zeros(2, np.int64)}, 22,
     "reduction 'average' .*valid: none, sum, mean"),
    (helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y"]),
     {"x": np.ones((2, 3), np.float32), "t": np.zeros(3, np.int64)}, 13, r"target of shape \[3\] .* must be \[2\]"),
])
def test_forms_outside_the_spec_are_refused_by_name(node, inputs, opset, why):
    with pytest.raises(UnsupportedOpError, match=why):
        from_onnx(_model(node, inputs, opset=opset))
