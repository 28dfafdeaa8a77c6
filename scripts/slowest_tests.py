"""Print the slowest tests of one or more JUnit XML reports (pytest ``--junitxml``): what `scripts/test.sh` shows
after its two passes, as one list.

    python scripts/slowest_tests.py --top 25 a.xml b.xml
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from pathlib import Path


def slowest(reports: list[Path], top: int) -> list[tuple[float, str]]:
    """The ``top`` longest test cases (seconds, ``file::name``) of the reports that exist."""
    cases = []
    for report in reports:
        if not report.is_file():
            continue
        for case in ET.parse(report).getroot().iter("testcase"):
            name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
            cases.append((float(case.get("time") or 0.0), name))
    return sorted(cases, reverse=True)[:top]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("reports", nargs="+", type=Path, help="JUnit XML files")
    parser.add_argument("--top", type=int, default=25, help="how many to print (default 25)")
    args = parser.parse_args(argv)
    for seconds, name in slowest(args.reports, args.top):
        print(f"{seconds:8.2f}s {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
