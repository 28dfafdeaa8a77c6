"""A prediction run on disk: MEDS-DEV's ``predictions.parquet`` (twice: one per evaluator version) and the project's
``prediction_details.parquet``.

MEDS-DEV's evaluator (PyPI ``meds-evaluation``) refuses any column it does not know, a null label and (in its
metrics) a null score, and its two versions in use disagree on the score's type: 0.0.6's strict
``PredictionSchema.validate`` wants ``predicted_boolean_probability`` float32 and refuses float64; 0.0.3, which
MEDS-DEV 0.0.14 pins (``meds-dev-evaluation`` runs its ``meds-evaluation-cli``), checks the polars dtype of the file
as read and refuses float32 (its message has the two types swapped). No one file passes both checks, so a run
writes each what it asks for, keyed alike by (``subject_id``, ``prediction_time``):

- ``predictions.parquet``: exactly MEDS-DEV's columns — ``subject_id`` int64, ``prediction_time`` timestamp[us],
  ``boolean_value`` bool, ``predicted_boolean_value`` bool, ``predicted_boolean_probability`` float32 (what
  meds-evaluation 0.0.6's ``PredictionSchema.validate`` wants) — for the tasks that have a score (status ok or
  partial). Tasks without one (failed, error) are not in it. When some task of the label file has no label,
  ``boolean_value`` is left out (the MEDS label schema makes it optional; there is then nothing to evaluate against).
- ``meds_dev/predictions.parquet`` (`MEDS_DEV_DIR`): the same rows with the probability float64, the form MEDS-DEV
  0.0.14 reads (meds-evaluation 0.0.3; 0.0.6's ``evaluate_binary_classification`` and CLI take it too, as they
  cast through ``PredictionSchema.align``), alone in its folder: ``meds-dev-evaluation predictions_dir=OUT/meds_dev``
  reads every parquet file under the folder it is given.
- ``prediction_details.parquet``: every task with a row, scored or not: the key, the label, then every other column
  of `PREDICTION_SCHEMA` (risk 1-10, trajectory, evidence, status, error, usage, latency, …). Any column added to
  `PREDICTION_SCHEMA` lands here by itself.

`read_predictions` joins them back into `PREDICTION_SCHEMA` rows (every task, the score null where there is none);
every command that needs the project's columns reads a run through it. A file without a details file beside it
(another tool's MEDS-DEV file, or a renamed one) is read as it is.

>>> import tempfile
>>> from datetime import datetime
>>> folder = Path(tempfile.mkdtemp())
>>> rows = pa.table({"subject_id": [1, 2], "prediction_time": [datetime(2020, 1, 1)] * 2,
...                  "boolean_value": [True, False], "predicted_boolean_value": [True, None],
...                  "predicted_boolean_probability": [0.7, None], "status": ["ok", "failed"]})
>>> write_prediction_files(rows, folder)
{'predictions': 1, 'prediction_details': 2, 'meds_dev_predictions': 1}
>>> pq.read_schema(folder / PREDICTIONS_FILE).names == list(MEDS_DEV_COLUMNS)
True
>>> pq.read_schema(meds_dev_file(folder)).field(PROBABILITY).type, sorted(p.name for p in (folder / MEDS_DEV_DIR).iterdir())
(DataType(double), ['predictions.parquet'])
>>> back = read_predictions(folder)
>>> back.column("predicted_boolean_probability").to_pylist(), back.column("status").to_pylist()
([0.7, None], ['ok', 'failed'])
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from trajonco.prediction_rows import PREDICTION_SCHEMA
from vista.shared.atomic import atomic_path
from vista.shared.errors import LocatedError

PREDICTIONS_FILE = "predictions.parquet"
DETAILS_FILE = "prediction_details.parquet"
MEDS_DEV_DIR = "meds_dev"
"""The run's subfolder holding MEDS-DEV's own predictions file (float64 scores) and nothing else."""
MEDS_DEV_OUTPUT = "meds_dev_predictions"
"""The name of ``meds_dev/predictions.parquet`` among a run's outputs (``summary.json``)."""

SUBJECT_ID, PREDICTION_TIME, BOOLEAN_VALUE = "subject_id", "prediction_time", "boolean_value"
PREDICTED_VALUE, PROBABILITY = "predicted_boolean_value", "predicted_boolean_probability"
KEY = (SUBJECT_ID, PREDICTION_TIME)
MEDS_DEV_COLUMNS = (SUBJECT_ID, PREDICTION_TIME, BOOLEAN_VALUE, PREDICTED_VALUE, PROBABILITY)
"""The columns of MEDS-DEV's ``PredictionSchema`` (the MEDS label schema plus the two predicted ones)."""

