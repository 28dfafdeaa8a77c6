"""scripts/slowest_tests.py: the slowest tests of `make test`'s two passes, as one list from their JUnit reports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "slowest_tests.py"


def report(path: Path, cases: dict[str, float]) -> Path:
    rows = "".join(f'<testcase classname="tests.test_a" name="{n}" time="{t}"/>' for n, t in cases.items())
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{rows}</testsuite></testsuites>')
    return path


def test_the_slowest_of_both_reports_come_first(tmp_path):
    first = report(tmp_path / "a.xml", {"test_quick": 0.5, "test_slow": 30.0})
    second = report(tmp_path / "b.xml", {"test_ray": 12.25})
    done = subprocess.run([sys.executable, str(SCRIPT), "--top", "2", str(first), str(second), str(tmp_path / "none.xml")],
                          capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["   30.00s tests/test_a.py::test_slow", "   12.25s tests/test_a.py::test_ray"]
