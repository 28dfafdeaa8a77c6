"""Readers of a MEDS dataset's ``metadata/`` files: codes.parquet, dataset.json and subject_splits.parquet.

Each returns None when its file is absent (all three are optional in practice), and raises `MedsMetadataError`
naming the file and field when the file is there but wrong. `splits_coverage` compares the splits file with the
subjects the data holds (a splits file made for another version of the data is a common, silent mistake).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vista.shared.meds.checks import STRING_TYPES
from vista.shared.meds.errors import MedsMetadataError, one_line
from vista.shared.meds.schema import CODES_FILE, DATASET_FILE, SPLITS_FILE, SUBJECT_ID
from vista.shared.records import CodeCatalog, CodeInfo

UNIT = "unit"
"""Optional extra column of codes.parquet holding a measurement's unit (e.g. ``g/dL`` for ``LOINC//718-7``)."""


class DatasetMetadata(BaseModel):
    """``metadata/dataset.json`` (the fields of ``meds.DatasetMetadataSchema``; unknown keys are kept as extras)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    dataset_name: str | None = Field(None, description="name of the dataset")
    dataset_version: str | None = Field(None, description="version of the dataset")
    etl_name: str | None = Field(None, description="ETL that produced it")
    etl_version: str | None = Field(None, description="version of that ETL")
    meds_version: str | None = Field(None, description="MEDS version the data follows")
    created_at: datetime | None = Field(None, description="when the dataset was created (ISO 8601)")
    license: str | None = Field(None, description="license of the data")
    location_uri: str | None = Field(None, description="where the dataset lives")
    description_uri: str | None = Field(None, description="where it is described")
    raw_source_id_columns: list[str] | None = Field(None, description="extra columns joining back to the raw source")
    code_modifier_columns: list[str] | None = Field(None, description="extra columns that modify the code")
    additional_value_modality_columns: list[str] | None = Field(None, description="extra value columns")
    site_id_columns: list[str] | None = Field(None, description="extra columns naming the site of care")
    other_extension_columns: list[str] | None = Field(None, description="other extra columns")


def _read_parquet(root: Path, relative: str) -> pa.Table | None:
    path = root / relative
    if not path.exists():
        return None
    try:
        return pq.read_table(path if isinstance(path, Path) else path.open_input())  # or a vista.shared.storage.Location
    except (OSError, pa.ArrowException) as exc:
        raise MedsMetadataError(relative, f"not a readable parquet file ({one_line(exc)})") from exc


def _require_column(table: pa.Table, file: str, name: str, allowed: tuple[pa.DataType, ...]) -> pa.ChunkedArray:
    if name not in table.column_names:
        raise MedsMetadataError(file, "required column is missing", field=name)
    return _typed_column(table, file, name, allowed)


def _typed_column(table: pa.Table, file: str, name: str, allowed: tuple[pa.DataType, ...]) -> pa.ChunkedArray:
    column = table.column(name)
    if not any(column.type.equals(t) for t in allowed):
        wanted = " or ".join(str(t) for t in allowed)
        raise MedsMetadataError(file, f"wrong type: found {column.type}, expected {wanted}", field=name)
    return column


def _no_nulls(column: pa.ChunkedArray, file: str, name: str) -> None:
    if column.null_count:
        valid = column.combine_chunks().is_valid().to_numpy(zero_copy_only=False)
        first = int(np.flatnonzero(~np.asarray(valid, dtype=bool))[0])
        count = column.null_count
        noun = "null value" if count == 1 else "null values"
        raise MedsMetadataError(file, f"{count} {noun} (first at row {first})", field=name)


def _first_duplicate(values: list, file: str, name: str, what: str) -> None:
    if len(set(values)) == len(values):
        return
    seen: dict[object, int] = {}
    for row, value in enumerate(values):
        if value in seen:
            raise MedsMetadataError(file, f"{what} {value!r} appears twice (rows {seen[value]} and {row})", field=name)
        seen[value] = row


def read_code_catalog(root: Path) -> CodeCatalog | None:
    """The code catalog from ``metadata/codes.parquet`` (``description``, ``parent_codes`` and ``unit`` optional)."""
    file = CODES_FILE
    table = _read_parquet(root, file)
    if table is None:
        return None
    codes = _require_column(table, file, "code", STRING_TYPES)
    _no_nulls(codes, file, "code")
    code_list = codes.to_pylist()
    _first_duplicate(code_list, file, "code", "code")
    n = table.num_rows

    def optional_strings(name: str) -> list[str | None]:
        return _typed_column(table, file, name, STRING_TYPES).to_pylist() if name in table.column_names else [None] * n

    descriptions, units = optional_strings("description"), optional_strings(UNIT)
    if "parent_codes" in table.column_names:
        list_types = tuple(f(t) for f in (pa.list_, pa.large_list) for t in STRING_TYPES)
        parents = _typed_column(table, file, "parent_codes", list_types).to_pylist()
    else:
        parents = [None] * n
    return CodeCatalog(
        CodeInfo(code, description, tuple(p for p in (parent or ()) if p is not None), unit)
        for code, description, parent, unit in zip(code_list, descriptions, parents, units)
    )


def read_dataset_metadata(root: Path) -> DatasetMetadata | None:
    """``metadata/dataset.json`` as a `DatasetMetadata`."""
    path = root / DATASET_FILE
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MedsMetadataError(DATASET_FILE, f"not readable JSON ({one_line(exc)})") from exc
    if not isinstance(raw, dict):
        raise MedsMetadataError(DATASET_FILE, f"expected a JSON object, found {type(raw).__name__}")
    try:
        return DatasetMetadata.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or None
        raise MedsMetadataError(DATASET_FILE, f"{first['msg']} ({exc.error_count()} problems)", field=field) from exc


def _split_columns(root: Path) -> tuple[pa.ChunkedArray, pa.ChunkedArray] | None:
    """The checked ``subject_id`` and ``split`` columns of ``metadata/subject_splits.parquet`` (None when absent)."""
    file = SPLITS_FILE
    table = _read_parquet(root, file)
    if table is None:
        return None
    subjects = _require_column(table, file, SUBJECT_ID, (pa.int64(),))
    splits = _require_column(table, file, "split", STRING_TYPES)
    _no_nulls(subjects, file, SUBJECT_ID)
    _no_nulls(splits, file, "split")
    ids = subjects.to_numpy()
    order = np.argsort(ids, kind="stable")
    repeats = order[np.flatnonzero(ids[order][1:] == ids[order][:-1]) + 1]  # rows of values seen at an earlier row
    if repeats.size:
        row = int(repeats.min())
        first = int(np.flatnonzero(ids == ids[row])[0])
        raise MedsMetadataError(file, f"subject {int(ids[row])!r} appears twice (rows {first} and {row})",
                                field=SUBJECT_ID)
    return subjects, splits


def read_subject_splits(root: Path) -> dict[int, str] | None:
    """``metadata/subject_splits.parquet`` as subject_id → split name."""
    columns = _split_columns(root)
    if columns is None:
        return None
    subjects, splits = columns
    return dict(zip(subjects.to_pylist(), splits.to_pylist()))


def read_split_subjects(root: Path) -> np.ndarray | None:
    """The subject ids of ``metadata/subject_splits.parquet`` (int64, file order), checked as `read_subject_splits`
    checks them but without a Python object per subject (a dataset of millions validates in bounded memory)."""
    columns = _split_columns(root)
    return None if columns is None else np.asarray(columns[0].to_numpy(), dtype=np.int64)


EXAMPLES_SHOWN = 5
"""How many example subject ids a coverage message names."""


def _examples(ids: np.ndarray) -> str:
    shown = ", ".join(str(s) for s in ids[:EXAMPLES_SHOWN].tolist())
    return shown + (", ..." if ids.size > EXAMPLES_SHOWN else "")


@dataclass(frozen=True, eq=False)
class SplitsCoverage:
    """How ``metadata/subject_splits.parquet`` and the data agree.

    >>> coverage = splits_coverage([1, 2, 3, 101, 102], [1, 2, 3, 4])
    >>> coverage.absent.tolist(), coverage.unlisted.tolist()
    ([101, 102], [4])
    >>> for problem in coverage.problems():
    ...     print(problem)
    lists 2 of its 5 subjects that have no rows in the data (e.g. 101, 102): they are in a split but can never be read
    omits 1 of the 4 subjects that have rows in the data (e.g. 4): they are in no split, so cohorts never use them
    >>> splits_coverage([1, 2], [2, 1]).problems()
    []
    """

    absent: np.ndarray  # int64, sorted: listed in the splits file, no rows in the data
    unlisted: np.ndarray  # int64, sorted: rows in the data, not in the splits file
    listed: int  # distinct subjects in the splits file
    present: int  # distinct subjects in the data

    def findings(self, *, unsearched_files: int = 0) -> list[tuple[str, int]]:
        """(sentence, number of subjects) per disagreement, with example ids (empty when the two agree).

        ``unsearched_files``: data files left unread (quarantined), whose subjects may be among the "absent" ones.
        """
        out: list[tuple[str, int]] = []
        if self.absent.size:
            note = (f"; {unsearched_files} quarantined data file{'' if unsearched_files == 1 else 's'} may hold some"
                    if unsearched_files else "")
            out.append((f"lists {self.absent.size} of its {self.listed} subjects that have no rows in the data "
                        f"(e.g. {_examples(self.absent)}): they are in a split but can never be read{note}",
                        int(self.absent.size)))
        if self.unlisted.size:
            out.append((f"omits {self.unlisted.size} of the {self.present} subjects that have rows in the data "
                        f"(e.g. {_examples(self.unlisted)}): they are in no split, so cohorts never use them",
                        int(self.unlisted.size)))
        return out

    def problems(self, *, unsearched_files: int = 0) -> list[str]:
        """The sentences of `findings`."""
        return [sentence for sentence, _ in self.findings(unsearched_files=unsearched_files)]


def _distinct_ids(ids: Iterable[int] | np.ndarray) -> np.ndarray:
    """Sorted distinct ids (a sort and a neighbour comparison: numpy 2.4's ``unique`` takes ~60× longer on 1M ids)."""
    ordered = np.sort(np.asarray(ids if isinstance(ids, np.ndarray) else list(ids), dtype=np.int64))
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if ordered.size else ordered


def splits_coverage(split_subjects: Iterable[int] | np.ndarray, data_subjects: Iterable[int] | np.ndarray
                    ) -> SplitsCoverage:
    """Compare the subjects of the splits file with those that have rows in the data (any order, repeats ignored)."""
    listed, present = _distinct_ids(split_subjects), _distinct_ids(data_subjects)
    return SplitsCoverage(np.setdiff1d(listed, present, assume_unique=True),
                          np.setdiff1d(present, listed, assume_unique=True), int(listed.size), int(present.size))
