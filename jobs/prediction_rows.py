"""One flat prediction row per task: MEDS-DEV's prediction columns, then the project's own (risk, evidence, usage).

A row is built from a `PatientResult` / `AnyCancerResult`, or from the exception that stopped the task (an error
row: ``status="error"``, the reason in ``error_kind``). Nested parts (the risk trajectory, the events with their
MEDS provenance, the per-cancer scores) are JSON strings, so the parquet file stays flat and readable by any tool.

``predicted_boolean_probability`` is ``risk_score / 10``: a ranking score for AUROC/AUPRC, not a calibrated
probability; ``predicted_boolean_value`` thresholds it (``--threshold``, default 0.5, i.e. risk >= 5).

Columns that depend on the run rather than the patient: usage (a cache hit costs 0 tokens), ``latency_*``,
``wall_s``, ``run_id`` and ``finished_at``; everything else is the same whichever run computed the row.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone
from typing import Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from trajonco.agents.results import AnyCancerResult, PatientResult
from jobs.job_gateway import TaskUsage
from jobs.tasks import TaskKey

RowStatus = Literal["ok", "partial", "failed", "error"]
UNSCORED: frozenset[str] = frozenset({"failed", "error"})
"""Statuses of rows without a score (marker ``<name>.failed.json``; re-run with ``--retry-failed``)."""

RUN_DEPENDENT_COLUMNS = (
    "llm_calls", "cache_hits", "failed_calls", "prompt_tokens", "completion_tokens", "cost_usd", "unpriced_calls",
    "latency_preprocess_s", "latency_workers_s", "latency_manager_s", "latency_single_agent_s", "latency_total_s",
    "wall_s", "run_id", "finished_at",
)
"""Columns whose values depend on the run (cache state, machine load), not only on the patient and the settings."""

_MAX_ERROR_CHARS = 2000


class PredictionRow(BaseModel):
    """One task's row of ``predictions.parquet`` (and the ``row`` of its per-patient JSON)."""

    model_config = ConfigDict(extra="forbid")

    subject_id: int
    prediction_time: datetime | None
    boolean_value: bool | None = Field(description="the label, copied from the label file")
    predicted_boolean_value: bool | None = Field(description="predicted_boolean_probability >= threshold")
    predicted_boolean_probability: float | None = Field(description="risk_score / 10 (a ranking score)")
    cancer: str = Field(description="the cancer assessed, or 'any' for the any-cancer max pooling")
    strongest_cancer: str | None = Field(None, description="any-cancer: the cancer carrying the highest score")
    variant: str
    model: str
    status: RowStatus = Field(description="ok | partial (some LLM calls failed) | failed (no score) | error (the task raised)")
    error_kind: str | None = Field(None, description="why a row is failed/error: llm_call_failed, data, timeline, "
                                   "context_budget, timeout, internal")
    error: str | None = None
    risk_score: int | None = None
    cancer_scores: str | None = Field(None, description="any-cancer: JSON list of {cancer, risk_score, status}")
    risk_trajectory: str = Field("[]", description="JSON list of the workers' per-chunk risk levels")
    events: str = Field("[]", description="JSON list of the final events, each with its MEDS source rows")
    summary: str | None = None
    reasoning: str | None = None
    n_chunks: int | None = None
    n_chunks_reduced: int | None = None
    timeline_events: int | None = None
    timeline_tokens: int | None = None
    llm_calls: int = 0
    cache_hits: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = Field(0, description="calls whose model has no price (their cost is not in cost_usd)")
    latency_preprocess_s: float | None = None
    latency_workers_s: float | None = None
    latency_manager_s: float | None = None
    latency_single_agent_s: float | None = None
    latency_total_s: float | None = None
    wall_s: float = Field(0.0, description="wall time of the task in its actor, reading the record included")
    run_id: str
    finished_at: datetime

    @property
    def key(self) -> TaskKey:
        return TaskKey(self.subject_id, self.prediction_time)

    @property
    def scored(self) -> bool:
        return self.status not in UNSCORED


