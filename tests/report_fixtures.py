"""A complete `ReportData` built by hand from seeded scores (no dataset, no Ray, no LLM): every section of the
report has content, including the cases that must be shown honestly (an agent run on 2 cases + 2 controls, strata
too small for a CI, a stratum AUROC whose CI reaches far below the usual axis).

Used by the report's unit tests and the headless-browser test; seconds to build."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

from baselines import ModelScores, evaluate, stratified_results
from benchmarks.report.dataset import DatasetSource
from benchmarks.report.paired import paired_comparisons
from benchmarks.report.predictions import load_predictions
from benchmarks.report.profile import run_profile, selection_view
from benchmarks.report.realism import realism_verdict
from benchmarks.report.record_length import TOKENS, VISITS
from benchmarks.report.report_data import ReportData, ReportResults, Timing
from benchmarks.report.agent_sensitivity import score_point
from benchmarks.report.results import (
    CohortCharacteristics,
    CohortInfo,
    CohortStrata,
    GapPoint,
    GroupCharacteristics,
    ModelResult,
    Quantiles,
    TruncationPoint,
)
from benchmarks.report.settings import PredictionSource, ReportSettings

RESAMPLES = 60
WHEN = datetime(2020, 1, 1)


def _scores(model: str, ids: np.ndarray, labels: np.ndarray, signal: float, rng: np.random.Generator) -> ModelScores:
    raw = rng.normal(size=ids.size) + signal * labels
    return ModelScores(model, ids, np.full(ids.size, np.datetime64(WHEN, "us")), labels, 1 / (1 + np.exp(-raw)))


def _group(n: int, tokens: list[float], span: list[float]) -> GroupCharacteristics:
    return GroupCharacteristics(n=n, age_years=Quantiles.of([55, 63, 71]), sex={"F": n // 2, "M": n - n // 2},
                                race={"White": n}, ethnicity={"Unknown": n}, ehr_span_years=Quantiles.of(span),
                                xml_tokens=Quantiles.of(tokens))


def _agent_file(path: Path, ids: np.ndarray, labels: np.ndarray, llm: str, variant: str, rng) -> Path:
    n = ids.size
    frame = pl.DataFrame({
        "subject_id": ids, "prediction_time": [WHEN] * n, "boolean_value": labels,
        "predicted_boolean_probability": np.clip(0.4 * labels + rng.uniform(0, 0.6, n), 0, 1), "model": [llm] * n,
        "variant": [variant] * n, "status": ["ok"] * n, "latency_total_s": rng.uniform(5, 30, n),
        "wall_s": rng.uniform(6, 31, n), "latency_workers_s": rng.uniform(3, 20, n),
        "latency_manager_s": rng.uniform(1, 5, n), "prompt_tokens": rng.integers(1000, 5000, n),
        "completion_tokens": rng.integers(100, 500, n), "cost_usd": rng.uniform(0.001, 0.01, n),
        "unpriced_calls": [0] * n, "llm_calls": rng.integers(2, 8, n), "cache_hits": [0] * n,
        "timeline_tokens": rng.integers(800, 2500, n), "n_chunks": rng.integers(1, 4, n),
    })
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(path)
    return path


def build_report_data(out: Path, *, llm: str = "smollm2-135m-instruct-q4_1", seed: int = 0) -> ReportData:
    """A report on two cohorts (lung, any_cancer): 3 baselines + 2 record-length scores each, two agent runs on lung
    (2+2 and 12+12 patients), strata, truncation and gap points, a latency profile and model selection."""
    rng = np.random.default_rng(seed)
    settings = ReportSettings.quick_defaults(out=out, n_resamples=RESAMPLES,
                                             command="python -m jobs.report --quick --out " + str(out))
    cohorts, results, scores, strata = [], [], {}, []
    for cohort, n in (("lung", 43), ("any_cancer", 60)):
        ids = np.arange(1, 2 * n + 1) + (0 if cohort == "lung" else 1000)
        labels = np.arange(2 * n) < n
        mine = [_scores(m, ids, labels, s, rng) for m, s in (("logistic_regression", 1.2), ("knn", 0.8),
                                                             ("xgboost", 1.4), (TOKENS, 0.9), (VISITS, 0.7))]
        for s in mine:
            kind = "record_length" if s.model.startswith("record length") else "baseline"
            results.append(ModelResult(cohort=cohort, gap_days=365, model=s.model, kind=kind,
                                       evaluation=evaluate(s, n_resamples=RESAMPLES), seconds=0.4))
        scores[cohort] = mine
        cohorts.append(CohortInfo(cohort=cohort, gap_days=365, test_cases=n, test_controls=n, train_rows=400,
                                  n_features=250, labels_dir=str(out / cohort), build_seconds=1.0,
                                  feature_seconds=1.0, model_seconds=1.0))
        frame = pl.DataFrame({"subject_id": ids, "prediction_time": [WHEN] * ids.size,
                              "sex": np.where(ids % 2 == 0, "F", "M"),
                              "age_group": np.where(ids % 7 == 0, "90–99", np.where(ids % 3 == 0, "60–69", "70–79"))})
        strata.append(CohortStrata(cohort=cohort, results=[
            r for s in mine[:2] for r in stratified_results(s, frame, n_resamples=RESAMPLES)]))
    agents, sources = [], []
    for variant, per_role in (("one_stage", 2), ("two_stage", 12)):
        ids = np.concatenate([np.arange(1, per_role + 1), np.arange(44, 44 + per_role)])
        labels = np.arange(ids.size) < per_role
        path = _agent_file(out / "agents" / variant / "predictions.parquet", ids, labels, llm, variant, rng)
        loaded = load_predictions(PredictionSource(path=path, cohort="lung"))
        frame = loaded.frame
        s = ModelScores(loaded.name, ids, np.full(ids.size, np.datetime64(WHEN, "us")), labels,
                        frame["predicted_boolean_probability"].to_numpy(), n_missing=86 - ids.size)
        results.append(ModelResult(cohort="lung", gap_days=365, model=loaded.name, kind="prediction_file",
                                   llm_model=llm, variant=variant, source=str(path),
                                   evaluation=evaluate(s, n_resamples=RESAMPLES)))
        agents.append(s)
        sources.append(loaded)
    paired = paired_comparisons("lung", agents, scores["lung"], results, n_resamples=RESAMPLES, seed=seed)
    profiles = [run_profile(x) for x in sources]
    lung_baselines = [r for r in results if r.cohort == "lung" and r.kind == "baseline"]
    best = {c: max(r.evaluation.auroc.value for r in results if r.cohort == c and r.kind == "baseline")
            for c in ("lung", "any_cancer")}
    lung_eval = next(r for r in results if r.model == "logistic_regression").evaluation
    truncation = [TruncationPoint(budget_tokens=b, model="logistic_regression", auroc=lung_eval.auroc,
                                  auprc=lung_eval.auprc, n_test=86, n_cases=43, n_controls=43,
                                  share_truncated=0.5 if b else 0.0,
                                  median_history_years=2.0 if b else 6.0, mean_history_years=2.5,
                                  median_kept_tokens=float(b or 9000)) for b in (2000, None)]
    gaps = [GapPoint(cohort="lung", gap_years=y, gap_days=int(365 * y), model="logistic_regression", n_cases=40,
                     n_controls=40, auroc=lung_eval.auroc) for y in (0.5, 1.0)]
    agent_truncation, agent_gaps = agent_sensitivity_points(out, sources[0].source.path, rng)
    characteristics = [CohortCharacteristics(cohort=c, cases=_group(43, [4000, 6000, 9000], [5, 7, 9]),
                                             controls=_group(43, [1500, 2500, 3500], [3, 4, 6]),
                                             token_sample_per_role=None) for c in ("lung", "any_cancer")]
    report = ReportResults(
        settings=settings, dataset=DatasetSource(root=str(out / "dataset"), synthetic=True, generated_now=False,
                                                 seconds=0.0, subjects=4000),
        cohorts=cohorts, skips=[], characteristics=characteristics, focus_cohort="lung", results=results,
        paired=paired, truncation_cohort="lung", truncation=truncation, gaps=gaps, strata=strata, profiles=profiles,
        agent_truncation=agent_truncation, agent_gaps=agent_gaps,
        agent_roles=[], selection=selection_view(profiles, [r for r in results if r.kind == "prediction_file"],
                                                 lung_baselines),
        realism=realism_verdict(best, (0.6, 0.9), synthetic=True), agent_request=None,
        commands=[settings.command, "python -m jobs.predict --labels x"], timings=[Timing(step="all", seconds=1.0)],
        total_seconds=1.0)
    return ReportData(results=report, scores=scores, predictions=sources)


def agent_sensitivity_points(out: Path, full_run: Path, rng: np.random.Generator):
    """The one-stage run (2 + 2 patients) at the whole record, a 2,000-token budget (its own file), a 32,000 budget
    (reusing the whole-record file) and gaps of 0.5 y (1 case + 1 control: no CI) and 1 y (reused)."""
    labels = pl.read_parquet(full_run).select("subject_id", "prediction_time", "boolean_value")
    frame = pl.read_parquet(full_run)
    truncated = out / "agents" / "sensitivity" / "truncate_2000" / "one_stage" / "predictions.parquet"
    truncated.parent.mkdir(parents=True, exist_ok=True)
    frame.with_columns(pl.Series("predicted_boolean_probability", rng.uniform(0, 1, frame.height))).write_parquet(
        truncated)
    gap = out / "agents" / "sensitivity" / "gap_183d" / "one_stage" / "predictions.parquet"
    gap.parent.mkdir(parents=True, exist_ok=True)
    one_each = frame.filter(pl.col("subject_id").is_in([1, 44]))
    one_each.write_parquet(gap)
    common = {"cohort": "lung", "n_resamples": RESAMPLES, "seed": 0, "longest_timeline_tokens": 1400}
    truncation = [score_point(full_run, labels, analysis="truncation", gap_days=365, reused_full_run=True, **common),
                  score_point(truncated, labels, analysis="truncation", gap_days=365, budget_tokens=2000, **common),
                  score_point(full_run, labels, analysis="truncation", gap_days=365, budget_tokens=32000,
                              reused_full_run=True, **common)]
    gaps = [score_point(gap, one_each.select(labels.columns), analysis="gap", gap_days=183, gap_years=0.5, **common),
            score_point(full_run, labels, analysis="gap", gap_days=365, gap_years=1.0, reused_full_run=True, **common)]
    return truncation, gaps
