"""The report's command-line options (`benchmarks.report_arguments` parses them) as its `ReportSettings`, checked before any
work: cohort names, prediction files and the output folder up front, settings errors as one line naming the options.
"""

from __future__ import annotations

import argparse
import re

from pydantic import ValidationError

from benchmarks.report.settings import PredictionSource, ReportSettings

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


def check_options(args: argparse.Namespace) -> None:
    """What can be checked before any work: cohort names, prediction files, the output folder (one line each)."""
    from trajonco.cohorts import load_definition
    from vista.shared.cli_kit import check_output_dir
    from vista.shared.errors import CommandLineError

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
