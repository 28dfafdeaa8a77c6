"""Vectorized checks of MEDS data files: the arrow schema of a shard, and the values and time order of its rows.

The row checks look at one record batch at a time with pyarrow.compute/numpy (no per-row Python) and report
findings per subject; `ProblemTally` adds up a subject's findings across batches so that the issue raised or
quarantined for a subject counts all its bad rows whatever the batch size.

>>> import pyarrow as pa
>>> batch = pa.RecordBatch.from_pydict({
...     "subject_id": pa.array([1, 1, 2, 2], pa.int64()),
...     "time": pa.array([None, 3, 5, 4], pa.timestamp("us")),
...     "code": pa.array(["GENDER//F", "LOINC//718-7", "", "LOINC//718-7"]),
...     "numeric_value": pa.array([None, float("nan"), None, 1.0], pa.float32()),
... })
>>> tally = ProblemTally()
>>> carry = tally.add_batch(batch, 100, carry=None, now_us=epoch_us(datetime(2030, 1, 1)))
>>> for issue in tally.pop_subject(2, "data/0.parquet"):
...     print(issue)
data/0.parquet: subject 2: field 'code': 1 empty-string code (first at row 102)
data/0.parquet: subject 2: field 'time': 1 row whose time is earlier than the row before (first at row 103)
>>> [issue.problem for issue in tally.pop_subject(1, "data/0.parquet")]
['1 NaN/inf value (first at row 101)']
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pyarrow as pa

from vista.shared.meds.errors import IssueKind, IssueScope, MedsIssue
from vista.shared.meds.schema import CODE, NUMERIC_VALUE, SUBJECT_ID, TEXT_VALUE, TIME

REQUIRED_COLUMNS: tuple[str, ...] = (SUBJECT_ID, TIME, CODE)
OPTIONAL_COLUMNS: tuple[str, ...] = (NUMERIC_VALUE, TEXT_VALUE)

STRING_TYPES: tuple[pa.DataType, ...] = (pa.string(), pa.large_string(), pa.string_view())
"""Arrow's UTF-8 layouts, all accepted for ``code``/``text_value``: one logical type that writers store differently."""

EXPECTED_TYPES: dict[str, tuple[pa.DataType, ...]] = {
    SUBJECT_ID: (pa.int64(),),
    TIME: (pa.timestamp("us"),),
    CODE: STRING_TYPES,
    NUMERIC_VALUE: (pa.float32(),),
    TEXT_VALUE: STRING_TYPES,
}
"""Arrow types of the MEDS 0.4 data columns. Nothing is cast: float64 ``numeric_value`` is an error, as in `meds`."""



def epoch_us(when: datetime) -> int:
    """A naive datetime as microseconds since 1970-01-01, the integer behind arrow's ``timestamp[us]``.

    >>> epoch_us(datetime(1970, 1, 1, 0, 0, 1))
    1000000
    """
    if when.tzinfo is not None:
        raise ValueError(f"expected a naive datetime like the MEDS time column, got {when.isoformat()}")
    return int(np.datetime64(when, "us").astype(np.int64))


NINETEEN_HUNDRED_US: int = epoch_us(datetime(1900, 1, 1))
"""1900-01-01 in microseconds since the epoch: earlier times are treated as impossible."""


def check_schema(arrow_schema: pa.Schema, file: str) -> list[MedsIssue]:
    """File-level issues of a shard's schema: missing required columns, duplicated or mistyped MEDS columns.

    >>> s = pa.schema([("subject_id", pa.int64()), ("time", pa.timestamp("ns")), ("numeric_value", pa.float64())])
    >>> for issue in check_schema(s, "data/0.parquet"):
    ...     print(issue)
    data/0.parquet: field 'code': required column is missing
    data/0.parquet: field 'time': wrong type: found timestamp[ns], expected timestamp[us]
    data/0.parquet: field 'numeric_value': wrong type: found double, expected float
    """
    issues: list[MedsIssue] = []
    names = arrow_schema.names
    for name in REQUIRED_COLUMNS:
        if name not in names:
            issues.append(MedsIssue(IssueKind.SCHEMA, IssueScope.FILE, file, "required column is missing", field=name))
    for name, allowed in EXPECTED_TYPES.items():
        count = names.count(name)
        if count > 1:
            problem = f"column appears {count} times"
            issues.append(MedsIssue(IssueKind.SCHEMA, IssueScope.FILE, file, problem, field=name))
        elif count == 1:
            found = arrow_schema.field(name).type
            if not any(found.equals(t) for t in allowed):
                wanted = " or ".join(str(t) for t in allowed)
                problem = f"wrong type: found {found}, expected {wanted}"
                issues.append(MedsIssue(IssueKind.SCHEMA, IssueScope.FILE, file, problem, field=name))
    return issues


