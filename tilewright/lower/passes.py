"""The ordered pass pipeline applied by `lower`."""

from __future__ import annotations

from dataclasses import replace

from ..ir.stmt import Seq
from .flatten import flatten
from .simplify_stmt import simplify_stmt


def run_passes(func):
    body = flatten(func.body)
    body = simplify_stmt(body)
    return replace(func, body=body if body is not None else Seq(()))
