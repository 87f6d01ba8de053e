"""Malformed `Trace.from_json` input and malformed replay steps are ScheduleErrors naming what is wrong
(issue 13: they were raw KeyError/TypeError tracebacks)."""

from __future__ import annotations

import pytest

import tilewright as tw
from tilewright.schedule.trace import Trace


@pytest.mark.parametrize("text, message", [
    ("{", "not valid JSON"),
    ("{}", "expected a JSON list of steps, got dict"),
    ("[1]", "step 0 must be an object"),
    ('[{"stage": "C"}]', "step 0 has no 'primitive'"),
    ('[{"primitive": "split"}]', "step 0 has no 'stage'"),
    ('[{"stage": 1, "primitive": "split"}]', "'stage' must be a string, got int"),
    ('[{"stage": "C", "primitive": "split", "args": []}]', "'args' must be an object, got list"),
    (None, "needs a JSON string, got NoneType"),
])
def test_malformed_json_is_a_schedule_error(text, message):
    with pytest.raises(tw.ScheduleError, match=message):
        Trace.from_json(text)


def _program():
    A = tw.placeholder((8,), "float32", name="A")
    return tw.compute((8,), lambda i: A[i] * 2, name="C")


@pytest.mark.parametrize("steps, message", [
    ('[{"stage": "C", "primitive": "split", "args": {}}]', r"step 0 'split' has malformed args \{\}: KeyError: 'axis'"),
    ('[{"stage": "", "primitive": "cache_read", "args": {"tensor": "A"}}]', "step 0 'cache_read'.*'scope'"),
    ('[{"stage": "C", "primitive": "fuse", "args": {"axes": 3}}]', "step 0 'fuse' has malformed args"),
])
def test_malformed_step_replays_to_a_schedule_error(steps, message):
    with pytest.raises(tw.ScheduleError, match=message):
        Trace.from_json(steps).replay(_program())


def test_well_formed_trace_still_round_trips():
    C = _program()
    s = tw.create_schedule(C)
    s[C].split(C.op.axis[0], factor=4)
    again = Trace.from_json(s.trace.to_json()).replay(C)
    assert str(again.trace) == str(s.trace)
