"""`check_shard`: every check `trajonco validate` makes on one data file, in one read of that file.

`MedsDataset.validate` checks a dataset through the reader (a read of ``subject_id`` per shard, then the rows), and
`vista.shared.meds.duplicates.find_duplicates` reads every column once more; both in one process, shard after
shard. Here a shard is checked on its own — footer and schema, layout, row values and time order, exact duplicate
rows — reading its columns once, and the result is a small picklable `ShardCheck`: the issues in the order the
reader reports them, the shard's distinct subject ids, the duplicates found. Any number of shards can be checked at
once (threads here, Ray tasks in ``jobs.data_steps``); `vista.shared.meds.validation` puts the results together in
shard order, so the report is the one the reader would have made. Memory is bounded by one shard.

Duplicates: in a shard that broke no rule (MEDS order holds, so equal rows sit in one run of the same subject and
time), equal rows are found over the whole shard from a 64-bit hash of each row, and every row flagged this way is
compared, column by column, with the first row of the same hash: the count, subjects and example are then those of
`DuplicateMarker`. Any doubt (a hash collision, a column type the comparison does not support, a run of one
subject's rows at one time longer than `MAX_CARRY`, a shard with problems) falls back to the marker itself.

>>> import tempfile
>>> from datetime import datetime
>>> import pyarrow as pa, pyarrow.parquet as pq
>>> root = Path(tempfile.mkdtemp()); (root / "data").mkdir()
>>> pq.write_table(pa.table({
...     "subject_id": pa.array([1, 1, 1, 2], pa.int64()),
...     "time": pa.array([None, datetime(2020, 1, 5), datetime(2020, 1, 5), datetime(2021, 2, 3)], pa.timestamp("us")),
...     "code": ["GENDER//F", "LOINC//718-7", "LOINC//718-7", "ENCOUNTER//AMB"],
...     "numeric_value": pa.array([None, 11.2, 11.2, float("nan")], pa.float32()),
... }), root / "data" / "0.parquet")
>>> found = check_shard(root, "data/0.parquet", now_us=epoch_us(datetime(2030, 1, 1)))
>>> found.subjects.tolist(), found.rows_checked, found.usable
([1, 2], 4, True)
>>> [str(issue) for issue in found.row_issues]
["data/0.parquet: subject 2: field 'numeric_value': 1 NaN/inf value (first at row 3)"]
>>> found.duplicates.rows, found.duplicates.example
(1, DuplicateExample(subject_id=1, row=2, same_as_row=1))
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from vista.shared.meds.checks import ProblemTally, RowCarry, _valid, _values, check_schema, epoch_us
from vista.shared.meds.duplicates import (
    DEFAULT_READ_ROWS,
    MAX_CARRY,
    DuplicateExample,
    DuplicateMarker,
    ShardDuplicates,
)
from vista.shared.meds.errors import IssueKind, IssueScope, MedsIssue, one_line
from vista.shared.meds.layout import build_layout
from vista.shared.meds.schema import CODE, NUMERIC_VALUE, SUBJECT_ID, TEXT_VALUE, TIME
from vista.shared.storage import Location, resolve

__all__ = ["SHARD_CHECK_SCHEMA", "ShardCheck", "check_shard", "epoch_us", "from_table", "open_shard", "to_table"]

MEDS_COLUMNS = (SUBJECT_ID, TIME, CODE, NUMERIC_VALUE, TEXT_VALUE)
STRING_COLUMNS = (CODE, TEXT_VALUE)  # checked for valid UTF-8 as they are read (arrow does not check on read)


@dataclass(frozen=True, eq=False)
class ShardCheck:
    """What checking one shard found (small: issues, distinct subject ids, duplicate counts; never rows).

    ``opening`` holds the footer, schema and layout issues (what the reader finds before reading any row),
    ``row_issues`` those of the rows, each in the order the reader reports them. ``subjects`` is None when the file
    was dropped before its layout was known. ``duplicates`` is None when they were not searched (file dropped, or
    not asked); ``duplicates_error`` says why comparing rows failed, if it did.
    """

    shard: str
    opening: tuple[MedsIssue, ...]
    subjects: np.ndarray | None
    row_issues: tuple[MedsIssue, ...]
    rows_checked: int
    duplicates: ShardDuplicates | None
    duplicates_error: str | None = None

    @property
    def laid_out(self) -> bool:
        """True when the layout was built and no footer/layout problem dropped the file."""
        return self.subjects is not None and not any(i.scope is IssueScope.FILE for i in self.opening)

    @property
    def usable(self) -> bool:
        """True when no problem dropped the whole file (its subjects count as checked)."""
        return self.laid_out and not any(i.scope is IssueScope.FILE for i in self.row_issues)


def _file_issue(shard: str, problem: str, *, row: int | None = None, field: str | None = None) -> MedsIssue:
    return MedsIssue(IssueKind.FILE, IssueScope.FILE, shard, problem, field=field, row=row)


def shard_source(location: Location, shard: str) -> Path | pa.NativeFile:
    """What `pq.ParquetFile` opens for ``shard``: its path on a local filesystem, an open handle on an object store
    (pyarrow then reads byte ranges: the footer, the row groups asked for)."""
    target = location / shard
    return Path(target.uri) if location.is_local else target.open_input()


def open_parquet(location: Location, shard: str, metadata: pq.FileMetaData | None = None) -> pq.ParquetFile:
    """``shard`` opened as a `pq.ParquetFile` (with its already-read footer, when given); an object-store handle is
    closed if opening fails."""
    source = shard_source(location, shard)
    try:
        return pq.ParquetFile(source, metadata=metadata)
    except BaseException:
        if isinstance(source, pa.NativeFile):
            source.close()
        raise


def open_shard(location: Location, shard: str) -> tuple[pq.FileMetaData | None, list[MedsIssue]]:
    """A shard's footer and schema, checked (the reader's `MedsDataset._open` and the validate step share it): the
    metadata, or the file-level issues."""
    try:
        if (location / shard).size() == 0:
            return None, [_file_issue(shard, "file is empty (0 bytes)")]
        with open_parquet(location, shard) as parquet:
            metadata, arrow_schema = parquet.metadata, parquet.schema_arrow
    except (OSError, pa.ArrowException) as exc:
        return None, [_file_issue(shard, f"not a readable parquet file ({one_line(exc)})")]
    issues = check_schema(arrow_schema, shard)
    if not issues and metadata.num_rows == 0:
        issues.append(_file_issue(shard, "file has 0 rows"))
    return (None if issues else metadata), issues


def checked_strings(batch: pa.RecordBatch, shard: str, row: int) -> tuple[pa.RecordBatch, MedsIssue | None]:
    """``batch`` with string views cast to large strings and every string checked as UTF-8 (arrow does not check
    on read), or the file-level issue of a corrupt string column (the reader reports it, `MedsDataset._checked_strings`)."""
    for name in STRING_COLUMNS:
        if name not in batch.schema.names:
            continue
        if batch.schema.field(name).type == pa.string_view():  # few compute kernels accept views
            batch = batch.set_column(batch.schema.get_field_index(name), name,
                                     batch.column(name).cast(pa.large_string()))
        try:
            batch.column(name).validate(full=True)
        except pa.ArrowInvalid as exc:  # its message gives an index, never the bytes
            problem = f"corrupt values in the rows from {row} ({one_line(exc)})"
            return batch, _file_issue(shard, problem, field=name, row=row)
    return batch, None


@dataclass
class _RowPass:
    """The reader's row checks over a whole shard (`MedsDataset._stream_runs` with every run, nothing built)."""

    shard: str
    starts: np.ndarray
    stops: np.ndarray
    subjects: list[int]
    now_us: int
    issues: list[MedsIssue]
    rows: int = 0

    def __post_init__(self) -> None:
        self.tally = ProblemTally()
        self.carry: RowCarry | None = None

    def add(self, batch: pa.RecordBatch, lo: int) -> None:
        hi = lo + batch.num_rows
        self.carry = self.tally.add_batch(batch, lo, carry=self.carry, now_us=self.now_us)
        self.rows += batch.num_rows
        if not self.tally:
            return
        first = int(np.searchsorted(self.stops, lo, side="right"))
        last = int(np.searchsorted(self.starts, hi, side="left"))
        for block in range(first, last):  # blocks complete in this batch: settle their subjects
            if int(self.stops[block]) <= hi:
                self.issues.extend(self.tally.pop_subject(self.subjects[block], self.shard))

    def finish(self) -> None:
        self.issues.extend(self.tally.pop_all(self.shard))  # only if the file could not be read to the end

    @property
    def usable(self) -> bool:
        """False once a problem dropped the whole file (a corrupt string column, a read failure)."""
        return not any(issue.scope is IssueScope.FILE for issue in self.issues)