PREDICTION_SCHEMA = pa.schema([
    pa.field("subject_id", pa.int64(), nullable=False),
    pa.field("prediction_time", pa.timestamp("us")),
    pa.field("boolean_value", pa.bool_()),
    pa.field("predicted_boolean_value", pa.bool_()),
    pa.field("predicted_boolean_probability", pa.float64()),
    pa.field("cancer", pa.string()),
    pa.field("strongest_cancer", pa.string()),
    pa.field("variant", pa.string()),
    pa.field("model", pa.string()),
    pa.field("status", pa.string()),
    pa.field("error_kind", pa.string()),
    pa.field("error", pa.string()),
    pa.field("risk_score", pa.int8()),
    pa.field("cancer_scores", pa.string()),
    pa.field("risk_trajectory", pa.string()),
    pa.field("events", pa.string()),
    pa.field("summary", pa.string()),
    pa.field("reasoning", pa.string()),
    pa.field("n_chunks", pa.int32()),
    pa.field("n_chunks_reduced", pa.int32()),
    pa.field("timeline_events", pa.int32()),
    pa.field("timeline_tokens", pa.int32()),
    pa.field("llm_calls", pa.int32()),
    pa.field("cache_hits", pa.int32()),
    pa.field("failed_calls", pa.int32()),
    pa.field("prompt_tokens", pa.int64()),
    pa.field("completion_tokens", pa.int64()),
    pa.field("cost_usd", pa.float64()),
    pa.field("unpriced_calls", pa.int32()),
    pa.field("latency_preprocess_s", pa.float64()),
    pa.field("latency_workers_s", pa.float64()),
    pa.field("latency_manager_s", pa.float64()),
    pa.field("latency_single_agent_s", pa.float64()),
    pa.field("latency_total_s", pa.float64()),
    pa.field("wall_s", pa.float64()),
    pa.field("run_id", pa.string()),
    pa.field("finished_at", pa.timestamp("us", tz="UTC")),
])
"""``predictions.parquet``: MEDS-DEV's five prediction columns first, then the project's."""

assert PREDICTION_SCHEMA.names == list(PredictionRow.model_fields), "keep PREDICTION_SCHEMA in step with PredictionRow"


def rows_to_table(rows: list[PredictionRow]) -> pa.Table:
    """Rows as an arrow table with `PREDICTION_SCHEMA`."""
    return pa.Table.from_pylist([row.model_dump() for row in rows], schema=PREDICTION_SCHEMA)


# --------------------------------------------------------------------------------------------- building rows
class RowContext(BaseModel):
    """What every row of a run shares."""

    model_config = ConfigDict(frozen=True)

    cancer: str
    variant: str
    model: str
    threshold: float = Field(0.5, ge=0.0, le=1.0)
    run_id: str


def _usage_fields(usage: TaskUsage) -> dict[str, int | float]:
    return {
        "llm_calls": usage.calls, "cache_hits": usage.cache_hits, "failed_calls": usage.failed_calls,
        "prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
        "cost_usd": round(usage.cost_usd, 10), "unpriced_calls": usage.unpriced_calls,
    }


def _errors_text(result: PatientResult) -> str | None:
    if not result.errors:
        return None
    parts = [f"{e.agent}{'' if e.chunk_index is None else f'[{e.chunk_index}]'}: {e.message}" for e in result.errors]
    return "; ".join(parts)[:_MAX_ERROR_CHARS]


def _trajectory_json(result: PatientResult) -> str:
    return json.dumps([step.model_dump(mode="json") for step in result.risk_trajectory], ensure_ascii=False)


def _events_json(result: PatientResult) -> str:
    return json.dumps([event.model_dump(mode="json") for event in result.events], ensure_ascii=False)


