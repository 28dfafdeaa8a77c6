"""How long ``--help`` takes for every command of both command lines (target: under 2 s each), measured as a user
meets it: the console script run in a fresh process. Figures printed, not asserted.

    python -m benchmarks.bench_cli_help [--repeat 3]
"""

from __future__ import annotations

import argparse
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

TARGET_S = 2.0


def console_script(tool: str) -> str:
    """The installed console script (``.venv/bin/vista``), as a user runs it."""
    return str(Path(sys.executable).with_name(tool))


def listed_commands(help_text: str) -> list[str]:
    r"""The sub-commands a tool's ``--help`` lists (argparse indents each name by four spaces under ``COMMAND``).

    >>> listed_commands("usage: vista COMMAND ...\n\npositional arguments:\n  COMMAND\n    graph   build graphs\n"
    ...                 "                 of a cohort\n    evaluate-cohort\n                 score a store\n")
    ['graph', 'evaluate-cohort']
    """
    return [match.group(1) for match in re.finditer(r"^ {4}(\S+)", help_text, re.MULTILINE)]


def commands() -> list[tuple[str, list[str]]]:
    """(tool, argv) for the tool itself and each sub-command its ``--help`` lists, jobs included (read from the console
    script's own help: benchmarks import nothing of `jobs`)."""
    found: list[tuple[str, list[str]]] = []
    for tool in ("trajonco", "vista"):
        text = subprocess.run([console_script(tool), "--help"], capture_output=True, text=True, check=True).stdout
        found.append((tool, []))
        found += [(tool, [name]) for name in listed_commands(text)]
    return found


def time_help(tool: str, argv: list[str]) -> tuple[float, float, bool]:
    """Wall and CPU seconds of ``tool ARGV --help`` in a fresh process, and whether its help shows an example."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run([console_script(tool), *argv, "--help"], capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, "example" in out.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="runs per command; the median is shown (default 3)")
    args = parser.parse_args(argv)
    table = Table(title=f"--help of every command (median of {args.repeat}; target < {TARGET_S:g} s)")
    for column in ("command", "wall s", "cpu s", "example", "within target"):
        table.add_column(column, justify="left" if column == "command" else "right")
    slow = 0
    for tool, command in commands():
        runs = [time_help(tool, command) for _ in range(args.repeat)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        example = runs[0][2] or not command  # the tool's own help lists commands instead
        slow += wall >= TARGET_S
        table.add_row(" ".join([tool, *command]), f"{wall:.2f}", f"{cpu:.2f}", "yes" if example else "NO",
                      "yes" if wall < TARGET_S else "NO")
    Console(width=120).print(table)
    print(f"{slow} command(s) at or over {TARGET_S:g} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