def check_shard(root: str | Path | Location, shard: str, *, now_us: int, batch_size: int = DEFAULT_READ_ROWS,
                duplicates: bool = True) -> ShardCheck:
    """Check ``shard`` (a path relative to ``root``) as `trajonco validate` does, reading it once.

    ``now_us`` is the latest plausible event time in µs since the epoch (see `MedsDataset`); ``batch_size`` the rows
    per record batch, as the reader's. Never raises for bad data: problems are returned as issues.
    """
    location = resolve(root)
    metadata, opening = open_shard(location, shard)
    if metadata is None:
        return ShardCheck(shard, tuple(opening), None, (), 0, None)
    try:
        with open_parquet(location, shard, metadata) as parquet:
            subject_ids = parquet.read(columns=[SUBJECT_ID]).column(0)
    except (OSError, pa.ArrowException) as exc:
        issue = _file_issue(shard, f"cannot read column subject_id ({one_line(exc)})")
        return ShardCheck(shard, (issue,), None, (), 0, None)
    row_group_rows = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
    if location.is_local:
        fast = _clean_shard(Path((location / shard).uri), shard, subject_ids, row_group_rows, now_us, duplicates)
        if fast is not None:
            return fast
    layout, layout_issues = build_layout(shard, subject_ids, row_group_rows)
    del subject_ids
    if layout is None:
        return ShardCheck(shard, tuple(layout_issues), None, (), 0, None)
    runs = (layout.run_starts, layout.run_starts + layout.run_lengths, layout.run_subjects.tolist())
    meds = [c for c in MEDS_COLUMNS if c in metadata.schema.to_arrow_schema().names]
    checks, kept, failure = _row_pass(location, shard, metadata, runs, now_us, batch_size,
                                      None if duplicates else meds)
    found = error = None
    if failure is not None and duplicates:
        # an unreadable extension column: the MEDS columns are checked alone, as the reader does, and the duplicate
        # search (which reads every column) fails as `find_duplicates` would
        checks, kept, again = _row_pass(location, shard, metadata, runs, now_us, batch_size, meds)
        if again is None and checks.usable:
            error = f"read failed while looking for duplicate rows ({failure})"
        kept = None
    elif kept is not None and checks.usable:
        found, error = _duplicates(shard, kept, clean=not layout_issues and not checks.issues)
    return ShardCheck(shard, tuple(layout_issues), layout.subjects, tuple(checks.issues), checks.rows, found, error)


