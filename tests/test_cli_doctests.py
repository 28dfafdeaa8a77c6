"""The doctests of the command-line plumbing: shared help and checks, the light option modules of the jobs, the
stderr filter of Ray's false alarm, the progress line and the synthetic dataset's summary table."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["vista.cli_kit", "vista.lazy", "jobs.ray_stderr_filter", "jobs.progress", "jobs.predict_options", "jobs.report_options",
           "jobs.build_graphs_options", "vista.synth.summary_table", "trajonco.agents.prompts"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    failures, tried = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0


def test_forwarded_options_modules_import_no_heavy_libraries():
    """``--help`` must answer at once: the options modules of the jobs and the parsers of both command lines (every
    sub-command registered) pull in no Ray, data or model library."""
    import subprocess
    import sys

    code = ("import sys, jobs.predict_options, jobs.report_options, jobs.build_graphs_options, jobs.evaluate_options; "
            "import trajonco.cli, vista.cli; trajonco.cli.build_parser(); vista.cli.build_parser(); "
            "print(sorted(m for m in ('ray', 'pyarrow', 'polars', 'sklearn', 'matplotlib', 'scipy', 'numpy') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
