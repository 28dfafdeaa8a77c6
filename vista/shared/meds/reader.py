"""`MedsDataset`: the one reader of a MEDS 0.4 dataset, streaming patients shard by shard and checking as it reads.

A dataset is ``data/**/*.parquet`` plus optional ``metadata/{codes.parquet,dataset.json,subject_splits.parquet}``.
Patients come out as `PatientRecord`s (event ids ``e<k>`` = row offset inside the subject's block, provenance back
to the shard row). Only the ``subject_id`` column of a shard is read in full (to know where each subject's rows are);
the other columns are read record batch by record batch, and only in the row groups holding requested subjects.

Problems raise `MedsDataError` (``on_error="raise"``) or drop the subject or file concerned and are recorded in
`MedsDataset.quarantine` (``on_error="quarantine"``).

>>> import tempfile
>>> from datetime import datetime
>>> import pyarrow as pa, pyarrow.parquet as pq
>>> root = Path(tempfile.mkdtemp())
>>> (root / "data").mkdir()
>>> pq.write_table(pa.table({
...     "subject_id": pa.array([1, 1, 2], pa.int64()),
...     "time": pa.array([None, datetime(2020, 1, 5), datetime(2021, 2, 3)], pa.timestamp("us")),
...     "code": ["GENDER//F", "LOINC//718-7", "ENCOUNTER//AMB"],
...     "numeric_value": pa.array([None, 11.2, None], pa.float32()),
... }), root / "data" / "0.parquet")
>>> ds = MedsDataset(root)
>>> rec = ds.load_patients([1])[1]
>>> [(e.event_id, e.code, e.numeric_value) for e in rec.events]
[('e0', 'GENDER//F', None), ('e1', 'LOINC//718-7', 11.2)]
>>> rec.provenance("e1")
RowRef(shard='data/0.parquet', row=1)
>>> ds.load_patients([9])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
vista.shared.meds.errors.MedsSubjectNotFoundError: ...: field 'subject_id': 1 requested subject is not in the dataset: 9
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from time import perf_counter

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from vista.shared.coding import CodingProfile, load_profile
from vista.shared.coding.detect import DETECTION_SAMPLE_ROWS, profile_report
from vista.shared.coding.terminology import standard_description
from vista.shared.meds.checks import ProblemTally, RowCarry, RowNumbers, epoch_us
from vista.shared.meds.errors import (
    IssueKind,
    IssueScope,
    MedsDataError,
    MedsFileError,
    MedsIssue,
    MedsSubjectNotFoundError,
    one_line,
)
from vista.shared.meds.event_columns import EventCoder
from vista.shared.meds.layout import ShardLayout, build_layout, cross_shard_issues
from vista.shared.meds.metadata import DatasetMetadata, read_code_catalog, read_dataset_metadata, read_subject_splits
from vista.shared.meds.reports import OnError, QuarantineReport, ValidationReport
from vista.shared.meds.schema import CODE, CODES_FILE, DATA_DIR, NUMERIC_VALUE, SPLITS_FILE, SUBJECT_ID, TEXT_VALUE, TIME
from vista.shared.meds.shard_check import checked_strings, open_parquet, open_shard, shard_source
from vista.shared.events_bulk import gc_paused, make_events
from vista.shared.records import CodeCatalog, CodeInfo, Event, PatientRecord
from vista.shared.storage import Location, StorageError, resolve

logger = logging.getLogger(__name__)

DEFAULT_PROFILE = "meds_synth"
"""The canonical spelling itself: what a dataset with nothing to detect from is read as."""

DEFAULT_BATCH_SIZE = 65_536
"""Rows per record batch: large enough for vectorized checks to pay off, small enough to keep memory flat."""

MEDS_COLUMNS = (SUBJECT_ID, TIME, CODE, NUMERIC_VALUE, TEXT_VALUE)

POLARS_SCHEMA = {SUBJECT_ID: pl.Int64, TIME: pl.Datetime("us"), CODE: pl.String, NUMERIC_VALUE: pl.Float32,
                 TEXT_VALUE: pl.String}


@dataclass(frozen=True, eq=False)
class _ShardFile:
    """What the parquet footer of a usable shard tells: metadata (reused to reopen cheaply), columns, id range."""

    metadata: pq.FileMetaData
    columns: tuple[str, ...]
    subject_range: tuple[int, int] | None  # from row-group statistics; None when any row group lacks them


def _subject_range(metadata: pq.FileMetaData) -> tuple[int, int] | None:
    leaf = next((j for j in range(metadata.num_columns) if metadata.schema.column(j).path == SUBJECT_ID), None)
    if leaf is None or metadata.num_row_groups == 0:
        return None
    lows, highs = [], []
    for rg in range(metadata.num_row_groups):
        stats = metadata.row_group(rg).column(leaf).statistics
        if stats is None or not stats.has_min_max:
            return None
        lows.append(stats.min)
        highs.append(stats.max)
    return int(min(lows)), int(max(highs))


_EVENT_IDS: list[str] = []
_EVENT_IDS_LOCK = threading.Lock()


def _event_ids(first: int, stop: int) -> list[str]:
    """``["e<first>", ..., "e<stop - 1>"]``, from one shared list so each id string is made once per process."""
    if stop > len(_EVENT_IDS):
        with _EVENT_IDS_LOCK:
            grown = len(_EVENT_IDS)
            if stop > grown:
                _EVENT_IDS.extend([f"e{k}" for k in range(grown, max(stop, 2 * grown))])
    return _EVENT_IDS[first:stop]


def _segment_event_ids(firsts: np.ndarray, lengths: np.ndarray) -> list[str]:
    """The event ids of consecutive row segments, segment ``j`` holding rows ``firsts[j]``… of its subject's block.

    >>> _segment_event_ids(np.array([5, 0]), np.array([2, 3]))
    ['e5', 'e6', 'e0', 'e1', 'e2']
    """
    ids: list[str] = []
    for first, length in zip(firsts.tolist(), lengths.tolist()):
        ids.extend(_event_ids(first, first + length))
    return ids


def _reopen(root: Path, on_error: OnError, now: datetime, batch_size: int,
            profile: str | Path | CodingProfile | None = None) -> MedsDataset:
    return MedsDataset(root, on_error=on_error, now=now, batch_size=batch_size, profile=profile)


def detect_profile(root: object, sources: Sequence[Path | pa.NativeFile]) -> CodingProfile:
    """The coding profile a sample of ``sources`` (readable shards) fits best, logged with the fit's warnings; the
    default profile when nothing is readable (nothing to translate either)."""
    if not sources:
        return load_profile(DEFAULT_PROFILE)
    report = profile_report(root, None, sample_rows=DETECTION_SAMPLE_ROWS, files=list(sources))
    logger.info("%s: coding profile %r detected (places %.0f%% of %s sampled rows)", root, report.profile,
                100 * report.recognised_share, f"{report.rows:,}")
    for warning in report.warnings:
        logger.warning("%s (profile %s): %s; see `trajonco profile %s`", root, report.profile, warning, root)
    return load_profile(report.profile)


class MedsDataset:
    """A MEDS 0.4 dataset on disk, read lazily and checked as it is read.

    ``now`` bounds plausible event times (default: the moment the dataset is opened); ``batch_size`` is the number of
    rows per record batch read. ``profile`` says how the dataset spells codes (a `vista.shared.coding` profile name, TOML
    path or object); by default it is detected from a sample of the codes the first time it is needed, and a poor fit
    is logged as a warning. Events come out with canonical codes (`vista.shared.records.Event`). Opening lists the shards;
    nothing else is read until asked.
    """

    def __init__(self, root: str | Path, *, on_error: OnError = "raise", now: datetime | None = None,
                 batch_size: int = DEFAULT_BATCH_SIZE, profile: str | Path | CodingProfile | None = None):
        if on_error not in ("raise", "quarantine"):
            raise ValueError(f"on_error must be 'raise' or 'quarantine', not {on_error!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, not {batch_size}")
        self.location = resolve(root)  # a local path or an object-store URI (vista.shared.storage)
        self._given = root if self.location.is_local else str(root)  # a URI keeps its ?endpoint_override when shipped
        self.root: Path | str = Path(root) if self.location.is_local else self.location.uri
        self.on_error: OnError = on_error
        self.now = now if now is not None else datetime.now()
        self._now_us = epoch_us(self.now)
        self.batch_size = batch_size
        self._shards = self._find_shards()
        self._quarantine = QuarantineReport()
        self._bad_files: set[str] = set()
        self._bad_subjects: set[int] = set()
        self._dropped_layouts: dict[str, ShardLayout] = {}  # quarantined files whose subjects were known
        self._files: dict[str, _ShardFile] = {}
        self._layouts: dict[str, ShardLayout] = {}
        self._all_shards_laid_out = False
        self._rows_checked = 0
        self._validation: ValidationReport | None = None
        self._catalog: CodeCatalog | None = None
        self._profile: CodingProfile | None = None if profile is None else load_profile(profile)
        self._coders: dict[tuple[str, ...], EventCoder] = {}  # per shard column set (extension columns may differ)

    def __reduce__(self):  # ship only the settings (to Ray workers): caches are rebuilt where used
        profile = None if self._profile is None else self._profile.name if _is_builtin(self._profile) else self._profile
        return (_reopen, (self.root if self.location.is_local else self._given, self.on_error, self.now,
                          self.batch_size, profile))

    # ----------------------------------------------------------------------------------------------- coding
    @property
    def profile(self) -> CodingProfile:
        """The coding profile rows are read with (detected on first use when none was given)."""
        if self._profile is None:
            self._profile = detect_profile(self.root, [self._source(s) for s in self._shards if self._open(s) is not None])
        return self._profile

    def _latest_us(self) -> int:
        """Times after this are "in the future": now, or later for a profile whose dataset shifts dates ahead."""
        latest = self.profile.latest_time
        return max(self._now_us, epoch_us(latest)) if latest is not None else self._now_us

    def _coder_for(self, columns: tuple[str, ...]) -> EventCoder:
        """How rows of a shard with these columns become events (its own unit/visit/table columns, if any)."""
        coder = self._coders.get(columns)
        if coder is None:
            coder = self._coders[columns] = EventCoder.for_columns(self.profile, columns)
        return coder

    def __repr__(self) -> str:
        return f"MedsDataset({str(self.root)!r}, on_error={self.on_error!r}, shards={len(self._shards)})"

    # ----------------------------------------------------------------------------------------------- files
    def _find_shards(self) -> tuple[str, ...]:
        data = self.location / DATA_DIR
        shown = str(self.root / DATA_DIR) if isinstance(self.root, Path) else data.uri
        try:
            if not self.location.is_dir():
                raise MedsFileError(str(self.root), "dataset directory not found")
            if not data.is_dir():
                raise MedsFileError(shown, "data directory not found (a MEDS dataset keeps its shards in data/)")
            if self.location.is_local:
                shards = sorted(p.relative_to(self.root).as_posix()  # type: ignore[arg-type]
                                for p in Path(shown).rglob("*.parquet") if p.is_file())
            else:
                shards = [p.relative_to(self.location) for p in data.files(suffix=".parquet")]
        except OSError as exc:  # an object store that cannot be reached, a bucket without access...
            raise MedsFileError(str(self.root), f"cannot list the dataset ({one_line(exc)})") from None
        if not shards:
            raise MedsFileError(shown, "no parquet shards found (expected data/**/*.parquet)")
        return tuple(shards)

    @property
    def shards(self) -> tuple[str, ...]:
        """Every data file, as sorted paths relative to the root (including any later quarantined)."""
        return self._shards

    @property
    def quarantine(self) -> QuarantineReport:
        """What quarantine mode has dropped so far, and why."""
        return self._quarantine

    def _report(self, issue: MedsIssue) -> None:
        """Raise ``issue`` or, in quarantine mode, record it and drop its subject or file."""
        if self.on_error == "raise":
            raise issue.to_error()
        if self._quarantine.add(issue):
            logger.warning("quarantined: %s", issue)
        if issue.scope is IssueScope.FILE:
            self._bad_files.add(issue.file)
            layout = self._layouts.pop(issue.file, None)
            if layout is not None:  # remembered, to tell its subjects why they were left out
                self._dropped_layouts[issue.file] = layout
            self._files.pop(issue.file, None)
        elif issue.subject_id is not None:
            self._bad_subjects.add(issue.subject_id)

    def check_files(self) -> list[str]:
        """Open every shard's footer and check its schema, reading no rows (fast: a few KB per file); raise or
        quarantine what is wrong. Returns the usable shards."""
        return [shard for shard in self._shards if self._open(shard) is not None]

    def subject_range(self, shard: str) -> tuple[int, int] | None:
        """The lowest and highest subject id of a usable ``shard``, from its footer's row-group statistics (no rows
        read); None when a row group lacks them or the shard is unusable."""
        info = self._open(shard)
        return info.subject_range if info is not None else None

    def why_left_out(self, subject_id: int) -> MedsDataError:
        """Why quarantine mode left ``subject_id`` out of a read: its own first problem (file, field, row), else the
        problem of the dropped file that held it, with the subject's rows in that file."""
        own = [e for e in self._quarantine.entries if e.subject_id == subject_id]
        if own:
            first = own[0]
            more = f" (+{len(own) - 1} more problem{'' if len(own) == 2 else 's'})" if len(own) > 1 else ""
            return MedsDataError(first.file, first.problem + more, subject_id=subject_id, field=first.field)
        for entry in self._quarantine.entries:
            layout = self._dropped_layouts.get(entry.file) if entry.subject_id is None else None
            if layout is None:
                continue
            runs = layout.runs_of(np.array([subject_id], np.int64))
            if runs.size:
                first_row = int(layout.run_starts[runs[0]])
                last_row = int(layout.run_starts[runs[-1]] + layout.run_lengths[runs[-1]] - 1)
                problem = (f"{entry.problem}; the whole file was left out, with this subject's rows "
                           f"{first_row}-{last_row}")
                return MedsDataError(entry.file, problem, subject_id=subject_id, field=entry.field)
        return MedsDataError(str(self.root), "subject left out of the read without a recorded reason",
                             subject_id=subject_id)

    def _source(self, shard: str) -> Path | pa.NativeFile:
        """What `pq.ParquetFile` opens for ``shard`` (`vista.shared.meds.shard_check.shard_source`)."""
        return shard_source(self.location, shard)

    def _parquet(self, shard: str, metadata: pq.FileMetaData | None = None) -> pq.ParquetFile:
        return open_parquet(self.location, shard, metadata)

    def _file_issue(self, shard: str, problem: str, *, row: int | None = None) -> MedsIssue:
        return MedsIssue(IssueKind.FILE, IssueScope.FILE, shard, problem, row=row)

    def _open(self, shard: str) -> _ShardFile | None:
        """Footer and schema of a shard, checked (`vista.shared.meds.shard_check.open_shard`); None if the file is
        (or has just been) quarantined."""
        if shard in self._bad_files:
            return None
        if shard in self._files:
            return self._files[shard]
        metadata, issues = open_shard(self.location, shard)
        for issue in issues:
            self._report(issue)
        if metadata is None:
            return None
        arrow_schema = metadata.schema.to_arrow_schema()
        info = _ShardFile(metadata, tuple(arrow_schema.names), _subject_range(metadata))
        self._files[shard] = info
        return info

    def _layout(self, shard: str) -> ShardLayout | None:
        """Where each subject's rows are in ``shard`` (reads its subject_id column once); None if quarantined."""
        if shard in self._layouts:
            return self._layouts[shard]
        info = self._open(shard)
        if info is None:
            return None
        try:
            with self._parquet(shard, info.metadata) as parquet:
                subject_ids = parquet.read(columns=[SUBJECT_ID]).column(0)
        except (OSError, pa.ArrowException) as exc:
            self._report(self._file_issue(shard, f"cannot read column subject_id ({one_line(exc)})"))
            return None
        row_group_rows = [info.metadata.row_group(i).num_rows for i in range(info.metadata.num_row_groups)]
        layout, issues = build_layout(shard, subject_ids, row_group_rows)
        for issue in issues:
            self._report(issue)
        if layout is None or shard in self._bad_files:
            return None
        self._layouts[shard] = layout
        return layout

    def _all_layouts(self) -> list[ShardLayout]:
        """Layouts of every usable shard, after checking that no subject is in two files."""
        for shard in self._shards:
            self._layout(shard)
        layouts = [self._layouts[s] for s in self._shards if s in self._layouts]
        if not self._all_shards_laid_out:
            for issue in cross_shard_issues(layouts):
                self._report(issue)
            self._all_shards_laid_out = True
        return layouts

    # ----------------------------------------------------------------------------------------------- metadata
    def code_catalog(self) -> CodeCatalog:
        """Code descriptions, parents and units from ``metadata/codes.parquet`` (empty, with a warning, if absent)."""
        if self._catalog is None:
            catalog = read_code_catalog(self._metadata_root())
            if catalog is None:
                logger.warning("%s: %s not found: codes will have no descriptions or units", self.root, CODES_FILE)
                catalog = CodeCatalog()
            self._catalog = _canonical_catalog(catalog, self.profile)
        return self._catalog

    def _metadata_root(self) -> Path | Location:
        return self.root if isinstance(self.root, Path) else self.location

    def dataset_metadata(self) -> DatasetMetadata | None:
        """``metadata/dataset.json``, or None when the dataset has none."""
        return read_dataset_metadata(self._metadata_root())

    def subject_splits(self) -> dict[int, str]:
        """subject_id → split name from ``metadata/subject_splits.parquet`` (empty, with a warning, if absent)."""
        splits = read_subject_splits(self._metadata_root())
        if splits is None:
            logger.warning("%s: %s not found: no subject has a split", self.root, SPLITS_FILE)
            return {}
        return splits

    # ----------------------------------------------------------------------------------------------- patients
    def subject_ids(self) -> list[int]:
        """Every subject of the usable shards, in dataset order, minus those already quarantined."""
        ids: list[int] = []
        for layout in self._all_layouts():
            ids.extend(s for s in layout.run_subjects.tolist() if s not in self._bad_subjects)
        return ids

    def iter_patients(self, subject_ids: Iterable[int] | None = None) -> Iterator[PatientRecord]:
        """Stream patients in dataset order (shard by shard, row order): all of them, or only ``subject_ids``.

        Which rows to read is settled before the first record: unknown ids raise `MedsSubjectNotFoundError` here,
        not halfway through. Quarantined subjects are left out.
        """
        if subject_ids is None:
            plan = [(layout, np.arange(layout.run_subjects.size)) for layout in self._all_layouts()]
        else:
            plan = self._plan(subject_ids)
        return self._stream_plan(plan, build=True)

    def load_patients(self, subject_ids: Iterable[int]) -> dict[int, PatientRecord]:
        """The records of ``subject_ids`` (read with `iter_patients`), keyed by subject id."""
        return {record.subject_id: record for record in self.iter_patients(subject_ids)}

    def _plan(self, subject_ids: Iterable[int]) -> list[tuple[ShardLayout, np.ndarray]]:
        """For each shard that may hold some of ``subject_ids``: its layout and the runs to read."""
        try:
            wanted = np.unique(np.asarray(list(subject_ids), dtype=np.int64))
        except (TypeError, ValueError, OverflowError) as exc:
            raise TypeError(f"subject ids must be integers ({exc})") from exc
        candidates: list[ShardLayout] = []
        for shard in self._shards:
            info = self._open(shard)
            if info is None:
                continue
            if info.subject_range is not None:
                lo, hi = info.subject_range
                if not np.any((wanted >= lo) & (wanted <= hi)):
                    continue  # row-group statistics rule this file out without reading it
            layout = self._layout(shard)
            if layout is not None:
                candidates.append(layout)
        for issue in cross_shard_issues(candidates, only=wanted):
            self._report(issue)
        found = np.unique(np.concatenate([lay.subjects for lay in candidates] or [np.zeros(0, np.int64)]))
        dropped = [lay.subjects for lay in self._dropped_layouts.values()]  # left out with their file: see why_left_out
        missing = np.setdiff1d(np.setdiff1d(wanted, found), np.concatenate(dropped) if dropped else found[:0])
        if missing.size:
            shown = ", ".join(str(s) for s in missing[:10].tolist()) + (" ..." if missing.size > 10 else "")
            noun = "subject is" if missing.size == 1 else "subjects are"
            problem = f"{missing.size} requested {noun} not in the dataset: {shown}"
            unsearched = sorted(self._bad_files - set(self._dropped_layouts))
            if unsearched:
                reasons = "; ".join(str(e) for e in self._quarantine.entries
                                    if e.subject_id is None and e.file in unsearched[:3])
                more = " ..." if len(unsearched) > 3 else ""
                problem += f" ({len(unsearched)} quarantined files were not searched: {reasons}{more})"
            raise MedsSubjectNotFoundError(str(self.root), problem, field=SUBJECT_ID)
        keep = np.setdiff1d(wanted, np.fromiter(self._bad_subjects, np.int64, len(self._bad_subjects)))
        plan = [(layout, layout.runs_of(keep)) for layout in candidates if layout.shard not in self._bad_files]
        return [(layout, runs) for layout, runs in plan if runs.size]

    def _stream_plan(self, plan: list[tuple[ShardLayout, np.ndarray]], *, build: bool) -> Iterator[PatientRecord]:
        for layout, runs in plan:
            if layout.shard not in self._bad_files:
                yield from self._stream_runs(layout, runs, build=build)

    def _checked_strings(self, batch: pa.RecordBatch, shard: str, row: int) -> pa.RecordBatch | None:
        """``batch`` with string views cast to large strings and every string checked as UTF-8
        (`vista.shared.meds.shard_check.checked_strings`); None, once reported, if a string column is corrupt."""
        batch, issue = checked_strings(batch, shard, row)
        if issue is not None:
            self._report(issue)
            return None
        return batch

    def _batches(self, layout: ShardLayout, ranges: list[tuple[int, int, int]], columns: list[str]
                 ) -> Iterator[tuple[int, pa.RecordBatch]]:
        """(first row, batch) over row groups ``[lo, hi)`` up to row ``until``, for each ``(lo, hi, until)``.

        Batches are decoded as they are asked for, so stopping at ``until`` spares the rest of a large row group.
        A read failure becomes a file-level issue.
        """
        shard = layout.shard
        row = 0
        try:
            with self._parquet(shard, self._files[shard].metadata) as parquet:
                for lo, hi, until in ranges:
                    row = int(layout.row_group_starts[lo])
                    batches = parquet.iter_batches(batch_size=self.batch_size, row_groups=list(range(lo, hi)),
                                                   columns=columns, use_threads=True)
                    for raw in batches:
                        batch = self._checked_strings(raw, shard, row)
                        if batch is None:
                            return
                        yield row, batch
                        row += batch.num_rows
                        if row >= until:
                            break
        except (OSError, pa.ArrowException) as exc:
            self._report(self._file_issue(shard, f"read failed near row {row} ({one_line(exc)})", row=row))

    def _stream_runs(self, layout: ShardLayout, runs: np.ndarray, *, build: bool) -> Iterator[PatientRecord]:
        """Read, check and (if ``build``) yield the given runs of one shard, batch by batch.

        A run's record is yielded once its last row has been read and checked, so a problem anywhere in a subject's
        rows drops (or raises for) that subject before anything of it is returned.
        """
        shard = layout.shard
        starts = layout.run_starts[runs]
        stops = starts + layout.run_lengths[runs]
        subjects = layout.run_subjects[runs].tolist()
        present = self._files[shard].columns
        coder = self._coder_for(present) if build else None
        columns = [c for c in MEDS_COLUMNS if c in present] + [c for c in (coder.columns if coder else ()) if c in present]
        tally = ProblemTally()
        carry: RowCarry | None = None
        events: list[Event] | None = None  # the record being assembled (None: none, or its subject is dropped)
        ranges = [(lo, hi, int(stops[np.searchsorted(starts, layout.row_group_starts[hi]) - 1]))
                  for lo, hi in layout.row_group_ranges(starts, stops)]
        for range_start, batch in self._batches(layout, ranges, columns):
            lo, hi = range_start, range_start + batch.num_rows
            first, last = int(np.searchsorted(stops, lo, side="right")), int(np.searchsorted(starts, hi, side="left"))
            if first >= last:
                continue
            seg_lo = np.maximum(starts[first:last], lo)
            seg_hi = np.minimum(stops[first:last], hi)
            whole = seg_lo[0] == lo and seg_hi[-1] == hi and bool(np.all(seg_hi[:-1] == seg_lo[1:]))
            rows: RowNumbers
            if whole:
                rows, part = lo, batch
            else:
                segments = zip(seg_lo.tolist(), seg_hi.tolist())
                rows = np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in segments])
                part = batch.take(pa.array(rows - lo))
            # The carried row is the one read just before: adjacent in the file whenever it has the same subject,
            # because every block is read whole and a subject with several blocks is only read in a full pass.
            carry = tally.add_batch(part, rows, carry=carry, now_us=self._latest_us())
            self._rows_checked += part.num_rows
            if not build and not tally:
                continue
            offsets = np.concatenate(([0], np.cumsum(seg_hi - seg_lo))).tolist()
            part_events: list[Event] | None = None  # every row's event, made in one go when the first is needed
            for j, block in enumerate(range(first, last)):
                sid = subjects[block]
                block_start = int(starts[block])
                if int(seg_lo[j]) == block_start:
                    events = []
                if build and events is not None and not (sid in self._bad_subjects or tally.has_problems(sid)):
                    if part_events is None:
                        ids = _segment_event_ids(seg_lo - starts[first:last], seg_hi - seg_lo)
                        with gc_paused():
                            part_events = make_events(ids, *coder.columns_of(part))  # type: ignore[union-attr]
                    events.extend(part_events[offsets[j]:offsets[j + 1]])
                else:
                    events = None
                if int(seg_hi[j]) == int(stops[block]):  # the block is complete: settle its subject
                    for issue in tally.pop_subject(sid, shard):
                        self._report(issue)
                    if build and events is not None and sid not in self._bad_subjects:
                        yield PatientRecord(sid, shard, block_start, events)
                    events = None
        for issue in tally.pop_all(shard):  # only if the file could not be read to the end
            self._report(issue)

    # ----------------------------------------------------------------------------------------------- whole dataset
    def validate(self) -> ValidationReport:
        """Check every shard (schema, layout, values, times) once; raise or quarantine what is wrong."""
        if self._validation is not None:
            return self._validation
        started = perf_counter()
        rows_before = self._rows_checked
        layouts = self._all_layouts()
        for _ in self._stream_plan([(lay, np.arange(lay.run_subjects.size)) for lay in layouts], build=False):
            pass
        usable = [self._layouts[s] for s in self._shards if s in self._layouts]
        subjects = np.unique(np.concatenate([lay.subjects for lay in usable])) if usable else np.zeros(0, np.int64)
        self._validation = ValidationReport(
            root=str(self.root), on_error=self.on_error, now=self.now,
            files_checked=len(self._shards), files_quarantined=len(self._bad_files),
            subjects_checked=int(subjects.size), subjects_quarantined=len(self._quarantine.subjects),
            rows_checked=self._rows_checked - rows_before, elapsed_s=perf_counter() - started,
            quarantine=self._quarantine,
        )
        return self._validation

    def scan(self) -> pl.LazyFrame:
        """All usable rows as a polars LazyFrame with the five MEDS columns, after `validate` (quarantine excluded)."""
        if not self.location.is_local:
            raise StorageError(f"{self.root}: scanning a whole dataset (cohort building, features) over object storage "
                               "is not supported yet; copy the dataset to a local or shared path")
        self.validate()
        paths = [str(self.root / s) for s in self._shards if s in self._layouts]  # type: ignore[operator]
        if not paths:
            return pl.LazyFrame(schema=POLARS_SCHEMA)
        frame = pl.scan_parquet(paths, schema=POLARS_SCHEMA, missing_columns="insert", extra_columns="ignore")
        if self._bad_subjects:
            frame = frame.filter(~pl.col(SUBJECT_ID).is_in(sorted(self._bad_subjects)))
        return canonical_codes(frame, self.profile)