def _clean_shard(path: Path, shard: str, subject_ids: pa.ChunkedArray, row_group_rows: list[int], now_us: int,
                 duplicates: bool) -> ShardCheck | None:
    """The check of a shard with no problem, read whole by polars (faster than record batches, and strings checked
    as UTF-8 on read); None at the first doubt — a problem, a read error, a hash collision — so that the record-batch
    path finds and words it exactly as the reader does."""
    layout, issues = build_layout(shard, subject_ids, row_group_rows)
    if layout is None or issues:
        return None
    try:
        frame = pl.read_parquet(path, columns=None if duplicates else
                                [c for c in MEDS_COLUMNS if c in pl.read_parquet_schema(path)])
        meds = [c for c in MEDS_COLUMNS if c in frame.columns]
        batch = frame.select(meds).to_arrow(compat_level=pl.CompatLevel.oldest()).combine_chunks().to_batches()
    except (OSError, pl.exceptions.PolarsError, pa.ArrowException):
        return None
    if len(batch) != 1 or not batch[0].schema.equals(pa.schema([(c, POLARS_TYPES[c]) for c in meds])):
        return None
    checks = _RowPass(shard, layout.run_starts, layout.run_starts + layout.run_lengths,
                      layout.run_subjects.tolist(), now_us, [])
    checks.add(batch[0], 0)
    checks.finish()
    if checks.issues:
        return None
    found = _hashed_duplicates(shard, frame) if duplicates else None
    if duplicates and found is None:
        return None
    return ShardCheck(shard, (), layout.subjects, (), checks.rows, found, None)


POLARS_TYPES = {SUBJECT_ID: pa.int64(), TIME: pa.timestamp("us"), CODE: pa.large_string(),
                NUMERIC_VALUE: pa.float32(), TEXT_VALUE: pa.large_string()}
"""The arrow types of the MEDS columns as polars hands them over (a shard of other types takes the batch path)."""


