"""The options of the cohort evaluation job (`jobs.evaluate`), apart from the job so that ``--help`` and option
mistakes answer at once: this module imports only argparse-level code."""

from __future__ import annotations

import argparse
from pathlib import Path

from vista.cli_kit import ArgumentParser, HelpFormatter

from jobs.ray_runtime import add_ray_arguments

DESCRIPTION = """\
Score a store's tumor-board displays against the truth with an LLM judge, one Ray task per patient, resumable.

example:
  vista evaluate-cohort --store out/vista-job --truth out/synth --out out/eval --judge-llm model=gpt-4.1
  vista evaluate-cohort --store out/vista-job --references refs.csv --out out/eval-clinicians
"""


def build_parser(prog: str = "python -m jobs.evaluate") -> argparse.ArgumentParser:
    """The job's options (light imports only: ``--help`` and option mistakes answer at once)."""
    parser = ArgumentParser(prog=prog, description=DESCRIPTION, formatter_class=HelpFormatter)
    parser.add_argument("--store", type=Path, required=True, help="store with display/<subject>.json (and graphs)")
    parser.add_argument("--truth", type=Path, help="synthetic dataset root holding ground_truth/oncology.jsonl")
    parser.add_argument("--references", type=Path, metavar="CSV|JSON", help="clinician reference answers "
                        "(docs/clinician_references.md); they replace the generator's record of their patients")
    parser.add_argument("--out", type=Path, required=True, help="output directory (markers, evaluation.json/.md)")
    parser.add_argument("--subjects", type=int, nargs="+", help="only these subject ids")
    parser.add_argument("--judge-llm", action="append", default=[], metavar="KEY=VALUE",
                        help="judge LLM setting (repeatable); default: VISTA_JUDGE_LLM_* variables, else the display "
                        "model's VISTA_LLM_* settings (warned: the paper judges with a different model)")
    parser.add_argument("--threshold", type=int, default=8, help="judge score counted as correct, of 10")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples per CI")
    parser.add_argument("--retry-failed", action="store_true", help="rerun patients whose marker is an error")
    parser.add_argument("--max-in-flight", type=int, default=None, help="patient tasks running at once "
                        "(default: twice the cluster's CPUs)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging, and Ray's own logs")
    add_ray_arguments(parser)
    return parser
