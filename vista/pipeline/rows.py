"""VISTA's per-patient row: what each stage produced (counts, files, calls, tokens, seconds) or why it stopped.

One `VistaRow` per task run goes into a job's part files (``OUT/rows/``, named by the task's key in
``task_id``/``prediction_time``: an XML task's key is its file's, its ``subject_id`` the patient inside); the
newest row of each task is its row of the consolidated ``OUT/patients.parquet``. A failed task names the stage it
stopped in and the problem (for bad input: the file, the patient and the field, as `vista.graph.GraphInputError` and
`vista.shared.meds.errors.MedsDataError` word it); the stages before it keep their outputs and counts. Rows that are not ok
carry a retry class, as the predict job's do: transient (a timeout, LLM calls that failed after their retries: the
next run tries again by default) or permanent (bad input, a graph or timeline that cannot be built).

>>> vista_failure_kind(GraphInputError("p.xml", "not well-formed XML", patient=None))
'input'
>>> row = VistaRow(task="7", subject_id=7, status="ok", stages="graph", run_id="r", finished_at=datetime(2024, 1, 1))
>>> vista_retry_class("error", "input"), vista_retry_class("error", "timeout"), vista_retry_class("failed", "llm_call_failed")
('permanent', 'transient', 'transient')
>>> part = vista_part_record(TaskKey(99), row.model_copy(update={"subject_id": None}))
>>> part["task_id"], part["subject_id"], VISTA_PART_SCHEMA.names[:2]
(99, None, ['task_id', 'task'])
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import pyarrow as pa
from pydantic import ConfigDict, Field

from vista.graph import GraphFileError, GraphInputError
from vista.shared.llm.task_usage import (
    IDENTITY_COLUMNS, USAGE_COLUMNS, TaskUsage, UsageColumns, identity_columns, usage_columns, usage_in_place,
)
from vista.shared.meds.task_key import TaskKey
from vista.shared.runs.retry import classify_failure

_MAX_ERROR_CHARS = 2000

RUN_DEPENDENT_COLUMNS = (
    "index_file", "graph_rebuilt", "toa_rebuilt", "display_rebuilt", *USAGE_COLUMNS, *IDENTITY_COLUMNS, "toa_calls",
    "display_calls",
    "load_s", "graph_s", "toa_s", "display_s", "wall_s", "run_id", "finished_at",
)
"""Columns whose values depend on the run (what was already on disk or cached, who answered this run's calls — none
when the stores answered —, machine load), not on the patient."""


class VistaRow(UsageColumns):
    """One task of the VISTA job (see the module docstring). Paths are relative to the output directory; the usage
    columns (inherited) stand after ``display_rebuilt`` on disk."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(description="the task's name: <subject>[_<prediction time>] for MEDS input, a file key for XML")
    subject_id: int | None = Field(description="the patient (null when an XML file could not be read far enough)")
    prediction_time: datetime | None = Field(None, description="events strictly before it (MEDS labels); null: all")
    source: str | None = Field(None, description="where the patient's rows came from: MEDS shard or XML file")
    status: Literal["ok", "failed", "error"] = Field(
        description="ok; failed: some LLM calls of a stage failed (its output is incomplete); error: a stage stopped")
    error_stage: str | None = Field(None, description="load | graph | toa | display: where the task stopped or failed")
    error_kind: str | None = None
    error: str | None = None
    retry_class: Literal["transient", "permanent"] | None = Field(
        None, description="not ok: transient (the next run retries it by default) or permanent (kept)")
    stages: str = Field(description="stages completed, comma-separated, in order")
    content_hash: str | None = Field(None, description="the graph's content hash (its inputs and build settings)")
    n_nodes: int | None = None
    n_edges: int | None = None
    n_events: int | None = Field(None, description="source events in the graph (encounter rows and notes included)")
    n_encounters: int | None = Field(None, description="encounter nodes (visits and per-day pseudo-encounters)")
    graph_file: str | None = Field(None, description="where the graph store holds the graph: its pack and byte "
                                   "range (`vista.graph.store.read_stored_graph`)")
    index_file: str | None = Field(None, description="the graph store's index part holding the graph's node rows "
                                   "(one part per actor batch)")
    graph_rebuilt: bool | None = Field(None, description="False: an identical graph was already on disk (same hash)")
    toa_file: str | None = None
    n_chunks: int | None = None
    failed_chunks: int | None = None
    n_timeline_events: int | None = None
    misdated_timeline_events: int | None = Field(None, description="proposed events dropped (after one re-ask) for a "
                                                 "date outside their cited events' dates")
    n_episodes: int | None = None
    toa_rebuilt: bool | None = Field(None, description="False: the stored timeline's content hash was current")
    display_file: str | None = None
    n_display_values: int | None = None
    failed_display_values: int | None = None
    uncited_display_values: int | None = Field(None, description="display values whose answer cited no event, so "
                                               "shown and scored as 'Not found'")
    display_rebuilt: bool | None = None
    backend: str | None = Field(None, description="the backend that answered the LLM calls (embedded, openai, ...)")
    endpoint_host: str | None = Field(None, description="its host:port, or in-process")
    served_model: str | None = Field(None, description="the model as the server named it in its answers")
    toa_calls: int = 0
    display_calls: int = 0
    load_s: float = 0.0
    graph_s: float = 0.0
    toa_s: float = 0.0
    display_s: float = 0.0
    wall_s: float = 0.0
    run_id: str
    finished_at: datetime

    def with_usage(self, usage: dict[str, TaskUsage]) -> VistaRow:
        """This row with the LLM totals of ``usage`` (per stage) filled in."""
        total = sum(usage.values(), TaskUsage())
        return self.model_copy(update={
            **usage_columns(total), **identity_columns(total),
            "toa_calls": usage.get("toa", TaskUsage()).calls, "display_calls": usage.get("display", TaskUsage()).calls,
        })


