"""Hardware-native templated kernels (Bolt): our own packed-panel templates whose parameters
are tile shapes at each level of the memory hierarchy, a light profiler that enumerates a
few tens of configurations from the target's facts, epilogues fused into the store of each
register tile, persistent back-to-back fusion with a static residency check, and padding
to the vector alignment.

CPU: cpu_tiles / cpu_microkernel / cpu_source render C, template_kernel and b2b build and run it,
profiler + isolated measure it. GPU: gpu_tiles / gpu_source / gpu_b2b render CUDA and OpenCL,
gpu_kernel wraps them as DeviceModules for the existing GPU runtimes.

Imports: targets, errors, codegen, build, runtime, records (a top layer: graph, bench and api may
import it). Public names: GemmProblem, ConvProblem, B2BProblem, Epilogue, CpuTile, cpu_tiles,
build_template, build_b2b, profile, check_residency."""

from .b2b import B2BProblem, build_b2b, check_residency
from .cpu_tiles import CpuTile, cpu_tiles
from .epilogue import Epilogue
from .problem import ConvProblem, GemmProblem
from .profiler import profile
from .template_kernel import build_template

__all__ = ["B2BProblem", "ConvProblem", "CpuTile", "Epilogue", "GemmProblem", "build_b2b", "build_template",
           "check_residency", "cpu_tiles", "profile"]