def _is_builtin(profile: CodingProfile) -> bool:
    try:
        return load_profile(profile.name) == profile
    except Exception:  # noqa: BLE001 - a user profile named like nothing built in
        return False


def canonical_codes(frame: pl.LazyFrame, profile: CodingProfile) -> pl.LazyFrame:
    """``frame`` with its ``code`` column in canonical spelling (one mapping over the distinct codes, not per row).

    An identity mapping (the dataset already speaks the canonical spelling) leaves the frame untouched.
    """
    changed = profile.respellings(frame.select(pl.col(CODE).unique()).collect()[CODE].to_list())
    if not changed:
        return frame
    return frame.with_columns(pl.col(CODE).replace(changed))


def _canonical_catalog(catalog: CodeCatalog, profile: CodingProfile) -> CodeCatalog:
    """The catalog with every entry also reachable by its canonical code (parents in canonical spelling too)."""
    infos = {code: info for code, info in catalog.items()}
    for code, info in list(infos.items()):
        canonical = profile.canonical_code(code)
        parents = tuple(profile.canonical_code(p) for p in info.parent_codes)
        if canonical != code or parents != info.parent_codes:
            moved = CodeInfo(canonical, info.description, parents, info.unit)
            infos.setdefault(canonical, moved)
            if canonical == code:
                infos[code] = moved
    return CodeCatalog(infos.values(), fallback=standard_description)
