"""report: the TrajOnco benchmark reproduction report, in one command.

    python -m jobs.report --out out/report            # the whole report on the synthetic cohorts (< 30 min, 2 cores)
    python -m jobs.report --out out/quick --quick     # the small CI configuration (a few minutes)
    python -m jobs.report --dataset MEDS --cohorts lung,breast --predictions lung=runs/gpt/predictions.parquet

What it does. Generates (or reuses) the synthetic MEDS dataset, builds every cohort, describes it (Table 1),
fits and scores LR, KNN and XGBoost, runs the sensitivity analyses (trajectory length, time gap) and the
stratified results, then runs the agents with ``jobs.predict`` (one process per variant) on a small subset of
the focus cohort (the embedded model by default; any OpenAI-compatible endpoint with --backend openai), scores
every prediction file (given or produced), profiles latency and cost, and writes OUT/report.html (one
self-contained file), OUT/results.json (every number) and OUT/figures/*.png. The domain logic lives in
`benchmarks.report`; this module only maps options onto `ReportSettings` and runs ``jobs.predict`` for the agents.

Rerunning the same command reuses the dataset and the agents' finished patients (jobs.predict resumes).
"""

from __future__ import annotations

import argparse
import logging
import shlex
import subprocess
import sys
import time
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console

from baselines import BaselineError

from benchmarks.report import AgentRequest, AgentRun, PredictionSource, ReportError, ReportSettings, reproduce
from jobs.errors import job_user_errors

log = logging.getLogger("jobs.report")

LLM_PASSTHROUGH = ("backend", "base_url", "model", "api_key_env", "context_tokens", "chunk_tokens", "llm_timeout",
                   "max_concurrency", "actors", "preprocess_actors")
"""Options forwarded to ``jobs.predict`` for the agents (same names)."""


def _csv(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _ints(value: str) -> tuple[int, ...]:
    return tuple(int(part) for part in _csv(value))


def _floats(value: str) -> tuple[float, ...]:
    return tuple(float(part) for part in _csv(value))


def _prediction(value: str) -> PredictionSource:
    """``PATH`` (scores the focus cohort) or ``COHORT=PATH``."""
    cohort, sep, path = value.partition("=")
    return PredictionSource(path=Path(path), cohort=cohort) if sep else PredictionSource(path=Path(value), cohort="")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("out/report"), help="report folder (default out/report)")
    parser.add_argument("--quick", action="store_true", help="small CI configuration: 4,000 subjects, lung + "
                        "any-cancer, 3 budgets and gaps, 4 agent patients (one_stage)")
    data = parser.add_argument_group("data")
    data.add_argument("--dataset", type=Path, help="use this MEDS dataset instead of the synthetic one")
    data.add_argument("--synth-dir", type=Path, help="where to generate or reuse the synthetic dataset "
                      "(default OUT/dataset)")
    data.add_argument("--subjects", type=int, help="synthetic subjects (default 50000; quick 4000)")
    data.add_argument("--synth-seed", type=int, help="seed of the synthetic dataset (default 0)")
    cohorts = parser.add_argument_group("cohorts and models")
    cohorts.add_argument("--cohorts", type=_csv, help="comma-separated definitions (built-in names or TOML paths); "
                         "default: the 15 cancers and any_cancer")
    cohorts.add_argument("--focus-cohort", help="cohort of the ROC/PR figure, trajectory length and agents (lung)")
    cohorts.add_argument("--stratify", type=_csv, help="cohorts with stratified results (default lung,any_cancer)")
    cohorts.add_argument("--baselines", type=_csv, help="baselines (default logistic_regression,knn,xgboost)")
    cohorts.add_argument("--train-cases-cap", type=int, help="training cases per cohort at most (default 2000)")
    cohorts.add_argument("--test-cases", type=int, help="test cases per cohort (default: the definition's, 500)")
    cohorts.add_argument("--token-sample", type=int, help="timelines rendered per cohort and role for the token "
                         "column (default 100)")
    cohorts.add_argument("--resamples", type=int, help="bootstrap resamples per CI (default 1000)")
    cohorts.add_argument("--seed", type=int, help="seed of models, bootstraps and samples (default 0)")
    sens = parser.add_argument_group("sensitivity analyses")
    sens.add_argument("--budgets", type=_ints, help="left-truncation budgets in tokens, comma-separated "
                      "(default 2000,...,256000; empty string: none)")
    sens.add_argument("--truncation-models", type=_csv, help="baselines refitted per budget (default: all three)")
    sens.add_argument("--gap-years", type=_floats, help="gaps in years (default 0.5,1,2,3,4,5; empty string: none)")
    sens.add_argument("--gap-cohorts", type=_csv, help="cohorts rebuilt per gap (default: the 15 cancers)")
    sens.add_argument("--gap-models", type=_csv, help="baselines refitted per gap (default xgboost)")
    sens.add_argument("--gap-train-cases-cap", type=int, help="training cases of the gap cohorts at most (default 400)")
    agents = parser.add_argument_group("agents (jobs.predict on a subset of the focus cohort)")
    agents.add_argument("--agent-patients", type=int, help="patients (half cases) the agents assess (default 4; "
                        "0: none)")
    agents.add_argument("--agent-variants", type=_csv, help="variants (default one_stage,two_stage,single_agent)")
    agents.add_argument("--agent-max-tokens", type=int, help="longest timeline admitted to the subset (default 2500)")
    agents.add_argument("--predictions", type=_prediction, action="append", default=[], metavar="[COHORT=]PATH",
                        help="a prediction file to score (repeatable); COHORT defaults to the focus cohort")
    agents.add_argument("--usage-ledger", type=Path, action="append", default=[],
                        help="a vista.llm usage ledger (parquet or JSON) for the per-agent table (repeatable)")
    agents.add_argument("--backend", choices=["embedded", "openai"],
                        help="LLM backend of the agents (default embedded)")
    agents.add_argument("--base-url", help="endpoint root for --backend openai")
    agents.add_argument("--model", help="model name sent to the endpoint")
    agents.add_argument("--api-key-env", help="environment variable holding the API key")
    agents.add_argument("--context-tokens", type=int, help="the model's context window (default: ask the endpoint)")
    agents.add_argument("--chunk-tokens", type=int, help="chunk limit l (default: jobs.predict's)")
    agents.add_argument("--llm-timeout", type=float, help="seconds per LLM request")
    agents.add_argument("--max-concurrency", type=int, help="LLM requests in flight per actor")
    agents.add_argument("--actors", type=int, help="patient actors of jobs.predict (default: its own; on 2 CPUs with "
                        "an HTTP endpoint pass 2, or the two-stage actor pools reserve every CPU)")
    agents.add_argument("--preprocess-actors", type=int, help="two-stage preprocessor actors of jobs.predict")
    agents.add_argument("--llm", action="append", default=[], metavar="KEY=VALUE", help="other LLMConfig fields")
    run = parser.add_argument_group("run")
    run.add_argument("--workers", type=int, help="worker processes for the cohort work (default 2)")
    run.add_argument("--address", help="Ray cluster for the agents (default: a local Ray)")
    run.add_argument("-v", "--verbose", action="store_true", help="info logging")
    return parser


