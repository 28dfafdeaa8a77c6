"""One flat prediction row per task: MEDS-DEV's prediction columns, then the project's own (risk, evidence, usage).

A row is built from a `PatientResult` / `AnyCancerResult`, or from the exception that stopped the task (an error
row: ``status="error"``, the reason in ``error_kind``). Nested parts (the risk trajectory, the events with their
MEDS provenance, the per-cancer scores) are JSON strings, so the parquet file stays flat and readable by any tool.

``predicted_boolean_probability`` is ``risk_score / 10``: a ranking score for AUROC/AUPRC, not a calibrated
probability; ``predicted_boolean_value`` thresholds it (``--threshold``, default 0.5, i.e. risk >= 5).

Columns that depend on the run rather than the patient: usage (a cache hit costs 0 tokens), ``latency_*``,
``wall_s``, ``run_id``, ``started_at`` and ``finished_at``; everything else is the same whichever run computed the row.

Retry policy. A row that is not ``ok`` says whether running it again could help: ``retry_class`` is ``transient``
when a call failed for a reason that passes (rate limit, timeout, server error, connection, a garbled answer — the
gateway's `RETRYABLE_KINDS`) or the task hit its time limit, and ``permanent`` when it cannot change by itself (bad
input data, a timeline or context problem, answers that never validated, a request the endpoint rejected). The
next run retries ``transient`` rows by default (``--retry transient``); ``--retry all`` retries both.

>>> retry_class("partial", None, "rate_limited,invalid_output"), retry_class("failed", "llm_call_failed", "http_error")
('transient', 'permanent')
>>> retry_class("error", "timeout", None), retry_class("error", "data", None), retry_class("ok", None, None)
('transient', 'permanent', None)
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from trajonco.agents.results import AnyCancerResult, PatientResult
from vista.shared.llm.errors import ENDPOINT_KINDS, RETRYABLE_KINDS, LLMEndpointFailure
from vista.shared.llm.task_usage import (
    USAGE_COLUMNS,
    TaskUsage,
    UsageColumns,
    identity_columns,
    usage_columns,
    usage_in_place,
    usage_scope,
)
from vista.shared.meds.task_key import TaskKey
from vista.shared.runs.retry import classify_failure

log = logging.getLogger(__name__)

RowStatus = Literal["ok", "partial", "failed", "error"]
RetryClass = Literal["transient", "permanent"]
UNSCORED: frozenset[str] = frozenset({"failed", "error"})
"""Statuses of rows without a score."""
TRANSIENT_CALL_KINDS: frozenset[str] = frozenset(kind.value for kind in RETRYABLE_KINDS | ENDPOINT_KINDS)
"""Gateway error kinds that may pass on their own (rate limit, server error, timeout, connection, bad response) or
once the endpoint is fixed (key refused, unknown model, quota exhausted: `vista.shared.llm.errors.ENDPOINT_KINDS`)."""
TRANSIENT_TASK_KINDS: frozenset[str] = frozenset({"timeout"})
"""`failure_kind` values of tasks that raised for a reason that may pass (the per-patient time limit)."""

RUN_DEPENDENT_COLUMNS = (
    *USAGE_COLUMNS, "latency_preprocess_s", "latency_workers_s", "latency_manager_s", "latency_single_agent_s",
    "latency_total_s", "wall_s", "run_id", "started_at", "finished_at",
)
"""Columns whose values depend on the run (cache state, machine load), not only on the patient and the settings."""

_MAX_ERROR_CHARS = 2000


class PredictionRow(UsageColumns):
    """One task's row; on disk (in `PREDICTION_SCHEMA` order: the usage columns, inherited, after
    ``timeline_tokens``), `trajonco.prediction_files` splits it into MEDS-DEV's ``predictions.parquet`` and the
    project's ``prediction_details.parquet``."""

    model_config = ConfigDict(extra="forbid")

    subject_id: int
    prediction_time: datetime | None
    boolean_value: bool | None = Field(description="the label, copied from the label file")
    predicted_boolean_value: bool | None = Field(description="predicted_boolean_probability >= threshold")
    predicted_boolean_probability: float | None = Field(description="risk_score / 10 (a ranking score)")
    cancer: str = Field(description="the cancer assessed, or 'any' for any-cancer (one chain, or max pooling)")
    strongest_cancer: str | None = Field(None, description="any-cancer: the cancer the chain named as the most likely "
                                         "(chain mode), or the cancer carrying the highest score (max pooling)")
    variant: str
    model: str = Field(description="the model name the run asked for (--model)")
    backend: str = Field("", description="the backend that answered: embedded (the in-process SmolLM2), openai (an "
                         "OpenAI-compatible endpoint), ...")
    endpoint_host: str = Field("", description="where it answered from: the endpoint's host:port, or in-process")
    served_model: str | None = Field(None, description="the model as the server named it in its answers (the "
                                     "embedded GGUF's name for the embedded model); None when no call was answered")
    status: RowStatus = Field(description="ok | partial (some LLM calls failed) | failed (no score) | error (the task raised)")
    error_kind: str | None = Field(None, description="why a row is failed/error: llm_call_failed, data, timeline, "
                                   "context_budget, timeout, internal")
    error: str | None = None
    call_error_kinds: str | None = Field(None, description="comma-separated gateway error kinds of the failed calls, "
                                         "e.g. 'rate_limited,invalid_output'")
    retry_class: RetryClass | None = Field(None, description="not ok: transient (the next run retries it by default) "
                                           "or permanent (kept unless --retry all)")
    risk_score: int | None = None
    cancer_scores: str | None = Field(None, description="any-cancer: JSON list of {cancer, risk_score, status} (max "
                                      "pooling; [] for the one chain, which gives one score)")
    risk_trajectory: str = Field("[]", description="JSON list of the workers' per-chunk risk levels")
    events: str = Field("[]", description="JSON list of the final events, each with its MEDS source rows and its "
                        "flags (unsourced, before_record, after_record: shown as flagged, never as facts)")
    evidence_unsourced: int = Field(0, description="final events citing no element the agents read (flagged)")
    evidence_out_of_record: int = Field(0, description="final events dated before the record's first event (birth "
                                        "included) or after its last one before the prediction time (flagged)")
    summary: str | None = None
    reasoning: str | None = None
    n_chunks: int | None = None
    n_chunks_reduced: int | None = None
    timeline_events: int | None = None
    timeline_tokens: int | None = None
    latency_preprocess_s: float | None = None
    latency_workers_s: float | None = None
    latency_manager_s: float | None = None
    latency_single_agent_s: float | None = None
    latency_total_s: float | None = None
    wall_s: float = Field(0.0, description="wall time of the task in its actor, reading the record included")
    run_id: str
    started_at: datetime | None = Field(None, description="when the actor started the task (UTC)")
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
    pa.field("backend", pa.string()),
    pa.field("endpoint_host", pa.string()),
    pa.field("served_model", pa.string()),
    pa.field("status", pa.string()),
    pa.field("error_kind", pa.string()),
    pa.field("error", pa.string()),
    pa.field("call_error_kinds", pa.string()),
    pa.field("retry_class", pa.string()),
    pa.field("risk_score", pa.int8()),
    pa.field("cancer_scores", pa.string()),
    pa.field("risk_trajectory", pa.string()),
    pa.field("events", pa.string()),
    pa.field("evidence_unsourced", pa.int32()),
    pa.field("evidence_out_of_record", pa.int32()),
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
    pa.field("started_at", pa.timestamp("us", tz="UTC")),
    pa.field("finished_at", pa.timestamp("us", tz="UTC")),
])
"""A task's row: MEDS-DEV's five prediction columns first, then the project's (the part files' columns;
`trajonco.prediction_files` writes the first five to ``predictions.parquet``, the key, the label and the rest to
``prediction_details.parquet``)."""