MEDS_DEV_SCHEMA = pa.schema([
    pa.field(SUBJECT_ID, pa.int64(), nullable=False),
    pa.field(PREDICTION_TIME, pa.timestamp("us"), nullable=False),
    pa.field(BOOLEAN_VALUE, pa.bool_(), nullable=False),
    pa.field(PREDICTED_VALUE, pa.bool_()),
    pa.field(PROBABILITY, pa.float32()),
])
"""``predictions.parquet`` (the types meds-evaluation 0.0.6's ``PredictionSchema.validate`` checks)."""

UNLABELLED_SCHEMA = pa.schema([f for f in MEDS_DEV_SCHEMA if f.name != BOOLEAN_VALUE])
"""``predictions.parquet`` of a run whose label file has tasks without a label."""

MEDS_DEV_PROBABILITY = pa.float64()
"""The score's type in ``meds_dev/predictions.parquet``: meds-evaluation 0.0.3 (MEDS-DEV 0.0.14) wants float64."""

DETAILS_SCHEMA = pa.schema([f for f in PREDICTION_SCHEMA if f.name not in (PREDICTED_VALUE, PROBABILITY)])
"""``prediction_details.parquet``: the key and the label, then every project column of `PREDICTION_SCHEMA`."""


class PredictionFilesError(LocatedError):
    """A prediction file (or its details file) that cannot be read, or two files that do not belong together."""


def meds_dev_schema(labelled: bool, *, meds_dev: bool = False) -> pa.Schema:
    """`MEDS_DEV_SCHEMA`, or `UNLABELLED_SCHEMA` when some task has no label; with ``meds_dev``, the score as
    `MEDS_DEV_PROBABILITY` (``meds_dev/predictions.parquet``)."""
    schema = MEDS_DEV_SCHEMA if labelled else UNLABELLED_SCHEMA
    if meds_dev:
        schema = schema.set(schema.get_field_index(PROBABILITY), pa.field(PROBABILITY, MEDS_DEV_PROBABILITY))
    return schema


def meds_dev_rows(rows: pa.Table, labelled: bool, *, meds_dev: bool = False) -> pa.Table:
    """The rows of ``rows`` (`PREDICTION_SCHEMA` columns, or more) that go into ``predictions.parquet`` (with
    ``meds_dev``: ``meds_dev/predictions.parquet``): those with a score (and a label, for a labelled run), with its
    columns and types."""
    keep = pc.is_valid(rows.column(PROBABILITY))
    if labelled:
        keep = pc.and_(keep, pc.is_valid(rows.column(BOOLEAN_VALUE)))
    schema = meds_dev_schema(labelled, meds_dev=meds_dev)
    return rows.filter(keep).select(schema.names).cast(schema)


def meds_dev_file(run: Path | str) -> Path:
    """MEDS-DEV's predictions file of the run folder ``run``: ``run/meds_dev/predictions.parquet``."""
    return Path(run) / MEDS_DEV_DIR / PREDICTIONS_FILE


def details_rows(rows: pa.Table) -> pa.Table:
    """Every row of ``rows`` with the `DETAILS_SCHEMA` columns (whatever else ``rows`` holds beyond MEDS-DEV's)."""
    names = [name for name in rows.column_names if name not in (PREDICTED_VALUE, PROBABILITY)]
    known = {f.name: f for f in DETAILS_SCHEMA}
    return rows.select(names).cast(pa.schema([known.get(n, rows.schema.field(n)) for n in names]))


