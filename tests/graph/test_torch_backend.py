"""torch.compile(model, backend="tilewright"): reduced ResNet-18 and a BERT layer
match eager; an unsupported op in the middle runs in PyTorch with one warning
naming it; a partition tilewright fails on falls back with a warning naming
the error; the backend is found by name through its entry point."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tilewright.errors import TilewrightWarning  # noqa: E402
from tilewright.graph import torch_backend  # noqa: E402
from tilewright.models import MODELS  # noqa: E402


def _compile(model, options=None):
    """torch.compile through the backend, keeping what it returned and the tilewright warnings it raised."""
    built, caught = [], []

    def backend(gm, example_inputs, options=None):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            run = torch_backend.tilewright_backend(gm, example_inputs, options)
        caught.extend(str(x.message) for x in w if issubclass(x.category, TilewrightWarning))
        built.append(run)
        return run

    torch._dynamo.reset()
    return torch.compile(model, backend=backend, options=options or {"trials": 0}), built, caught


def _check(compiled, model, x):
    with torch.no_grad():
        got, want = compiled(x), model(x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4 * want.abs().max().item())


@pytest.mark.parametrize("name", ["resnet18", "bert_layer"])
def test_model_matches_eager_in_one_module(name):
    spec = MODELS[name]
    model, x = spec.build(reduced=True).eval(), spec.example_input(reduced=True)
    compiled, built, caught = _compile(model)
    _check(compiled, model, x)
    assert caught == []
    assert [(b.tilewright_partitions, b.fallback_ops) for b in built] == [(1, [])]
    _check(compiled, model, spec.example_input(reduced=True, seed=1))  # a second call, new data


class _ConvCumsumConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.b = torch.nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return self.b(torch.cumsum(torch.relu(self.a(x)), dim=2))


@pytest.fixture(scope="module")
def conv_cumsum():
    model = _ConvCumsumConv().eval()
    compiled, built, caught = _compile(model)
    x = torch.randn(1, 3, 8, 8)
    with torch.no_grad():
        compiled(x)
    return model, compiled, built, caught


def test_unsupported_op_in_the_middle_falls_back_with_one_warning(conv_cumsum):
    model, compiled, built, caught = conv_cumsum
    _check(compiled, model, torch.randn(1, 3, 8, 8))
    assert len(caught) == 1 and "aten.cumsum" in caught[0] and "1 nodes run in PyTorch" in caught[0]
    assert built[0].tilewright_partitions == 2 and built[0].fallback_ops == ["aten.cumsum.default"]


def test_failing_partition_falls_back_naming_the_error(monkeypatch):
    from tilewright.graph import compile as compile_module

    def broken(*args, **kwargs):
        raise RuntimeError("no kernel today")

    monkeypatch.setattr(compile_module, "compile", broken)
    model = _ConvCumsumConv().eval()
    compiled, built, caught = _compile(model)
    _check(compiled, model, torch.randn(1, 3, 8, 8))
    assert len(caught) == 1 and "no kernel today" in caught[0] and "RuntimeError" in caught[0]
    assert built[0].tilewright_partitions == 0


def test_non_float32_graph_runs_in_pytorch():
    model = torch.nn.Linear(4, 3).double().eval()
    compiled, built, caught = _compile(model)
    _check(compiled, model, torch.randn(2, 4, dtype=torch.float64))
    assert built[0].tilewright_partitions == 0 and caught and "aten.addmm" in caught[0]


def test_backend_found_by_name():
    from torch._dynamo.backends.registry import lookup_backend

    assert "tilewright" in torch._dynamo.list_backends()
    assert lookup_backend("tilewright") is torch_backend.tilewright_backend
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="tilewright")
    _check(compiled, model, torch.randn(2, 4))


def test_options_and_modes_are_checked_by_name():
    from tilewright.errors import TilewrightError

    assert torch_backend.backend_options(mode="max-autotune")["trials"] == torch_backend.MAX_AUTOTUNE_TRIALS
    assert torch_backend.backend_options()["trials"] == 0 and not torch_backend.backend_options()["progress"]
    assert torch_backend.backend_options({"trials": 8, "seed": 3})["progress"]
    with pytest.raises(TilewrightError, match="unknown option trails.*valid:.*fuse_b2b"):
        torch_backend.backend_options({"trails": 100})
    with pytest.raises(TilewrightError, match="unknown mode 'fastest'; valid: default"):
        torch_backend.backend_options(mode="fastest")
    with pytest.raises(TilewrightError, match="trials must be a non-negative int"):
        torch_backend.backend_options({"trials": -5})
    torch._dynamo.reset()
    compiled = torch.compile(torch.nn.Linear(4, 3).eval(), backend="tilewright", options={"trails": 10})
    with pytest.raises(Exception, match="trails"):  # dynamo wraps it: the user sees the name, not a fallback
        compiled(torch.randn(2, 4))


def test_trials_are_shared_among_partitions():
    assert torch_backend.shares(100, [3, 1]) == [75, 25]
    assert sum(torch_backend.shares(5, [1, 1, 1])) == 5 and torch_backend.shares(7, []) == []


@pytest.mark.parametrize("how", [{"options": {"trials": 10}}, {"mode": "max-autotune"}])
def test_one_budget_for_the_whole_graph(how, monkeypatch):
    from tilewright.graph import compile as compile_module

    real, asked = compile_module.compile, []

    def spy(*args, trials=0, **kwargs):
        asked.append(trials)
        return real(*args, **{**kwargs, "trials": 0, "progress": False})  # the budget is what is checked

    monkeypatch.setattr(compile_module, "compile", spy)
    model = _ConvCumsumConv().eval()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="tilewright", **how)
    _check(compiled, model, torch.randn(1, 3, 8, 8))
    total = how.get("options", {}).get("trials", torch_backend.MAX_AUTOTUNE_TRIALS)
    assert len(asked) == 2 and sum(asked) == total and min(asked) > 0
