"""The options of the VISTA cohort job (`jobs.build_graphs`), apart from the job so that ``--help`` and option
mistakes answer at once: this module imports only argparse-level code.

>>> args = build_parser().parse_args(["--dataset", "meds", "--out", "out/vista", "--chunk-tokens", "4000"])
>>> args.chunk_tokens, args.stages
(4000, 'auto')
"""

from __future__ import annotations

import argparse
from pathlib import Path

from jobs.job_options import add_job_arguments, add_selection_arguments, job_parser
from jobs.llm_options import add_llm_arguments
from vista.cli import add_on_duplicate_option
from vista.shared.cli_kit import add_profile_option
from vista.shared.cli_kit import local_path

DESCRIPTION = """\
Build a cohort's MEDS Graphs, TOA timelines and tumor-board displays on Ray, into a graph store that `vista ask`,
`source`, `display`, `evaluate`, `similar` and `cohort-query` open; resumable (rerun the same command).

example:
  vista build --dataset out/synth --out out/vista-job --stages graph --limit 1000
  vista build --dataset out/synth --out out/vista-job --stages graph,toa,display --model gpt-4.1-mini --base-url URL
  vista build --xml-dir patients/ --out out/vista-xml
"""

EPILOG = """\
Stages, outputs, resume and bad input: docs/jobs.md and docs/cluster.md.
"""


def build_parser(prog: str = "python -m jobs.build_graphs") -> argparse.ArgumentParser:
    """The job's options (light imports only: ``--help`` and option mistakes answer at once)."""
    parser = job_parser(prog, DESCRIPTION, EPILOG, "%(prog)s (--dataset MEDS | --xml-dir DIR) --out OUT [options]")
    io = parser.add_argument_group("inputs and outputs")
    source = io.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset", type=local_path, help="MEDS dataset root (data/**/*.parquet, metadata/)")
    source.add_argument("--xml-dir", type=Path, help="directory of VISTA patient XML files (*.xml, searched recursively)")
    add_profile_option(io)
    add_on_duplicate_option(io)
    io.add_argument("--out", required=True, type=local_path, help="output directory; rerunning the same command resumes there")
    io.add_argument("--labels", type=local_path, help="with --dataset: MEDS label parquet, one task per row cut at its "
                    "prediction_time (default: every subject, whole record)")

    add_selection_arguments(parser, order_note=" (XML: in file-key order)")

    stages = parser.add_argument_group("stages")
    stages.add_argument("--stages", default="auto", help="comma-separated subset of graph,toa,display (graph is always "
                        "included; display needs toa); default auto: graph,toa,display when a model is configured, "
                        "else graph")
    stages.add_argument("--profile", help="TOA event-definition profile: packaged name or TOML path (default thoracic)")
    size = stages.add_mutually_exclusive_group()
    size.add_argument("--chunk-tokens", type=int, help="TOA chunk size limit in tokens (default: fitted to the "
                      "model's context, at most the paper's 120,000 characters)")
    size.add_argument("--chunk-chars", type=int, help="TOA chunk size limit in characters (the paper's unit: 120000)")
    size.add_argument("--chunk-limit", type=int, help=argparse.SUPPRESS)  # deprecated: --chunk-tokens / --chunk-chars
    stages.add_argument("--chunk-unit", choices=["chars", "tokens"], default="chars", help=argparse.SUPPRESS)
    stages.add_argument("--max-events-per-chunk", type=int, help="most events one extraction call may return "
                        "(default 24)")
    stages.add_argument("--answer-tokens", type=int, help="answer token cap of each TOA and display call (default: "
                        "the gateway's max_tokens)")
    stages.add_argument("--no-safety-net", action="store_true", help="skip the TOA radiology safety net")
    stages.add_argument("--no-judge", action="store_true", help="do not ask the judge about ambiguous same-date events")
    stages.add_argument("--variables", type=Path, help="display variable definitions TOML (default: the packaged "
                        "thoracic-oncology list)")
    stages.add_argument("--group-size", type=int, help="display variables per LLM call (default 3)")
    stages.add_argument("--no-summary-note", action="store_true", help="display without the summary note call")

    add_llm_arguments(parser)
    add_job_arguments(parser, task="task's LLM stage",
                      resource_note="with the graph stage only: one actor per CPU, 0.5 CPU each, blocks of 16")
    return parser
