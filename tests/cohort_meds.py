"""Tiny hand-made MEDS datasets for the cohort tests: patients described by dates, written with pyarrow."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from vista.shared.meds import schema

DAY0 = date(2010, 1, 1)
VISIT_HOUR = time(9, 0)


def day(offset: int) -> date:
    """The date ``offset`` days after 2010-01-01 (tests speak in day offsets)."""
    return DAY0 + timedelta(days=offset)


def at(d: date) -> datetime:
    return datetime.combine(d, VISIT_HOUR)


@dataclass
class Patient:
    """One subject: demographics, visit dates, and diagnosis codes on dates (each code also gets an encounter)."""

    subject_id: int
    split: str = "held_out"
    sex: str | None = "F"
    birth: date | None = date(1950, 6, 15)
    visits: list[date] = field(default_factory=list)
    codes: list[tuple[date, str]] = field(default_factory=list)
    static_codes: list[str] = field(default_factory=list)
    encounters: bool = True

    def rows(self) -> list[tuple[int, datetime | None, str, float | None, str | None]]:
        out: list[tuple[int, datetime | None, str, float | None, str | None]] = []
        if self.sex is not None:
            out.append((self.subject_id, None, f"GENDER//{self.sex}", None, None))
        out += [(self.subject_id, None, c, None, None) for c in self.static_codes]
        if self.birth is not None:
            out.append((self.subject_id, datetime.combine(self.birth, time(0)), schema.BIRTH_CODE, None, None))
        visit_days = sorted(set(self.visits) | {d for d, _ in self.codes})
        if self.encounters:
            out += [(self.subject_id, at(d), "ENCOUNTER//AMB", None, None) for d in visit_days]
        else:
            out += [(self.subject_id, at(d), "LOINC//718-7", 12.5, None) for d in visit_days]
        out += [(self.subject_id, at(d), c, None, None) for d, c in self.codes]
        return out


def write_dataset(root: Path, patients: list[Patient]) -> Path:
    """Write ``patients`` as a MEDS dataset (one shard per split, rows sorted by subject and time)."""
    (root / schema.DATA_DIR).mkdir(parents=True, exist_ok=True)
    (root / "metadata").mkdir(parents=True, exist_ok=True)
    by_split: dict[str, list[Patient]] = {}
    for p in patients:
        by_split.setdefault(p.split, []).append(p)
    for split, members in by_split.items():
        rows = [r for p in sorted(members, key=lambda p: p.subject_id) for r in p.rows()]
        rows.sort(key=lambda r: (r[0], r[1] is not None, r[1] or datetime.min))
        cols = list(zip(*rows, strict=True)) if rows else [[]] * 5
        table = pa.Table.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(cols, schema.DATA_SCHEMA, strict=True)], schema=schema.DATA_SCHEMA
        )
        (root / schema.DATA_DIR / split).mkdir(exist_ok=True)
        pq.write_table(table, root / schema.DATA_DIR / split / "0.parquet")
    splits = pa.Table.from_pydict(
        {"subject_id": [p.subject_id for p in patients], "split": [p.split for p in patients]},
        schema=schema.SUBJECT_SPLIT_SCHEMA,
    )
    pq.write_table(splits, root / schema.SPLITS_FILE)
    (root / schema.DATASET_FILE).write_text(json.dumps({"dataset_name": "cohort-test", "dataset_version": "1"}))
    return root
