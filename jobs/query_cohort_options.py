"""The options of the cohort query job (`jobs.query_cohort`), apart from the job so that ``--help`` and option
mistakes answer at once: this module imports only argparse-level code.

>>> args = build_parser().parse_args(["--store", "s", "--out", "o", "--plan", '{"measure": "hgb"}'])
>>> args.plan, args.question, args.flush_rows
('{"measure": "hgb"}', None, 256)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from jobs.job_options import add_job_arguments, add_selection_arguments, job_parser
from jobs.llm_options import add_llm_arguments

DESCRIPTION = """\
Run one query plan over every patient of a graph store on Ray: one row per patient (value, unit, date, rows matched,
cited ids) in OUT/answers.parquet; resumable (rerun the same command: patients with a row are skipped, and a
question is not asked again — its plan is kept in OUT/plan.json).

example:
  vista query-cohort --store out/vista --out out/anemia \\
      --plan '{"measure": "hemoglobin", "where": {"op": "<", "value": 8}, "during": "carboplatin", "aggregate": "min"}'
  vista query-cohort --store out/vista --out out/hgb --question "lowest hemoglobin during carboplatin"
"""

EPILOG = """\
The plan language: docs/vista-query.md. Outputs, resume and retries: docs/jobs.md.
"""


def build_parser(prog: str = "python -m jobs.query_cohort") -> argparse.ArgumentParser:
    """The job's options (light imports only)."""
    parser = job_parser(prog, DESCRIPTION, EPILOG)
    io = parser.add_argument_group("inputs and outputs")
    io.add_argument("--store", type=Path, required=True, help="graph store directory (vista graph / vista build)")
    io.add_argument("--out", type=Path, required=True, help="output directory (part files, answers.parquet, "
                    "plan.json); rerunning the same command resumes there")
    what = io.add_mutually_exclusive_group(required=True)
    what.add_argument("--plan", help="the plan: JSON, or a JSON file (vista query --plan-schema)")
    what.add_argument("--question", help="a question in words: planned once by the model (with the first patient's "
                      "names), the plan kept in OUT/plan.json")
    io.add_argument("--subjects", type=int, nargs="+", help="only these subject ids")
    add_selection_arguments(parser)
    add_llm_arguments(parser)
    add_job_arguments(parser, task="patient")
    return parser
