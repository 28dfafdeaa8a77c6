"""report: the TrajOnco benchmark reproduction report, in one command (``python -m jobs.report --quick --out DIR``).

The report is `benchmarks.report` (its options: `benchmarks.report_arguments`, their settings:
`benchmarks.report.options`); this module runs ``jobs.predict`` for the agents, one process per variant. What it
does, reruns and exit statuses: docs/jobs.md.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import subprocess
import sys
import time

from pydantic import ValidationError
from rich.console import Console

from baselines import BaselineError
from benchmarks.report import AgentRequest, AgentRun, PredictionSource, ReportError, reproduce
from benchmarks.report.options import agent_output_sections, check_options, option_problems, settings_from_args
from benchmarks.report_arguments import build_parser
from jobs.errors import job_user_errors
from vista.shared.atomic import apply_data_umask

log = logging.getLogger("jobs.report")

NOTHING_TO_SHOW = 3
"""Exit status of a report that ran but holds no result (every cohort skipped): it is written, and says why."""

LLM_PASSTHROUGH = ("backend", "base_url", "model", "api_key_env", "context_tokens", "chunk_tokens", "llm_timeout",
                   "max_concurrency", "actors", "preprocess_actors")
"""Options forwarded to ``jobs.predict`` for the agents (same names)."""


class PredictJobRunner:
    """Runs ``python -m jobs.predict`` once per variant on the agents' subset, each in its own process.

    A process per variant gives each run a fresh local Ray (or a fresh connection to ``--address``): actor pools
    of one variant can never hold the CPUs the next one needs, and the command printed in the report is exactly
    what ran. jobs.predict resumes, so rerunning the report reuses the patients already assessed.
    """

    def __init__(self, args: argparse.Namespace, console: Console):
        self.args = args
        self.console = console

    def predict_argv(self, request: AgentRequest, variant: str) -> list[str]:
        out = request.out_dir / variant
        argv = ["--labels", str(request.labels), "--dataset", str(request.dataset), "--out", str(out),
                "--variant", variant, "--horizon-days", str(request.horizon_days), "--progress-every", "30"]
        argv += ["--any-cancer"] if request.any_cancer else ["--cancer", str(request.cancer)]
        if request.truncate_tokens is not None:
            argv += ["--truncate-tokens", str(request.truncate_tokens)]
        for option in LLM_PASSTHROUGH:
            value = getattr(self.args, option)
            if value is not None:
                argv += [f"--{option.replace('_', '-')}", str(value)]
        for item in self.args.llm:
            argv += ["--llm", item]
        if self.args.address:
            argv += ["--address", self.args.address]
        return argv

    def __call__(self, request: AgentRequest) -> AgentRun:
        started = time.perf_counter()
        sources, commands = [], []
        for variant in request.variants:
            argv = self.predict_argv(request, variant)
            command = [sys.executable, "-m", "jobs.predict", *argv]
            commands.append("python -m jobs.predict " + shlex.join(argv))
            self.console.print(f"[report] agents, {variant}: {commands[-1]}", markup=False, highlight=False)
            done = subprocess.run(command, check=False)
            predictions = request.out_dir / variant / "predictions.parquet"
            if done.returncode == 2 or not predictions.is_file():
                raise ReportError(f"jobs.predict ({variant}) failed with exit status {done.returncode}; its error "
                                  f"is printed above (command: {commands[-1]})")
            if done.returncode != 0:
                self.console.print(f"[report] {variant}: some patients have no output yet; the report scores the "
                                   "others (rerun the same command to finish them)", markup=False)
            sources.append(PredictionSource(path=predictions, cohort=request.cohort))
        return AgentRun(sources=sources, commands=commands, seconds=round(time.perf_counter() - started, 2))


def run(args: argparse.Namespace, argv: list[str], console: Console | None = None, extra_sections=None,
        prog: str = "python -m jobs.report"):
    """The whole job; returns the `benchmarks.report.ReportOutcome`. ``extra_sections``: builders of sections
    added to the report (``ReportData -> Section``, see `benchmarks.report.sections`); default: the analyses of the
    agents' outputs (`agent_output_sections`)."""
    console = console or Console(width=110)
    check_options(args)
    settings = settings_from_args(args, f"{prog} " + shlex.join(argv))
    runner = PredictJobRunner(args, console) if settings.agent_patients > 0 else None
    sections = agent_output_sections(args, settings) if extra_sections is None else extra_sections
    return reproduce(settings, agent_runner=runner, extra_sections=sections,
                     progress=lambda line: console.print(line, markup=False, highlight=False))


def main(argv: list[str] | None = None, prog: str = "python -m jobs.report") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(prog).parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        apply_data_umask()  # the report holds patient data: private (VISTA_DATA_MODE, vista.shared.atomic)
        outcome = run(args, argv, prog=prog)
    except ValidationError as exc:
        print(f"error: {option_problems(exc)}", file=sys.stderr)
        return 2
    except (ReportError, BaselineError, *job_user_errors()) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if outcome.nothing_to_show:
        print(f"error: {outcome.nothing_to_show}; the report {outcome.html} says the same", file=sys.stderr)
        return NOTHING_TO_SHOW
    print(f"report: {outcome.html}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
