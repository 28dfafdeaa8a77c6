"""Read and check MEDS label tables (``subject_id``, ``prediction_time``, ``boolean_value`` + cohort extras).

Every table entering the baselines goes through `check_labels`, so a wrong type, a null or a repeated
``(subject_id, prediction_time)`` is reported once, here, with the file and subject named.

>>> from datetime import datetime
>>> frame = pl.DataFrame({"subject_id": [1, 2], "prediction_time": [datetime(2020, 1, 1)] * 2,
...                       "boolean_value": [True, False]})
>>> check_labels(frame, "memory").height
2
>>> check_labels(frame.with_columns(boolean_value=pl.lit(None, pl.Boolean)), "labels/test.parquet")
Traceback (most recent call last):
...
baselines.errors.LabelDataError: labels/test.parquet: subject 1: field 'boolean_value': 2 null labels
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from baselines.errors import LabelDataError
from vista.shared.meds.labels import LabelFileError, read_label_table

SUBJECT_ID = "subject_id"
PREDICTION_TIME = "prediction_time"
BOOLEAN_VALUE = "boolean_value"


def read_labels(path: str | Path, *, require_outcome: bool = True) -> pl.DataFrame:
    """A label parquet file (MEDS labels or ACES output, read by `vista.shared.meds.labels.read_label_table`), checked (see
    `check_labels`); errors name ``path``."""
    try:
        table = read_label_table(path)
    except LabelFileError as exc:
        raise LabelDataError(exc.source, exc.problem, subject_id=exc.subject_id, field=exc.field) from None
    frame = pl.from_arrow(table)
    if frame[BOOLEAN_VALUE].null_count() == frame.height:  # no label at all: as if the file had no such column
        frame = frame.drop(BOOLEAN_VALUE)
    return check_labels(frame, str(path), require_outcome=require_outcome)


def check_labels(frame: pl.DataFrame, source: str, *, require_outcome: bool = True) -> pl.DataFrame:
    """``frame`` with ``subject_id`` as Int64 and ``prediction_time`` as Datetime(us), after checking it.

    Checks: the columns exist with integer / naive datetime / boolean types; no nulls; no repeated
    ``(subject_id, prediction_time)``. ``boolean_value`` is only required when ``require_outcome``.
    """
    required = [SUBJECT_ID, PREDICTION_TIME] + ([BOOLEAN_VALUE] if require_outcome else [])
    for column in required:
        if column not in frame.columns:
            raise LabelDataError(source, f"column is missing (columns: {', '.join(frame.columns)})", field=column)
    dtypes = frame.schema
    if not dtypes[SUBJECT_ID].is_integer():
        raise LabelDataError(source, f"has type {dtypes[SUBJECT_ID]}, expected an integer type", field=SUBJECT_ID)
    time_type = dtypes[PREDICTION_TIME]
    if not isinstance(time_type, pl.Datetime):
        raise LabelDataError(source, f"has type {time_type}, expected a datetime", field=PREDICTION_TIME)
    if time_type.time_zone is not None:
        raise LabelDataError(source, f"carries time zone {time_type.time_zone}; MEDS times are naive",
                             field=PREDICTION_TIME)
    if BOOLEAN_VALUE in frame.columns and dtypes[BOOLEAN_VALUE] != pl.Boolean:
        raise LabelDataError(source, f"has type {dtypes[BOOLEAN_VALUE]}, expected boolean", field=BOOLEAN_VALUE)
    if frame[SUBJECT_ID].null_count():
        raise LabelDataError(source, f"{frame[SUBJECT_ID].null_count()} null subject ids", field=SUBJECT_ID)
    for column in required[1:]:
        nulls = frame.filter(pl.col(column).is_null())
        if nulls.height:
            noun = "labels" if column == BOOLEAN_VALUE else "values"
            raise LabelDataError(source, f"{nulls.height} null {noun}", subject_id=int(nulls[SUBJECT_ID][0]), field=column)
    frame = frame.with_columns(pl.col(SUBJECT_ID).cast(pl.Int64), pl.col(PREDICTION_TIME).dt.cast_time_unit("us"))
    repeated = frame.filter(pl.struct(SUBJECT_ID, PREDICTION_TIME).is_duplicated())
    if repeated.height:
        raise LabelDataError(source, f"{repeated.height} rows repeat a (subject_id, prediction_time) pair",
                             subject_id=int(repeated[SUBJECT_ID].min()), field=PREDICTION_TIME)  # type: ignore[arg-type]
    return frame
