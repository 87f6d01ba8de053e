"""Published workload shapes for tests, examples and benchmarks.

`flextensor_suite.json` is a copy of ../shared/benchmarks/flextensor_suite.json
(the FlexTensor paper's operator suite, ASPLOS'20 Table 3, as our own JSON; its
README there gives the provenance). `resnet50_conv.json` is a copy of
../shared/benchmarks/resnet50_conv.json (ResNet-50 v1.5's unique convolution
layers, batch 1, with how often each occurs); it appears in `suite()` as the
operator "R50", conv2d cases like C2D's. `deepbench_conv_inference*.json` are
copies of ../shared/benchmarks' (Baidu DeepBench's inference convolutions,
server and device sets, int8). Imports nothing from tilewright.
Public names: suite, suite_case, deepbench_convs."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

_SUITE = Path(__file__).with_name("flextensor_suite.json")
_RESNET50 = Path(__file__).with_name("resnet50_conv.json")
_DEEPBENCH = {"server": "deepbench_conv_inference.json", "device": "deepbench_conv_inference_device.json"}


def deepbench_convs(sets=("server", "device")) -> list[dict]:
    """DeepBench's inference convolutions: dicts with name, N, C, H, W, K (out channels), R (kernel height),
    S (kernel width), pad_h, pad_w, stride_h, stride_w, in file order, `sets` concatenated."""
    out = []
    for s in sets:
        if s not in _DEEPBENCH:
            raise KeyError(f"unknown DeepBench set {s!r}; sets: {', '.join(_DEEPBENCH)}")
        out.extend(json.loads(Path(__file__).with_name(_DEEPBENCH[s]).read_text()))
    return out


@lru_cache(maxsize=1)
def suite() -> dict:
    """Every case list: operator key (C2D, GEMM, ..., R50) -> definition and cases."""
    data = json.loads(_SUITE.read_text())
    r50 = json.loads(_RESNET50.read_text())
    data["R50"] = {"full_name": "ResNet-50 convolution layers", "definition": data["C2D"]["definition"],
                   "note": r50["note"], "model": r50["model"], "cases": r50["cases"]}
    return data


def suite_case(op: str, name: str) -> dict:
    """One case's parameters, e.g. suite_case("C2D", "yolo_conv2")."""
    data = suite()
    if op not in data:
        raise KeyError(f"unknown operator {op!r}; the suite has {', '.join(data)}")
    for case in data[op]["cases"]:
        if case["name"] == name:
            return dict(case)
    names = ", ".join(c["name"] for c in data[op]["cases"])
    raise KeyError(f"{op} has no case {name!r}; its cases are: {names}")
