"""Prediction files as report "models": read, named after the LLM and variant that produced them, and evaluated.

A run of ``jobs.predict`` (its ``predictions.parquet``, read with the ``prediction_details.parquet`` beside it by
`trajonco.prediction_files.read_predictions`) carries ``model`` (the LLM asked for) and ``variant`` columns, which name
it in every table ('one_stage · smollm2-135m-instruct-q4_1'), and who answered: ``backend`` (embedded, openai, ...),
``endpoint_host`` and ``served_model`` (the model as the server named it); the report's caveats key on the backend,
so the report always says which LLM produced the agents' numbers.
Any MEDS-DEV prediction file (subject_id, [prediction_time], predicted_boolean_probability) works too.
Files covering part of a cohort (the agents' subset) are evaluated on the rows they scored; the evaluation's
notes say how many cohort rows had no score.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from baselines import MetricInputError, ModelScores, PredictionFileModel, evaluate
from benchmarks.report.results import ModelResult, UnscoredRun
from benchmarks.report.settings import PredictionSource
from trajonco.prediction_files import read_predictions


@dataclass(frozen=True)
class LoadedPredictions:
    """One prediction file with what it says about itself."""

    source: PredictionSource
    name: str
    llm_model: str | None
    variant: str | None
    frame: pl.DataFrame
    llm_backend: str | None = None  # the backend column (None: not recorded)
    served_model: str | None = None  # the served_model column


def _distinct(frame: pl.DataFrame, column: str) -> str | None:
    if column not in frame.columns:
        return None
    values = sorted({str(v) for v in frame[column].drop_nulls().to_list()})
    return ", ".join(values) if values else None


def load_predictions(source: PredictionSource) -> LoadedPredictions:
    """Read a prediction file (errors name the file and the column) and name it."""
    model = PredictionFileModel(source.path, on_missing="subset")  # validates keys and scores
    frame = pl.from_arrow(read_predictions(source.path))  # with the run's prediction_details.parquet, if any
    llm, variant = _distinct(frame, "model"), _distinct(frame, "variant")
    if source.name:
        name = source.name
    elif llm or variant:
        name = " · ".join(part for part in (variant, llm) if part)
    else:
        name = model.name
    return LoadedPredictions(source=source, name=name, llm_model=llm, variant=variant, frame=frame,
                             llm_backend=_distinct(frame, "backend"), served_model=_distinct(frame, "served_model"))


def evaluate_predictions(loaded: LoadedPredictions, test_labels: pl.DataFrame, *, cohort: str, gap_days: int,
                         n_resamples: int, seed: int) -> tuple[ModelResult | UnscoredRun, ModelScores]:
    """AUROC/AUPRC (with CIs), curves and thresholds of a prediction file on the rows of a cohort it scored.

    Too few scored cases or controls for the metrics give an `UnscoredRun` saying so (the report shows it).
    """
    model = PredictionFileModel(loaded.source.path, name=loaded.name, on_missing="subset")
    scores = model.scores_for(test_labels)
    try:
        evaluation = evaluate(scores, n_resamples=n_resamples, seed=seed)
    except MetricInputError as exc:
        return UnscoredRun(cohort=cohort, model=loaded.name, llm_model=loaded.llm_model, variant=loaded.variant,
                           source=str(loaded.source.path), n_scored=scores.n, reason=str(exc),
                           llm_backend=loaded.llm_backend, served_model=loaded.served_model), scores
    result = ModelResult(cohort=cohort, gap_days=gap_days, model=loaded.name, kind="prediction_file",
                         llm_model=loaded.llm_model, llm_backend=loaded.llm_backend, served_model=loaded.served_model,
                         variant=loaded.variant, source=str(loaded.source.path), evaluation=evaluation)
    return result, scores