def write_prediction_files(rows: pa.Table, folder: Path | str, *, labelled: bool | None = None) -> dict[str, int]:
    """Write ``rows`` as ``folder/predictions.parquet``, ``folder/prediction_details.parquet`` and
    ``folder/meds_dev/predictions.parquet`` (atomically); returns the rows each holds. ``labelled`` defaults to:
    every row has a label."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if labelled is None:
        labelled = rows.column(BOOLEAN_VALUE).null_count == 0
    scored, details = meds_dev_rows(rows, labelled), details_rows(rows)
    with atomic_path(folder / DETAILS_FILE) as tmp:
        pq.write_table(details, tmp)
    with atomic_path(folder / PREDICTIONS_FILE) as tmp:
        pq.write_table(scored, tmp)
    with atomic_path(meds_dev_file(folder)) as tmp:
        pq.write_table(meds_dev_rows(rows, labelled, meds_dev=True), tmp)
    return {Path(PREDICTIONS_FILE).stem: scored.num_rows, Path(DETAILS_FILE).stem: details.num_rows,
            MEDS_DEV_OUTPUT: scored.num_rows}


def prediction_file(path: Path | str) -> Path:
    """The prediction file of a run: ``path`` itself, or ``path/predictions.parquet`` for a run folder."""
    path = Path(path)
    return path / PREDICTIONS_FILE if path.is_dir() else path


def details_file(path: Path | str) -> Path | None:
    """The details file paired with prediction file ``path`` (``prediction_details.parquet`` beside a file named
    ``predictions.parquet``), or None when there is none: the file is then read as it is."""
    file = prediction_file(path)
    details = file.with_name(DETAILS_FILE)
    return details if file.name == PREDICTIONS_FILE and details.is_file() else None


def _read(path: Path, columns: Sequence[str] | None = None) -> pa.Table:
    try:
        schema = pq.read_schema(path)
        wanted = None if columns is None else [c for c in dict.fromkeys(columns) if c in schema.names]
        return pq.read_table(path, columns=wanted)
    except FileNotFoundError:
        raise PredictionFilesError(str(path), "prediction file not found") from None
    except (OSError, pa.ArrowException) as exc:
        raise PredictionFilesError(str(path), f"not a readable parquet file ({' '.join(str(exc).split())})") from None


def _widened(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """float32 scores as float64 through their shortest decimal (0.7, not 0.699999988): ``risk_score / 10`` survives
    the float32 that MEDS-DEV stores."""
    if column.type != pa.float32():
        return column
    return pc.cast(pc.cast(column, pa.string()), pa.float64())


def read_predictions(path: Path | str, columns: Sequence[str] | None = None) -> pa.Table:
    """A run's rows (``path``: a run folder or its ``predictions.parquet``): its details joined with its scores,
    in `PREDICTION_SCHEMA` order, every task once (score null when it has none). ``columns`` limits the columns
    read (those a file lacks are left out). Without a details file, the prediction file as it is.

    Raises `PredictionFilesError` (naming the file) for an unreadable file, or a prediction file holding tasks its
    details file lacks (files of two different runs).
    """
    file = prediction_file(path)
    details_path = details_file(file)
    if details_path is None:
        table = _read(file, columns)
        if PROBABILITY in table.column_names:
            table = table.set_column(table.column_names.index(PROBABILITY), PROBABILITY, _widened(table.column(PROBABILITY)))
        return table
    details = _read(details_path, None if columns is None else [*KEY, *columns])
    scores = _read(file, [*KEY, PREDICTED_VALUE, PROBABILITY])
    for name, table in ((details_path, details), (file, scores)):
        missing = [c for c in KEY if c not in table.column_names]
        if missing:
            raise PredictionFilesError(str(name), "column missing from the prediction run", field=missing[0])
    joined = _join(pl.from_arrow(details), pl.from_arrow(scores), file, details_path)
    order = [n for n in PREDICTION_SCHEMA.names if n in joined.columns]
    order += [n for n in joined.columns if n not in order]
    if columns is not None:
        order = [n for n in order if n in columns]
    table = joined.select(order).to_arrow()
    if PROBABILITY in table.column_names:
        table = table.set_column(table.column_names.index(PROBABILITY), PROBABILITY, _widened(table.column(PROBABILITY)))
    types = {f.name: f.type for f in (*scores.schema, *details.schema)} | {PROBABILITY: pa.float64()}
    return table.cast(pa.schema([pa.field(f.name, types[f.name]) for f in table.schema]))


def _join(details: pl.DataFrame, scores: pl.DataFrame, file: Path, details_path: Path) -> pl.DataFrame:
    """``details`` with the score columns of ``scores`` (left join on the key, details order)."""
    scores = scores.select(*KEY, *[c for c in (PREDICTED_VALUE, PROBABILITY) if c in scores.columns])
    stray = scores.join(details.select(KEY), on=list(KEY), how="anti", nulls_equal=True)
    if stray.height:
        raise PredictionFilesError(str(file), f"{stray.height} scored task(s) are not in {details_path} (the two files "
                                   "come from different runs; keep a run's two files together)",
                                   subject_id=int(stray[SUBJECT_ID][0]))
    repeated = scores.filter(pl.struct(list(KEY)).is_duplicated())
    if repeated.height:
        raise PredictionFilesError(str(file), f"{repeated.height} rows repeat a (subject_id, prediction_time) key",
                                   subject_id=int(repeated[SUBJECT_ID][0]))
    return details.join(scores, on=list(KEY), how="left", maintain_order="left", nulls_equal=True)
