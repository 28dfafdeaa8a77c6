"""Read a label file as the MEDS label schema, whichever tool wrote it: `trajonco cohort`, ACES, MEDS-DEV, pandas.

Every command that takes a label file (``jobs.predict``/``jobs.build_graphs --labels``, ``trajonco chunk``,
``predict-one --labels``, `baselines.read_labels`) reads it here, so they accept the same files and reject bad ones
with the same one-line `LabelFileError` naming the file, the subject and the field.

What ACES (PyPI ``es-aces`` 0.7.3, the MEDS ecosystem's cohort extractor) writes, as measured:

- ``aces-cli ... data.standard=meds``: exactly ``meds.LabelSchema`` — ``subject_id`` int64, ``prediction_time``
  timestamp[us], ``boolean_value`` bool, ``integer_value`` int64, ``float_value`` float32, ``categorical_value``
  string — one row per trigger event (so usually several rows per subject). ``prediction_time`` is null in every
  row when the task config sets no ``index_timestamp``, and ``boolean_value`` when it sets no ``label``. With
  ``data=sharded`` it writes one file per shard (``COHORT_DIR/NAME/held_out/0.parquet``, …).
- Its Python API (``aces.query.query()``, the table its docs show) and its ``window_stats_dir`` files:
  ``subject_id``, ``index_timestamp`` (or ``prediction_time``), ``label`` (or ``boolean_value``) as an int64 *count*
  of the label predicate in its window, ``trigger``, and one struct ``<window>.<start|end>_summary`` per window.

`read_label_table` returns ``subject_id`` int64, ``prediction_time`` timestamp[us] (naive, never null: a label row
without a time would let a model read the outcome) and ``boolean_value`` bool (null: an unlabelled task) first,
then the file's other columns unchanged. ``index_timestamp`` becomes ``prediction_time``; ``label`` becomes
``boolean_value``; an integer label is a count, true when non-zero (as ``aces-cli`` itself casts it); other integer
widths, other time units and ``date`` columns are cast. It neither sorts nor removes duplicates: the readers decide.

>>> import tempfile
>>> from datetime import datetime
>>> path = Path(tempfile.mkdtemp()) / "aces_query.parquet"
>>> pq.write_table(pa.table({"subject_id": [7, 7], "index_timestamp": [datetime(2020, 1, 1), datetime(2021, 1, 1)],
...                          "label": [0, 2]}), path)
>>> table = read_label_table(path)
>>> table.column_names, table.column("boolean_value").to_pylist(), str(table.schema.field("prediction_time").type)
(['subject_id', 'prediction_time', 'boolean_value'], [False, True], 'timestamp[us]')
>>> pq.write_table(pa.table({"subject_id": [7], "prediction_time": pa.nulls(1, pa.timestamp("us"))}), path)
>>> read_label_table(path)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
vista.meds.labels.LabelFileError: ...aces_query.parquet: subject 7: field 'prediction_time': 1 of 1 rows have no \
prediction time (an ACES task config needs `index_timestamp: end` on its input window)
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyarrow.types as pat
from pyarrow.fs import FileType

from vista.meds.errors import MedsDataError, one_line
from vista.storage import StorageError, resolve

SUBJECT_ID = "subject_id"
PREDICTION_TIME = "prediction_time"
BOOLEAN_VALUE = "boolean_value"
LABEL_COLUMNS = (SUBJECT_ID, PREDICTION_TIME, BOOLEAN_VALUE)

ALIASES = {PREDICTION_TIME: "index_timestamp", BOOLEAN_VALUE: "label"}
"""MEDS label column -> the name ACES's Python API (and its non-MEDS outputs) gives it."""

LABEL_TYPES = pa.schema([
    pa.field(SUBJECT_ID, pa.int64()),
    pa.field(PREDICTION_TIME, pa.timestamp("us")),
    pa.field(BOOLEAN_VALUE, pa.bool_()),
])
"""The first three columns of every table `read_label_table` returns (the types of ``meds.LabelSchema``)."""


class LabelFileError(MedsDataError):
    """A label file is missing, unreadable, or lacks a usable subject, prediction time or label column."""