def row_from_result(
    key: TaskKey, label: bool | None, result: PatientResult | AnyCancerResult, usage: TaskUsage,
    context: RowContext, *, wall_s: float,
) -> PredictionRow:
    """The row of a task that ran to the end (its status says whether the LLM calls all succeeded)."""
    if isinstance(result, AnyCancerResult):
        shown = next((r for r in result.results if r.cancer == result.strongest_cancer), None)
        basis = result.results[0] if result.results else None
        latency = {
            stage: sum(getattr(r.latency, stage) for r in result.results)
            for stage in ("preprocess", "workers", "manager", "single_agent")
        }
        total = result.latency_total
        scores = json.dumps([s.model_dump(mode="json") for s in result.scores])
        errors = "; ".join(filter(None, (_errors_text(r) for r in result.results)))[:_MAX_ERROR_CHARS] or None
        strongest = result.strongest_cancer
    else:
        shown = basis = result
        latency = {stage: getattr(result.latency, stage) for stage in ("preprocess", "workers", "manager", "single_agent")}
        total = result.latency.total
        scores = None
        errors = _errors_text(result)
        strongest = None
    probability = result.probability
    status = result.status
    return PredictionRow(
        subject_id=key.subject_id, prediction_time=key.prediction_time, boolean_value=label,
        predicted_boolean_value=None if probability is None else probability >= context.threshold,
        predicted_boolean_probability=probability,
        cancer=context.cancer, strongest_cancer=strongest, variant=context.variant,
        model=basis.model if basis is not None else context.model,
        status=status, error_kind="llm_call_failed" if status == "failed" else None, error=errors,
        risk_score=result.risk_score, cancer_scores=scores,
        risk_trajectory=_trajectory_json(shown) if shown is not None else "[]",
        events=_events_json(shown) if shown is not None else "[]",
        summary=shown.summary if shown is not None else None, reasoning=shown.reasoning if shown is not None else None,
        n_chunks=basis.chunks.n_chunks if basis is not None else None,
        n_chunks_reduced=basis.chunks.n_chunks_reduced if basis is not None else None,
        timeline_events=basis.chunks.timeline_events if basis is not None else None,
        timeline_tokens=basis.chunks.timeline_tokens if basis is not None else None,
        **_usage_fields(usage),
        latency_preprocess_s=latency["preprocess"], latency_workers_s=latency["workers"],
        latency_manager_s=latency["manager"], latency_single_agent_s=latency["single_agent"], latency_total_s=total,
        wall_s=wall_s, run_id=context.run_id, finished_at=datetime.now(timezone.utc),
    )


def failure_kind(exc: BaseException) -> str:
    """The reason class of an exception that stopped a task (the summary counts failures by it)."""
    from trajonco.agents.budget import BudgetError
    from trajonco.chunking import ChunkingError
    from vista.meds.errors import MedsDataError
    from vista.timeline import TimelineError

    if isinstance(exc, MedsDataError):
        return "data"
    if isinstance(exc, (TimelineError, ChunkingError)):
        return "timeline"
    if isinstance(exc, BudgetError):
        return "context_budget"
    if isinstance(exc, TimeoutError):
        return "timeout"
    return "internal"


def row_from_failure(
    key: TaskKey, label: bool | None, exc: BaseException, usage: TaskUsage, context: RowContext, *, wall_s: float,
) -> PredictionRow:
    """The error row of a task that raised (bad data, a timeout, a bug): no score, the reason and the message."""
    message = str(exc) or type(exc).__name__
    return PredictionRow(
        subject_id=key.subject_id, prediction_time=key.prediction_time, boolean_value=label,
        predicted_boolean_value=None, predicted_boolean_probability=None,
        cancer=context.cancer, variant=context.variant, model=context.model,
        status="error", error_kind=failure_kind(exc), error=f"{type(exc).__name__}: {message}"[:_MAX_ERROR_CHARS],
        **_usage_fields(usage), wall_s=wall_s, run_id=context.run_id, finished_at=datetime.now(timezone.utc),
    )


def patient_json(row: PredictionRow, result: PatientResult | AnyCancerResult | None, usage: TaskUsage | None = None) -> bytes:
    """The per-patient JSON file: ``{"format": 1, "row": {...}, "result": {...} | null, "usage": {...} | null}``
    (``usage``: this run's calls for the task, including how many the two-stage preprocessor pool answered)."""
    body = result.model_dump_json() if result is not None else "null"
    calls = json.dumps(dataclasses.asdict(usage)) if usage is not None else "null"
    return f'{{"format": 1, "row": {row.model_dump_json()}, "result": {body}, "usage": {calls}}}'.encode("utf-8")


def row_from_json(data: bytes, source: str) -> PredictionRow:
    """The row of a per-patient JSON file (raises ValueError naming ``source`` when it is not one)."""
    try:
        return PredictionRow.model_validate(json.loads(data)["row"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{source}: not a per-patient prediction file ({type(exc).__name__}: {exc})") from None
