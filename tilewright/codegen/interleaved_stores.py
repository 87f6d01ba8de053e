"""The C renderer's interleaved stores: k vectors stored at stride k to offsets 0 .. k-1 of one buffer
(a relayout into k-channel blocks) as one k-way interleave and one contiguous store (k = 2, 4 over at
most 128 bytes), or as k x k transposes of k-lane slices (k = 4, 8, 16 over wider vectors), instead of
one store per element."""

from __future__ import annotations

from .strided import SHUFFLE_MACRO, blocked_interleave_helper, interleave_helper
from .transpose import transpose_helper


class InterleavedStores:
    """Mixed into CCodeGen (its helpers, names, vector/mask/scalar types, expr and emit)."""

    def interleave(self, run) -> None:
        d = run[0].value.dtype
        k, lanes = len(run), d.lanes
        wide = self.vector_type(d.with_lanes(k * lanes))
        name, definition = interleave_helper(k, lanes, self.vector_type(d), wide,
                                             self.vector_type(d.with_lanes(2 * lanes)))
        self.helpers.setdefault(name, definition)
        buf = self.names.of(run[0].buffer, run[0].buffer.name)
        values = ", ".join(self.expr(st.value) for st in run)
        self.emit(f"*({wide} *)(&{buf}[{self.expr(run[0].indices[0].base)}]) = {name}({values});")

    def interleave_blocked(self, run) -> None:
        d = run[0].value.dtype
        k, part = len(run), d.with_lanes(len(run))
        transpose, definition = transpose_helper(k, self.vector_type(part), self.mask_type(part), self.scalar_type(d))
        self.helpers.setdefault("TW_SHUFFLE", SHUFFLE_MACRO)
        self.helpers.setdefault(transpose, definition)
        name, definition = blocked_interleave_helper(k, d.lanes, self.vector_type(d), self.scalar_type(d), transpose)
        self.helpers.setdefault(name, definition)
        buf = self.names.of(run[0].buffer, run[0].buffer.name)
        values = ", ".join(self.expr(st.value) for st in run)
        self.emit(f"{name}(&{buf}[{self.expr(run[0].indices[0].base)}], {values});")


__all__ = ["InterleavedStores"]
