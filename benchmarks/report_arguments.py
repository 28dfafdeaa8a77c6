"""The report command's options (``trajonco report``, ``python -m jobs.report``), apart from the report so that
``--help`` and option mistakes answer at once: this module imports only argparse-level code (`benchmarks.report.options`
turns the values into `ReportSettings`).

>>> args = build_parser().parse_args(["--quick", "--cohorts", "lung,breast", "--predictions", "lung=p.parquet"])
>>> args.cohorts, args.predictions[0].cohort
(('lung', 'breast'), 'lung')
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NamedTuple

from vista.shared.cli_kit import ArgumentParser, HelpFormatter

DESCRIPTION = """\
The TrajOnco benchmark reproduction report: cohorts, Table 1, LR/KNN/XGBoost, sensitivity analyses, strata, the
agents on a subset (paired with the baselines on the same patients), record-length baseline, population insights,
pairwise judge, latency and cost — one HTML file, results.json and figures/.

example:
  trajonco report --quick --out out/quick
  trajonco report --out out/report
  trajonco report --dataset MEDS --cohorts lung,breast --predictions lung=runs/gpt/predictions.parquet
"""


def _csv(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _ints(value: str) -> tuple[int, ...]:
    return tuple(int(part) for part in _csv(value))


def _floats(value: str) -> tuple[float, ...]:
    return tuple(float(part) for part in _csv(value))


class PredictionArg(NamedTuple):
    """A ``--predictions`` value: the file, and its cohort ("" = the focus cohort)."""

    path: Path
    cohort: str


def _prediction(value: str) -> PredictionArg:
    """``PATH`` (scores the focus cohort) or ``COHORT=PATH``."""
    cohort, sep, path = value.partition("=")
    return PredictionArg(Path(path), cohort) if sep else PredictionArg(Path(value), "")


def build_parser(prog: str = "python -m jobs.report") -> argparse.ArgumentParser:
    """The report's options (light imports only, so ``--help`` and option mistakes answer at once)."""
    parser = ArgumentParser(prog=prog, usage="%(prog)s [--quick] [--out OUT] [options]", description=DESCRIPTION,
                            formatter_class=HelpFormatter)
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
    cohorts.add_argument("--token-sample", type=int, help="render only a seeded sample of N timelines per cohort "
                         "and role for Table 1's token column (default: every test patient)")
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
    agents.add_argument("--agent-sensitivity", choices=["all", "truncation", "gap", "none"],
                        help="run the first variant over the truncation budgets and/or the time gaps, beside the "
                             "baselines (default all; none: off)")
    agents.add_argument("--agent-sensitivity-patients", type=int, help="patients of the subset (half cases) in "
                        "those runs (default: the whole subset; quick 2; 0: off)")
    agents.add_argument("--agent-gap-years", type=_floats, help="gaps (among --gap-years) at which the agents run "
                        "(default: every gap; quick 0.5,1)")
    agents.add_argument("--predictions", type=_prediction, action="append", default=[], metavar="[COHORT=]PATH",
                        help="a prediction file to score (repeatable); COHORT defaults to the focus cohort")
    agents.add_argument("--usage-ledger", type=Path, action="append", default=[],
                        help="a vista.shared.llm usage ledger (parquet or JSON) for the per-agent table (repeatable)")
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
    analyses = parser.add_argument_group("analyses of the agents' outputs")
    analyses.add_argument("--judge-llm", action="append", default=[], metavar="KEY=VALUE",
                          help="LLM setting of the pairwise judge of two agent runs (repeatable); default: "
                               "VISTA_LLM_* / the embedded model, which proves the machinery only")
    analyses.add_argument("--judge-patients", type=int, help="shared patients the judge compares (default 2; 0: no "
                          "judge)")
    analyses.add_argument("--judge-report", type=Path, help="show this judge.json (from `trajonco judge`) instead "
                          "of running the judge")
    run = parser.add_argument_group("run")
    run.add_argument("--workers", type=int, help="worker processes for the cohort work (default 2)")
    run.add_argument("--address", help="Ray cluster for the agents (default: a local Ray)")
    run.add_argument("-v", "--verbose", action="store_true", help="info logging")
    return parser
