"""The doctests of the command-line plumbing: shared help and checks, the light option modules of the jobs, the
stderr filter of Ray's false alarm, the progress line and the synthetic dataset's summary table."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["vista.cli_kit", "jobs.ray_stderr_filter", "jobs.progress", "jobs.predict_options", "jobs.report_options",
           "jobs.build_graphs_options", "vista.synth.summary_table", "trajonco.agents.prompts"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    failures, tried = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0


def test_forwarded_options_modules_import_no_heavy_libraries():
    """``trajonco predict --help`` must answer at once: its options module pulls in no Ray, pyarrow or polars."""
    import subprocess
    import sys

    code = ("import sys, jobs.predict_options, jobs.report_options, jobs.build_graphs_options, jobs.evaluate_options; "
            "print(sorted(m for m in ('ray', 'pyarrow', 'polars', 'sklearn', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
