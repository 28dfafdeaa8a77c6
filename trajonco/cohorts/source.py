"""Where cohort building reads a MEDS dataset: the event rows (lazily), the subject splits and the dataset metadata.

`scan_events` is the single entry to the data rows, so it can later be pointed at `vista.meds.reader.MedsDataset.scan()`
without touching the cohort logic. Only ``subject_id``, ``time`` and ``code`` are read (never note text).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from pydantic import BaseModel, Field

from trajonco.cohorts.errors import CohortDataError
from vista.meds import schema

EVENT_COLUMNS: dict[str, type[pl.DataType]] = {
    schema.SUBJECT_ID: pl.Int64,
    schema.TIME: pl.Datetime,
    schema.CODE: pl.String,
}
SPLIT = "split"


class DatasetInfo(BaseModel):
    """Which dataset a cohort came from (path plus what ``metadata/dataset.json`` says about itself)."""

    path: str = Field(description="absolute path of the MEDS dataset root")
    name: str | None = Field(default=None, description="dataset_name from metadata/dataset.json, if present")
    version: str | None = Field(default=None, description="dataset_version from metadata/dataset.json, if present")
    data_files: int = Field(description="parquet files found under data/")


def data_files(dataset_root: Path) -> list[Path]:
    """Every parquet shard under ``data/`` (sorted); a clear error when there is none."""
    folder = dataset_root / schema.DATA_DIR
    files = sorted(folder.rglob("*.parquet")) if folder.is_dir() else []
    if not files:
        raise CohortDataError(f"{folder}: no parquet files — is {dataset_root} a MEDS dataset root?")
    return files


def scan_events(dataset_root: Path) -> pl.LazyFrame:
    """``subject_id``, ``time``, ``code`` of every data row, lazily, with the column types checked up front."""
    try:
        frame = pl.scan_parquet(data_files(dataset_root))
        found = frame.collect_schema()
    except pl.exceptions.PolarsError as exc:
        raise CohortDataError(f"{dataset_root / schema.DATA_DIR}: cannot read the MEDS shards ({exc})") from None
    for column, dtype in EVENT_COLUMNS.items():
        if column not in found:
            raise CohortDataError(f"{dataset_root / schema.DATA_DIR}: column {column!r} is missing")
        if not isinstance(found[column], dtype) and found[column] != dtype:
            raise CohortDataError(
                f"{dataset_root / schema.DATA_DIR}: column {column!r} has type {found[column]},"
                f" expected {dtype.__name__}"
            )
    if found[schema.TIME].time_zone is not None:  # type: ignore[union-attr]
        raise CohortDataError(
            f"{dataset_root / schema.DATA_DIR}: column 'time' carries a time zone; MEDS times are naive"
        )
    return frame.select(schema.SUBJECT_ID, pl.col(schema.TIME).dt.cast_time_unit("us"), schema.CODE)


def read_splits(dataset_root: Path) -> pl.DataFrame:
    """``subject_id`` → ``split`` from ``metadata/subject_splits.parquet`` (one split per subject, checked)."""
    path = dataset_root / schema.SPLITS_FILE
    if not path.is_file():
        raise CohortDataError(
            f"{path}: missing; cohorts take their test/training subjects from the MEDS subject splits"
        )
    try:
        splits = pl.read_parquet(path, columns=[schema.SUBJECT_ID, SPLIT])
    except pl.exceptions.PolarsError as exc:
        raise CohortDataError(f"{path}: cannot read subject_id and split ({exc})") from None
    if splits[schema.SUBJECT_ID].null_count() or splits[SPLIT].null_count():
        raise CohortDataError(f"{path}: null subject_id or split")
    repeated = splits.group_by(schema.SUBJECT_ID).agg(pl.col(SPLIT).n_unique()).filter(pl.col(SPLIT) > 1)
    if repeated.height:
        raise CohortDataError(f"{path}: subject {repeated[schema.SUBJECT_ID].min()} is listed in more than one split")
    return splits.unique().with_columns(pl.col(schema.SUBJECT_ID).cast(pl.Int64), pl.col(SPLIT).cast(pl.String))


def dataset_info(dataset_root: Path) -> DatasetInfo:
    """Path, name and version of the dataset, for the manifest."""
    meta_path = dataset_root / schema.DATASET_FILE
    meta: dict[str, object] = {}
    if meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise CohortDataError(f"{meta_path}: not valid JSON ({exc})") from None
    name, version = meta.get("dataset_name"), meta.get("dataset_version")
    return DatasetInfo(
        path=str(dataset_root.resolve()),
        name=None if name is None else str(name),
        version=None if version is None else str(version),
        data_files=len(data_files(dataset_root)),
    )
