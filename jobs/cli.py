"""The console scripts `trajonco` and `vista`: each system's own sub-commands (`trajonco.cli`, `vista.cli`) plus the
commands that sit above them — the Ray jobs and the report — forwarded to the job modules, which ``ray job submit
-- python -m jobs.<name>`` also runs. (They live here because nothing below `jobs` may import it.)

    trajonco predict --labels COHORT/labels/test.parquet --dataset MEDS --out out/predict-lung
    trajonco report --quick --out out/quick
    vista build --dataset MEDS --out out/vista-job --stages graph,toa,display

``trajonco cohort ... --address ADDR`` is forwarded to ``python -m jobs.data_steps cohort`` (its shard step on that
cluster). A forwarded command's ``--help`` and option mistakes are answered from its options module alone (no Ray, no data
libraries imported), so they come back at once.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Forwarded:
    """A sub-command run by a job module: ``options`` builds its parser (``build_parser(prog)``), ``module`` runs it
    (``main(argv, prog=...)``)."""

    name: str
    summary: str
    module: str
    options: str


TRAJONCO_JOBS = (
    Forwarded("predict", "run the agents over a cohort on Ray: one row per patient, resumable (python -m jobs.predict)",
              "jobs.predict", "jobs.predict_options"),
    Forwarded("report", "baselines, agents and every analysis of the paper in one HTML report (python -m jobs.report)",
              "jobs.report", "benchmarks.report_arguments"),
)
VISTA_JOBS = (
    Forwarded("build", "build a cohort's MEDS Graphs, timelines and displays on Ray into a store the other vista "
              "commands open (python -m jobs.build_graphs)", "jobs.build_graphs", "jobs.build_graphs_options"),
    Forwarded("evaluate-cohort", "score a whole store's displays with an LLM judge on Ray, resumable "
              "(python -m jobs.evaluate)", "jobs.evaluate", "jobs.evaluate_options"),
    Forwarded("query-cohort", "run one query plan over every patient of a store on Ray, one row per patient, "
              "resumable (python -m jobs.query_cohort)", "jobs.query_cohort", "jobs.query_cohort_options"),
)


def _add_forwarded(jobs: Sequence[Forwarded], tool: str):
    def add(sub: argparse._SubParsersAction) -> None:
        for job in jobs:
            sub.add_parser(job.name, help=job.summary, add_help=False,
                           description=f"{job.summary}; see `{tool} {job.name} --help`")
    return add


def _forward(job: Forwarded, tool: str, argv: list[str]) -> int:
    prog = f"{tool} {job.name}"
    if any(a in ("-h", "--help") for a in argv):
        importlib.import_module(job.options).build_parser(prog).parse_args(argv)  # prints the help and exits
    return importlib.import_module(job.module).main(argv, prog=prog)


def _main(tool: str, jobs: Sequence[Forwarded], argv: Sequence[str] | None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if tool == "trajonco" and args[:1] == ["cohort"] and any(a.split("=")[0] == "--address" for a in args):
        from jobs.data_steps import main as data_steps  # on a cluster: the cohort's shard step as Ray Data

        return data_steps(args, prog=tool)
    for job in jobs:
        if args and args[0] == job.name:
            return _forward(job, tool, args[1:])
    if tool == "trajonco":
        from trajonco.cli import main
    else:
        from vista.cli import main
    return main(args, extra=_add_forwarded(jobs, tool))


def trajonco_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `trajonco` console script."""
    return _main("trajonco", TRAJONCO_JOBS, argv)


def vista_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `vista` console script."""
    return _main("vista", VISTA_JOBS, argv)
