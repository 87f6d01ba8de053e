"""Static analysis of te programs (FlexTensor 4.1): the mini-graph of stages
with their spatial/reduce loops, trip counts and access patterns. Imports
`te`, `ir`. Public names: analyze, MiniGraph, Node, Loop, access_axes, workload_key."""

from .graph import Loop, MiniGraph, Node, access_axes, analyze
from .workload import canonical_text, workload_key

__all__ = ["Loop", "MiniGraph", "Node", "access_axes", "analyze", "canonical_text", "workload_key"]