@dataclass(frozen=True, slots=True)
class RowCheck:
    """One row-level rule: the field it is about, its kind, and how to name a bad row (singular, plural)."""

    name: str
    field: str
    kind: IssueKind
    singular: str
    plural: str
    advice: str = ""

    def problem(self, count: int, first_row: int) -> str:
        noun = self.singular if count == 1 else self.plural
        return f"{count} {noun} (first at row {first_row}){self.advice}"


NULL_CODE = RowCheck("null_code", CODE, IssueKind.VALUE, "null code", "null codes")
EMPTY_CODE = RowCheck("empty_code", CODE, IssueKind.VALUE, "empty-string code", "empty-string codes")
NONFINITE_VALUE = RowCheck("nonfinite_value", NUMERIC_VALUE, IssueKind.VALUE, "NaN/inf value", "NaN/inf values")
TIME_BEFORE_1900 = RowCheck(
    "time_before_1900", TIME, IssueKind.VALUE, "time before 1900-01-01", "times before 1900-01-01")
TIME_IN_FUTURE = RowCheck("time_in_future", TIME, IssueKind.VALUE, "time after now", "times after now")
STATIC_AFTER_TIMED = RowCheck(
    "static_after_timed", TIME, IssueKind.ORDER, "static row (null time) after timed rows",
    "static rows (null time) after timed rows", "; static rows must come before a subject's timed rows",
)
TIME_DECREASING = RowCheck(
    "time_decreasing", TIME, IssueKind.ORDER, "row whose time is earlier than the row before",
    "rows whose time is earlier than the row before",
)
ROW_CHECKS: tuple[RowCheck, ...] = (
    NULL_CODE, EMPTY_CODE, NONFINITE_VALUE, TIME_BEFORE_1900, TIME_IN_FUTURE, STATIC_AFTER_TIMED, TIME_DECREASING,
)


@dataclass(frozen=True, slots=True)
class RowCarry:
    """The last row checked in a shard (its subject and time in µs, None if static), to compare the next batch with."""

    subject_id: int
    time_us: int | None


@dataclass(frozen=True, slots=True)
class Finding:
    """The rows of one batch breaking one rule, per subject: count and first offending row (row inside the file)."""

    check: RowCheck
    subject_ids: np.ndarray
    first_rows: np.ndarray
    counts: np.ndarray


def _bits(buffer: pa.Buffer, offset: int, n: int) -> np.ndarray:
    """``n`` bits of an arrow bitmap from bit ``offset``, as a numpy bool array."""
    return np.unpackbits(np.frombuffer(buffer, dtype=np.uint8), count=offset + n, bitorder="little")[offset:].view(bool)


def _valid(array: pa.Array) -> np.ndarray | None:
    """Where ``array`` is not null; None when it has no nulls."""
    if not array.null_count:
        return None
    bitmap = array.buffers()[0]
    if bitmap is None:  # every slot null without a bitmap
        return np.zeros(len(array), dtype=bool)
    return _bits(bitmap, array.offset, len(array))


def _values(array: pa.Array, dtype: type[np.generic], extra: int = 0) -> np.ndarray:
    """The fixed-width buffer of ``array`` as numpy, zero-copy; slots under nulls hold arbitrary values."""
    data = array.buffers()[1]
    if data is None:
        return np.zeros(len(array) + extra, dtype=dtype)
    return np.frombuffer(data, dtype=dtype, count=array.offset + len(array) + extra)[array.offset:]


def _empty_strings(array: pa.Array) -> np.ndarray:
    """Where a UTF-8 array holds a zero-length string (or a null: mask those separately), from its offsets buffer."""
    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        array = array.cast(pa.large_string())
    offsets = _values(array, np.int64 if pa.types.is_large_string(array.type) else np.int32, extra=1)
    return offsets[1:] == offsets[:-1]


RowNumbers = int | np.ndarray
"""The file rows of a batch: the row of its first row (the batch is contiguous), or one row number per batch row."""


def _per_subject(check: RowCheck, mask: np.ndarray, sids: np.ndarray, rows: RowNumbers) -> Finding | None:
    bad = np.flatnonzero(mask)
    if bad.size == 0:
        return None
    subjects, first, counts = np.unique(sids[bad], return_index=True, return_counts=True)
    first_rows = rows + bad[first] if isinstance(rows, int | np.integer) else rows[bad[first]]
    return Finding(check, subjects, first_rows, counts)


