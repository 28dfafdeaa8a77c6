"""The records a MEDS dataset should read as, built the slow, obvious way: row by row, one rule at a time.

An oracle for `MedsDataset`'s batch path (tests/test_reader_records.py): every shard is read whole with
``to_pylist``, and each row becomes an `Event` by asking the coding profile about that one row (its canonical code,
its unit, the category its source table states). Clean datasets only: it knows nothing of quarantine.
"""

from __future__ import annotations

from itertools import groupby
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from vista.shared.coding import Category, CodingProfile
from vista.shared.meds.schema import CODE, NUMERIC_VALUE, SUBJECT_ID, TEXT_VALUE, TIME
from vista.shared.records import Event, PatientRecord


def _as_text(value: object) -> str | None:
    """An extension column's value as the reader shows it: strings as they are, integers in decimal, None if null."""
    return None if value is None else str(value)


def _decimal(value: float | None) -> float | None:
    """A float32 as the float of its shortest decimal form (11.2, not 11.199999809265137)."""
    return None if value is None else float(str(np.float32(value)))


def _event(profile: CodingProfile, k: int, row: dict, unit_col: str | None, visit_col: str | None,
           table_col: str | None) -> Event:
    code = row[CODE]
    canonical = profile.canonical(code)
    out_code, source = canonical.code, (None if canonical.code == code else code)
    unit = _as_text(row.get(unit_col)) if unit_col else None
    table = _as_text(row.get(table_col)) if table_col else None
    kind = None
    if table:
        refined = profile.category_of(code, table)
        kind = refined.value if refined is not canonical.category else None
        if refined is Category.NOTE:
            out_code, source = profile.in_table(code, table).code, code
    return Event(f"e{k}", row[TIME], out_code, _decimal(row.get(NUMERIC_VALUE)), row.get(TEXT_VALUE), source,
                 unit or canonical.unit, _as_text(row.get(visit_col)) if visit_col else None, kind)


def reference_records(root: Path, shards: tuple[str, ...], profile: CodingProfile) -> dict[int, PatientRecord]:
    """Every subject's record, read row by row (``shards`` relative to ``root``, as `MedsDataset.shards`)."""
    records: dict[int, PatientRecord] = {}
    for shard in shards:
        table = pq.read_table(root / shard)
        names = tuple(table.column_names)
        unit_col = profile.first_column(profile.unit_columns, names)
        visit_col = profile.first_column(profile.visit_id_columns, names)
        table_col = profile.first_column(profile.table_columns, names)
        if visit_col and not pa.types.is_string(table.schema.field(visit_col).type):
            table = table.set_column(names.index(visit_col), visit_col, table.column(visit_col).cast(pa.string()))
        rows = table.to_pylist()
        row_number = 0
        for sid, block in groupby(rows, key=lambda r: r[SUBJECT_ID]):
            block = list(block)
            events = [_event(profile, k, row, unit_col, visit_col, table_col) for k, row in enumerate(block)]
            records[sid] = PatientRecord(sid, shard, row_number, events)
            row_number += len(block)
    return records