assert PREDICTION_SCHEMA.names == usage_in_place(PredictionRow.model_fields, after="timeline_tokens"), (
    "keep PREDICTION_SCHEMA in step with PredictionRow")


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
    backend: str = Field("", description="the configured backend kind (rows whose calls answered say who did)")
    endpoint_host: str = Field("", description="the configured endpoint's host:port, or in-process")
    threshold: float = Field(0.5, ge=0.0, le=1.0)
    run_id: str


def _identity_fields(usage: TaskUsage, context: RowContext) -> dict[str, str | None]:
    """Who answered the task's calls (from their records), else who was configured to; the served model only from
    answers."""
    seen = identity_columns(usage)
    return {"backend": seen["backend"] or context.backend, "endpoint_host": seen["endpoint_host"] or context.endpoint_host,
            "served_model": seen["served_model"]}


def _usage_fields(usage: TaskUsage) -> dict[str, int | float]:
    """The row's usage columns, the cost rounded (a float sum of the same calls need not be bit-equal)."""
    return usage_columns(usage) | {"cost_usd": round(usage.cost_usd, 10)}


def _errors_text(result: PatientResult) -> str | None:
    if not result.errors:
        return None
    parts = [f"{e.agent}{'' if e.chunk_index is None else f'[{e.chunk_index}]'}: {e.message}" for e in result.errors]
    return "; ".join(parts)[:_MAX_ERROR_CHARS]


