"""Source generation from loop IR: one C-family renderer base (`base.py`) and
its dialects (`c.py` for CPUs). Imports `ir`, `errors`. Public names:
generate_c, CSource."""

from .c import CSource, generate_c

__all__ = ["CSource", "generate_c"]
