"""A job's rows as parquet part files written by the actors, and the polars scans that read them back.

Layout: ``OUT/rows/run=<run_id>/part-<writer>-<seq>.parquet``. Each actor buffers the rows of the tasks it finished
and writes them as one part file when it has ``flush_rows`` of them, when the oldest has waited ``flush_s``
seconds, or when it has no task left running (so the end of a job, or a quiet actor, leaves nothing unwritten).
A part file is written to a temporary name and renamed into place, so readers see whole files only (on an object
store, ``--out s3://…``, it is sent as one PUT of the whole object: `vista.shared.storage`). No file is ever rewritten: a task run again (a retry, or an actor that died after writing) adds a newer row, and the newest
row of a task (``finished_at``) is its row.

The driver reads only the key and status columns to plan a run (which tasks have a row, which are failures worth
retrying), and builds the consolidated table as a streamed polars scan over every part file, key range by key
range, so its memory stays flat whatever the cohort size.

>>> import tempfile, pyarrow as pa
>>> from datetime import datetime, timezone
>>> schema = pa.schema([("subject_id", pa.int64()), ("prediction_time", pa.timestamp("us")), ("status", pa.string()),
...                     ("retry_class", pa.string()), ("run_id", pa.string()), ("error_kind", pa.string()),
...                     ("finished_at", pa.timestamp("us", tz="UTC"))])
>>> root = Path(tempfile.mkdtemp())
>>> writer = PartWriter(root, run_id="r1", schema=schema, flush_rows=2)
>>> at = lambda s: datetime(2024, 1, 1, 0, 0, s, tzinfo=timezone.utc)
>>> writer.add({"subject_id": 1, "prediction_time": None, "status": "failed", "retry_class": "transient", "run_id": "r1",
...             "error_kind": "llm_call_failed", "finished_at": at(1)})
>>> writer.due(), writer.flush()
(False, ...)
>>> writer.add({"subject_id": 1, "prediction_time": None, "status": "ok", "retry_class": None, "run_id": "r1",
...             "error_kind": None, "finished_at": at(5)})
>>> _ = writer.flush()  # the task run again: its newer row wins
>>> len(part_files(root)), latest_states(root)
(2, {TaskKey(subject_id=1, prediction_time=None): RowState(status='ok', retry_class=None, run_id='r1', error_kind=None)})
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from vista.shared.llm.task_usage import TaskUsage
from vista.shared.meds.labels import PREDICTION_TIME, SUBJECT_ID
from vista.shared.meds.task_key import TaskKey
from vista.shared.storage import Location, resolve, scan_parquet

ROWS = "rows"
"""Folder of the part files under the output directory."""
ORDER_COLUMN = "finished_at"


@dataclass(frozen=True, slots=True)
class RowKeys:
    """The two part-file columns that name a task: its subject (an int) and its prediction time (or null).

    The predict job's rows name the task by ``subject_id``; the VISTA job's by ``task_id``, because a row's
    ``subject_id`` there is the patient an XML file turned out to hold, not the task (the file) itself.
    """

    subject: str = SUBJECT_ID
    time: str = PREDICTION_TIME

    @property
    def columns(self) -> list[str]:
        return [self.subject, self.time]


TASK_KEYS = RowKeys()


class PartWriter:
    """An actor's buffer of finished rows and the part files it writes (thread-safe)."""

    def __init__(self, root: Path | str, *, run_id: str, schema: pa.Schema, flush_rows: int = 256, flush_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        if flush_rows < 1 or flush_s <= 0:
            raise ValueError(f"flush_rows must be >= 1 and flush_s > 0, not {flush_rows} and {flush_s}")
        self.folder = resolve(root) / ROWS / f"run={run_id}"
        self.schema = schema
        self.flush_rows = flush_rows
        self.flush_s = flush_s
        self.writer_id = uuid.uuid4().hex[:10]
        self._clock = clock
        self._rows: list[dict[str, object]] = []
        self._oldest: float | None = None
        self._seq = 0
        self._lock = threading.Lock()  # the buffer
        self._write_lock = threading.Lock()  # one file at a time, in sequence order
        self.files_written = 0
        self.rows_written = 0

    def add(self, record: dict[str, object]) -> None:
        with self._lock:
            if not self._rows:
                self._oldest = self._clock()
            self._rows.append(record)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._rows)

    def due(self) -> bool:
        """Whether the buffer is full or its oldest row has waited long enough."""
        with self._lock:
            if not self._rows:
                return False
            return len(self._rows) >= self.flush_rows or self._clock() - (self._oldest or 0.0) >= self.flush_s

    def flush(self) -> Path | Location | None:
        """Write the buffered rows as one part file (atomically); None when there was nothing to write."""
        with self._write_lock:
            with self._lock:
                rows, self._rows, self._oldest = self._rows, [], None
                if not rows:
                    return None
                self._seq += 1
                seq = self._seq
            table = pa.Table.from_pylist(rows, schema=self.schema)
            path = self.folder / f"part-{self.writer_id}-{seq:05d}.parquet"
            try:
                _write_parquet(table, path)
            except BaseException:
                with self._lock:  # keep the rows for the next attempt
                    self._rows[:0] = rows
                    self._oldest = self._oldest or self._clock()
                raise
            self.files_written += 1
            self.rows_written += len(rows)
            return Path(path.path) if path.is_local else path


