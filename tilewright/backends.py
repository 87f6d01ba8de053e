"""Targets as plug-ins: one `Backend` record per target kind, assembled here
and nowhere else, pointing at its pieces in the stage folders: the schedule
space (`space/`), the lowering pass list (`lower/`), the renderer
(`codegen/`), the compiler (`build/`) and the runtime (`runtime/`).

`tw.build`, the tuner and the measurer ask the record; nothing else branches
on `target.kind`. Pieces are imported when a record is first asked for
(`backend_for`), so using the CPU never imports a GPU driver, and no
registry is filled as an import side effect."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from .errors import EmptySpaceError, TilewrightError
from .targets import KINDS, Target


@dataclass(frozen=True)
class Backend:
    """What a target kind plugs in. Every callable takes the target explicitly.

    space(outputs, target) -> (Space, plan); apply(outputs, plan, point) -> Schedule;
    default_point(space, plan) -> Point; heuristic_points(space, plan, k) -> [Point]
      (the four are None for a kind with no schedule space yet: tuning says so);
    lower(schedule, args, name, target) -> LoweredFunc (the kind's passes and limits);
    render(func, target) -> source (`.text` is what the compiler takes);
    compile(source, target, timeout) -> artefact (`.path`: what a runner process loads);
    load(func, source, artefact, target) -> a callable kernel (`.source`, `.time()`, `.export()`);
    runner: the module a measuring process runs (`python -m`); loader: for device kinds, the module
      whose `load_exported(directory)` that process opens artefacts with;
    render_packed(func, target, constants) -> source or None: the kernel with the packs of the
      arguments named in `constants` made once, outside what `tw_time` times (as a compiled model
      runs it; None where nothing moves or the kind cannot)."""

    kind: str
    space: Callable | None
    apply: Callable | None
    default_point: Callable | None
    heuristic_points: Callable | None
    lower: Callable
    render: Callable
    compile: Callable
    load: Callable
    runner: str
    loader: str | None = None
    fallback_schedule: Callable | None = None  # (outputs, target) -> Schedule where there is no space
    render_packed: Callable | None = None
    # kinds whose compiler lowers whole recognised operators from their own tiling space instead of
    # reading a te schedule (vta): (args, target) -> kernel, and (args, target, trials, **options) -> result
    operator_compiler: Callable | None = None
    operator_tuner: Callable | None = None

    def build(self, schedule, args, target: Target, name: str = "kernel"):
        """Lower, render, compile (cached) and load `schedule` as a kernel taking `args`."""
        return self.build_func(self.lower(schedule, args, name, target), target)

    def build_func(self, func, target: Target):
        """Render, compile (cached) and load an already lowered function."""
        source = self.render(func, target)
        return self.load(func, source, self.compile(source, target), target)

    def space_generator(self, outputs, target: Target, constants=()):
        """The program's schedule space on `target` (space/generator.py), what a tuning task searches."""
        from .space.generator import SpaceGenerator

        self.require_space()
        return SpaceGenerator(outputs, target, self.space, self.apply, self.default_point, self.heuristic_points,
                              constants)

    def default_schedule(self, outputs, target: Target, constants=()):
        """The untuned schedule: the space's default point, else the kind's fallback. `constants`:
        inputs that never change between calls (packs of them are made once)."""
        if self.space is None and self.fallback_schedule is not None:
            return self.fallback_schedule(outputs, target)
        generator = self.space_generator(outputs, target, constants)
        try:
            point = generator.default()
        except EmptySpaceError:
            # e.g. a GPU elementwise op over 45 elements: no thread count fills 75% of its warps
            if self.fallback_schedule is None:
                raise
            return self.fallback_schedule(outputs, target)
        return generator.apply(point)

    def require_space(self) -> None:
        if self.space is None:
            raise TilewrightError(f"target kind '{self.kind}' has no schedule space yet, so it cannot be tuned or "
                                  f"given a default schedule; write one by hand (s[C].bind(...)) and tw.build it")


def _no_accelerator_buffers(func, kind: str) -> None:
    """Scratchpad scopes belong to the accelerator: on a CPU or GPU they would silently be ordinary memory."""
    from .ir.stmt import Allocate, Scope
    from .ir.stmt_functor import walk_stmt

    on_chip = (Scope.VTA_INP, Scope.VTA_WGT, Scope.VTA_ACC)
    bad = sorted({f"'{s.buffer.name}' ({s.buffer.scope.value})" for s in walk_stmt(func.body)
                  if isinstance(s, Allocate) and s.buffer.scope in on_chip})
    if bad:
        raise TilewrightError(f"buffers {', '.join(bad)} are placed in the VTA accelerator's scratchpads, which a "
                              f"{kind} target does not have: build the schedule for target='vta', or use the "
                              f"scopes global / local{' / shared' if kind != 'cpu' else ''}")


def _cpu_lower(s, args, name, target: Target):
    """Lowering for a CPU: no loop may be bound to GPU blocks or threads."""
    from .ir.stmt_functor import walk_stmt
    from .lower import lower
    from .lower.gpu_checks import is_bound, stage_names, top_level
    from .lower.registers import RegisterFile
    from .lower.tensorize import bind_emitters

    func = lower(s, args, name, registers=RegisterFile.of(target))
    _no_accelerator_buffers(func, "cpu")
    func = bind_emitters(func, "c", target)
    for stmt in top_level(func.body):
        bound = sorted({f"'{x.var.name}' to {x.thread_tag}" for x in walk_stmt(stmt) if is_bound(x)})
        if bound:
            raise TilewrightError(f"stages {stage_names(stmt)} bind loops to GPU blocks or threads "
                                  f"({', '.join(bound)}); a CPU target has neither: build them for target='cuda' "
                                  f"or 'opencl', or use parallel/vectorize on a CPU")
    return func


def _cpu() -> Backend:
    from .build import build_library
    from .codegen import generate_c
    from .runtime import Kernel
    from .space import apply_cpu, cpu_space, default_point, heuristic_points

    return Backend(
        kind="cpu", space=cpu_space, apply=apply_cpu, default_point=default_point,
        heuristic_points=heuristic_points,
        lower=_cpu_lower,
        render=lambda func, target: generate_c(func, target.vector_bytes),
        compile=lambda source, target, timeout=300.0: build_library(source.text, target, timeout=timeout),
        load=lambda func, source, artefact, target: Kernel(func, source, artefact, target),
        runner="tilewright.runtime.runner",
        render_packed=_cpu_render_packed,
    )


def _cpu_render_packed(func, target: Target, constants: set[str]):
    from .codegen.c import CCodeGen
    from .lower.hoist_packs import hoist_constant_packs

    hoisted = hoist_constant_packs(func, constants)
    return None if hoisted is None else CCodeGen(target.vector_bytes).render_with_packs(hoisted)


def _gpu_lower(s, args, name, target: Target):
    """Lowering plus what a GPU needs: every root stage bound, launches within the device's limits."""
    from .lower import lower
    from .lower.gpu_checks import check_launch_limits, validate_gpu_func
    from .lower.registers import RegisterFile

    func = lower(s, args, name, registers=RegisterFile.of(target))
    _no_accelerator_buffers(func, target.kind)
    validate_gpu_func(func)
    g = target.gpu
    check_launch_limits(func, g.max_threads_per_block, g.shared_mem_per_block, g.max_block_dims, g.max_grid_dims)
    return func


def _load_cuda(func, module, artefact, target: Target):
    """A kernel on the GPU, or, with none here, one that can be read and exported but not run. Any other
    failure (a refused binary, a block over the register budget) is raised: it is the kernel's fault."""
    from .runtime.cuda import CudaKernel
    from .runtime.cuda_driver import NoCudaDevice
    from .runtime.unrunnable import UnrunnableKernel

    try:
        return CudaKernel(module, artefact.binary, target.gpu.device)
    except NoCudaDevice as exc:
        return UnrunnableKernel(module, artefact.path, str(exc))


def _gpu_space_fields() -> dict:
    from .space.gpu import apply_gpu, gpu_space
    from .space.gpu_model import default_point, heuristic_points

    return dict(space=gpu_space, apply=apply_gpu, default_point=default_point, heuristic_points=heuristic_points)


def _cuda() -> Backend:
    from .build.device_artefact import compile_cuda_artefact
    from .codegen.cuda import generate_cuda
    from .space.gpu_default import naive_gpu_schedule

    return Backend(
        kind="cuda", **_gpu_space_fields(),
        lower=_gpu_lower, render=lambda func, target: generate_cuda(func),
        compile=lambda module, target, timeout=300.0: compile_cuda_artefact(module, target, timeout),
        load=_load_cuda,
        runner="tilewright.runtime.device_runner", loader="tilewright.runtime.cuda",
        fallback_schedule=naive_gpu_schedule,
    )


def _cl_context(target: Target):
    """(context, queue) of the OpenCL device `target` names ("opencl -platform=P -device=N")."""
    from .runtime.opencl import default_context

    return default_context(target.gpu.platform, target.gpu.device)


def _opencl() -> Backend:
    from .build.device_artefact import compile_opencl_artefact
    from .codegen.opencl import generate_opencl
    from .runtime.opencl import OpenCLKernel
    from .space.gpu_default import naive_gpu_schedule

    return Backend(
        kind="opencl", **_gpu_space_fields(),
        lower=_gpu_lower, render=lambda func, target: generate_opencl(func),
        compile=lambda module, target, timeout=300.0: compile_opencl_artefact(module, target, _cl_context(target)[0]),
        load=lambda func, module, artefact, target: OpenCLKernel(module, *_cl_context(target), artefact.binary),
        runner="tilewright.runtime.device_runner", loader="tilewright.runtime.opencl",
        fallback_schedule=naive_gpu_schedule,
    )


def _vta() -> Backend:
    """The accelerator: a te schedule is lowered (virtual threads interleaved, storage flat) and its
    loop nests selected into instructions; given tensors, the blocked conv operator is lowered from
    its own tiling space instead. Kernels run in the simulator; there is nothing to compile."""
    from .lower.vta_program import lower_for_vta, select_program
    from .runtime.vta_kernel import VTAFunction
    from .search.vta_tune import build_operator, tune_operator

    return Backend(kind="vta", space=None, apply=None, default_point=None, heuristic_points=None,
                   lower=lambda s, args, name, target: lower_for_vta(s, args, name),
                   render=lambda func, target: select_program(func, target.vta),
                   compile=lambda program, target, timeout=300.0: program,
                   load=lambda func, program, artefact, target: VTAFunction(program),
                   runner="", operator_compiler=build_operator, operator_tuner=tune_operator)


def _aie_needs_operator(*_args, **_kwargs):
    raise TilewrightError("target aie compiles whole operators with the Vyasa passes, not te schedules: pass the "
                          "tensors (tw.build([I, W, O], target='aie'), tw.tune([I, W, O], target='aie'))")


def _aie() -> Backend:
    """The AI-Engine-like core: a convolution's te is lowered by the Vyasa passes to intrinsic C, which
    runs on the host against our emulation of the intrinsics; its time is the cycle model's."""
    from .search.aie_tune import build_operator, tune_operator

    return Backend(kind="aie", space=None, apply=None, default_point=None, heuristic_points=None,
                   lower=_aie_needs_operator, render=_aie_needs_operator, compile=_aie_needs_operator,
                   load=_aie_needs_operator, runner="", operator_compiler=build_operator, operator_tuner=tune_operator)


def _hls_needs_operator(*_args, **_kwargs):
    raise TilewrightError("target hls compiles whole operators into FPGA designs, not te schedules: pass the "
                          "tensors (tw.build([A, B, C], target='hls'), tw.tune([A, B, C], target='hls'))")


def _hls() -> Backend:
    """An FPGA: a sum of products becomes a read / compute / write HLS design searched against the
    analytic model; the kernel is the generated HLS C++ run by C simulation."""
    from .search.hls_tune import build_operator, tune_operator

    return Backend(kind="hls", space=None, apply=None, default_point=None, heuristic_points=None,
                   lower=_hls_needs_operator, render=_hls_needs_operator, compile=_hls_needs_operator,
                   load=_hls_needs_operator, runner="", operator_compiler=build_operator, operator_tuner=tune_operator)


_FACTORIES: dict[str, Callable[[], Backend]] = {"cpu": _cpu, "cuda": _cuda, "opencl": _opencl, "vta": _vta,
                                                "aie": _aie, "hls": _hls}


def register_backend(kind: str, factory: Callable[[], Backend]) -> None:
    """Plug in (or replace) the backend of a target kind; called explicitly, never on import."""
    if kind not in KINDS:
        raise TilewrightError(f"unknown target kind {kind!r}; valid: {', '.join(KINDS)}")
    _FACTORIES[kind] = factory
    _made.cache_clear()


@functools.cache
def _made(kind: str) -> Backend:
    return _FACTORIES[kind]()


def backend_for(target: Target) -> Backend:
    """The plug-in of `target`'s kind."""
    if target.kind not in _FACTORIES:
        raise TilewrightError(f"no backend for target kind '{target.kind}' in this build of tilewright; "
                              f"available: {', '.join(sorted(_FACTORIES))}")
    return _made(target.kind)


__all__ = ["Backend", "backend_for", "register_backend"]
