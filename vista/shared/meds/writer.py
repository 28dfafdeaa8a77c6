"""Writing a MEDS dataset: data shards, ``metadata/codes.parquet``, ``metadata/dataset.json`` and
``metadata/subject_splits.parquet``, each validated against the `meds` schemas and written atomically.

Every file is written to a temporary name in its final directory and renamed into place, so a reader never sees a
half-written file and an interrupted run leaves no partial output behind.

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> _ = write_subject_splits(root, [3, 1, 2], ["train", "held_out", "train"])
>>> pq.read_table(root / SPLITS_FILE).column("subject_id").to_pylist()
[1, 2, 3]
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import meds
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from vista.shared.atomic import atomic_path, atomic_write_text
from vista.shared.meds.schema import CODE_METADATA_SCHEMA, CODES_FILE, DATA_SCHEMA, DATASET_FILE, SPLITS_FILE, SUBJECT_ID, SUBJECT_SPLIT_SCHEMA, TIME
from vista.shared.records import CodeInfo

if TYPE_CHECKING:
    from flexible_schema import PyArrowSchema  # the meds package's schema classes (meds.DataSchema, ...)

UNIT = "unit"
"""Extra column of codes.parquet holding a measurement's unit (null for codes without one)."""


class MedsWriteError(ValueError):
    """A table could not be written as MEDS (names the file and what is wrong)."""


def _check_data(table: pa.Table, path: Path) -> pa.Table:
    missing = [f.name for f in DATA_SCHEMA if f.name not in table.column_names]
    if missing:
        raise MedsWriteError(f"{path}: missing MEDS data columns {missing}")
    for f in DATA_SCHEMA:
        if table.schema.field(f.name).type != f.type:
            raise MedsWriteError(f"{path}: column {f.name!r} has type {table.schema.field(f.name).type}, MEDS requires {f.type}")
    table = table.select([f.name for f in DATA_SCHEMA] + [c for c in table.column_names if c not in DATA_SCHEMA.names])
    for name in (SUBJECT_ID, "code"):
        if table.column(name).null_count:
            raise MedsWriteError(f"{path}: column {name!r} has null values")
    if table.num_rows > 1:
        sid = table.column(SUBJECT_ID)
        t = pc.fill_null(table.column(TIME).cast(pa.int64()), -(2**63))
        prev_sid, next_sid = sid.slice(0, table.num_rows - 1), sid.slice(1)
        prev_t, next_t = t.slice(0, table.num_rows - 1), t.slice(1)
        bad = pc.or_(pc.less(next_sid, prev_sid), pc.and_(pc.equal(next_sid, prev_sid), pc.less(next_t, prev_t)))
        if pc.any(bad).as_py():
            first = pc.index(bad, True).as_py()
            raise MedsWriteError(f"{path}: rows are not sorted by (subject_id, time) at row {first + 1} "
                                 f"(subject {sid[first + 1].as_py()})")
    _meds_valid(meds.DataSchema, table, path, "data table")
    return table


def _meds_valid(schema: type[PyArrowSchema], table: pa.Table, path: Path, what: str) -> None:
    """`MedsWriteError` naming ``path`` unless ``table`` passes the meds package's ``schema`` (e.g. ``meds.DataSchema``)."""
    try:
        schema.validate(table)
    except Exception as exc:  # the meds package raises its own (varied) exception types
        raise MedsWriteError(f"{path}: not a valid MEDS {what}: {exc}") from exc


def _write_metadata_table(schema: type[PyArrowSchema], table: pa.Table, path: Path, what: str) -> Path:
    """Validate ``table`` as ``schema`` (see `_meds_valid`) and write it atomically to ``path``."""
    _meds_valid(schema, table, path, what)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
    return path


def write_data_shard(table: pa.Table, path: str | os.PathLike, compression: str = "zstd", row_group_size: int = 1_000_000) -> int:
    """Validate and write one data shard (sorted by subject then time, static rows first); returns its row count."""
    path = Path(path)
    table = _check_data(table, path)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression=None if compression == "none" else compression, row_group_size=row_group_size,
                       use_dictionary=["code"])
    return table.num_rows


def write_codes(root: str | os.PathLike, infos: Iterable[CodeInfo]) -> Path:
    """``metadata/codes.parquet``: code, description, parent_codes, plus the extra ``unit`` column."""
    infos = list(infos)
    codes = [i.code for i in infos]
    if len(set(codes)) != len(codes):
        dup = sorted({c for c in codes if codes.count(c) > 1})[:5]
        raise MedsWriteError(f"{Path(root) / CODES_FILE}: duplicate codes {dup}")
    schema = CODE_METADATA_SCHEMA.append(pa.field(UNIT, pa.string()))
    table = pa.table({
        "code": pa.array(codes, pa.string()),
        "description": pa.array([i.description for i in infos], pa.string()),
        "parent_codes": pa.array([list(i.parent_codes) for i in infos], pa.list_(pa.string())),
        UNIT: pa.array([i.unit for i in infos], pa.string()),
    }, schema=schema)
    return _write_metadata_table(meds.CodeMetadataSchema, table, Path(root) / CODES_FILE, "code metadata table")


def write_dataset_metadata(root: str | os.PathLike, **fields) -> Path:
    """``metadata/dataset.json`` with the given `meds.DatasetMetadataSchema` fields (keys sorted, stable bytes)."""
    path = Path(root) / DATASET_FILE
    known = set(meds.DatasetMetadataSchema.__annotations__)
    unknown = set(fields) - known
    if unknown:
        raise MedsWriteError(f"{path}: unknown dataset metadata fields {sorted(unknown)}")
    atomic_write_text(path, json.dumps(fields, indent=2, sort_keys=True, default=str) + "\n")
    return path


def write_subject_splits(root: str | os.PathLike, subject_ids: Sequence[int], splits: Sequence[str]) -> Path:
    """``metadata/subject_splits.parquet`` sorted by subject id (each subject exactly once)."""
    path = Path(root) / SPLITS_FILE
    if len(subject_ids) != len(splits):
        raise MedsWriteError(f"{path}: {len(subject_ids)} subject ids but {len(splits)} splits")
    table = pa.table({"subject_id": pa.array(subject_ids, pa.int64()), "split": pa.array(splits, pa.string())}, schema=SUBJECT_SPLIT_SCHEMA)
    table = table.sort_by("subject_id")
    if table.num_rows and pc.count_distinct(table.column("subject_id")).as_py() != table.num_rows:
        raise MedsWriteError(f"{path}: duplicate subject ids")
    return _write_metadata_table(meds.SubjectSplitSchema, table, path, "subject split table")
