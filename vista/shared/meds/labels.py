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

What ``trajonco cohort`` writes: ``COHORT/labels/<split>.parquet`` holds exactly ``meds.LabelSchema``'s columns
(so ``meds.LabelSchema.validate``/``align`` and every MEDS tool accept it as it is), and the cohort's own columns
(``index_time``, ``role``, ``matched_to``, …) are in ``COHORT/label_details/<split>.parquet``, keyed by
(``subject_id``, ``prediction_time``): `label_details_path`, written by `write_label_file`. A label file in a
folder named ``labels`` with such a details file gets its columns back here, so every reader sees them; any other
file (ACES's, a hand-made one) has none.

`read_label_table` returns ``subject_id`` int64, ``prediction_time`` timestamp[us] (naive, never null: a label row
without a time would let a model read the outcome) and ``boolean_value`` bool (null: an unlabelled task) first,
then the file's other columns unchanged, then those of its details file. ``index_timestamp`` becomes
``prediction_time``; ``label`` becomes ``boolean_value``; an integer label is a count, true when non-zero (as
``aces-cli`` itself casts it); other integer widths, other time units and ``date`` columns are cast. It neither sorts
nor removes duplicates: the readers decide.

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
vista.shared.meds.labels.LabelFileError: ...aces_query.parquet: subject 7: field 'prediction_time': 1 of 1 rows have no \
prediction time (an ACES task config needs `index_timestamp: end` on its input window)
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyarrow.types as pat
from pyarrow.fs import FileType

from vista.shared.atomic import atomic_path, make_dirs
from vista.shared.meds.errors import MedsDataError, one_line
from vista.shared.storage import Location, StorageError, resolve

SUBJECT_ID = "subject_id"
PREDICTION_TIME = "prediction_time"
BOOLEAN_VALUE = "boolean_value"
LABEL_COLUMNS = (SUBJECT_ID, PREDICTION_TIME, BOOLEAN_VALUE)

ALIASES = {PREDICTION_TIME: "index_timestamp", BOOLEAN_VALUE: "label"}
"""MEDS label column -> the name ACES's Python API (and its non-MEDS outputs) gives it."""

LABELS_FOLDER, DETAILS_FOLDER = "labels", "label_details"
"""A label file ``X/labels/NAME.parquet`` keeps its extra columns in ``X/label_details/NAME.parquet``."""
KEY = (SUBJECT_ID, PREDICTION_TIME)

LABEL_TYPES = pa.schema([
    pa.field(SUBJECT_ID, pa.int64()),
    pa.field(PREDICTION_TIME, pa.timestamp("us")),
    pa.field(BOOLEAN_VALUE, pa.bool_()),
])
"""The first three columns of every table `read_label_table` returns (the types of ``meds.LabelSchema``)."""


class LabelFileError(MedsDataError):
    """A label file is missing, unreadable, or lacks a usable subject, prediction time or label column."""


def read_label_table(path: str | Path) -> pa.Table:
    """The label file at ``path`` (a local path or an object-store URI, `vista.shared.storage`) with `LABEL_TYPES` columns
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
    table = pa.Table.from_arrays(columns, schema=pa.schema(fields))
    details = _details_location(location)
    return _with_details(table, source, details) if details is not None and details.is_file() else table


def _details_location(location: Location) -> Location | None:
    if location.parent.name != LABELS_FOLDER:
        return None
    return location.parent.parent / DETAILS_FOLDER / location.name


def label_details_path(path: str | Path) -> Path | str | None:
    """Where the extra columns of label file ``path`` go (``X/labels/NAME.parquet`` ->
    ``X/label_details/NAME.parquet``), or None for a file outside a ``labels`` folder.

    >>> label_details_path("cohorts/lung/labels/test.parquet")
    PosixPath('cohorts/lung/label_details/test.parquet')
    >>> label_details_path("aces/held_out.parquet") is None
    True
    """
    location = _details_location(resolve(path))
    if location is None:
        return None
    if not location.is_local:
        return location.uri
    return Path(path).parent.parent / DETAILS_FOLDER / Path(path).name


def _with_details(table: pa.Table, source: str, details: Location) -> pa.Table:
    """``table`` with the columns of its details file, joined on the key (every label row needs exactly one)."""
    where = str(Path(details.path)) if details.is_local else details.uri
    try:
        extra = pq.read_table(details.path, filesystem=details.fs)
    except (OSError, pa.ArrowException) as exc:
        raise LabelFileError(source, f"its details file {where} is not a readable parquet file ({one_line(exc)})") from None
    missing = [name for name in KEY if name not in extra.column_names]
    if missing:
        raise LabelFileError(where, "missing from the label details file", field=missing[0])
    clash = [name for name in extra.column_names if name not in KEY and name in table.column_names]
    if clash:
        raise LabelFileError(source, f"column in both the label file and its details file {where}", field=clash[0])
    extra = extra.set_column(extra.column_names.index(SUBJECT_ID), SUBJECT_ID, extra.column(SUBJECT_ID).cast(pa.int64()))
    extra = extra.set_column(extra.column_names.index(PREDICTION_TIME), PREDICTION_TIME,
                             extra.column(PREDICTION_TIME).cast(pa.timestamp("us")))
    order = table.append_column("_row", pa.array(range(table.num_rows), pa.int64()))
    joined = order.join(extra, keys=list(KEY), join_type="inner")
    distinct = pc.count_distinct(joined.column("_row")).as_py()
    if not joined.num_rows == distinct == extra.num_rows == table.num_rows:  # one details row per label row
        matched = set(joined.column("_row").to_pylist())
        unmatched = [i for i in range(table.num_rows) if i not in matched]
        first = table.column(SUBJECT_ID)[unmatched[0]].as_py() if unmatched else None
        raise LabelFileError(source, f"its details file {where} does not match: {len(unmatched)} label row(s) without "
                                     f"a details row, {extra.num_rows} details rows for {table.num_rows} label rows",
                             subject_id=first)
    joined = joined.sort_by("_row").drop_columns(["_row"])
    names = table.column_names + [n for n in extra.column_names if n not in KEY]
    return joined.select(names).cast(pa.schema([*table.schema, *[extra.schema.field(n) for n in names[table.num_columns:]]]))


def merge_label_files(files: list[Path], out: Path) -> pa.Table:
    """One label file at ``out`` from shard files of one schema (ACES's per-shard outputs), in file order; the
    optional MEDS label columns that are null in every row are left out, since ``meds.LabelSchema`` (0.4.1) makes
    them optional but refuses their nulls: ACES 0.7.3 writes ``integer_value``/``float_value``/``categorical_value``
    all null for a boolean task, which ``meds.LabelSchema.validate`` rejects. Returns the table written.

    >>> import tempfile
    >>> from datetime import datetime
    >>> folder = Path(tempfile.mkdtemp())
    >>> shard = pa.table({"subject_id": [1], "prediction_time": [datetime(2020, 1, 1)], "boolean_value": [True],
    ...                   "integer_value": pa.nulls(1, pa.int64())})
    >>> pq.write_table(shard, folder / "0.parquet")
    >>> merge_label_files([folder / "0.parquet"], folder / "held_out.parquet").column_names
    ['subject_id', 'prediction_time', 'boolean_value']
    """
    import meds

    table = pa.concat_tables(pq.read_table(f) for f in files)
    optional = set(meds.LabelSchema.schema().names) - set(KEY)
    empty = [name for name in table.column_names if name in optional and table.column(name).null_count == table.num_rows]
    table = table.drop_columns(empty) if table.num_rows else table
    with atomic_path(out) as tmp:
        pq.write_table(table, tmp)
    return table


def write_label_file(table: pa.Table, path: Path) -> Path | None:
    """Write a label table whose first columns are the MEDS label ones: exactly ``meds.LabelSchema``'s columns to
    ``path`` (checked by `meds`), the others (if any) with the key to `label_details_path` (atomically). Returns
    the details file written, or None."""
    import meds

    path = Path(path)
    names = [name for name in meds.LabelSchema.schema().names if name in table.column_names]
    labels = table.select(names)
    meds.LabelSchema.validate(labels)
    rest = [name for name in table.column_names if name not in names]
    details = label_details_path(path) if rest else None
    if rest and details is None:
        raise ValueError(f"{path}: a label file with extra columns ({', '.join(rest)}) must sit in a folder named "
                         f"{LABELS_FOLDER!r} (its details go to ../{DETAILS_FOLDER}/)")
    with atomic_path(path) as tmp:
        pq.write_table(labels, tmp)
    if details is None:
        return None
    make_dirs(Path(details).parent)
    with atomic_path(Path(details)) as tmp:
        pq.write_table(table.select([*KEY, *rest]), tmp)
    return Path(details)


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