def _write_parquet(table: pa.Table, path: Location) -> None:
    """A whole parquet file at ``path``: a temporary file renamed into place, or one PUT of the whole object."""
    if not path.is_local:
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        path.write_bytes(sink.getvalue().to_pybytes())
        return
    with path.publish() as tmp:
        pq.write_table(table, tmp)


def _part_locations(root: Path | str | Location, prefix: str = "part-", suffix: str = ".parquet") -> list[Location]:
    """The files ``rows/run=*/<prefix>*<suffix>`` under ``root``, sorted (one listing, local or object store)."""
    folder = resolve(root) / ROWS
    return [f for f in folder.files(suffix=suffix)
            if f.name.startswith(prefix) and f.parent.name.startswith("run=") and f.parent.parent.path == folder.path]


def part_files(root: Path | str) -> list[Path] | list[Location]:
    """Every complete part file under ``root/rows`` (temporaries of interrupted writes excluded): paths for a local
    ``root``, `vista.shared.storage.Location`s for an object store."""
    found = _part_locations(root)
    return [Path(f.path) for f in found] if found and found[0].is_local else found


def remove_stale_temporaries(root: Path | str) -> int:
    """Delete temporaries left by interrupted writes (call before any writer starts). An object store has none:
    part files are sent whole."""
    stale = _part_locations(root, ".", ".tmp") if resolve(root).is_local else []
    for path in stale:
        path.delete()
    return len(stale)


def _latest(files: list[Location], columns: Iterable[str], keys: RowKeys) -> pl.LazyFrame:
    """The newest row of each task, with ``columns`` (the key and ``finished_at`` are always included)."""
    wanted = list(dict.fromkeys([*keys.columns, ORDER_COLUMN, *columns]))
    return (scan_parquet(files).select(wanted).sort(ORDER_COLUMN, nulls_last=False)
            .unique(subset=keys.columns, keep="last", maintain_order=False))


@dataclass(frozen=True, slots=True)
class RowState:
    """What the newest row of a task says, for planning the next run."""

    status: str
    retry_class: str | None
    run_id: str | None = None
    error_kind: str | None = None


def latest_states(root: Path | str, keys: RowKeys = TASK_KEYS) -> dict[TaskKey, RowState]:
    """Each task with a row, and its newest row's status and retry class (reads four small columns only)."""
    files = _part_locations(root)
    if not files:
        return {}
    frame = _latest(files, ["status", "retry_class", "run_id", "error_kind"], keys).collect(engine="streaming")
    return {
        TaskKey(int(s), t): RowState(status, retry, run, kind)
        for s, t, status, retry, run, kind in zip(frame[keys.subject].to_list(), frame[keys.time].to_list(),
                                                  frame["status"].to_list(), frame["retry_class"].to_list(),
                                                  frame["run_id"].to_list(), frame["error_kind"].to_list())
    }


@dataclass(frozen=True, slots=True)
class OutputFile:
    """One consolidated file: its name in the summary, where it goes, its schema (the columns it keeps), and which
    of the newest rows it keeps (``rows``: a table of every task's newest row, with the union of the files'
    columns -> this file's rows; None: every row)."""

    name: str
    path: Path | str
    schema: pa.Schema
    rows: Callable[[pa.Table], pa.Table] | None = None

    def of(self, chunk: pa.Table) -> pa.Table:
        table = self.rows(chunk) if self.rows is not None else chunk
        return table.select(self.schema.names).cast(self.schema)


USAGE_SUMS = {"calls": "llm_calls", "cache_hits": "cache_hits", "prompt_tokens": "prompt_tokens",
              "completion_tokens": "completion_tokens", "cost_usd": "cost_usd", "unpriced_calls": "unpriced_calls"}
"""The `TaskUsage` fields `RunLLMRows.kept` adds up, and the row columns holding them."""


@dataclass(frozen=True, slots=True)
class RunLLMRows:
    """What a run's rows say about its LLM calls, from one scan of the part files at run end."""

    answered_by: dict[str, list[str]]
    """Who answered the run's calls: the distinct ``backend``, ``endpoint_host`` and ``served_model`` values of
    every row the run wrote (comma-joined cells split), each sorted; empty lists when no row records them."""
    kept: TaskUsage
    """The usage columns (`USAGE_SUMS`) summed over the tasks whose newest row the run wrote: what the rows the
    output keeps say it spent (a row written twice, or superseded by a rerun, is not counted)."""