def _call_kinds(results: list[PatientResult]) -> str | None:
    """The distinct gateway error kinds of the results' failed calls, sorted ('skipped' steps are consequences)."""
    kinds = sorted({e.kind for r in results for e in r.errors if e.kind != "skipped"})
    return ",".join(kinds) or None


def retry_class(status: str, error_kind: str | None, call_error_kinds: str | None) -> RetryClass | None:
    """Whether a row that is not ok may succeed on another run (see the module docstring)."""
    if status == "ok":
        return None
    kinds = set(call_error_kinds.split(",")) if call_error_kinds else set()
    if kinds & TRANSIENT_CALL_KINDS or (status == "error" and error_kind in TRANSIENT_TASK_KINDS):
        return "transient"
    return "permanent"


def _trajectory_json(result: PatientResult) -> str:
    return json.dumps([step.model_dump(mode="json") for step in result.risk_trajectory], ensure_ascii=False)


def _events_json(result: PatientResult) -> str:
    return json.dumps([event.model_dump(mode="json") for event in result.events], ensure_ascii=False)


def row_from_result(
    key: TaskKey, label: bool | None, result: PatientResult | AnyCancerResult, usage: TaskUsage,
    context: RowContext, *, wall_s: float, started_at: datetime | None = None,
) -> PredictionRow:
    """The row of a task that ran to the end (its status says whether the LLM calls all succeeded)."""
    if isinstance(result, AnyCancerResult):
        shown = result.representative()
        basis = result.results[0] if result.results else None
        latency = {
            stage: sum(getattr(r.latency, stage) for r in result.results)
            for stage in ("preprocess", "workers", "manager", "single_agent")
        }
        total = result.latency_total
        scores = json.dumps([s.model_dump(mode="json") for s in result.scores])
        errors = "; ".join(filter(None, (_errors_text(r) for r in result.results)))[:_MAX_ERROR_CHARS] or None
        strongest = result.strongest_cancer
        kinds = _call_kinds(list(result.results))
    else:
        shown = basis = result
        latency = {stage: getattr(result.latency, stage) for stage in ("preprocess", "workers", "manager", "single_agent")}
        total = result.latency.total
        scores = None
        errors = _errors_text(result)
        strongest = None
        kinds = _call_kinds([result])
    probability = result.probability
    status = result.status
    error_kind = "llm_call_failed" if status == "failed" else None
    return PredictionRow(
        subject_id=key.subject_id, prediction_time=key.prediction_time, boolean_value=label,
        predicted_boolean_value=None if probability is None else probability >= context.threshold,
        predicted_boolean_probability=probability,
        cancer=context.cancer, strongest_cancer=strongest, variant=context.variant,
        model=basis.model if basis is not None else context.model, **_identity_fields(usage, context),
        status=status, error_kind=error_kind, error=errors, call_error_kinds=kinds,
        retry_class=retry_class(status, error_kind, kinds), risk_score=result.risk_score, cancer_scores=scores,
        risk_trajectory=_trajectory_json(shown) if shown is not None else "[]",
        events=_events_json(shown) if shown is not None else "[]",
        evidence_unsourced=shown.evidence_unsourced if shown is not None else 0,
        evidence_out_of_record=shown.evidence_out_of_record if shown is not None else 0,
        summary=shown.summary if shown is not None else None, reasoning=shown.reasoning if shown is not None else None,
        n_chunks=basis.chunks.n_chunks if basis is not None else None,
        n_chunks_reduced=basis.chunks.n_chunks_reduced if basis is not None else None,
        timeline_events=basis.chunks.timeline_events if basis is not None else None,
        timeline_tokens=basis.chunks.timeline_tokens if basis is not None else None,
        **_usage_fields(usage),
        latency_preprocess_s=latency["preprocess"], latency_workers_s=latency["workers"],
        latency_manager_s=latency["manager"], latency_single_agent_s=latency["single_agent"], latency_total_s=total,
        wall_s=wall_s, run_id=context.run_id, started_at=started_at, finished_at=datetime.now(timezone.utc),
    )


