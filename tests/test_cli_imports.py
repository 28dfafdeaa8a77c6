"""The command lines answer ``--help`` at once: their option modules import no heavy library."""

from __future__ import annotations


def test_forwarded_options_modules_import_no_heavy_libraries():
    """``--help`` must answer at once: the options modules of the jobs and the parsers of both command lines (every
    sub-command registered) pull in no Ray, data or model library."""
    import subprocess
    import sys

    code = ("import sys, jobs.predict_options, benchmarks.report_arguments, jobs.build_graphs_options, jobs.evaluate_options; "
            "import trajonco.cli, vista.cli; trajonco.cli.build_parser(); vista.cli.build_parser(); "
            "print(sorted(m for m in ('ray', 'pyarrow', 'polars', 'sklearn', 'matplotlib', 'scipy', 'numpy') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
