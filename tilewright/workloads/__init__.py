"""Published workload shapes for tests, examples and benchmarks.

`flextensor_suite.json` is a copy of ../shared/benchmarks/flextensor_suite.json
(the FlexTensor paper's operator suite, ASPLOS'20 Table 3, as our own JSON; its
README there gives the provenance). Imports nothing from tilewright.
Public names: suite, suite_case."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

_SUITE = Path(__file__).with_name("flextensor_suite.json")


@lru_cache(maxsize=1)
def suite() -> dict:
    """The whole suite: operator key (C2D, GEMM, ...) -> definition and cases."""
    return json.loads(_SUITE.read_text())


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
