"""The units of work of a report, each runnable in a worker process that holds the MEDS events in memory.

- `CohortTask`: build one cohort (optionally with another gap), describe it (Table 1), featurize its training and
  test labels, fit and score the baselines, and stratify the test results;
- `TruncationTask`: refit and score the baselines with every patient's input window left-truncated to each token
  budget (see `benchmarks.report.timelines`), training and test windows alike.

A cohort that comes out empty is reported as a `CohortSkip` with the builder's reason; any other error propagates.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from baselines import (
    FeatureMatrix,
    ModelScores,
    StratumResult,
    SummaryFeaturizer,
    cohort_strata,
    evaluate,
    fit_and_score,
    make_baselines,
    stratified_results,
)
from benchmarks.report.characteristics import cohort_characteristics
from benchmarks.report.record_length import record_length_results
from benchmarks.report.results import (
    CohortCharacteristics,
    CohortInfo,
    CohortSkip,
    ModelResult,
    TruncationPoint,
)
from benchmarks.report.timelines import WINDOW_START, sample_per_role, token_counts, truncate_events, truncation_windows
from trajonco.cohorts import EmptyCohortError, build_cohort, load_definition

log = logging.getLogger(__name__)
SID, PT = "subject_id", "prediction_time"


@dataclass(frozen=True)
class CohortTask:
    """Build and score one cohort (a definition, optionally with another gap and other sample sizes)."""

    definition: str
    out_dir: Path
    models: tuple[str, ...]
    seed: int
    n_resamples: int
    gap_days: int | None = None  # None: the definition's own gap
    train_cases_cap: int | None = None
    test_cases: int | None = None  # None: the definition's own
    describe: bool = False  # Table 1 of the test cohort (demographics, EHR span, XML tokens)
    token_sample: int | None = None  # Table 1's XML tokens: None every test patient, N a seeded sample per role
    stratify: bool = False
    keep_scores: bool = False
    record_length: bool = False  # also score the record-length baselines (token count of the sample, visit count)

    @property
    def label(self) -> str:
        return f"{self.definition} (gap {self.gap_days} d)" if self.gap_days is not None else self.definition


@dataclass
class CohortOutcome:
    """What a `CohortTask` produced."""

    task: CohortTask
    cohort: str
    gap_days: int
    info: CohortInfo | None = None
    skip: CohortSkip | None = None
    characteristics: CohortCharacteristics | None = None
    results: list[ModelResult] = field(default_factory=list)
    scores: list[ModelScores] = field(default_factory=list)
    strata: pl.DataFrame | None = None
    stratified: list[StratumResult] = field(default_factory=list)
    test_labels: pl.DataFrame | None = None
    train_labels: pl.DataFrame | None = None


def score_baselines(models: tuple[str, ...], train: FeatureMatrix, test: FeatureMatrix, *, cohort: str,
                    gap_days: int, seed: int, n_resamples: int) -> tuple[list[ModelResult], list[ModelScores]]:
    """Fit each named baseline on ``train``, score ``test`` and evaluate (AUROC/AUPRC with bootstrap CIs)."""
    results, all_scores = [], []
    for model in make_baselines(models, seed=seed, n_jobs=1):
        started = time.perf_counter()
        scores = fit_and_score([model], train, test)[0]
        seconds = time.perf_counter() - started
        evaluation = evaluate(scores, n_resamples=n_resamples, seed=seed)
        results.append(ModelResult(cohort=cohort, gap_days=gap_days, model=model.name, kind="baseline",
                                   evaluation=evaluation, seconds=round(seconds, 3), tuning=model.tuning_))
        all_scores.append(scores)
    return results, all_scores


def run_cohort_task(task: CohortTask, events: pl.DataFrame, dataset_root: Path) -> CohortOutcome:
    """Build, describe, featurize, fit, score and stratify one cohort."""
    definition = load_definition(task.definition)
    overrides: dict[str, object] = {"train_target_cases": task.train_cases_cap}
    if task.gap_days is not None:
        overrides["gap_days"] = task.gap_days
    if task.test_cases is not None:
        overrides["test_target_cases"] = task.test_cases
    definition = definition.with_overrides(**overrides)
    outcome = CohortOutcome(task=task, cohort=definition.name, gap_days=definition.gap_days)
    started = time.perf_counter()
    try:
        built = build_cohort(dataset_root, definition, task.out_dir)
    except EmptyCohortError as exc:
        outcome.skip = CohortSkip(cohort=definition.name, gap_days=definition.gap_days, reason=str(exc))
        return outcome
    build_seconds = time.perf_counter() - started
    if built.train is None:
        outcome.skip = CohortSkip(cohort=definition.name, gap_days=definition.gap_days,
                                  reason="the definition has no training splits, so no baseline can be fitted")
        return outcome
    test, train = built.test, built.train
    outcome.test_labels, outcome.train_labels = test, train
    lazy = events.lazy()
    started = time.perf_counter()
    tokens = None
    if task.describe:
        sample = test if task.token_sample is None else sample_per_role(test, task.token_sample, task.seed)
        tokens = token_counts(dataset_root, sample, source=str(built.label_paths["test"]))
        outcome.characteristics = cohort_characteristics(definition.name, lazy, test, tokens, task.token_sample)
    describe_seconds = time.perf_counter() - started
    started = time.perf_counter()
    featurizer = SummaryFeaturizer()
    train_matrix = featurizer.fit_transform(lazy, train, source=str(built.label_paths["train"]))
    test_matrix = featurizer.transform(lazy, test, source=str(built.label_paths["test"]))
    feature_seconds = time.perf_counter() - started
    started = time.perf_counter()
    outcome.results, scores = score_baselines(task.models, train_matrix, test_matrix, cohort=definition.name,
                                              gap_days=definition.gap_days, seed=task.seed,
                                              n_resamples=task.n_resamples)
    if task.record_length:
        lengths, length_scores = record_length_results(definition.name, definition.gap_days, test, lazy, tokens,
                                                       n_resamples=task.n_resamples, seed=task.seed)
        outcome.results += lengths
    if task.keep_scores:
        outcome.scores = scores + (length_scores if task.record_length else [])
    if task.stratify:
        outcome.strata = cohort_strata(test, lazy, source=str(built.label_paths["test"]))
        for model_scores in scores:
            outcome.stratified += stratified_results(model_scores, outcome.strata, n_resamples=task.n_resamples,
                                                     seed=task.seed)
    model_seconds = time.perf_counter() - started
    outcome.info = CohortInfo(
        cohort=definition.name, gap_days=definition.gap_days, test_cases=int(test["boolean_value"].sum()),
        test_controls=int((~test["boolean_value"]).sum()), train_rows=train.height,
        n_features=len(train_matrix.feature_names), labels_dir=str(task.out_dir / "labels"),
        build_seconds=round(build_seconds, 2), describe_seconds=round(describe_seconds, 2), feature_seconds=round(feature_seconds, 2),
        model_seconds=round(model_seconds, 2))
    log.info("%s: %d test rows, %d training rows, %d features", task.label, test.height, train.height,
             len(train_matrix.feature_names))
    return outcome


# ------------------------------------------------------------------------------------------------ truncation
@dataclass(frozen=True)
class TruncationTask:
    """Refit and score baselines with inputs left-truncated to each budget (training and test windows alike)."""

    cohort: str
    train_labels: pl.DataFrame
    test_labels: pl.DataFrame
    budgets: tuple[int, ...]
    models: tuple[str, ...]
    seed: int
    n_resamples: int


@dataclass
class TruncationOutcome:
    task: TruncationTask
    points: list[TruncationPoint]
    render_seconds: float
    fit_seconds: float


def run_truncation_task(task: TruncationTask, events: pl.DataFrame, dataset_root: Path) -> TruncationOutcome:
    """One `TruncationPoint` per budget (and the whole record, budget None) and model."""
    started = time.perf_counter()
    keys = [SID, PT, "boolean_value"]
    everyone = pl.concat([task.train_labels.select(keys), task.test_labels.select(keys)])
    windows = truncation_windows(dataset_root, everyone, task.budgets, source=f"{task.cohort} labels")
    render_seconds = time.perf_counter() - started
    started = time.perf_counter()
    test_windows = windows.filter(pl.col(SID).is_in(task.test_labels[SID].implode()))
    points: list[TruncationPoint] = []
    done: dict[tuple, list[ModelResult]] = {}  # identical windows give identical results: fit once
    first_budget: dict[tuple, int] = {}  # signature -> the budget first fitted on it (0: the whole record)
    for budget in (None, *task.budgets):
        if budget is None:
            per_subject = everyone.select(SID).with_columns(pl.lit(None, pl.Datetime("us")).alias(WINDOW_START))
        else:
            per_subject = windows.filter(pl.col("budget_tokens") == budget).select(SID, WINDOW_START)
        signature = tuple(per_subject.sort(SID)[WINDOW_START].to_list())
        same_as = first_budget.get(signature)
        if signature not in done:
            first_budget[signature] = budget or 0
            lazy = truncate_events(events.lazy(), per_subject) if budget is not None else events.lazy()
            featurizer = SummaryFeaturizer()
            train = featurizer.fit_transform(lazy, task.train_labels, source=f"{task.cohort} training labels")
            test = featurizer.transform(lazy, task.test_labels, source=f"{task.cohort} test labels")
            done[signature], _ = score_baselines(task.models, train, test, cohort=task.cohort, gap_days=0,
                                                 seed=task.seed, n_resamples=task.n_resamples)
        rows = test_windows.filter(pl.col("budget_tokens") == (budget if budget is not None else task.budgets[0]))
        points += [_point(budget, result, rows, same_as) for result in done[signature]]
    return TruncationOutcome(task, points, round(render_seconds, 2), round(time.perf_counter() - started, 2))


def _point(budget: int | None, result: ModelResult, rows: pl.DataFrame, same_as: int | None = None) -> TruncationPoint:
    """A model's result at one budget with what the test patients kept (``rows``: their windows at that budget);
    ``same_as``: the budget whose identical input windows gave this result (0: the whole record)."""
    if budget is None:
        history, tokens, truncated = rows["full_history_years"], rows["full_tokens"], 0.0
    else:
        history, tokens = rows["history_years"], rows["kept_tokens"]
        truncated = float(rows[WINDOW_START].is_not_null().mean())
    return TruncationPoint(
        budget_tokens=budget, model=result.model, auroc=result.evaluation.auroc, auprc=result.evaluation.auprc,
        n_test=rows.height, n_cases=result.evaluation.n_positive, n_controls=result.evaluation.n_negative,
        same_input_as=same_as, share_truncated=truncated, median_history_years=float(history.median()),
        mean_history_years=float(history.mean()), median_kept_tokens=float(tokens.median()))
