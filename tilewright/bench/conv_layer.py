"""A suite convolution compiled as a one-layer model (`graph.compile`), the path a user's model
takes: NCHW data in and out with the layout transforms inside every call, and the constant
weights packed, and Winograd-transformed where the compiler's rule picks the layer, once at
compile time. The suite benchmark times it beside the direct te kernel for the layers the
Winograd rule takes; since our weights are then prepared ahead, PyTorch gets its own
prepacked-weight path (`torch_prepacked`) among its variants."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..graph import Graph, Node, TensorType

CONV_SUITES = ("C2D", "R50")  # suite operators that are plain conv2d layers


def conv_graph(case: dict, weight: np.ndarray) -> Graph:
    """conv2d(x, weight) of a suite case as a graph with `weight` constant (no bias: the suite has none)."""
    x_shape = (case.get("batch", 1), case["in_channels"], case["height"], case["width"])
    p, s, d = case["padding"], case["stride"], case.get("dilation", 1)
    nodes = [Node("constant", (), ("w",)),
             Node("conv2d", ("x", "w"), ("y",), {"stride": (s, s), "padding": (p, p, p, p), "dilation": (d, d),
                                                "groups": case.get("groups", 1)})]
    return Graph(nodes, ["x"], ["y"], {"x": TensorType(x_shape)}, {"w": np.asarray(weight, np.float32)},
                 name=case["name"])


def winograd_takes(case: dict, weight: np.ndarray, target) -> bool:
    """Whether `compile` rewrites this layer as Winograd on `target`'s packed layout."""
    from ..graph.infer import infer_types
    from ..graph.kernel_graph import kernel_graph

    packed = kernel_graph(infer_types(conv_graph(case, weight)), "NCHWc", target.vector_lanes(4), winograd=True)
    return any(n.op == "winograd_output" for n in packed.nodes)


def compiled_layer(case: dict, weight: np.ndarray, target, trials: int, records, progress: bool = False,
                   seed: int = 0, executor=None):
    """The layer compiled with the Winograd rule on packed data, tuned for `trials` in total over its
    tasks (0: default schedules; pass an empty store for the untuned default) through `executor`."""
    from ..graph.compile import compile as compile_graph

    return compile_graph(conv_graph(case, weight), target=target, trials=trials, records=records,
                         progress=progress, layout="NCHWc", winograd=True, seed=seed, executor=executor)


def torch_prepacked(case: dict, weight: np.ndarray, x: np.ndarray) -> Callable[[], object] | None:
    """PyTorch with its weights prepacked once (TorchScript freeze + optimize_for_inference: oneDNN
    convolution on a prepacked weight, NCHW in and out), or None without PyTorch."""
    try:
        import torch
    except ImportError:
        return None
    conv = torch.nn.Conv2d(case["in_channels"], case["out_channels"], case["kernel"], stride=case["stride"],
                           padding=case["padding"], dilation=case.get("dilation", 1),
                           groups=case.get("groups", 1), bias=False)
    with torch.no_grad():
        conv.weight.copy_(torch.from_numpy(weight))
    frozen = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(conv.eval())))
    t = torch.from_numpy(x)

    def run():
        with torch.no_grad():
            return frozen(t)
    return run
