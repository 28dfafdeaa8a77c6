"""One plan over every patient of a store: a row per patient (the value, unit, date, rows matched, cited ids), or an
error row naming the patient and the problem — one bad patient never sinks the cohort.

Used in process (`cohort_rows`: the MCP ``query_cohort`` tool, tests) and by the resumable Ray job
(``vista query-cohort``, `jobs.query_cohort`), whose part files hold `COHORT_PLAN_SCHEMA` rows. A cohort asked in
words is planned once (`cohort_plan`) and the plan is kept beside the rows (``plan.json``): a resumed run reads it
back instead of asking the model again.

Example: which patients had hemoglobin below 8 g/dL during first-line therapy::

    {"measure": "hemoglobin", "where": {"op": "<", "value": 8}, "episode": {"kind": "treatment_line", "line": 1},
     "aggregate": "min"}

(``matched`` is true for the patients with at least one such row.)
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from vista.query.entry import open_entry
from vista.query.errors import PlanError, UnknownNameError
from vista.query.execute import run_plan
from vista.query.plan import Plan, plan_of
from vista.shared.atomic import atomic_write_text
from vista.shared.errors import UserError
from vista.shared.llm.task_usage import IDENTITY_COLUMNS, USAGE_COLUMNS, TaskUsage, identity_columns, usage_columns

PLAN_FILE = "plan.json"
_MAX_ERROR_CHARS = 2000


class CohortPlanRow(BaseModel):
    """One patient's answer to the cohort's plan (``value`` as text too, since a value may be a number or an id)."""

    model_config = ConfigDict(extra="ignore")

    subject_id: int
    prediction_time: datetime | None = None
    status: Literal["ok", "error"]
    error_kind: str | None = None
    error: str | None = None
    retry_class: Literal["transient", "permanent"] | None = None
    matched: bool = False
    value: float | None = None
    value_text: str | None = None
    unit: str | None = None
    date: datetime | None = None
    n: int = 0
    cited: str = "[]"
    wall_s: float = 0.0
    run_id: str
    finished_at: datetime


_INT, _STR = pa.int64(), pa.string()
COHORT_PLAN_SCHEMA = pa.schema([
    ("subject_id", _INT), ("prediction_time", pa.timestamp("us")), ("status", _STR), ("error_kind", _STR),
    ("error", _STR), ("retry_class", _STR), ("matched", pa.bool_()), ("value", pa.float64()), ("value_text", _STR),
    ("unit", _STR), ("date", pa.timestamp("us")), ("n", _INT), ("cited", _STR),
    *((name, pa.float64() if name == "cost_usd" else _INT) for name in USAGE_COLUMNS),
    *((name, _STR) for name in IDENTITY_COLUMNS), ("wall_s", pa.float64()), ("run_id", _STR),
    ("finished_at", pa.timestamp("us", tz="UTC")),
])
"""The job's part files' and ``answers.parquet``'s columns (plan rows need no model: usage columns stay zero)."""


def plan_row(store: str | os.PathLike, plan: Plan, subject_id: int, run_id: str) -> CohortPlanRow:
    """The plan's row for one patient: a patient without the plan's lab or drug is answered (not matched, ``error``
    saying which name it lacks); any other problem becomes its error row (input problems are permanent)."""
    started = time.perf_counter()
    now = datetime.now(timezone.utc)
    try:
        result = run_plan(open_entry(store, subject_id), plan)
    except UnknownNameError as exc:  # the patient has no such lab or drug: answered, not matched (and said why)
        return CohortPlanRow(subject_id=subject_id, status="ok", matched=False, error=str(exc), run_id=run_id,
                             finished_at=now, wall_s=time.perf_counter() - started)
    except Exception as exc:  # noqa: BLE001 - failure isolation: one bad patient gets an error row
        kind = "input" if isinstance(exc, (UserError, OSError)) else "internal"
        return CohortPlanRow(subject_id=subject_id, status="error", error_kind=kind, retry_class="permanent",
                             error=f"{type(exc).__name__}: {exc}"[:_MAX_ERROR_CHARS], run_id=run_id, finished_at=now,
                             wall_s=time.perf_counter() - started)
    value = result.value
    number = float(value) if isinstance(value, (int, float)) else None
    date = datetime.combine(result.date, datetime.min.time()) if result.date else None
    return CohortPlanRow(subject_id=subject_id, status="ok", matched=result.n > 0, value=number,
                         value_text=None if value is None else str(value), unit=result.unit, date=date, n=result.n,
                         cited=json.dumps(list(result.cited)), run_id=run_id, finished_at=now,
                         wall_s=time.perf_counter() - started)


def part_record(row: CohortPlanRow) -> dict[str, object]:
    """The row as a part-file record (`COHORT_PLAN_SCHEMA`)."""
    usage = TaskUsage()
    return {**row.model_dump(), **usage_columns(usage), **identity_columns(usage)}


def cohort_rows(store: str | os.PathLike, plan: Plan, subject_ids: Iterable[int], run_id: str = "in-process") -> list[CohortPlanRow]:
    """The plan's rows for ``subject_ids``, in process (no Ray)."""
    return [plan_row(store, plan, sid, run_id) for sid in subject_ids]


def cohort_plan(out: str | os.PathLike, plan: Plan | None, question: str | None,
                planner: Callable[[str], Awaitable[Plan]] | None) -> Plan:
    """The cohort's plan: ``plan`` when given; else the one kept in ``out/plan.json`` for the same question; else
    the ``planner``'s plan for ``question`` (one model call), kept there for a resumed run."""
    import asyncio

    path = Path(out) / PLAN_FILE
    kept = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    if kept is not None:
        if plan is None and question is not None and kept.get("question") == question:
            return plan_of(kept["plan"], str(path))
        if plan is not None and kept["plan"] == json.loads(plan.model_dump_json()):
            return plan
        raise PlanError(f"{path}: this output holds the rows of another plan ({json.dumps(kept['plan'])}); choose "
                        "another --out")
    if plan is None:
        if question is None or planner is None:
            raise PlanError("give a plan or a question")
        plan = asyncio.run(planner(question))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"question": question, "plan": json.loads(plan.model_dump_json())}, indent=1))
    return plan