def _row_pass(location: Location, shard: str, metadata: pq.FileMetaData,
              runs: tuple[np.ndarray, np.ndarray, list[int]], now_us: int, batch_size: int,
              columns: list[str] | None) -> tuple[_RowPass, list[pa.RecordBatch] | None, str | None]:
    """The row checks over the whole shard, the batches read (every column when ``columns`` is None, kept for the
    duplicate search) and the message of a read failure (which is also a file issue among the checks')."""
    meds = [c for c in MEDS_COLUMNS if c in metadata.schema.to_arrow_schema().names]
    checks = _RowPass(shard, *runs, now_us, [])
    kept: list[pa.RecordBatch] | None = [] if columns is None else None
    row = 0
    failure: str | None = None
    try:
        with open_parquet(location, shard, metadata) as parquet:
            for raw in parquet.iter_batches(batch_size=batch_size, columns=columns, use_threads=True):
                batch, corrupt = checked_strings(raw.select(meds), shard, row)
                if corrupt is not None:
                    checks.issues.append(corrupt)
                    break
                checks.add(batch, row)
                if kept is not None:
                    kept.append(raw)
                row += raw.num_rows
    except (OSError, pa.ArrowException) as exc:
        failure = one_line(exc)
        checks.issues.append(_file_issue(shard, f"read failed near row {row} ({failure})", row=row))
    checks.finish()
    return checks, kept, failure


def _duplicates(shard: str, batches: list[pa.RecordBatch], *, clean: bool) -> tuple[ShardDuplicates | None, str | None]:
    """The shard's exact duplicates (see the module docstring), or why rows could not be compared."""
    if clean:
        fast = _hashed_duplicates(shard, batches)
        if fast is not None:
            return fast, None
    marker = DuplicateMarker()
    try:
        for batch in batches:
            marker.mark(batch)
    except (pl.exceptions.PolarsError, pa.ArrowException) as exc:
        return None, f"cannot compare rows for duplicates ({one_line(exc)})"
    return ShardDuplicates(shard, marker.total, marker.subjects, marker.example), None


def _runs(sids: np.ndarray, time: pa.Array) -> np.ndarray:
    """For each row, the index of its run of one subject at one time (nulls equal to nulls), counted from 0."""
    valid = _valid(time)
    values = _values(time, np.int64)  # under nulls: arbitrary, masked below
    new = np.empty(sids.size, dtype=bool)
    new[:1] = True
    np.not_equal(sids[1:], sids[:-1], out=new[1:])
    if valid is None:
        new[1:] |= values[1:] != values[:-1]
    else:
        new[1:] |= (valid[1:] != valid[:-1]) | (valid[1:] & (values[1:] != values[:-1]))
    return np.cumsum(new) - 1


RUN_BITS = 24
"""Bits of a row's run index in its sort key (the other 40 are the top of its hash): shards of up to 16M runs."""


def _hashed_duplicates(shard: str, data: list[pa.RecordBatch] | pl.DataFrame) -> ShardDuplicates | None:
    """Duplicates of a shard in MEDS order, found by sorting the rows of each (subject, time) run on their hash, each
    one confirmed against the first row of its hash; None when the marker must decide (see the module docstring)."""
    try:
        frame = data if isinstance(data, pl.DataFrame) else pl.from_arrow(pa.Table.from_batches(data))
        assert isinstance(frame, pl.DataFrame)
        sids = frame[SUBJECT_ID].to_numpy()
        if sids.size == 0:
            return ShardDuplicates(shard, 0, 0, None)
        run = _runs(sids, frame[TIME].rechunk().to_arrow())
        lengths = np.bincount(run)
        if lengths.max() > MAX_CARRY or lengths.size >= 1 << RUN_BITS:
            return None
        rows = np.flatnonzero(lengths[run] > 1)  # a row alone in its run repeats nothing
        hashes = frame.drop(SUBJECT_ID, TIME).hash_rows().to_numpy()[rows]  # the run stands for both
        key = (run[rows].astype(np.uint64) << np.uint64(64 - RUN_BITS)) | (hashes >> np.uint64(RUN_BITS))
        order = np.argsort(key, kind="stable")  # equal keys keep file order: a group's first row comes first
        ordered = key[order]
        same = ordered[1:] == ordered[:-1]
        if not same.any():
            return ShardDuplicates(shard, 0, 0, None)
        group_start = np.maximum.accumulate(np.where(np.concatenate(([True], ~same)), np.arange(ordered.size), 0))
        at = np.flatnonzero(same) + 1
        repeated, same_as = rows[order[at]], rows[order[group_start[at]]]
        by_row = np.argsort(repeated)
        repeated, same_as = repeated[by_row], same_as[by_row]
        later, earlier = frame[repeated], frame[same_as]
        for name in frame.columns:
            if not bool(later[name].eq_missing(earlier[name]).all()):
                return None  # equal keys, different rows: let the marker compare the rows themselves
    except (pl.exceptions.PolarsError, pa.ArrowException, TypeError, ValueError):
        return None
    example = DuplicateExample(int(sids[repeated[0]]), int(repeated[0]), int(same_as[0]))
    return ShardDuplicates(shard, int(repeated.size), int(np.unique(sids[repeated]).size), example)