def read_label_table(path: str | Path) -> pa.Table:
    """The label file at ``path`` (a local path or an object-store URI, `vista.storage`) with `LABEL_TYPES` columns
    first (see the module docstring); `LabelFileError` else."""
    try:
        location = resolve(path)
    except StorageError as exc:
        raise LabelFileError(str(path).partition("?")[0], str(exc)) from None
    source = str(Path(path)) if location.is_local else location.uri
    try:
        kind = location.fs.get_file_info(location.path).type
    except OSError as exc:
        raise LabelFileError(source, f"cannot be reached ({one_line(exc)})") from None
    if kind == FileType.Directory:
        raise LabelFileError(source, "is a directory; pass one label file (aces-cli with data=sharded writes one per "
                                     "shard, e.g. DIR/held_out/0.parquet; scripts/aces_labels.sh merges them per split)")
    if kind != FileType.File:
        raise LabelFileError(source, "label file not found")
    try:
        table = pq.read_table(location.path, filesystem=location.fs)
    except (OSError, pa.ArrowException) as exc:
        raise LabelFileError(source, f"not a readable parquet label file ({one_line(exc)})") from None
    table = _rename_aliases(table, source)
    subjects = _subject_ids(table, source)
    times = _prediction_times(table, source, subjects)
    labels = _boolean_values(table, source)
    rest = [name for name in table.column_names if name not in LABEL_COLUMNS]
    columns = [subjects, times, labels] + [table.column(name) for name in rest]
    fields = list(LABEL_TYPES) + [table.schema.field(name) for name in rest]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _rename_aliases(table: pa.Table, source: str) -> pa.Table:
    names = table.column_names
    for column, alias in ALIASES.items():
        if alias not in names:
            continue
        if column in names:
            raise LabelFileError(source, f"both {column!r} and {alias!r} are present; keep one", field=column)
        names = [column if name == alias else name for name in names]
    return table.rename_columns(names)


def _missing(table: pa.Table, source: str, column: str, hint: str = "") -> LabelFileError:
    return LabelFileError(source, f"missing from the label file (columns: {', '.join(table.column_names) or 'none'})"
                                  f"{hint}", field=column)


def _subject_ids(table: pa.Table, source: str) -> pa.ChunkedArray:
    if SUBJECT_ID not in table.column_names:
        raise _missing(table, source, SUBJECT_ID)
    column = table.column(SUBJECT_ID)
    if not pat.is_integer(column.type):
        raise LabelFileError(source, f"has type {column.type}, expected an integer type", field=SUBJECT_ID)
    if column.null_count:
        raise LabelFileError(source, f"{column.null_count} null subject ids", field=SUBJECT_ID)
    try:
        return column.cast(pa.int64())
    except pa.ArrowInvalid as exc:
        raise LabelFileError(source, f"does not fit int64 ({one_line(exc)})", field=SUBJECT_ID) from None


def _prediction_times(table: pa.Table, source: str, subjects: pa.ChunkedArray) -> pa.ChunkedArray:
    hint = " (an ACES task config needs `index_timestamp: end` on its input window)"
    if PREDICTION_TIME not in table.column_names:
        raise _missing(table, source, PREDICTION_TIME, hint)
    column = table.column(PREDICTION_TIME)
    if pat.is_timestamp(column.type) and column.type.tz is not None:
        raise LabelFileError(source, f"carries time zone {column.type.tz}; MEDS times are naive", field=PREDICTION_TIME)
    if not (pat.is_timestamp(column.type) or pat.is_date(column.type)):
        raise LabelFileError(source, f"has type {column.type}, expected a timestamp", field=PREDICTION_TIME)
    if column.null_count:
        first = subjects.filter(pc.is_null(column))[0].as_py()
        raise LabelFileError(source, f"{column.null_count} of {table.num_rows} rows have no prediction time{hint}",
                             subject_id=first, field=PREDICTION_TIME)
    try:
        return column.cast(pa.timestamp("us"))
    except pa.ArrowInvalid as exc:
        raise LabelFileError(source, f"cannot be held in microseconds as MEDS times are ({one_line(exc)})",
                             field=PREDICTION_TIME) from None


def _boolean_values(table: pa.Table, source: str) -> pa.ChunkedArray:
    if BOOLEAN_VALUE not in table.column_names:
        return pa.chunked_array([pa.nulls(table.num_rows, pa.bool_())])
    column = table.column(BOOLEAN_VALUE)
    if pat.is_boolean(column.type):
        return column
    if pat.is_integer(column.type):  # ACES's label: the count of the label predicate in its window
        return pc.not_equal(column, pa.scalar(0, column.type))
    if pat.is_null(column.type):
        return pa.chunked_array([pa.nulls(table.num_rows, pa.bool_())])
    raise LabelFileError(source, f"has type {column.type}, expected boolean (or an integer count, as ACES writes)",
                         field=BOOLEAN_VALUE)
