"""The cohort evaluation's per-patient row: the patient's counts, who judged, what it cost, or why it was not scored.

One `CohortRow` per patient and run goes into the job's part files; the newest row of each patient is its row of the
consolidated ``evaluated.parquet`` (`COHORT_SCHEMA`), and ``result`` holds the scored items and display as JSON
(`vista.evaluation.cohort.EvaluatedPatient`), from which the report is built. Status: ok; failed — some judge calls
gave no verdict (those items count as wrong, the next run asks them again); error — the patient could not be scored
(its display unreadable or stale, a timeout), ``error`` naming the file, patient and field.

>>> failure_kind(TimeoutError("subject 3: not finished within 60 s")), retry_class("error", "timeout")
('timeout', 'transient')
>>> failure_kind(EvaluationError("subject 3: no truth")), retry_class("error", "input")
('input', 'permanent')
>>> row = error_row(3, EvaluationError("subject 3: no truth"), run_id="r", wall_s=0.1)
>>> record = part_record(row, TaskUsage())
>>> row.status, row.error_kind, row.retry_class, sorted(record) == sorted(COHORT_SCHEMA.names), record["llm_calls"]
('error', 'input', 'permanent', True, 0)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from vista.evaluation.cohort import EvaluatedPatient
from vista.evaluation.errors import EvaluationError
from vista.shared.llm.task_usage import IDENTITY_COLUMNS, USAGE_COLUMNS, TaskUsage, identity_columns, usage_columns

_MAX_ERROR_CHARS = 2000
JUDGE_FAILED = "judge_failed"
TRANSIENT_KINDS = frozenset({"timeout", JUDGE_FAILED})
"""Failure kinds another run may get past (the time limit; judge calls without a verdict, asked again)."""


class CohortRow(BaseModel):
    """One patient of the cohort evaluation (see the module docstring)."""

    model_config = ConfigDict(extra="ignore")  # a part file's row also holds the usage columns (`part_record`)

    subject_id: int
    prediction_time: datetime | None = None  # the job's task key: one evaluation per patient
    status: Literal["ok", "failed", "error"]
    error_kind: str | None = None
    error: str | None = None
    retry_class: Literal["transient", "permanent"] | None = None
    method: str | None = None  # the display's method (vista, rag)
    display_model: str | None = None
    truth_source: str | None = None
    n_items: int = Field(0, description="the display's variables (unscorable ones included)")
    n_evaluated: int = Field(0, description="items with a score")
    n_correct: int = Field(0, description="items scoring at least the threshold")
    judge_calls: int = Field(0, description="distinct judge questions asked")
    judge_failures: int = Field(0, description="judge calls without a verdict (those items count as wrong)")
    display_failures: int = Field(0, description="values whose display call had failed (scored 0)")
    wall_s: float = 0.0
    run_id: str
    finished_at: datetime
    result: str | None = None  # the EvaluatedPatient as JSON (None when not scored)

    def patient(self) -> EvaluatedPatient | None:
        """The scored patient this row holds (None for an error row)."""
        return EvaluatedPatient.model_validate_json(self.result) if self.result is not None else None


_INT, _STR = pa.int64(), pa.string()
COHORT_SCHEMA = pa.schema([
    ("subject_id", _INT), ("prediction_time", pa.timestamp("us")), ("status", _STR), ("error_kind", _STR),
    ("error", _STR), ("retry_class", _STR), ("method", _STR), ("display_model", _STR), ("truth_source", _STR),
    ("n_items", _INT), ("n_evaluated", _INT), ("n_correct", _INT), ("judge_calls", _INT), ("judge_failures", _INT),
    ("display_failures", _INT), *((name, pa.float64() if name == "cost_usd" else _INT) for name in USAGE_COLUMNS),
    *((name, _STR) for name in IDENTITY_COLUMNS), ("wall_s", pa.float64()), ("run_id", _STR),
    ("finished_at", pa.timestamp("us", tz="UTC")), ("result", _STR),
])
"""The part files' and ``evaluated.parquet``'s columns: a `CohortRow` per patient and its usage (the jobs' usage
and identity columns, `vista.shared.llm.task_usage`), in subject order."""


def part_record(row: CohortRow, usage: TaskUsage) -> dict[str, object]:
    """One part-file record (`COHORT_SCHEMA`): the row and what its judge calls used."""
    return {**row.model_dump(), **usage_columns(usage), **identity_columns(usage)}


def failure_kind(exc: BaseException) -> str:
    """The reason class of an exception that kept a patient from being scored (the summary counts by it)."""
    from vista.display import DisplayError
    from vista.graph import GraphFileError, GraphInputError

    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, (DisplayError, EvaluationError, GraphFileError, GraphInputError, OSError)):
        return "input"
    return "internal"


def retry_class(status: str, error_kind: str | None) -> Literal["transient", "permanent"] | None:
    """Whether a row that is not ok may pass on another run."""
    if status == "ok":
        return None
    return "transient" if error_kind in TRANSIENT_KINDS else "permanent"


def scored_row(patient: EvaluatedPatient, *, run_id: str, wall_s: float) -> CohortRow:
    """The row of a scored patient: failed when some judge calls gave no verdict."""
    failures = patient.judge_failures
    status, kind = ("failed", JUDGE_FAILED) if failures else ("ok", None)
    items = patient.items
    return CohortRow(
        subject_id=patient.subject_id, status=status, error_kind=kind,
        error=f"{failures} judge call(s) gave no verdict (scored as wrong)" if failures else None,
        retry_class=retry_class(status, kind), method=patient.display.method, display_model=patient.display.model,
        truth_source=patient.truth_source, n_items=len(items), n_evaluated=sum(i.evaluated for i in items),
        n_correct=sum(bool(i.correct) for i in items), judge_calls=patient.judge_calls, judge_failures=failures,
        display_failures=sum(i.scorer == "display_failed" for i in items), wall_s=wall_s, run_id=run_id,
        finished_at=datetime.now(timezone.utc), result=patient.model_dump_json())


def error_row(subject_id: int, exc: BaseException, *, run_id: str, wall_s: float) -> CohortRow:
    """The row of a patient that could not be scored, naming the problem."""
    kind = failure_kind(exc)
    return CohortRow(subject_id=subject_id, status="error", error_kind=kind, retry_class=retry_class("error", kind),
                     error=f"{type(exc).__name__}: {str(exc) or type(exc).__name__}"[:_MAX_ERROR_CHARS],
                     wall_s=wall_s, run_id=run_id, finished_at=datetime.now(timezone.utc))


def read_rows(path: str | os.PathLike, subject_ids: Iterable[int]) -> list[CohortRow]:
    """The rows of ``subject_ids`` in a cohort evaluation's table (``evaluated.parquet``)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, filters=[("subject_id", "in", list(subject_ids))])
    return [CohortRow.model_validate(record) for record in table.to_pylist()]
