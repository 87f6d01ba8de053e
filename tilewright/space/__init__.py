"""Schedule spaces (FlexTensor 4.2, 5.3): knobs with neighbourhoods, frozen
JSON-able points, and the per-target implementation turning a point into a
schedule. Imports `analysis`, `lower` (bound inference), `schedule`, `targets`. Public names: Space,
Point, SplitKnob, OrdinalKnob, cpu_space, apply_cpu, default_point, heuristic_points."""

from .cpu import CpuPlan, apply_cpu, cpu_space
from .cpu_default import default_point, heuristic_points
from .knobs import OrdinalKnob, SplitKnob
from .space import Point, Space

__all__ = ["CpuPlan", "OrdinalKnob", "Point", "Space", "SplitKnob", "apply_cpu", "cpu_space", "default_point",
           "heuristic_points"]
