"""The build-graphs job's Ray Data UDF: persist each patient's provenance-carrying timeline.

Until the VISTA graph exists, the per-patient artifact is the XML timeline (events strictly before the task's
prediction time, or the whole record) plus its provenance table (every element id of the XML -> the MEDS shard
and row it came from, with the row's time and code). Per task, under ``<out>/timelines/<bucket>/``:
``<name>.xml``, ``<name>.provenance.parquet`` and, written last as the done marker, ``<name>.json`` (the task's
`TimelineRow`); a task that fails leaves ``<name>.failed.json`` instead. Each file is written atomically.
"""

from __future__ import annotations

import io
import logging
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from vista.records import PatientRecord
from vista.timeline import Timeline, render_timeline

from jobs.outputs import MarkerStore, atomic_write_bytes
from jobs.patient_loader import PatientLoader
from jobs.prediction_rows import failure_kind
from jobs.progress import StatusRow, status_table
from jobs.tasks import TaskKey, task_keys

log = logging.getLogger(__name__)

TIMELINES = "timelines"

PROVENANCE_SCHEMA = pa.schema([
    pa.field("event_id", pa.string(), nullable=False),
    pa.field("element", pa.string(), nullable=False),  # "static" (top of the root) or "event" (a timestamp block)
    pa.field("shard", pa.string(), nullable=False),
    pa.field("row", pa.int64(), nullable=False),
    pa.field("time", pa.timestamp("us")),
    pa.field("code", pa.string(), nullable=False),
])
"""``<name>.provenance.parquet``: one row per element id of the timeline, in document order."""


class TimelineRow(BaseModel):
    """One task's row of ``timelines.parquet`` (and the content of its marker)."""

    model_config = ConfigDict(extra="forbid")

    subject_id: int
    prediction_time: datetime | None
    status: Literal["ok", "error"]
    error_kind: str | None = None
    error: str | None = None
    n_events: int | None = Field(None, description="element ids in the XML (static elements included)")
    n_tokens: int | None = Field(None, description="cl100k tokens of the XML")
    first_time: datetime | None = None
    last_time: datetime | None = None
    xml_file: str | None = Field(None, description="path relative to the output directory")
    provenance_file: str | None = None
    wall_s: float = 0.0
    run_id: str
    finished_at: datetime


TIMELINE_SCHEMA = pa.schema([
    pa.field("subject_id", pa.int64(), nullable=False),
    pa.field("prediction_time", pa.timestamp("us")),
    pa.field("status", pa.string()),
    pa.field("error_kind", pa.string()),
    pa.field("error", pa.string()),
    pa.field("n_events", pa.int32()),
    pa.field("n_tokens", pa.int32()),
    pa.field("first_time", pa.timestamp("us")),
    pa.field("last_time", pa.timestamp("us")),
    pa.field("xml_file", pa.string()),
    pa.field("provenance_file", pa.string()),
    pa.field("wall_s", pa.float64()),
    pa.field("run_id", pa.string()),
    pa.field("finished_at", pa.timestamp("us", tz="UTC")),
])
assert TIMELINE_SCHEMA.names == list(TimelineRow.model_fields), "keep TIMELINE_SCHEMA in step with TimelineRow"


def timeline_rows_to_table(rows: list[TimelineRow]) -> pa.Table:
    return pa.Table.from_pylist([row.model_dump() for row in rows], schema=TIMELINE_SCHEMA)


def timeline_row_from_json(data: bytes, source: str) -> TimelineRow:
    try:
        return TimelineRow.model_validate_json(data)
    except ValueError as exc:
        raise ValueError(f"{source}: not a timeline marker ({exc})") from None


def provenance_table(record: PatientRecord, timeline: Timeline) -> pa.Table:
    """Every element id of ``timeline`` with the MEDS row it came from."""
    by_id = {event.event_id: event for event in record.events}
    ids = [("static", e.event_id) for e in timeline.root.static] + [("event", i) for i in timeline.event_ids()]
    seen: set[str] = set()
    rows = []
    for element, event_id in ids:
        if event_id in seen:  # a long note split across a timestamp keeps its id in each piece
            continue
        seen.add(event_id)
        ref = record.provenance(event_id)
        event = by_id[event_id]
        rows.append({"event_id": event_id, "element": element, "shard": ref.shard, "row": ref.row, "time": event.time,
                     "code": event.code})
    return pa.Table.from_pylist(rows, schema=PROVENANCE_SCHEMA)


class TimelineSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    dataset: Path
    out: Path
    retry_failed: bool = False
    run_id: str


class TimelineActor:
    """Renders and persists the timelines of a batch of tasks (one `PatientLoader` per actor)."""

    def __init__(self, settings: TimelineSettings):
        self.settings = settings
        self.store = MarkerStore(settings.out, TIMELINES)
        self.loader = PatientLoader(settings.dataset)
        self.catalog = self.loader.catalog()

    def __call__(self, batch: pa.Table) -> pa.Table:
        keys = task_keys(batch)
        rows: list[StatusRow] = []
        pending = []
        for key in keys:
            status = self.store.status(key)
            if status == "done" or (status == "failed" and not self.settings.retry_failed):
                rows.append(StatusRow(key.subject_id, key.prediction_time, "skipped", None, 0, 0, 0, 0, 0.0, 0, 0.0))
            else:
                pending.append(key)
        if pending:
            records = self.loader.load(key.subject_id for key in pending)
            for key in pending:
                row = self._one(key, records[key.subject_id])
                rows.append(StatusRow(row.subject_id, row.prediction_time, row.status, row.error_kind, 0, 0, 0, 0, 0.0, 0,
                                      row.wall_s))
        return status_table(rows)

    def _one(self, key: TaskKey, loaded: PatientRecord | Exception) -> TimelineRow:
        started = time.perf_counter()
        try:
            if not isinstance(loaded, PatientRecord):
                raise loaded
            row = self._persist(key, loaded, started)
        except Exception as exc:  # noqa: BLE001 - failure isolation: the task gets an error row, the batch goes on
            log.warning("subject %s: error row (%s, %s)", key.subject_id, failure_kind(exc), type(exc).__name__)
            row = TimelineRow(subject_id=key.subject_id, prediction_time=key.prediction_time, status="error",
                              error_kind=failure_kind(exc), error=f"{type(exc).__name__}: {exc}"[:2000],
                              wall_s=time.perf_counter() - started, run_id=self.settings.run_id,
                              finished_at=datetime.now(timezone.utc))
            self.store.write(key, row.model_dump_json().encode("utf-8"), failed=True)
        return row

    def _persist(self, key: TaskKey, record: PatientRecord, started: float) -> TimelineRow:
        timeline = render_timeline(record, self.catalog, key.prediction_time)
        xml = timeline.to_xml().encode("utf-8")
        provenance = provenance_table(record, timeline)
        folder = self.store.bucket(key)
        xml_path = folder / f"{key.name}.xml"
        provenance_path = folder / f"{key.name}.provenance.parquet"
        sink = io.BytesIO()
        pq.write_table(provenance, sink)
        atomic_write_bytes(provenance_path, sink.getvalue())
        atomic_write_bytes(xml_path, xml)
        times = [b.time for b in timeline.blocks]
        row = TimelineRow(
            subject_id=key.subject_id, prediction_time=key.prediction_time, status="ok",
            n_events=provenance.num_rows, n_tokens=timeline.n_tokens(),
            first_time=times[0] if times else None, last_time=times[-1] if times else None,
            xml_file=str(xml_path.relative_to(self.settings.out)),
            provenance_file=str(provenance_path.relative_to(self.settings.out)),
            wall_s=time.perf_counter() - started, run_id=self.settings.run_id, finished_at=datetime.now(timezone.utc),
        )
        self.store.write(key, row.model_dump_json().encode("utf-8"), failed=False)
        return row


def list_shard_subjects(batch: pa.Table, root: str) -> pa.Table:
    """Ray Data UDF: the distinct subject ids of each shard path in ``batch["shard"]`` (ids are unique to a shard)."""
    ids = []
    for shard in batch.column("shard").to_pylist():
        column = pq.read_table(Path(root) / shard, columns=["subject_id"]).column("subject_id")
        ids.append(column.unique().cast(pa.int64()))
    values = pa.concat_arrays([a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in ids]) if ids else pa.array([], pa.int64())
    return pa.table({"subject_id": values})
