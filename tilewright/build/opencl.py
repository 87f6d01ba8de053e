"""Building OpenCL programs: the driver compiles the source at load time (for
the device of the context), so this module only builds a program and turns a
failed build into a BuildError carrying the driver's log. pyopencl keeps its
own binary cache keyed by source and device."""

from __future__ import annotations

from ..errors import BuildError


def opencl_available() -> str | None:
    """Why OpenCL cannot be used here, or None when pyopencl finds a platform with a device."""
    try:
        import pyopencl as cl
    except ImportError as exc:
        return f"pyopencl is not installed ({exc}); `pip install pyopencl pocl-binary-distribution`"
    try:
        if not any(p.get_devices() for p in cl.get_platforms()):
            return "no OpenCL device on any platform"
    except Exception as exc:  # no ICD loader / no platform
        return f"no OpenCL platform: {exc}"
    return None


def build_program(source: str, context, options: tuple[str, ...] = ()):
    """A built pyopencl Program for every device of `context`."""
    import pyopencl as cl

    try:
        return cl.Program(context, source).build(options=list(options))
    except cl.RuntimeError as exc:  # build failures carry the compiler log in the message
        raise BuildError(f"OpenCL program build failed:\n{str(exc).strip()[:4000]}") from None


__all__ = ["build_program", "opencl_available"]
