"""The in-tree reference networks: reduced versions run and are reproducible,
full versions have torchvision's parameter counts, and YOLO-v1's conv stack
is FlexTensor's C2D suite."""

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import tilewright  # noqa: E402
from tilewright.errors import ShapeError  # noqa: E402
from tilewright.models import MODELS, build, yolo  # noqa: E402

OUT = {"resnet18": (1, 10), "resnet50": (1, 10), "mobilenet_v2": (1, 10), "yolo_v1": (1, 30), "overfeat": (1, 10),
       "bert_layer": (1, 16, 64)}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_reduced_model_runs_in_eval_mode_and_is_seeded(name):
    spec = MODELS[name]
    a, b = spec.build(reduced=True), build(name, reduced=True)
    assert not a.training
    x = spec.example_input(reduced=True)
    assert tuple(x.shape) == spec.reduced_shape
    with torch.no_grad():
        ya, yb = a(x), b(x)
    assert tuple(ya.shape) == OUT[name] and torch.isfinite(ya).all()
    assert torch.equal(ya, yb)
    other = spec.builder(**{**spec.reduced, "seed": 1})
    with torch.no_grad():
        assert not torch.equal(other(x), ya)


@pytest.mark.parametrize("name,params", [("resnet18", 11_689_512), ("resnet50", 25_557_032),
                                         ("mobilenet_v2", 3_504_872)])
def test_full_models_have_torchvision_parameter_counts(name, params):
    model = MODELS[name].build()
    assert sum(p.numel() for p in model.parameters()) == params


def test_bert_layer_full_size_runs():
    spec = MODELS["bert_layer"]
    with torch.no_grad():
        y = spec.build()(spec.example_input())
    assert tuple(y.shape) == (1, 128, 768)


def test_yolo_conv_stack_is_flextensor_c2d():
    suite = json.loads((Path(tilewright.__file__).parent / "workloads" / "flextensor_suite.json").read_text())
    want = {(c["in_channels"], c["height"], c["out_channels"], c["kernel"], c["stride"], c["padding"])
            for c in suite["C2D"]["cases"]}
    got, cin, side = set(), 3, 448
    for layer in yolo.LAYERS:
        if layer == "M":
            side //= 2
            continue
        k, cout, s = layer
        got.add((cin, side, cout, k, s, k // 2))
        cin, side = cout, side // s
    assert got == want and side == 7


def test_bad_sizes_and_names_are_shape_errors():
    with pytest.raises(ShapeError, match="multiple of 64"):
        MODELS["yolo_v1"].builder(image=100)
    with pytest.raises(ShapeError, match="known: bert_layer"):
        build("vgg16")
