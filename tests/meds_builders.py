"""Small helpers writing tiny good and bad MEDS datasets with pyarrow, for the reader and validation tests."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from vista.shared.meds.schema import CODES_FILE, DATA_DIR, DATA_SCHEMA, DATASET_FILE, SPLITS_FILE

Row = tuple[int | None, datetime | None, str | None, float | None, str | None]
"""(subject_id, time, code, numeric_value, text_value), the five MEDS columns in order."""

NOW = datetime(2025, 1, 1)
"""The `now` the tests pass to the reader, so "in the future" does not depend on the clock."""


def patient_rows(subject_id: int, n_timed: int = 3, *, start: datetime = datetime(2020, 1, 1)) -> list[Row]:
    """A plausible subject: a static sex row, a birth, then ``n_timed`` daily events cycling visit/lab/note."""
    rows: list[Row] = [(subject_id, None, "GENDER//F", None, None),
                       (subject_id, datetime(1950, 6, 1), "MEDS_BIRTH", None, None)]
    kinds = [("ENCOUNTER//AMB", None, None), ("LOINC//718-7", 11.2, None),
             ("NOTE//PROGRESS", None, f"note of {subject_id}")]
    for k in range(n_timed):
        code, value, text = kinds[k % len(kinds)]
        rows.append((subject_id, start + timedelta(days=k), code, value, text))
    return rows


def meds_table(rows: Sequence[Row], schema: pa.Schema = DATA_SCHEMA) -> pa.Table:
    """Rows as a table with the MEDS data schema (or another ``schema`` with the same five columns)."""
    columns = list(zip(*rows)) if rows else [[] for _ in schema.names]
    return pa.table({name: pa.array(list(col), schema.field(name).type) for name, col in zip(schema.names, columns)},
                    schema=schema)


def with_column(table: pa.Table, name: str, array: pa.Array) -> pa.Table:
    """``table`` with column ``name`` replaced by ``array`` (to write a mistyped file)."""
    return table.set_column(table.schema.get_field_index(name), name, array)


def write_shard(root: Path, shard: str, table: pa.Table, *, row_group_size: int | None = None) -> Path:
    """Write ``table`` to ``root/shard`` (e.g. ``data/train/0.parquet``)."""
    path = root / shard
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def write_dataset(
    root: Path,
    shards: Mapping[str, pa.Table | Sequence[Row]],
    *,
    row_group_size: int | None = None,
    codes: pa.Table | None = None,
    dataset_json: Mapping[str, object] | None = None,
    splits: Mapping[int, str] | None = None,
) -> Path:
    """A dataset at ``root`` with the given shards (relative paths) and optional metadata files."""
    (root / DATA_DIR).mkdir(parents=True, exist_ok=True)
    for shard, content in shards.items():
        table = content if isinstance(content, pa.Table) else meds_table(content)
        write_shard(root, shard, table, row_group_size=row_group_size)
    if codes is not None:
        (root / CODES_FILE).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(codes, root / CODES_FILE)
    if dataset_json is not None:
        (root / DATASET_FILE).parent.mkdir(parents=True, exist_ok=True)
        (root / DATASET_FILE).write_text(json.dumps(dataset_json))
    if splits is not None:
        (root / SPLITS_FILE).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"subject_id": pa.array(list(splits), pa.int64()), "split": list(splits.values())}),
                       root / SPLITS_FILE)
    return root


def good_dataset(root: Path, subjects_per_shard: Sequence[Sequence[int]] = ((1, 2, 3), (4, 5)), n_timed: int = 3,
                 *, row_group_size: int | None = None) -> Path:
    """A valid dataset: shard ``data/train/<i>.parquet`` holds the subjects of ``subjects_per_shard[i]``."""
    shards = {f"data/train/{i}.parquet": [row for sid in sids for row in patient_rows(sid, n_timed)]
              for i, sids in enumerate(subjects_per_shard)}
    return write_dataset(root, shards, row_group_size=row_group_size)