_ARROW_TYPES = {int: pa.int64(), float: pa.float64(), bool: pa.bool_(), str: pa.string()}
_SPECIAL_TYPES = {"prediction_time": pa.timestamp("us"), "finished_at": pa.timestamp("us", tz="UTC"), "status": pa.string(),
                  "retry_class": pa.string()}


def _arrow_field(name: str) -> pa.Field:
    """The arrow column of a `VistaRow` field: its (optional) int/float/bool/str type, or a time column."""
    if name in _SPECIAL_TYPES:
        return pa.field(name, _SPECIAL_TYPES[name])
    annotation = VistaRow.model_fields[name].annotation
    base = next(t for t in _ARROW_TYPES if annotation is t or t in getattr(annotation, "__args__", ()))
    return pa.field(name, _ARROW_TYPES[base])


VISTA_SCHEMA = pa.schema([_arrow_field(name) for name in usage_in_place(VistaRow.model_fields, after="display_rebuilt")])
"""``patients.parquet``: the newest `VistaRow` of every task with a row, in task-key order."""
TASK_ID = "task_id"
"""The part files name a task by ``task_id`` (its key's subject: an XML file's key) and ``prediction_time``."""
VISTA_PART_SCHEMA = pa.schema([pa.field(TASK_ID, pa.int64()), *VISTA_SCHEMA])
"""The actors' part files: the task key, then the row."""


def vista_part_record(key: TaskKey, row: VistaRow) -> dict[str, object]:
    """One part-file record: ``row`` under its task's key."""
    return {TASK_ID: key.subject_id, **row.model_dump()}


TRANSIENT_VISTA_KINDS = frozenset({"timeout", "llm_call_failed"})
"""Failure kinds that may pass on another run (the time limit; LLM calls that failed after their retries — the
stages' stores keep every answered call, so a retry asks only for the rest)."""


def vista_retry_class(status: str, error_kind: str | None) -> Literal["transient", "permanent"] | None:
    """Whether a row that is not ok may succeed on another run."""
    if status == "ok":
        return None
    return "transient" if error_kind in TRANSIENT_VISTA_KINDS else "permanent"


def vista_failure_kind(exc: BaseException) -> str:
    """The reason class of an exception that stopped a task (the summary counts failures by it)."""
    from vista.shared.llm.errors import LLMConfigError
    from vista.shared.meds.errors import MedsDataError
    from vista.toa import TOAError

    return classify_failure(exc, [(GraphInputError, "input"), (MedsDataError, "data"), (GraphFileError, "graph_file"),
                                  (TOAError, "timeline"), (LLMConfigError, "llm_config")])


def error_text(exc: BaseException) -> str:
    """``Type: message`` of ``exc``, capped (the message of our input errors names file, patient and field)."""
    return f"{type(exc).__name__}: {str(exc) or type(exc).__name__}"[:_MAX_ERROR_CHARS]