def failure_kind(exc: BaseException) -> str:
    """The reason class of an exception that stopped a task (the summary counts failures by it)."""
    from trajonco.agents.context_fit import ContextFitError
    from trajonco.chunking import ChunkingError
    from vista.shared.llm import LLMCallFailed
    from vista.shared.meds.errors import MedsDataError
    from vista.shared.timeline import TimelineError

    return classify_failure(exc, [(LLMCallFailed, "llm_call_failed"), (MedsDataError, "data"),
                                  ((TimelineError, ChunkingError), "timeline"), (ContextFitError, "context_budget")])


def row_from_failure(
    key: TaskKey, label: bool | None, exc: BaseException, usage: TaskUsage, context: RowContext, *, wall_s: float,
    started_at: datetime | None = None,
) -> PredictionRow:
    """The error row of a task that raised (bad data, a timeout, a bug): no score, the reason and the message."""
    from vista.shared.llm import LLMCallFailed

    message = str(exc) or type(exc).__name__
    kind = failure_kind(exc)
    calls = exc.error.kind.value if isinstance(exc, LLMCallFailed) else None
    return PredictionRow(
        subject_id=key.subject_id, prediction_time=key.prediction_time, boolean_value=label,
        predicted_boolean_value=None, predicted_boolean_probability=None,
        cancer=context.cancer, variant=context.variant, model=context.model, **_identity_fields(usage, context),
        status="error", error_kind=kind, error=f"{type(exc).__name__}: {message}"[:_MAX_ERROR_CHARS],
        call_error_kinds=calls, retry_class=retry_class("error", kind, calls),
        **_usage_fields(usage), wall_s=wall_s, run_id=context.run_id, started_at=started_at,
        finished_at=datetime.now(timezone.utc),
    )


# --------------------------------------------------------------------------------------------- part files
DETAIL_COLUMNS = ("result_json", "usage_json")
"""What the part files keep besides the row: the whole `PatientResult`/`AnyCancerResult` (per-agent usage, errors,
chunk statistics) and this run's `TaskUsage` (e.g. calls answered by the preprocessor pool), as JSON text."""

PART_SCHEMA = pa.schema([*PREDICTION_SCHEMA, pa.field("result_json", pa.string()), pa.field("usage_json", pa.string())])
"""The rows actors write to ``OUT/rows/`` (the consolidated files hold their `PREDICTION_SCHEMA` columns)."""


def part_record(row: PredictionRow, result: PatientResult | AnyCancerResult | None,
                usage: TaskUsage | None = None) -> dict[str, object]:
    """One task's record of a part file: its row plus the detail columns."""
    record = row.model_dump()
    record["result_json"] = result.model_dump_json() if result is not None else None
    record["usage_json"] = json.dumps(dataclasses.asdict(usage)) if usage is not None else None
    return record


async def assessed_record(key: TaskKey, label: bool | None, context: RowContext,
                          assess: Callable[[], Awaitable[PatientResult | AnyCancerResult]]) -> tuple[dict[str, object], PredictionRow]:
    """One task's part-file record and its row: ``assess`` run within the task's usage scope; any exception but
    `LLMEndpointFailure` (a job's budget stopped the job: raised) becomes the task's error row."""
    started, started_at = time.perf_counter(), datetime.now(timezone.utc)
    result: PatientResult | AnyCancerResult | None = None
    with usage_scope() as usage:
        try:
            result = await assess()
            row = row_from_result(key, label, result, usage, context, wall_s=time.perf_counter() - started,
                                  started_at=started_at)
        except LLMEndpointFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - failure isolation: any problem becomes this task's error row
            result = None
            row = row_from_failure(key, label, exc, usage, context, wall_s=time.perf_counter() - started,
                                   started_at=started_at)
            log.warning("subject %s: error row (%s, %s)", key.subject_id, row.error_kind, type(exc).__name__)
            log.debug("subject %s failed", key.subject_id, exc_info=exc)
    return part_record(row, result, usage), row
