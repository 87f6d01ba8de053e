"""What a C-family dialect has and how it spells it: one frozen table per
dialect (C here; CUDA and OpenCL in their modules). The renderer base asks the
table instead of branching on the dialect's name."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

from ..ir.expr import Intrinsic


def _frozen(d: dict) -> MappingProxyType:
    return MappingProxyType(dict(d))


@dataclass(frozen=True, eq=False)
class Capabilities:
    name: str
    scalar_types: MappingProxyType  # dtype name -> spelling of a scalar value
    storage_types: MappingProxyType = field(default_factory=lambda: _frozen({}))  # buffer element, if different
    vector_lanes: tuple[int, ...] = ()  # lanes of the native vector types (float4); () = none
    vector_lane_names: tuple[str, ...] = ()  # member names of lanes 0, 1, ... (".x" / ".s0")
    half: bool = True  # float16 arithmetic
    bf16_native: bool = False  # else bfloat16 is uint16 storage converted to float for arithmetic
    fma: str = "fmaf"
    global_qualifier: str = ""  # on pointers to global memory
    shared_qualifier: str = ""  # on per-block arrays
    local_qualifier: str = ""  # on per-thread arrays
    barrier: str = ""  # a block-wide barrier that also fences shared memory
    thread_index: MappingProxyType = field(default_factory=lambda: _frozen({}))  # "blockIdx.x" -> int expression
    math_suffix_f32: str = "f"  # expf; "" where the names are overloaded (OpenCL)
    math_renames: MappingProxyType = field(default_factory=lambda: _frozen({}))  # Intrinsic -> base name
    restrict: str = "restrict"
    int64_literal: str = "INT64_C({v})"
    uint64_literal: str = "UINT64_C({v})"  # unsuffixed, a value above INT64_MAX has no standard type
    int32_min: str = "INT32_MIN"
    inf: str = "INFINITY"
    nan: str = "NAN"
    helper_prefix: str = "static inline"  # before helper function definitions
    kernel_prefix: str = ""  # before a device kernel's return type


C_CAPS = Capabilities(
    name="c",
    scalar_types=_frozen({
        "float32": "float", "float64": "double", "float16": "_Float16", "bfloat16": "uint16_t",
        "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t",
        "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t", "bool": "bool",
    }),
    math_renames=_frozen({Intrinsic.ABS: "fabs", Intrinsic.ROUND: "nearbyint"}),
)

__all__ = ["C_CAPS", "Capabilities"]
