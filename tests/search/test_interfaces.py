"""The tuning interfaces: every builder, runner and database the tuner composes offers what its Protocol
says, and the space generator a backend record makes checks the points it is given."""

import pytest

import tilewright as tw
from tests.synthetic_targets import AVX512
from tilewright.backends import backend_for
from tilewright.errors import TilewrightError
from tilewright.records import Records
from tilewright.runtime.builder import LocalBuilder
from tilewright.runtime.local_runner import LocalRunner
from tilewright.search.interfaces import Builder, Database, Runner
from tilewright.space import Point


def lacks(cls, protocol) -> list[str]:
    """The methods of `protocol` that `cls` does not define (its data members are set per instance)."""
    return [n for n in dir(protocol) if not n.startswith("_") and callable(getattr(protocol, n))
            and not callable(getattr(cls, n, None))]


def gemm():
    A = tw.placeholder((64, 32), "float32", name="A")
    B = tw.placeholder((32, 48), "float32", name="B")
    return [A, B, tw.ops.matmul(A, B)]


def test_local_and_ray_implementations_offer_their_protocols():
    A, B, C = gemm()
    assert isinstance(LocalBuilder(backend_for(AVX512), AVX512, [A, B, C]), Builder)
    runner = LocalRunner("tilewright.runtime.runner", {"data_dir": "/nonexistent"})
    assert isinstance(runner, Runner)
    ray = pytest.importorskip("ray")
    del ray
    from tilewright.search.ray_executor import RayBuilder
    from tilewright.search.ray_runner import RayRunner

    assert lacks(RayBuilder, Builder) == [] and lacks(RayRunner, Runner) == []
    assert lacks(object, Runner) == ['close', 'run', 'run_retrying', 'suspend', 'time_limit']


def test_records_are_a_database(tmp_path):
    assert isinstance(Records(tmp_path / "r.db"), Database)


def test_the_space_generator_applies_its_own_points_and_refuses_others():
    A, B, C = gemm()
    generator = backend_for(AVX512).space_generator([C], AVX512)
    default = generator.default()
    assert generator.space.valid(default)
    assert all(generator.space.valid(p) for p in generator.heuristic(4))
    assert generator.apply(default) is not None
    with pytest.raises(TilewrightError, match="point is not in this space.*knobs are"):
        generator.apply(Point((("no_such_knob", 1),)))
