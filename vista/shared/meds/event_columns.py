"""A checked record batch as the columns `Event`s are made of, each value converted once per distinct value.

The reader turns rows into events a batch at a time. Converting row by row (a dict lookup per code, a ``datetime``
per row, a decimal cast per value) cost more than reading the parquet; here every column is dictionary-encoded by
arrow, the distinct values are converted once (codes respelled through the coding profile with a vocabulary-sized
cache kept across batches, runs of equal times made into one ``datetime``), and the rows take their value from the
distinct ones with one numpy gather. Equal values come out as one shared Python object.

>>> from datetime import datetime
>>> from vista.shared.coding import load_profile
>>> batch = pa.RecordBatch.from_pydict({
...     "time": pa.array([None, datetime(2110, 1, 5), datetime(2110, 1, 5)], pa.timestamp("us")),
...     "code": ["GENDER//F", "LAB//50912//mg/dL", "DIAGNOSIS//ICD//10//C3411"],
...     "numeric_value": pa.array([None, 1.1, None], pa.float32()),
...     "hadm_id": pa.array([None, 7, 7], pa.int64()),
... })
>>> coder = EventCoder.for_columns(load_profile("mimic_iv"), tuple(batch.schema.names))
>>> times, codes, values, texts, sources, units, visits, kinds = coder.columns_of(batch)
>>> codes, sources
(['GENDER//F', 'LAB//50912', 'ICD10CM//C34.11'], [None, 'LAB//50912//mg/dL', 'DIAGNOSIS//ICD//10//C3411'])
>>> values, units, visits
([None, 1.1, None], [None, 'mg/dL', None], [None, '7', '7'])
>>> times[1] is times[2]
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vista.shared.coding import Category, CodingProfile
from vista.shared.meds.schema import CODE, NUMERIC_VALUE, TEXT_VALUE, TIME

Columns = tuple[list, list, list, list, list, list, list, list]
"""times, canonical codes, numeric values, texts, source codes, units, visit ids, kinds: `Event`'s fields after its
id, one list per field, one item per row."""


def _objects(items: list) -> np.ndarray:
    """``items`` as a 1-d numpy object array (strings, datetimes, floats or None), to gather rows from."""
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _encoded(column: pa.Array) -> tuple[list, np.ndarray]:
    """The distinct values of ``column`` as Python objects, then None, and each row's index into them (nulls → None).

    >>> _encoded(pa.array(["b", None, "a", "b"]))
    (['b', 'a', None], array([0, 2, 1, 0], dtype=int32))
    """
    encoded = pc.dictionary_encode(column)
    distinct = encoded.dictionary.to_pylist()
    indices = encoded.indices.fill_null(len(distinct)).to_numpy(zero_copy_only=False)
    distinct.append(None)
    return distinct, indices


def _strings(column: pa.Array) -> list:
    """A string column's values (None for nulls), each distinct string made once."""
    distinct, indices = _encoded(column)
    return _objects(distinct)[indices].tolist()


def _extension(batch: pa.RecordBatch, name: str | None) -> pa.Array | None:
    """An extension column as strings (visit ids of any integer or string type, units, tables); None when absent,
    entirely null, or of a type that has no string form."""
    if name is None or name not in batch.schema.names:
        return None
    column = batch.column(name)
    if column.null_count == len(column):
        return None
    if not pa.types.is_string(column.type) and not pa.types.is_large_string(column.type):
        try:
            column = pc.cast(column, pa.string())
        except pa.ArrowException:
            return None
    return column


def _times(column: pa.Array) -> list:
    """Times as ``datetime`` (None for nulls), one object per run of equal times (a visit's rows share their time).

    Goes through numpy, whose conversion also gives ints instead of an exception for times outside Python's range
    (such rows belong to subjects that are being dropped).
    """
    stamps = column.to_numpy(zero_copy_only=False)
    if stamps.size == 0:
        return []
    starts = np.empty(stamps.size, dtype=bool)
    starts[0] = True
    np.not_equal(stamps[1:], stamps[:-1], out=starts[1:])  # NaT != NaT: every null starts its own run
    heads = stamps[starts].astype(object)
    return heads[np.cumsum(starts) - 1].tolist()


def _values(column: pa.Array) -> list:
    """Numeric values as the float closest to their shortest decimal form (11.2, not 11.199999809265137): what the
    source meant, and what timelines show. Converted once per distinct value; None for nulls."""
    encoded = pc.dictionary_encode(column)
    decimal = pc.cast(pc.cast(encoded.dictionary, pa.string()), pa.float64()).to_pylist()
    decimal.append(None)
    return _objects(decimal)[encoded.indices.fill_null(len(decimal) - 1).to_numpy(zero_copy_only=False)].tolist()


