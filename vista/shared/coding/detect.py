"""Which coding profile fits a dataset, and how much of it the profile can place: the coverage report.

`detect_profile` scores every built-in profile on a sample of the dataset's codes (share of rows it recognises, plus
its signature columns and code patterns) and keeps the best; `profile_report` counts, for one profile, the share of
rows per category, the codes it cannot place, and the warnings a user must see before trusting any result (no
encounters, no sex, no notes, most rows unplaced).

>>> import tempfile, pyarrow as pa, pyarrow.parquet as pq
>>> from pathlib import Path
>>> from datetime import datetime
>>> root = Path(tempfile.mkdtemp()); (root / "data").mkdir()
>>> pq.write_table(pa.table({"subject_id": pa.array([1, 1, 1, 1], pa.int64()),
...     "time": pa.array([None, datetime(2020, 1, 1), datetime(2020, 1, 1), datetime(2020, 1, 2)], pa.timestamp("us")),
...     "code": ["Gender/F", "Visit/OP", "SNOMED/254637007", "LOINC/8480-6"],
...     "numeric_value": pa.array([None, None, None, 120.0], pa.float32())}), root / "data" / "0.parquet")
>>> report = profile_report(root)
>>> report.profile, report.recognised_share
('omop', 1.0)
>>> [(s.category, s.rows) for s in report.categories if s.rows]
[('visit', 1), ('sex', 1), ('diagnosis', 1), ('observation', 1)]
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, Field

from vista.shared.coding.errors import CodingProfileError
from vista.shared.coding.model import Category
from vista.shared.coding.profile import CodingProfile, builtin_profiles, load_profile
from vista.shared.meds import schema

log = logging.getLogger(__name__)

DETECTION_SAMPLE_ROWS = 200_000
"""Rows read (from the first shards) to choose a profile: enough to see every common vocabulary."""
POOR_RECOGNITION = 0.5
"""A profile placing less than this share of rows is reported as a poor fit."""


class CategoryShare(BaseModel):
    category: str
    rows: int
    share: float = Field(description="share of all rows")
    distinct_codes: int


class UnplacedCode(BaseModel):
    code: str
    rows: int


class ProfileScore(BaseModel):
    profile: str
    recognised_share: float
    signature: float


class ProfileReport(BaseModel):
    """What a profile makes of a dataset (printed by ``trajonco profile``, and logged when coverage is poor)."""

    dataset: str
    profile: str
    chosen_by: str = Field(description="'detected' or 'given'")
    rows: int
    sampled: bool = Field(description="True when counted on a sample of the rows")
    subjects: int
    recognised_share: float
    categories: list[CategoryShare]
    unplaced: list[UnplacedCode] = Field(description="the most frequent codes no rule places")
    subjects_with_sex: float = Field(description="share of subjects with a sex row")
    subjects_with_birth: float = Field(description="share of subjects with a birth row")
    visit_id_column: str | None
    unit_column: str | None
    table_column: str | None
    scores: list[ProfileScore] = Field(description="every built-in profile's fit, best first (detection only)")
    warnings: list[str]

    def render(self) -> str:
        """A plain-text report for the terminal."""
        lines = [f"dataset   {self.dataset}",
                 f"profile   {self.profile} ({self.chosen_by}); rows {self.rows:,}{' (sample)' if self.sampled else ''},"
                 f" subjects {self.subjects:,}; recognised {self.recognised_share:.1%} of rows"]
        cols = [f"visit id: {self.visit_id_column or '—'}", f"unit: {self.unit_column or '—'}",
                f"source table: {self.table_column or '—'}"]
        lines.append("columns   " + ", ".join(cols))
        lines.append(f"subjects  with sex {self.subjects_with_sex:.1%}, with birth date {self.subjects_with_birth:.1%}")
        lines.append("")
        lines.append(f"  {'category':<12} {'rows':>12} {'share':>7} {'codes':>8}")
        for share in self.categories:
            lines.append(f"  {share.category:<12} {share.rows:>12,} {share.share:>7.1%} {share.distinct_codes:>8,}")
        if self.unplaced:
            lines.append("")
            lines.append("most frequent codes not placed (rendered as <other>; add them to a profile TOML):")
            lines += [f"  {u.rows:>10,}  {u.code}" for u in self.unplaced]
        if len(self.scores) > 1:
            lines.append("")
            lines.append("fit of each built-in profile: " + ", ".join(
                f"{s.profile} {s.recognised_share:.0%}" + (f" (+signature {s.signature:.0%})" if s.signature else "")
                for s in self.scores))
        for warning in self.warnings:
            lines.append(f"WARNING: {warning}")
        return "\n".join(lines)


def _data_files(root: Path) -> list[Path]:
    files = sorted(p for p in (root / schema.DATA_DIR).rglob("*.parquet") if p.is_file())
    if not files:
        raise CodingProfileError(f"{root / schema.DATA_DIR}: no parquet shards (is {root} a MEDS dataset root?)")
    return files


def _columns(files: Sequence[Path]) -> list[str]:
    try:
        return list(pq.read_schema(files[0]).names)
    except Exception as exc:  # noqa: BLE001 - any unreadable footer is reported the same way
        raise CodingProfileError(f"{files[0]}: not a readable parquet file ({exc})") from None


def _code_batches(files: Sequence[Path], extra: Sequence[str]) -> Iterator[tuple[int, pa.Table]]:
    """(file index, table of subject_id, code and ``extra`` as strings) for each record batch of ``files``.

    Read with pyarrow batch by batch (a corrupt shard is skipped with a warning: the reader reports it properly).
    """
    target = pa.schema([(schema.SUBJECT_ID, pa.int64()), (schema.CODE, pa.string()),
                        *((c, pa.string()) for c in extra)])
    for index, path in enumerate(files):
        try:
            with pq.ParquetFile(path) as parquet:
                present = [c for c in (schema.SUBJECT_ID, schema.CODE, *extra) if c in parquet.schema_arrow.names]
                if schema.CODE not in present or schema.SUBJECT_ID not in present:
                    continue
                for batch in parquet.iter_batches(batch_size=65_536, columns=present):
                    table = pa.Table.from_batches([batch])
                    for column in extra:
                        if column not in table.column_names:
                            table = table.append_column(column, pa.nulls(table.num_rows, pa.string()))
                        else:
                            table = table.set_column(table.column_names.index(column), column,
                                                     pc.cast(table.column(column), pa.string()))
                    yield index, table.select([schema.SUBJECT_ID, schema.CODE, *extra]).cast(target)
        except (OSError, pa.ArrowException) as exc:
            log.warning("%s: skipped while reading codes (%s)", path, str(exc).splitlines()[0] if str(exc) else exc)


def _rows(root: Path, sample_rows: int | None, extra: Sequence[str], files: Sequence[Path] | None = None
          ) -> tuple[pl.DataFrame, bool]:
    """subject_id, code (+ ``extra`` columns when present) of the whole dataset or its first ``sample_rows`` rows."""
    files = list(files) if files is not None else _data_files(root)
    tables: list[pa.Table] = []
    total = 0
    for _, table in _code_batches(files, extra):
        tables.append(table)
        total += table.num_rows
        if sample_rows is not None and total > sample_rows:
            break
    if not tables:
        empty = {schema.SUBJECT_ID: pl.Int64, schema.CODE: pl.String, **{c: pl.String for c in extra}}
        return pl.DataFrame(schema=empty), False
    rows = pl.from_arrow(pa.concat_tables(tables))
    assert isinstance(rows, pl.DataFrame)
    rows = rows.filter(pl.col(schema.CODE).is_not_null())  # null codes are the validator's to report, not ours
    sampled = sample_rows is not None and rows.height > sample_rows
    return (rows.head(sample_rows) if sampled else rows), sampled


@dataclass
class _Tally:
    """What `profile_report` needs of every row, held per code (bounded by the vocabulary, not the rows): row counts
    per (code, table), and the distinct subjects overall and with a sex or birth row (per file, merged at the end)."""

    profile: CodingProfile
    table: str | None
    counts: list[pl.DataFrame] = field(default_factory=list)
    seen: set[tuple[str, str | None]] = field(default_factory=set)
    wanted: dict[str, pl.DataFrame] = field(default_factory=dict)  # "sex"/"birth" -> the (code, table) keys placed so
    subjects: dict[str, list[np.ndarray]] = field(default_factory=lambda: {"all": [], "sex": [], "birth": []})
    _file: dict[str, list[np.ndarray]] = field(default_factory=lambda: {"all": [], "sex": [], "birth": []})

    @property
    def keys(self) -> list[str]:
        return [schema.CODE, *([self.table] if self.table else [])]

    def add(self, rows: pl.DataFrame) -> None:
        keys = self.keys
        rows = rows.filter(pl.col(schema.CODE).is_not_null())
        counted = rows.group_by(keys).agg(n=pl.len())
        self.counts.append(counted)
        if len(self.counts) >= 64:  # fold the partial counts: memory stays bounded by the vocabulary
            self.counts = [pl.concat(self.counts).group_by(keys).agg(n=pl.col("n").sum())]
        fresh = [key for key in counted.select(keys).rows() if key not in self.seen]
        if fresh:
            self.seen.update(fresh)
            for name, category in (("sex", Category.SEX), ("birth", Category.BIRTH)):
                placed = [key for key in fresh if self.profile.category_of(key[0], key[1] if self.table else None)
                          is category]
                if placed:
                    new = pl.DataFrame(placed, schema=dict.fromkeys(keys, pl.String), orient="row")
                    self.wanted[name] = pl.concat([self.wanted[name], new]) if name in self.wanted else new
        self._file["all"].append(rows[schema.SUBJECT_ID].unique().to_numpy())
        for name, wanted in self.wanted.items():
            matched = rows.join(wanted, on=keys, how="semi", nulls_equal=True)
            self._file[name].append(matched[schema.SUBJECT_ID].unique().to_numpy())

    def end_file(self) -> None:
        for name, parts in self._file.items():
            if parts:
                self.subjects[name].append(np.unique(np.concatenate(parts)))
            parts.clear()

    def distinct(self, name: str) -> int:
        parts = self.subjects[name]
        return int(np.unique(np.concatenate(parts)).size) if parts else 0


def _streamed(files: Sequence[Path], chosen: CodingProfile, table_col: str | None, extra: Sequence[str]) -> _Tally:
    """Every row of ``files`` counted into a `_Tally` (one record batch in memory at a time)."""
    tally = _Tally(chosen, table_col)
    current = None
    for index, table in _code_batches(files, extra):
        if index != current and current is not None:
            tally.end_file()
        current = index
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        tally.add(frame)
    tally.end_file()
    return tally


def _categorise(profile: CodingProfile, counts: pl.DataFrame, table: str | None) -> pl.DataFrame:
    """code (+table) counts → the same with canonical code and category."""
    keys = counts.select([schema.CODE] + ([table] if table else [])).unique().rows()
    canon = [profile.canonical(row[0]) for row in keys]
    cats = [profile.category_of(row[0], row[1] if table else None).value for row in keys]
    types = {schema.CODE: pl.String, **({table: counts.schema[table]} if table else {}), "canonical": pl.String,
             "category": pl.String}
    mapping = pl.DataFrame({schema.CODE: [r[0] for r in keys], **({table: [r[1] for r in keys]} if table else {}),
                            "canonical": [c.code for c in canon], "category": cats}, schema=types)
    return counts.join(mapping, on=[schema.CODE] + ([table] if table else []), how="left", nulls_equal=True)


def _score(profile: CodingProfile, counts: pl.DataFrame, columns: Sequence[str]) -> ProfileScore:
    table = profile.first_column(profile.table_columns, columns)
    placed = _categorise(profile, counts, table)
    total = int(placed["n"].sum()) or 1
    recognised = int(placed.filter(pl.col("category") != Category.OTHER.value)["n"].sum())
    top = counts.sort("n", descending=True).head(500)[schema.CODE].to_list()
    return ProfileScore(profile=profile.name, recognised_share=recognised / total,
                        signature=profile.signature_score(top, columns))


def _table_columns(columns: Sequence[str], given: CodingProfile | None) -> list[str]:
    """The source-table columns any candidate profile may read, among ``columns`` (read once for every profile)."""
    names = [c for name in builtin_profiles() for c in load_profile(name).table_columns]
    names += list(given.table_columns) if given is not None else []
    return [c for c in dict.fromkeys(names) if c in columns]


def _best(rows: pl.DataFrame, columns: Sequence[str]) -> tuple[CodingProfile, list[ProfileScore]]:
    """Every built-in profile scored on ``rows`` (recognised share first, signature to break near-ties)."""
    table_cols = [c for c in ("table",) if c in rows.columns]
    counts = rows.group_by([schema.CODE, *table_cols]).agg(n=pl.len())
    scores = [_score(load_profile(name), counts, columns) for name in builtin_profiles()]
    scores.sort(key=lambda s: (round(s.recognised_share, 2), s.signature), reverse=True)
    return load_profile(scores[0].profile), scores


def detect_profile(root: str | Path, *, sample_rows: int | None = DETECTION_SAMPLE_ROWS,
                   files: Sequence[Path] | None = None) -> tuple[CodingProfile, list[ProfileScore]]:
    """The built-in profile that fits ``root`` best (recognised share first, signature to break near-ties).

    ``files`` restricts the sample to those shards (a reader passes the ones it found usable).
    """
    root = Path(root)
    files = list(files) if files is not None else _data_files(root)
    columns = _columns(files)
    rows, _ = _rows(root, sample_rows, _table_columns(columns, None), files)
    return _best(rows, columns)


def profile_report(root: str | Path, profile: str | Path | CodingProfile | None = None, *,
                   sample_rows: int | None = None, unplaced: int = 15,
                   files: Sequence[Path] | None = None) -> ProfileReport:
    """Coverage of ``profile`` (detected when None, on the first `DETECTION_SAMPLE_ROWS` rows) over the dataset: its
    first ``sample_rows`` rows (read once, for the detection and the report), or, when ``sample_rows`` is None,
    every row, streamed shard by shard holding only per-code counts and the distinct subject ids."""
    root = Path(root)
    files = list(files) if files is not None else _data_files(root)
    columns = _columns(files)
    given = None if profile is None else load_profile(profile)
    extra = _table_columns(columns, given)
    rows, sampled = _rows(root, DETECTION_SAMPLE_ROWS if sample_rows is None else sample_rows, extra, files)
    scores: list[ProfileScore] = []
    if given is None:
        chosen, scores = _best(rows.head(DETECTION_SAMPLE_ROWS), columns)
        how = "detected"
    else:
        chosen, how = given, "given"
    visit_col = chosen.first_column(chosen.visit_id_columns, columns)
    unit_col = chosen.first_column(chosen.unit_columns, columns)
    table_col = chosen.first_column(chosen.table_columns, columns)
    keys = [schema.CODE, *([table_col] if table_col else [])]
    if sample_rows is None and sampled:  # more rows than the detection sample: count them all, streaming
        tally = _streamed(files, chosen, table_col, extra)
        counts = pl.concat(tally.counts).group_by(keys).agg(n=pl.col("n").sum())
        subjects, with_sex, with_birth = tally.distinct("all"), tally.distinct("sex"), tally.distinct("birth")
        sampled = False
    else:
        counts = rows.group_by(keys).agg(n=pl.len())
        subjects = rows[schema.SUBJECT_ID].n_unique()
        with_cat = rows.join(_categorise(chosen, counts, table_col).select(schema.CODE, "category").unique(schema.CODE),
                             on=schema.CODE, how="left")
        with_sex, with_birth = (with_cat.filter(pl.col("category") == c.value)[schema.SUBJECT_ID].n_unique()
                                for c in (Category.SEX, Category.BIRTH))
    placed = _categorise(chosen, counts, table_col)
    total = int(placed["n"].sum())
    per_category = placed.group_by("category").agg(rows=pl.col("n").sum(), codes=pl.col("canonical").n_unique())
    by_name = {r["category"]: r for r in per_category.iter_rows(named=True)}
    shares = [CategoryShare(category=c.value, rows=int(by_name.get(c.value, {}).get("rows", 0) or 0),
                            share=(by_name.get(c.value, {}).get("rows", 0) or 0) / (total or 1),
                            distinct_codes=int(by_name.get(c.value, {}).get("codes", 0) or 0)) for c in Category]
    other = placed.filter(pl.col("category") == Category.OTHER.value)
    top_other = other.group_by(schema.CODE).agg(n=pl.col("n").sum()).sort("n", descending=True).head(unplaced)
    recognised = 1.0 - (int(other["n"].sum()) / total if total else 0.0)
    report = ProfileReport(
        dataset=str(root), profile=chosen.name, chosen_by=how, rows=total, sampled=sampled, subjects=subjects,
        recognised_share=recognised, categories=shares,
        unplaced=[UnplacedCode(code=c, rows=int(n)) for c, n in top_other.iter_rows()],
        subjects_with_sex=with_sex / subjects if subjects else 0.0,
        subjects_with_birth=with_birth / subjects if subjects else 0.0,
        visit_id_column=visit_col, unit_column=unit_col, table_column=table_col, scores=scores, warnings=[])
    report.warnings.extend(coverage_warnings(report))
    return report


def coverage_warnings(report: ProfileReport) -> list[str]:
    """What a user must know before trusting results on this dataset (empty when coverage is good)."""
    share = {s.category: s for s in report.categories}
    warnings: list[str] = []
    if report.recognised_share < POOR_RECOGNITION:
        warnings.append(f"profile {report.profile!r} places only {report.recognised_share:.0%} of rows; the rest render"
                        " as <other> — pass --profile NAME or a profile TOML that knows this spelling")
    if share[Category.VISIT.value].rows == 0 and report.visit_id_column is None:
        warnings.append("no encounter rows and no visit-id column recognised: visits fall back to days with events,"
                        " and the graph uses one pseudo-encounter per day")
    if report.subjects_with_sex < 0.5:
        warnings.append(f"sex found for only {report.subjects_with_sex:.0%} of subjects: cohort matching on sex and"
                        " displays will lack it")
    if report.subjects_with_birth < 0.5:
        warnings.append(f"birth date found for only {report.subjects_with_birth:.0%} of subjects: ages are unknown")
    if share[Category.NOTE.value].rows == 0:
        warnings.append("no notes recognised: VISTA's notes, mentions and radiology safety net will see none")
    if share[Category.DIAGNOSIS.value].rows == 0:
        warnings.append("no diagnosis codes recognised: cancer cohorts cannot find cases")
    return warnings