def run_llm_rows(root: Path | str, run_id: str, keys: RowKeys = TASK_KEYS) -> RunLLMRows:
    """`RunLLMRows` of run ``run_id``: its identity and usage columns, with the key and order columns, read once."""
    from vista.shared.llm.task_usage import IDENTITY_COLUMNS

    files = _part_locations(root)
    if not files:
        return RunLLMRows({name: [] for name in IDENTITY_COLUMNS}, TaskUsage())
    scan = scan_parquet(files)
    names = scan.collect_schema().names()
    identity = [c for c in IDENTITY_COLUMNS if c in names]
    usage = {field: column for field, column in USAGE_SUMS.items() if column in names}
    wanted = list(dict.fromkeys([*keys.columns, ORDER_COLUMN, "run_id", *identity, *usage.values()]))
    rows = scan.select(wanted).collect(engine="streaming")
    found: dict[str, set[str]] = {name: set() for name in IDENTITY_COLUMNS}
    ours = rows.filter(pl.col("run_id") == run_id)
    for name in identity:
        for cell in ours[name].drop_nulls().unique().to_list():
            found[name].update(part for part in str(cell).split(",") if part)
    newest = (rows.sort(ORDER_COLUMN, nulls_last=False).unique(subset=keys.columns, keep="last")
              .filter(pl.col("run_id") == run_id).select([pl.col(c).sum() for c in usage.values()]))
    kept = TaskUsage(**{field: newest[column][0] or 0 for field, column in usage.items()})
    return RunLLMRows({name: sorted(values) for name, values in found.items()}, kept)


@dataclass(slots=True)
class PartConsolidation:
    """What went into the consolidated files."""

    path: Path | str  # the first file (the one with every task's row)
    rows: int = 0  # tasks with a row (selected or not)
    missing: list[TaskKey] = field(default_factory=list)  # selected tasks without a row
    statuses: Counter[str] = field(default_factory=Counter)  # over the selected tasks
    seconds: float = 0.0
    paths: dict[str, str] = field(default_factory=dict)  # each file, by name
    file_rows: dict[str, int] = field(default_factory=dict)  # the rows each file holds, by name

    @property
    def complete(self) -> bool:
        return not self.missing


def consolidate_parts(root: Path | str, files: Sequence[OutputFile], selected: Iterable[TaskKey], *,
                      keys: RowKeys = TASK_KEYS, chunk_rows: int = 10_000) -> PartConsolidation:
    """Write the newest row of every task with a row (not only this run's selection: a rerun with a smaller
    ``--limit`` keeps the others) into each of ``files`` (its rows and columns, `OutputFile`) in key order,
    atomically; report the selected tasks without one.

    The scan runs key range by key range (``chunk_rows`` tasks each), so memory holds one range at a time: each row
    carries ~7 KB of detail JSON that the join/sort copies several times, so 10,000 rows peak near 0.85 GB where
    50,000 peaked near 2.4 GB (``benchmarks/bench_consolidation.py``, 100k patients).
    """
    started = time.perf_counter()
    if not files:
        raise ValueError("consolidate_parts needs at least one output file")
    targets = [resolve(f.path) for f in files]
    shown = [Path(t.path) if t.is_local else t.uri for t in targets]
    report = PartConsolidation(shown[0], paths={f.name: str(p) for f, p in zip(files, shown)},
                               file_rows={f.name: 0 for f in files})
    parts = _part_locations(root)
    selected = set(selected)
    winners = (_latest(parts, ["status"], keys).collect(engine="streaming").sort(keys.columns)
               if parts else pl.DataFrame(schema={keys.subject: pl.Int64, keys.time: pl.Datetime("us"),
                                                   ORDER_COLUMN: pl.Datetime("us", "UTC"), "status": pl.String}))
    found: set[TaskKey] = set()
    for s, t, status in zip(winners[keys.subject].to_list(), winners[keys.time].to_list(),
                            winners["status"].to_list()):
        key = TaskKey(int(s), t)
        found.add(key)
        if key in selected:
            report.statuses[status] += 1
    report.missing = sorted(selected - found, key=TaskKey.sort_key)
    report.rows = winners.height
    columns = list(dict.fromkeys(name for f in files for name in f.schema.names))
    with ExitStack() as stack:
        writers = [stack.enter_context(pq.ParquetWriter(stack.enter_context(t.publish()), f.schema))
                   for f, t in zip(files, targets)]
        for lo in range(0, winners.height, chunk_rows):
            chunk = winners.slice(lo, chunk_rows).select([*keys.columns, ORDER_COLUMN])
            first, last = chunk[keys.subject][0], chunk[keys.subject][-1]
            rows = (scan_parquet(parts)
                    .filter(pl.col(keys.subject).is_between(first, last))
                    .select(list(dict.fromkeys([*keys.columns, ORDER_COLUMN, *columns])))
                    .join(chunk.lazy(), on=[*keys.columns, ORDER_COLUMN], how="semi", nulls_equal=True)
                    .unique(subset=keys.columns, keep="first")  # two writes of one row at the same instant
                    .sort(keys.columns, nulls_last=False)
                    .select(columns)
                    .collect(engine="streaming")).to_arrow()
            for f, writer in zip(files, writers):
                table = f.of(rows)
                writer.write_table(table)
                report.file_rows[f.name] += table.num_rows
    report.seconds = time.perf_counter() - started
    return report
