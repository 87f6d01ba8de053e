"""tw.compile(model, target="vta"): a float CNN quantized with power-of-two scales, its convolutions on the
accelerator simulator and the rest on the CPU; bit-exact against the reference evaluator of the quantized
graph, close to the float model."""

import numpy as np
import pytest

import tilewright as tw
from tilewright.errors import LoweringError, ShapeError

torch = pytest.importorskip("torch")
nn = torch.nn


class _Net(nn.Module):
    def __init__(self, act=nn.ReLU):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1), nn.BatchNorm2d(16), act())
        self.down = nn.Sequential(nn.Conv2d(16, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU())
        self.body = nn.Sequential(nn.Conv2d(32, 32, 3, 1, 1), nn.BatchNorm2d(32))
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        y = self.down(self.stem(x))
        y = torch.relu(self.body(y) + y)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.pool(y), 1), 1))


def _net(act=nn.ReLU):
    torch.manual_seed(0)
    m = _Net(act).eval()
    with torch.no_grad():
        for bn in (m.stem[1], m.down[1], m.body[1]):
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 2.0)
    return m


def test_small_cnn_is_offloaded_and_bit_exact():
    m = _net()
    x = torch.randn(1, 3, 16, 16)
    module = tw.compile(m, (x,), target="vta")
    devices = [st.device for st in module.steps]
    # the 3-channel stem goes through an embedding (tw.intrin.embed), the others natively
    assert devices.count("vta") == 3 and module.steps[0].embedded and not module.steps[1].embedded
    held_out = torch.randn(1, 3, 16, 16)
    assert module.check(held_out.numpy())
    got, want = module(held_out.numpy()), m(held_out).detach().numpy()
    assert np.corrcoef(got.ravel(), want.ravel())[0, 1] > 0.95
    text = module.summary()
    assert "3 of" in text and "layers on the accelerator" in text and "simulated" in text
    assert f"vta ({module.steps[0].kernel.conv.realization.mapping.label})" in text


def test_what_the_flow_cannot_take_is_named():
    m = _net(nn.Sigmoid)
    x = torch.randn(1, 3, 16, 16)
    with pytest.raises(LoweringError, match="sigmoid"):
        tw.compile(m, (x,), target="vta")
    graph = tw.frontend.from_torch(_net(), (x,))
    with pytest.raises(ShapeError, match="calibration"):
        tw.compile(graph, target="vta")


def test_calibration_takes_every_input():
    m = _net()
    quiet, loud = torch.randn(1, 3, 16, 16) * 0.1, torch.randn(1, 3, 16, 16) * 4
    one = tw.compile(m, (quiet,), target="vta")
    both = tw.compile(m, (quiet,), target="vta", calibration=[quiet, loud])
    assert both.q.exp[both.graph.inputs[0]] < one.q.exp[one.graph.inputs[0]]  # a coarser step for the louder range
    assert both.check(loud.numpy())