@dataclass(frozen=True)
class EventCoder:
    """Turns a batch's columns into `Event` fields for shards with one set of columns (its extension columns).

    Respellings are cached per distinct source code (and per code and source table), across batches: the cache is
    as large as the dataset's vocabulary, not its rows.
    """

    profile: CodingProfile
    unit_column: str | None
    visit_column: str | None
    table_column: str | None
    _codes: dict[str, tuple[str, str | None, str | None]] = field(default_factory=dict, repr=False, compare=False)
    _pairs: dict[tuple[str, str], tuple[str | None, str | None]] = field(default_factory=dict, repr=False,
                                                                         compare=False)

    @classmethod
    def for_columns(cls, profile: CodingProfile, columns: tuple[str, ...]) -> EventCoder:
        """The coder of shards with these columns: the profile's first unit, visit and table columns among them."""
        return cls(profile, profile.first_column(profile.unit_columns, columns),
                   profile.first_column(profile.visit_id_columns, columns),
                   profile.first_column(profile.table_columns, columns))

    @property
    def columns(self) -> tuple[str, ...]:
        """The extension columns this coder reads."""
        return tuple(c for c in (self.unit_column, self.visit_column, self.table_column) if c is not None)

    def _respelled(self, code: str | None) -> tuple[str | None, str | None, str | None]:
        """(canonical code, source code if different, unit in the code) of one distinct code."""
        if code is None:  # a null code: the row checks report it, the subject is dropped
            return None, None, None
        found = self._codes.get(code)
        if found is None:
            c = self.profile.canonical(code)
            found = self._codes[code] = (c.code, None if c.code == code else code, c.unit)
        return found

    def _kind(self, code: str | None, table: str | None) -> tuple[str | None, str | None]:
        """(kind, note code) a source table states for a code: only what refines the code's own category."""
        if not table or code is None:
            return None, None
        found = self._pairs.get((code, table))
        if found is None:
            refined = self.profile.category_of(code, table)
            kind = refined.value if refined is not self.profile.canonical(code).category else None
            # a note row coded by its note class becomes NOTE//<kind>
            note = self.profile.in_table(code, table).code if refined is Category.NOTE else None
            found = self._pairs[(code, table)] = (kind, note)
        return found

    def columns_of(self, batch: pa.RecordBatch) -> Columns:
        """The `Columns` of ``batch`` (``time`` and ``code``, optional MEDS and extension columns)."""
        n = batch.num_rows
        names = batch.schema.names
        distinct, code_rows = _encoded(batch.column(CODE))
        respelled = [self._respelled(code) for code in distinct]
        canon = _objects([r[0] for r in respelled])[code_rows]
        sources = _objects([r[1] for r in respelled])[code_rows]
        code_units = _objects([r[2] for r in respelled])[code_rows]
        kinds: list | np.ndarray = [None] * n  # only what a source table states: a code's own category is its code's
        tables = _extension(batch, self.table_column)
        if tables is not None:
            table_names, table_rows = _encoded(tables)
            pairs, pair_rows = np.unique(code_rows.astype(np.int64) * len(table_names) + table_rows,
                                         return_inverse=True)
            found = [self._kind(distinct[p // len(table_names)], table_names[p % len(table_names)])
                     for p in pairs.tolist()]
            kinds = _objects([f[0] for f in found])[pair_rows]
            notes = _objects([f[1] for f in found])[pair_rows]
            is_note = notes != None  # noqa: E711 - elementwise over an object array
            if is_note.any():
                canon[is_note] = notes[is_note]
                sources[is_note] = _objects(distinct)[code_rows[is_note]]
            kinds = kinds.tolist()
        units = _extension(batch, self.unit_column)
        if units is None:
            unit_list = code_units.tolist()
        else:
            unit_names, unit_rows = _encoded(units)
            stated = _objects(unit_names)[unit_rows]
            blank = np.array([not u for u in unit_names], dtype=bool)[unit_rows]  # null or "": the code's unit
            stated[blank] = code_units[blank]
            unit_list = stated.tolist()
        visits = _extension(batch, self.visit_column)
        has_values = NUMERIC_VALUE in names and batch.column(NUMERIC_VALUE).null_count < n
        has_texts = TEXT_VALUE in names and batch.column(TEXT_VALUE).null_count < n
        return (_times(batch.column(TIME)), canon.tolist(),
                _values(batch.column(NUMERIC_VALUE)) if has_values else [None] * n,
                batch.column(TEXT_VALUE).to_numpy(zero_copy_only=False).tolist() if has_texts else [None] * n,
                sources.tolist(), unit_list, [None] * n if visits is None else _strings(visits), kinds)
