"""The options of the cohort evaluation job (`jobs.evaluate`), apart from the job so that ``--help`` and option
mistakes answer at once: this module imports only argparse-level code.

>>> args = build_parser().parse_args(["--store", "s", "--truth", "t", "--out", "o", "--max-in-flight", "8"])
>>> args.in_flight, args.threshold, args.retry_failed, args.flush_rows
(8, 8, False, 256)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from jobs.job_options import add_job_arguments, add_selection_arguments, job_parser

DESCRIPTION = """\
Score a store's tumor-board displays against the truth with an LLM judge, on Ray's patient actors, resumable (rerun
the same command).

example:
  vista evaluate-cohort --store out/vista-job --truth out/synth --out out/eval --judge-llm model=gpt-4.1
  vista evaluate-cohort --store out/vista-job --references refs.csv --out out/eval-clinicians
"""

EPILOG = """\
Outputs, resume and retries: docs/jobs.md.
"""


def build_parser(prog: str = "python -m jobs.evaluate") -> argparse.ArgumentParser:
    """The job's options (light imports only: ``--help`` and option mistakes answer at once)."""
    parser = job_parser(prog, DESCRIPTION, EPILOG)
    io = parser.add_argument_group("inputs and outputs")
    io.add_argument("--store", type=Path, required=True, help="store with display/<subject>.json (and graphs)")
    io.add_argument("--truth", type=Path, help="synthetic dataset root holding ground_truth/oncology.jsonl")
    io.add_argument("--references", type=Path, metavar="CSV|JSON", help="clinician reference answers "
                    "(docs/clinician_references.md); they replace the generator's record of their patients")
    io.add_argument("--out", type=Path, required=True, help="output directory (part files, evaluated.parquet, "
                    "evaluation.json/.md); rerunning the same command resumes there")
    io.add_argument("--subjects", type=int, nargs="+", help="only these subject ids")
    add_selection_arguments(parser)

    judge = parser.add_argument_group("the judge")
    judge.add_argument("--judge-llm", action="append", default=[], metavar="KEY=VALUE",
                       help="judge LLM setting (repeatable); default: VISTA_JUDGE_LLM_* variables, else the display "
                       "model's VISTA_LLM_* settings (warned: the paper judges with a different model)")
    judge.add_argument("--threshold", type=int, default=8, help="judge score counted as correct, of 10")
    judge.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples per CI")
    judge.add_argument("--max-concurrency", type=int, help="judge requests in flight per actor (default 4)")
    judge.add_argument("--requests-per-second", type=float, help="judge requests started per second over the whole "
                       "job (default: no limit)")
    judge.add_argument("--tokens-per-minute", type=int, help="judge prompt + completion tokens per minute over the "
                       "whole job (default: no limit)")

    add_job_arguments(parser, task="patient")
    parser.add_argument("--max-in-flight", type=int, dest="in_flight", help="same as --in-flight (kept for older "
                        "commands)")
    return parser
