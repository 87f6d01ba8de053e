"""The intrinsics a target has, by name. Nothing registers on import: the
built-in declarations (`x86.py`) are added on first lookup."""

from __future__ import annotations

from ..errors import TilewrightError
from .declare import TensorIntrin

_REGISTRY: dict[str, TensorIntrin] = {}
_builtin_loaded = False


def _ensure_builtin() -> None:
    global _builtin_loaded
    if not _builtin_loaded:
        _builtin_loaded = True
        from .x86 import x86_intrinsics

        for intrin in x86_intrinsics():
            _REGISTRY.setdefault(intrin.name, intrin)


def register(intrin: TensorIntrin, override: bool = False) -> TensorIntrin:
    """Add a declaration (a name already taken needs override=True)."""
    _ensure_builtin()
    if not isinstance(intrin, TensorIntrin):
        raise TilewrightError(f"register takes a TensorIntrin (tw.decl_tensor_intrin), got {type(intrin).__name__}")
    if intrin.name in _REGISTRY and not override:
        raise TilewrightError(f"an intrinsic named '{intrin.name}' is already registered; pass override=True")
    _REGISTRY[intrin.name] = intrin
    return intrin


def get(name: str) -> TensorIntrin:
    _ensure_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise TilewrightError(f"no intrinsic named '{name}'; registered: {', '.join(sorted(_REGISTRY))}") from None


def registered(target=None) -> list[str]:
    """Names of the intrinsics `target` can emit (every registered one when None)."""
    _ensure_builtin()
    if target is None:
        return sorted(_REGISTRY)
    from ..targets import as_target

    t = as_target(target)
    if not t.intrinsics:
        return []
    dialect = "c" if t.kind == "cpu" else t.kind
    return sorted(n for n, i in _REGISTRY.items() if i.emitter_for(dialect, t.features) is not None)


__all__ = ["get", "register", "registered"]
