"""The differential fuzzer in CI (issue 13): a few hundred random programs x random legal schedules,
built, run in child processes and compared with `tw.evaluate`. The long run is `make fuzz`
(tests/reliability/fuzz_programs.py; FUZZ_CASES / FUZZ_SEED)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.reliability.fuzz_programs import fuzz  # noqa: E402

CASES = int(os.environ.get("TW_FUZZ_CASES", "240"))


def test_random_programs_and_schedules_match_the_reference():
    cwd = os.getcwd()
    os.chdir(ROOT)  # the children run `python -m tests.reliability.fuzz_programs`
    try:
        results = fuzz(CASES, seed=int(os.environ.get("TW_FUZZ_SEED", "7")), jobs=2)
    finally:
        os.chdir(cwd)
    assert len(results) == CASES
    bad = [r for r in results if not r["ok"]]
    assert not bad, "\n".join(f"case {r['case']} ({r['kind']}): {r['message'][:500]} "
                              f"(replay: python -m tests.reliability.fuzz_programs --seed 7 --only {r['case']})"
                              for r in bad[:10])