SETTING_OPTIONS = {
    "dataset": "dataset", "synth_dir": "synth_dir", "subjects": "synth_subjects", "synth_seed": "synth_seed",
    "cohorts": "cohorts", "focus_cohort": "focus_cohort", "stratify": "stratify_cohorts", "baselines": "baselines",
    "train_cases_cap": "train_cases_cap", "test_cases": "test_cases", "token_sample": "token_sample",
    "resamples": "n_resamples", "seed": "seed", "budgets": "truncation_budgets",
    "truncation_models": "truncation_models", "gap_years": "gap_years", "gap_cohorts": "gap_cohorts",
    "gap_models": "gap_models", "gap_train_cases_cap": "gap_train_cases_cap", "agent_patients": "agent_patients",
    "agent_variants": "agent_variants", "agent_max_tokens": "agent_max_tokens", "workers": "workers",
}
"""Command-line option -> `ReportSettings` field."""

QUICK_AGENTS = {"agent_patients": 4, "agent_variants": ("one_stage",), "agent_max_tokens": 1500}


def settings_from_args(args: argparse.Namespace, command: str) -> ReportSettings:
    """The report's settings: defaults (or the quick ones), then every option given."""
    given = {field: getattr(args, option) for option, field in SETTING_OPTIONS.items()
             if getattr(args, option) is not None}
    focus = given.get("focus_cohort", "lung")
    predictions = tuple(p if p.cohort else p.model_copy(update={"cohort": focus}) for p in args.predictions)
    common = {"out": args.out, "predictions": predictions, "usage_ledgers": tuple(args.usage_ledger),
              "command": command}
    if args.quick:
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


def run(args: argparse.Namespace, argv: list[str], console: Console | None = None):
    """The whole job; returns the `benchmarks.report.ReportOutcome`."""
    console = console or Console(width=110)
    settings = settings_from_args(args, "python -m jobs.report " + shlex.join(argv))
    runner = PredictJobRunner(args, console) if settings.agent_patients > 0 else None
    return reproduce(settings, agent_runner=runner, progress=lambda line: console.print(line, markup=False,
                                                                                          highlight=False))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        outcome = run(args, argv)
    except (ReportError, ValidationError, BaselineError, *job_user_errors()) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"report: {outcome.html}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
