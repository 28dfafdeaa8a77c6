"""report: the TrajOnco benchmark reproduction report, in one command.

    python -m jobs.report --out out/report            # the whole report on the synthetic cohorts (< 30 min, 2 cores)
    python -m jobs.report --out out/quick --quick     # the small CI configuration (a few minutes)
    python -m jobs.report --dataset MEDS --cohorts lung,breast --predictions lung=runs/gpt/predictions.parquet

What it does. Generates (or reuses) the synthetic MEDS dataset, builds every cohort, describes it (Table 1),
fits and scores LR, KNN and XGBoost, runs the sensitivity analyses (trajectory length, time gap) and the
stratified results, then runs the agents with ``jobs.predict`` (one process per variant) on a small subset of
the focus cohort (and the first variant on a few of those patients per truncation budget and per gap,
``--agent-sensitivity``) (the embedded model by default; any OpenAI-compatible endpoint with --backend openai), scores
every prediction file (given or produced), profiles latency and cost, and writes OUT/report.html (one
self-contained file), OUT/results.json (every number) and OUT/figures/*.png. The domain logic lives in
`benchmarks.report`; this module only maps options onto `ReportSettings` and runs ``jobs.predict`` for the agents.

Rerunning the same command reuses the dataset and the agents' finished patients (jobs.predict resumes).

Exit status: 0 when the report is written; 2 for a mistake in the options or inputs (one line, before any work when it
can be found then); 3 when the report is written but holds no scored result (every cohort skipped: one line why).
"""

from __future__ import annotations

import argparse
import logging
import re
import shlex
import subprocess
import sys
import time

from pydantic import ValidationError
from rich.console import Console

from vista.atomic import apply_data_umask
from baselines import BaselineError

from benchmarks.report import AgentRequest, AgentRun, PredictionSource, ReportError, ReportSettings, reproduce
from jobs.errors import job_user_errors
from jobs.report_options import build_parser

log = logging.getLogger("jobs.report")

NOTHING_TO_SHOW = 3
"""Exit status of a report that ran but holds no result (every cohort skipped): it is written, and says why."""

LLM_PASSTHROUGH = ("backend", "base_url", "model", "api_key_env", "context_tokens", "chunk_tokens", "llm_timeout",
                   "max_concurrency", "actors", "preprocess_actors")
"""Options forwarded to ``jobs.predict`` for the agents (same names)."""


SETTING_OPTIONS = {
    "dataset": "dataset", "synth_dir": "synth_dir", "subjects": "synth_subjects", "synth_seed": "synth_seed",
    "cohorts": "cohorts", "focus_cohort": "focus_cohort", "stratify": "stratify_cohorts", "baselines": "baselines",
    "train_cases_cap": "train_cases_cap", "test_cases": "test_cases", "token_sample": "token_sample",
    "resamples": "n_resamples", "seed": "seed", "budgets": "truncation_budgets",
    "truncation_models": "truncation_models", "gap_years": "gap_years", "gap_cohorts": "gap_cohorts",
    "gap_models": "gap_models", "gap_train_cases_cap": "gap_train_cases_cap", "agent_patients": "agent_patients",
    "agent_variants": "agent_variants", "agent_max_tokens": "agent_max_tokens", "workers": "workers",
    "agent_sensitivity": "agent_sensitivity", "agent_sensitivity_patients": "agent_sensitivity_patients",
    "agent_gap_years": "agent_gap_years",
}
"""Command-line option -> `ReportSettings` field."""

QUICK_AGENTS = {"agent_patients": 4, "agent_variants": ("one_stage",), "agent_max_tokens": 1500,
                "agent_sensitivity_patients": 2}
QUICK_AGENT_GAP_YEARS = (0.5, 1.0)
"""Gaps of the agents' quick sensitivity runs (1 year is the lung cohort's own gap: its run is reused)."""


def settings_from_args(args: argparse.Namespace, command: str) -> ReportSettings:
    """The report's settings: defaults (or the quick ones), then every option given."""
    given = {field: getattr(args, option) for option, field in SETTING_OPTIONS.items()
             if getattr(args, option) is not None}
    focus = given.get("focus_cohort", "lung")
    predictions = tuple(PredictionSource(path=p.path, cohort=p.cohort or focus) for p in args.predictions)
    common = {"out": args.out, "predictions": predictions, "usage_ledgers": tuple(args.usage_ledger),
              "command": command}
    if args.quick:
        if "gap_years" not in given:  # the quick gaps: the agents at the shortest one and the cohort's own (reused)
            given.setdefault("agent_gap_years", QUICK_AGENT_GAP_YEARS)
        return ReportSettings.quick_defaults(**(QUICK_AGENTS | given | common))
    return ReportSettings(**(given | common))


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


def check_options(args: argparse.Namespace) -> None:
    """What can be checked before any work: cohort names, prediction files, the output folder (one line each)."""
    from trajonco.cohorts import load_definition
    from vista.cli_kit import check_output_dir
    from vista.errors import CommandLineError

    check_output_dir(args.out, resumable=True)  # a rerun reuses the dataset, cohorts and agents' patients
    for option in ("cohorts", "stratify", "gap_cohorts"):
        for ref in getattr(args, option) or ():
            load_definition(ref)  # an unknown name or a bad TOML: one line naming it
    for prediction in args.predictions:
        if not prediction.path.is_file():
            raise CommandLineError(f"--predictions {prediction.path}: no such file")
    if args.judge_report is not None and not args.judge_report.is_file():
        raise CommandLineError(f"--judge-report {args.judge_report}: no such file")
    for option in ("subjects", "resamples", "workers"):
        value = getattr(args, option)
        if value is not None and value < 1:
            raise CommandLineError(f"--{option} {value}: must be at least 1")


def option_problems(exc: ValidationError) -> str:
    """A settings validation error as one line naming the command-line options (not the settings' field names)."""
    options = {field: option.replace("_", "-") for option, field in SETTING_OPTIONS.items()}
    problems = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else ""
        message = str(error["msg"]).removeprefix("Value error, ")
        for name, option in sorted(options.items(), key=lambda item: -len(item[0])):  # model-level checks name
            message = re.sub(rf"(?<![\w-]){name}:", f"--{option}:", message)  # settings fields: say the options
        problems.append(f"--{options.get(field, field.replace('_', '-'))}: {message}" if field else message)
    return "; ".join(problems)


def agent_output_sections(args: argparse.Namespace, settings: ReportSettings) -> list:
    """The sections built from the agents' own outputs: population insights and the pairwise judge."""
    from benchmarks.report.agent_analyses import JudgeOptions, insights_builder, judge_builder

    builders = [insights_builder(seed=settings.seed)]
    patients = 2 if args.judge_patients is None else args.judge_patients
    if patients > 0 or args.judge_report is not None:
        builders.append(judge_builder(JudgeOptions(llm=list(args.judge_llm), patients=patients or None,
                                                   seed=settings.seed, report=args.judge_report)))
    return builders


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
        apply_data_umask()  # the report holds patient data: private (VISTA_DATA_MODE, vista.atomic)
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