def find_row_problems(
    batch: pa.RecordBatch, rows: RowNumbers, *, carry: RowCarry | None, now_us: int
) -> tuple[list[Finding], RowCarry | None]:
    """Apply every `RowCheck` to ``batch``, whose rows are file rows ``rows`` (see `RowNumbers`).

    ``batch`` must hold ``subject_id`` (int64, no nulls), ``time`` and ``code``, and may hold ``numeric_value``;
    ``carry`` is the previously checked row of the same file, when the batch continues it.
    Returns the findings and the carry for the next batch.
    """
    n = batch.num_rows
    if n == 0:
        return [], carry
    findings: list[Finding | None] = []
    sids = _values(batch.column(SUBJECT_ID), np.int64)

    code = batch.column(CODE)
    code_valid = _valid(code)
    if code_valid is not None:
        findings.append(_per_subject(NULL_CODE, ~code_valid, sids, rows))
    empty = _empty_strings(code)
    findings.append(_per_subject(EMPTY_CODE, empty if code_valid is None else empty & code_valid, sids, rows))

    if NUMERIC_VALUE in batch.schema.names:
        values = batch.column(NUMERIC_VALUE)
        if values.null_count < n:
            nonfinite = ~np.isfinite(_values(values, np.float32))
            valid = _valid(values)
            if valid is not None:
                nonfinite &= valid
            findings.append(_per_subject(NONFINITE_VALUE, nonfinite, sids, rows))

    time = batch.column(TIME)
    time_valid = _valid(time)
    has_time = np.ones(n, dtype=bool) if time_valid is None else time_valid
    t = _values(time, np.int64)  # under nulls: arbitrary, always masked with has_time below
    findings.append(_per_subject(TIME_BEFORE_1900, has_time & (t < NINETEEN_HUNDRED_US), sids, rows))
    findings.append(_per_subject(TIME_IN_FUTURE, has_time & (t > now_us), sids, rows))

    # Compare each row with the one before it within the same subject: rows 1.. with their predecessor in the batch
    # (views, no large temporaries: fresh allocations cost page faults), row 0 with the carried row.
    after_timed = (sids[1:] == sids[:-1]) & has_time[:-1]
    follows_carry = carry is not None and carry.time_us is not None and carry.subject_id == int(sids[0])
    first_static = follows_carry and not has_time[0]
    first_earlier = follows_carry and bool(has_time[0]) and int(t[0]) < carry.time_us  # type: ignore[union-attr]
    static_after_timed = np.concatenate(([first_static], after_timed & ~has_time[1:]))
    earlier = np.concatenate(([first_earlier], after_timed & has_time[1:] & (t[1:] < t[:-1])))
    findings.append(_per_subject(STATIC_AFTER_TIMED, static_after_timed, sids, rows))
    findings.append(_per_subject(TIME_DECREASING, earlier, sids, rows))

    new_carry = RowCarry(int(sids[-1]), int(t[-1]) if has_time[-1] else None)
    return [f for f in findings if f is not None], new_carry


class ProblemTally:
    """Adds up each subject's row findings across batches until its block is complete, then turns them into issues."""

    def __init__(self) -> None:
        self._open: dict[int, dict[RowCheck, list[int]]] = {}  # subject -> check -> [count, first_row]

    def add_batch(self, batch: pa.RecordBatch, rows: RowNumbers, *, carry: RowCarry | None,
                  now_us: int) -> RowCarry | None:
        """Check ``batch`` (see `find_row_problems`), remember what it found, and return the new carry."""
        findings, carry = find_row_problems(batch, rows, carry=carry, now_us=now_us)
        for finding in findings:
            per_subject = zip(finding.subject_ids.tolist(), finding.first_rows.tolist(), finding.counts.tolist())
            for sid, first, count in per_subject:
                slot = self._open.setdefault(sid, {}).setdefault(finding.check, [0, first])
                slot[0] += count
                slot[1] = min(slot[1], first)
        return carry

    def __len__(self) -> int:
        """Subjects with problems not yet popped."""
        return len(self._open)

    def has_problems(self, subject_id: int) -> bool:
        return subject_id in self._open

    def pop_subject(self, subject_id: int, file: str) -> list[MedsIssue]:
        """The issues of a subject whose rows have all been checked, in `ROW_CHECKS` order (then forgotten)."""
        found = self._open.pop(subject_id, {})
        return [
            MedsIssue(check.kind, IssueScope.SUBJECT, file, check.problem(*found[check]), subject_id=subject_id,
                      field=check.field, row=found[check][1])
            for check in ROW_CHECKS if check in found
        ]

    def pop_all(self, file: str) -> list[MedsIssue]:
        """The issues of every subject still open (at the end of a file)."""
        issues: list[MedsIssue] = []
        for sid in sorted(self._open):
            issues.extend(self.pop_subject(sid, file))
        return issues
