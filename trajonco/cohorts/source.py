"""Where cohort building reads a MEDS dataset: the event rows (lazily), the subject splits and the dataset metadata.

`scan_events` (or `open_events`, which also says how the codes were read) is the single entry to the data rows. Only
``subject_id``, ``time`` and ``code`` are read (never note text), and ``code`` comes out in the project's canonical
spelling (`trajonco.cohorts.coding`), whatever the dataset's own.

Bad input is reported as what it is, never as an empty cohort: every shard's footer and schema are checked first
(`check_data_files`: a truncated or foreign file, a missing or mistyped column, named with its path), `read_splits`
warns when ``subject_splits.parquet`` lists subjects the data lacks or omits subjects it has, and `unreadable_data`
finds the file behind a read that failed halfway (a corrupt page, which only a full read meets).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from pydantic import BaseModel, Field

from trajonco.cohorts.coding import CodingChoice, ProfileSpec, choose_profile
from trajonco.cohorts.errors import CohortDataError
from vista.shared.coding import CodingProfile
from vista.shared.errors import describe_location
from vista.shared.meds import schema
from vista.shared.meds.errors import MedsDataError
from vista.shared.meds.metadata import splits_coverage
from vista.shared.meds.reader import MedsDataset

log = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class EventSource:
    """The dataset's rows with canonical codes, the profile that spelled them, and how many rows each code has."""

    events: pl.LazyFrame
    """``subject_id``, ``time``, ``code`` (canonical) of every row, lazily"""
    profile: CodingProfile
    coding: CodingChoice
    code_rows: pl.DataFrame
    """``code`` (canonical) and ``rows``: every distinct code of the whole dataset with its row count"""


def scan_events(dataset_root: Path, profile: ProfileSpec | None = None) -> pl.LazyFrame:
    """``subject_id``, ``time``, ``code`` of every data row, lazily, with the column types checked up front and
    ``code`` in canonical spelling (``profile`` detected when not given)."""
    return open_events(dataset_root, profile).events


def open_events(dataset_root: Path, profile: ProfileSpec | None = None) -> EventSource:
    """`scan_events` plus the coding profile's choice (for the manifest) and the rows per canonical code.

    The codes are translated through a mapping built over the dataset's distinct codes and applied as one
    ``replace``; a dataset already in canonical spelling (ours) is left untouched.
    """
    raw = scan_checked(dataset_root)
    try:
        counts = raw.group_by(schema.CODE).agg(rows=pl.len()).collect()
    except pl.exceptions.PolarsError as exc:
        raise CohortDataError(f"{dataset_root / schema.DATA_DIR}: cannot read the MEDS shards ({exc})") from None
    chosen, how, share = choose_profile(dataset_root, profile)
    coding, mapping, code_rows = read_coding(chosen, how, share, counts)
    events = raw.with_columns(pl.col(schema.CODE).replace(mapping)) if mapping else raw
    return EventSource(events=events, profile=chosen, coding=coding, code_rows=code_rows)


def read_coding(
    chosen: CodingProfile, how: str, share: float | None, counts: pl.DataFrame
) -> tuple[CodingChoice, dict[str, str], pl.DataFrame]:
    """From the rows per source code (``code``, ``rows``) and the profile chosen (`choose_profile`): the manifest's
    `CodingChoice`, the source → canonical mapping, and the rows per canonical code (sorted)."""
    mapping = chosen.respellings(counts[schema.CODE].drop_nulls().to_list())
    code_rows = counts
    if mapping:
        code_rows = (
            counts.with_columns(pl.col(schema.CODE).replace(mapping))
            .group_by(schema.CODE)
            .agg(pl.col("rows").sum())
        )
    choice = CodingChoice(profile=chosen.name, chosen_by=how, recognised_share=share,  # type: ignore[arg-type]
                          distinct_source_codes=counts.height, respelled_codes=len(mapping))
    return choice, mapping, code_rows.sort(schema.CODE)


def scan_checked(dataset_root: Path) -> pl.LazyFrame:
    """``subject_id``, ``time``, ``code`` as the shards spell them, with the column types checked up front."""
    try:
        frame = pl.scan_parquet(data_files(dataset_root), extra_columns="ignore")  # shards may differ in extensions
        found = frame.collect_schema()
    except pl.exceptions.PolarsError as exc:
        check_data_files(dataset_root)  # names the unusable file
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
    check_data_files(dataset_root)  # the polars checks above saw the first file's schema only
    return frame.select(schema.SUBJECT_ID, pl.col(schema.TIME).dt.cast_time_unit("us"), schema.CODE)


def _located(dataset_root: Path, source: str, subject_id: int | None, field: str | None, problem: str) -> str:
    """A `describe_location` line naming the file by its full path (``source`` may be relative to the root)."""
    path = Path(source) if Path(source).is_absolute() else dataset_root / source
    return describe_location(str(path), subject_id, field, problem)


def check_data_files(dataset_root: Path) -> None:
    """Every shard's footer and schema, as `MedsDataset` checks them, reading no rows (fast); `CohortDataError`
    naming the first unusable file (truncated, not parquet, empty, a required column missing or mistyped)."""
    try:
        MedsDataset(dataset_root).check_files()
    except MedsDataError as exc:
        raise CohortDataError(_located(dataset_root, exc.file, exc.subject_id, exc.field, exc.problem)) from None


def unreadable_data(dataset_root: Path) -> list[str]:
    """The data files that fail a full read, one line each (file, field, problem); empty when every row reads.

    For a read that failed halfway through a cohort build (a corrupt page): this reads every row, as `trajonco
    validate` does, so it is only worth its time once something went wrong.
    """
    try:
        dataset = MedsDataset(dataset_root, on_error="quarantine")
        dataset.validate()
    except MedsDataError as exc:
        return [_located(dataset_root, exc.file, exc.subject_id, exc.field, exc.problem)]
    return [_located(dataset_root, e.file, None, e.field, e.problem)
            for e in dataset.quarantine.entries if e.subject_id is None]


def warn_about_coverage(dataset_root: Path, splits: pl.DataFrame, present: pl.Series | None = None) -> None:
    """Log a warning when the splits file lists subjects without rows or omits subjects that have rows (``present``:
    the subject ids of the data, read from the shards when not given)."""
    if present is None:
        try:
            present = pl.scan_parquet(data_files(dataset_root)).select(schema.SUBJECT_ID).unique().collect().to_series()
        except pl.exceptions.PolarsError:
            return  # unreadable data is reported, with its file, where the rows are read
    coverage = splits_coverage(splits[schema.SUBJECT_ID].to_numpy(), present.to_numpy())
    for problem in coverage.problems():
        log.warning("%s: %s", dataset_root / schema.SPLITS_FILE, problem)


def read_splits(dataset_root: Path, *, warn: bool = True) -> pl.DataFrame:
    """``subject_id`` → ``split`` from ``metadata/subject_splits.parquet`` (one split per subject, checked; with
    ``warn``, a warning when it disagrees with the subjects of the data — `warn_about_coverage`)."""
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
    splits = splits.unique().with_columns(pl.col(schema.SUBJECT_ID).cast(pl.Int64), pl.col(SPLIT).cast(pl.String))
    if warn:
        warn_about_coverage(dataset_root, splits)
    return splits


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