# ------------------------------------------------------------------------------------------------ as an arrow row
_ISSUE = pa.struct([("kind", pa.string()), ("scope", pa.string()), ("file", pa.string()), ("problem", pa.string()),
                    ("subject_id", pa.int64()), ("field", pa.string()), ("row", pa.int64())])
SHARD_CHECK_SCHEMA = pa.schema([
    ("shard", pa.string()), ("opening", pa.list_(_ISSUE)), ("subjects", pa.list_(pa.int64())),
    ("row_issues", pa.list_(_ISSUE)), ("rows_checked", pa.int64()), ("duplicate_rows", pa.int64()),
    ("duplicate_subjects", pa.int64()), ("example", pa.list_(pa.int64())), ("duplicates_error", pa.string()),
])
"""One row per shard: how a `ShardCheck` travels as a `vista.shared.meds.shard_step` summary (Ray Data blocks)."""


def _issue_dict(issue: MedsIssue) -> dict[str, object]:
    return {"kind": issue.kind.value, "scope": issue.scope.value, "file": issue.file, "problem": issue.problem,
            "subject_id": issue.subject_id, "field": issue.field, "row": issue.row}


def _issue(row: dict) -> MedsIssue:
    return MedsIssue(IssueKind(row["kind"]), IssueScope(row["scope"]), row["file"], row["problem"],
                     subject_id=row["subject_id"], field=row["field"], row=row["row"])


def to_table(check: ShardCheck) -> pa.Table:
    """``check`` as a one-row table with `SHARD_CHECK_SCHEMA` (`from_table` reads it back).

    >>> found = ShardCheck("data/0.parquet", (), np.array([3, 5]), (), 7, ShardDuplicates("data/0.parquet", 0, 0, None))
    >>> back = from_table(to_table(found))[0]
    >>> back.shard, back.subjects.tolist(), back.rows_checked, back.duplicates
    ('data/0.parquet', [3, 5], 7, ShardDuplicates(shard='data/0.parquet', rows=0, subjects=0, example=None))
    """
    d, e = check.duplicates, check.duplicates.example if check.duplicates else None
    return pa.Table.from_pylist([{
        "shard": check.shard, "opening": [_issue_dict(i) for i in check.opening],
        "subjects": None if check.subjects is None else check.subjects,
        "row_issues": [_issue_dict(i) for i in check.row_issues], "rows_checked": check.rows_checked,
        "duplicate_rows": None if d is None else d.rows, "duplicate_subjects": None if d is None else d.subjects,
        "example": None if e is None else [e.subject_id, e.row, e.same_as_row],
        "duplicates_error": check.duplicates_error,
    }], schema=SHARD_CHECK_SCHEMA)


def from_table(table: pa.Table) -> list[ShardCheck]:
    """The `ShardCheck` of each row of a `SHARD_CHECK_SCHEMA` table, in the table's order."""
    out: list[ShardCheck] = []
    subjects_column = table.column("subjects")
    for i, row in enumerate(table.drop_columns(["subjects"]).to_pylist()):
        ids = subjects_column[i]
        subjects = None if not ids.is_valid else ids.values.to_numpy(zero_copy_only=False).astype(np.int64)
        example = None if row["example"] is None else DuplicateExample(*row["example"])
        found = (None if row["duplicate_rows"] is None else
                 ShardDuplicates(row["shard"], row["duplicate_rows"], row["duplicate_subjects"], example))
        out.append(ShardCheck(row["shard"], tuple(map(_issue, row["opening"])), subjects,
                              tuple(map(_issue, row["row_issues"])), row["rows_checked"], found,
                              row["duplicates_error"]))
    return out
