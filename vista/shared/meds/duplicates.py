"""Exact duplicate rows of a MEDS dataset: found for `trajonco validate`, dropped in a copy on request.

A duplicate is a row equal in every column (extension columns included) to an earlier row of the same shard. MEDS
does not forbid them, but they are nearly always an ETL artefact (a join that fanned out, a table exported twice),
and they count twice wherever events are counted: a timeline shows the event twice, code counts and token budgets
grow. So validation warns about them (count, subjects, an example) and drops nothing; `write_deduplicated` writes a
copy of the dataset without them, the first of equal rows kept and the order of the rest unchanged. The input is
never modified.

Equal rows share subject and time, so in MEDS order (sorted by subject, then time) they sit in one run of rows of
the same subject and time. Each shard is therefore read once, batch by batch, carrying into the next batch only the
rows of the run the previous one ended in. (In a file out of MEDS order, which validation reports anyway, duplicates
are only found within a batch.)

>>> import pyarrow as pa
>>> marker = DuplicateMarker()
>>> first = pa.RecordBatch.from_pydict({"subject_id": pa.array([1, 1, 2], pa.int64()),
...                                     "time": pa.array([None, None, 5], pa.timestamp("us")), "code": ["A", "A", "B"]})
>>> marker.mark(first).tolist()
[False, True, False]
>>> second = pa.RecordBatch.from_pydict({"subject_id": pa.array([2, 2], pa.int64()),
...                                      "time": pa.array([5, 6], pa.timestamp("us")), "code": ["B", "B"]})
>>> marker.mark(second).tolist()  # row 3 repeats row 2, across the batch boundary
[True, False]
>>> marker.total, marker.example
(2, DuplicateExample(subject_id=1, row=1, same_as_row=0))
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from vista.shared.atomic import make_dirs, protect
from vista.shared.meds.errors import MedsFileError, one_line
from vista.shared.meds.reports import DatasetWarning
from vista.shared.meds.schema import DATA_DIR, SUBJECT_ID, TIME

MAX_CARRY = 1 << 20
"""Most rows carried from one batch into the next; a longer run of one subject's rows at one time is only searched
for duplicates within its last ``MAX_CARRY`` rows."""

DEFAULT_READ_ROWS = 65_536
MAX_ROW_GROUP = 1 << 20


@dataclass(frozen=True, slots=True)
class DuplicateExample:
    """One duplicate: its subject, its row in the file, and the earlier row it repeats."""

    subject_id: int
    row: int
    same_as_row: int


@dataclass(frozen=True, slots=True)
class ShardDuplicates:
    """What one shard holds: duplicate rows, distinct subjects having some, and the first one found."""

    shard: str
    rows: int
    subjects: int
    example: DuplicateExample | None

    def warning(self) -> DatasetWarning:
        """The validation warning for this shard (only meaningful when ``rows`` > 0)."""
        e = self.example
        where = f" (e.g. subject {e.subject_id}: row {e.row} repeats row {e.same_as_row})" if e is not None else ""
        noun = "row" if self.rows == 1 else "rows"
        problem = (f"{self.rows} exact duplicate {noun} (every column equal to an earlier row) in {self.subjects} "
                   f"subject{'' if self.subjects == 1 else 's'}{where}")
        return DatasetWarning(kind="duplicates", file=self.shard, problem=problem, count=self.rows,
                              subject_id=None if e is None else e.subject_id, row=None if e is None else e.row)


def _run_start(sids: np.ndarray, times: pa.Array) -> int:
    """Where the final run of rows with the last row's subject and time starts (nulls equal to nulls)."""
    n = len(sids)
    same = sids == sids[-1]
    valid = np.ones(n, dtype=bool) if not times.null_count else np.asarray(
        times.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if valid[-1]:
        values = times.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        same &= valid & (values == values[-1])
    else:
        same &= ~valid
    breaks = np.flatnonzero(~same)
    return int(breaks[-1]) + 1 if breaks.size else 0


class DuplicateMarker:
    """Marks, batch after batch of one shard, the rows equal to an earlier row (see the module docstring).

    Counts what it marked (``total``, ``subjects``) and keeps the first duplicate as ``example``.
    """

    def __init__(self, *, first_row: int = 0, max_carry: int = MAX_CARRY):
        self._carry: pa.Table | None = None  # rows of the run the last batch ended in
        self._carry_rows = np.zeros(0, np.int64)  # their rows in the file
        self._next_row = first_row
        self._max_carry = max_carry
        self._subjects: set[int] = set()
        self.total = 0
        self.example: DuplicateExample | None = None

    @property
    def subjects(self) -> int:
        return len(self._subjects)

    def mark(self, batch: pa.RecordBatch) -> np.ndarray:
        """A bool per row of ``batch`` (the next rows of the shard): True where it repeats an earlier row."""
        n = batch.num_rows
        rows = np.arange(self._next_row, self._next_row + n, dtype=np.int64)
        self._next_row += n
        if n == 0:
            return np.zeros(0, dtype=bool)
        table = pa.Table.from_batches([batch])
        carried = 0
        if self._carry is not None and self._carry.num_rows:
            carried = self._carry.num_rows
            table = pa.concat_tables([self._carry, table])
            rows = np.concatenate([self._carry_rows, rows])
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        repeated = ~frame.select(pl.struct(pl.all()).is_first_distinct()).to_series().to_numpy()
        sids = table.column(SUBJECT_ID).to_numpy()
        found = np.flatnonzero(repeated[carried:]) + carried  # carried rows were counted with their own batch
        if found.size:
            self.total += int(found.size)
            self._subjects.update(np.unique(sids[found]).tolist())
            if self.example is None:
                self.example = self._example(frame, int(found[0]), rows, sids)
        start = _run_start(sids, table.column(TIME).combine_chunks())
        start = max(start, len(sids) - self._max_carry)
        self._carry = table.slice(start)
        self._carry_rows = rows[start:]
        return repeated[carried:]

    @staticmethod
    def _example(frame: pl.DataFrame, at: int, rows: np.ndarray, sids: np.ndarray) -> DuplicateExample:
        """The duplicate at position ``at`` and the first earlier row equal to it."""
        hashes = frame.hash_rows().to_numpy()
        target = frame.row(at)
        same_as = next((int(i) for i in np.flatnonzero(hashes[:at] == hashes[at]) if frame.row(int(i)) == target),
                       at)
        return DuplicateExample(int(sids[at]), int(rows[at]), int(rows[same_as]))


def _batches(root: Path, shard: str, batch_size: int) -> Iterator[pa.RecordBatch]:
    try:
        with pq.ParquetFile(root / shard) as parquet:
            yield from parquet.iter_batches(batch_size=batch_size)
    except (OSError, pa.ArrowException) as exc:
        raise MedsFileError(shard, f"read failed while looking for duplicate rows ({one_line(exc)})") from exc


def _marked(root: Path, shard: str, batch_size: int, marker: DuplicateMarker
            ) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """Each batch of ``shard`` with its duplicate mask (a read or comparison failure names the shard)."""
    for batch in _batches(root, shard, batch_size):
        try:
            mask = marker.mark(batch)
        except (pl.exceptions.PolarsError, pa.ArrowException) as exc:
            raise MedsFileError(shard, f"cannot compare rows for duplicates ({one_line(exc)})") from exc
        yield batch, mask


def find_duplicates(root: str | Path, shards: Sequence[str], *,
                    batch_size: int = DEFAULT_READ_ROWS) -> list[ShardDuplicates]:
    """The duplicates of each of ``shards`` (paths relative to ``root``), reading every column once."""
    out: list[ShardDuplicates] = []
    for shard in shards:
        marker = DuplicateMarker()
        for _ in _marked(Path(root), shard, batch_size, marker):
            pass
        out.append(ShardDuplicates(shard, marker.total, marker.subjects, marker.example))
    return out


def _check_destination(root: Path, out: Path) -> None:
    source, target = root.resolve(), out.resolve()
    if target == source or source in target.parents or target in source.parents:
        raise MedsFileError(str(out), f"the deduplicated copy must go outside the dataset {root} (and not contain it)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise MedsFileError(str(out), "already exists and is not an empty directory; choose a new path")


def _codec(metadata: pq.FileMetaData) -> str:
    if metadata.num_row_groups == 0 or metadata.num_columns == 0:
        return "snappy"
    codec = str(metadata.row_group(0).column(0).compression).lower()
    return "none" if codec == "uncompressed" else codec


def _copy_shard(root: Path, shard: str, target: Path, batch_size: int) -> ShardDuplicates:
    """Write ``shard`` to ``target`` without its duplicates (same schema, codec, similar row groups)."""
    try:
        metadata = pq.read_metadata(root / shard)
        schema = pq.read_schema(root / shard)
    except (OSError, pa.ArrowException) as exc:
        raise MedsFileError(shard, f"not a readable parquet file ({one_line(exc)})") from exc
    group_rows = min(MAX_ROW_GROUP, max([metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)],
                                        default=batch_size) or batch_size)
    make_dirs(target.parent)
    marker = DuplicateMarker()
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    with pq.ParquetWriter(target, schema, compression=_codec(metadata)) as writer:
        for batch, mask in _marked(root, shard, batch_size, marker):
            kept = batch.filter(pa.array(~mask)) if mask.any() else batch
            pending.append(kept)
            pending_rows += kept.num_rows
            if pending_rows >= group_rows:
                writer.write_table(pa.Table.from_batches(pending, schema=schema), row_group_size=group_rows)
                pending, pending_rows = [], 0
        if pending_rows or not metadata.num_rows:
            writer.write_table(pa.Table.from_batches(pending, schema=schema), row_group_size=group_rows)
    protect(target)
    return ShardDuplicates(shard, marker.total, marker.subjects, marker.example)


def write_deduplicated(root: str | Path, shards: Sequence[str], out: str | Path, *,
                       batch_size: int = DEFAULT_READ_ROWS) -> list[ShardDuplicates]:
    """Copy the dataset at ``root`` to ``out`` with the exact duplicate rows of ``shards`` (every data file of the
    dataset, relative paths) removed; every other file (``metadata/``, anything else) is copied as it is.

    ``out`` must not exist yet (or be an empty directory) and must lie outside the dataset. The copy is assembled in
    a temporary directory next to ``out`` and renamed into place, so an interrupted run leaves no half copy behind.
    """
    root, out = Path(root), Path(out)
    _check_destination(root, out)
    make_dirs(out.parent)
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    wanted = set(shards)
    try:
        found = [_copy_shard(root, shard, staging / shard, batch_size) for shard in shards]
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root)
            if path.is_dir() or relative.as_posix() in wanted:
                continue
            if relative.parts[0] == DATA_DIR and path.suffix == ".parquet":
                raise MedsFileError(relative.as_posix(), "data file left out of the deduplicated copy")
            make_dirs((staging / relative).parent)
            protect(shutil.copy2(path, staging / relative))  # copy2 would keep the source's mode
        if out.exists():
            out.rmdir()  # empty, checked above
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return found
