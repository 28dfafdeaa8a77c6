"""`validate_dataset`: check a whole MEDS dataset and summarise what was found (the `trajonco validate` command).

The data checks live in `vista.shared.meds.checks` (schema, values, time order) and `vista.shared.meds.layout` (subject
order and contiguity); `vista.shared.meds.shard_check` runs them, with the search for exact duplicate rows
(`vista.shared.meds.duplicates`), on one shard in one read. `ValidateStep` is that as a
`vista.shared.meds.shard_step.ShardStep`: shards are checked in parallel (threads here, Ray tasks through
``python -m jobs.data_steps validate``) and the results are put together in shard order, so the report is the one
`MedsDataset.validate` makes, and memory is bounded by a shard plus the distinct subject ids. On top of them this
module

- checks the ``metadata/`` files (a broken one raises, or is quarantined like a data file);
- warns, dropping nothing, about what MEDS allows but is probably wrong: exact duplicate rows, a
  ``subject_splits.parquet`` listing subjects the data lacks or omitting subjects it has
  (`vista.shared.meds.metadata.splits_coverage`), a missing metadata file.

`deduplicate_dataset` writes a checked copy of a dataset without its exact duplicate rows.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from time import perf_counter

import numpy as np
import pyarrow as pa

from vista.shared.meds.checks import epoch_us
from vista.shared.meds.duplicates import ShardDuplicates, write_deduplicated
from vista.shared.meds.errors import IssueKind, IssueScope, MedsFileError, MedsIssue, MedsMetadataError
from vista.shared.meds.layout import cross_shard_issues
from vista.shared.meds.metadata import read_code_catalog, read_dataset_metadata, read_split_subjects, splits_coverage
from vista.shared.meds.reader import DEFAULT_BATCH_SIZE, MedsDataset, detect_profile
from vista.shared.meds.reports import DatasetWarning, OnError, QuarantineReport, ValidationReport
from vista.shared.meds.schema import CODES_FILE, DATASET_FILE, SPLITS_FILE
from vista.shared.meds.shard_check import ShardCheck, check_shard, from_table, open_shard, shard_source, to_table
from vista.shared.storage import resolve

__all__ = ["DatasetWarning", "QuarantineReport", "ValidateStep", "ValidationReport", "deduplicate_dataset",
           "validate_dataset", "validate_step"]

logger = logging.getLogger(__name__)

MISSING_METADATA: dict[str, str] = {
    CODES_FILE: "not found: codes will have no descriptions, parents or units",
    DATASET_FILE: "not found: the dataset has no name, version or ETL recorded",
    SPLITS_FILE: "not found: no subject has a split, and cohorts take their subjects from the splits",
}
"""What a missing metadata file costs (MEDS makes them optional; the tools work without them, less well)."""


MAX_WORKERS = 4
"""Shards checked at once by default (one per CPU up to this): memory is this many shards, whatever the machine."""

ShardRunner = Callable[["ValidateStep", Sequence[Path]], ValidationReport]
"""``run(step, shards)``: a shard step's reduced result over the shards (``jobs.data_steps``: Ray Data)."""


def validate_dataset(root: str | Path, *, on_error: OnError = "raise", now: datetime | None = None,
                     batch_size: int = DEFAULT_BATCH_SIZE, duplicates: bool = True,
                     workers: int | None = None, run: ShardRunner | None = None) -> ValidationReport:
    """Check every file, subject and row of the dataset at ``root``, then its metadata, then look for warnings.

    ``on_error="raise"`` raises `MedsDataError` at the first problem; ``"quarantine"`` records every problem, drops
    the subjects/files concerned and returns the report (``report.quarantine`` can be written as JSON or parquet).
    ``duplicates=False`` skips the search for exact duplicate rows. ``workers`` shards are checked at once (default:
    one per CPU, at most `MAX_WORKERS`); the first problem in dataset order is the one raised, whatever the order
    shards finish in. ``run`` runs the step elsewhere instead (a Ray task per shard, ``python -m jobs.data_steps
    validate``): the report is the same.
    """
    step = validate_step(root, on_error=on_error, now=now, batch_size=batch_size, duplicates=duplicates)
    if run is not None:
        return run(step, [Path(shard) for shard in step.shards])
    return step.fold(_checks_in_order(step, workers or min(os.cpu_count() or 1, MAX_WORKERS)))


def _checks_in_order(step: ValidateStep, workers: int) -> Iterator[ShardCheck]:
    """Each shard's check, in dataset order, ``workers`` at a time (threads: arrow and numpy release the GIL).

    Stopping early (the first problem raised) cancels the checks not started."""
    if workers <= 1:
        yield from map(step.check, step.shards)
        return
    pool = ThreadPoolExecutor(workers, thread_name_prefix="validate")
    try:
        pending = [pool.submit(step.check, shard) for shard in step.shards]
        for future in pending:
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def validate_step(root: str | Path, *, on_error: OnError = "raise", now: datetime | None = None,
                  batch_size: int = DEFAULT_BATCH_SIZE, duplicates: bool = True) -> ValidateStep:
    """The `ValidateStep` of the dataset at ``root``: its shards listed, its coding profile detected (from the
    shards whose footer reads, as `MedsDataset.profile` does) for the latest plausible time. Raises
    `MedsFileError` when there is no dataset or no shard."""
    dataset = MedsDataset(root, on_error=on_error, now=now, batch_size=batch_size)
    given = str(root) if not isinstance(root, Path) else root.as_posix()
    usable = [shard for shard in dataset.shards if open_shard(dataset.location, shard)[0] is not None]
    profile = detect_profile(dataset.root, [shard_source(dataset.location, s) for s in usable])
    latest = epoch_us(dataset.now)
    if profile.latest_time is not None:
        latest = max(latest, epoch_us(profile.latest_time))
    return ValidateStep(root=given, shards=dataset.shards, on_error=on_error, now=dataset.now, latest_us=latest,
                        batch_size=batch_size, duplicates=duplicates, started=perf_counter())


@dataclass(frozen=True)
class ValidateStep:
    """`trajonco validate` as a shard step: ``map_shard`` checks one shard (`check_shard`, as one
    `vista.shared.meds.shard_check.SHARD_CHECK_SCHEMA` row), ``reduce`` puts the shards' checks together in
    dataset order with the metadata and duplicate warnings (`fold`). Settings only: pickled to Ray workers."""

    root: str
    shards: tuple[str, ...]
    on_error: OnError
    now: datetime
    latest_us: int
    batch_size: int = DEFAULT_BATCH_SIZE
    duplicates: bool = True
    started: float = 0.0
    name: str = "validate"

    def check(self, shard: str) -> ShardCheck:
        return check_shard(self.root, shard, now_us=self.latest_us, batch_size=self.batch_size,
                           duplicates=self.duplicates)

    def map_shard(self, shard: Path) -> pa.Table:
        return to_table(self.check(shard.as_posix()))

    def reduce(self, tables: Sequence[pa.Table]) -> ValidationReport:
        position = {shard: i for i, shard in enumerate(self.shards)}
        checks = sorted((c for table in tables for c in from_table(table)), key=lambda c: position[c.shard])
        return self.fold(checks)

    def fold(self, checks: Iterable[ShardCheck]) -> ValidationReport:
        """The report from every shard's check, given in dataset order: issues raised or quarantined in the order
        the reader finds them (footers and layouts, subjects in two files, rows), then metadata and duplicates."""
        quarantine = QuarantineReport()

        def report(issue: MedsIssue) -> None:
            if self.on_error == "raise":
                raise issue.to_error()
            if quarantine.add(issue):
                logger.warning("quarantined: %s", issue)

        seen: list[ShardCheck] = []
        for check in checks:
            for issue in check.opening:
                report(issue)
            seen.append(check)
        laid_out = [check for check in seen if check.laid_out]
        for issue in _cross_shard_issues(laid_out):
            report(issue)
        for check in laid_out:
            for issue in check.row_issues:
                report(issue)
        usable = [check for check in seen if check.usable]
        subjects = (np.unique(np.concatenate([c.subjects for c in usable])) if usable  # type: ignore[misc]
                    else np.zeros(0, np.int64))
        dropped_files, dropped_subjects = len(quarantine.files), len(quarantine.subjects)  # before the metadata's
        present = np.union1d(subjects, np.asarray(quarantine.subjects, dtype=np.int64))
        warnings = _metadata_warnings(self, quarantine, present)
        if self.duplicates:
            for check in usable:
                if check.duplicates_error is not None:
                    raise MedsFileError(check.shard, check.duplicates_error)
            warnings += [c.duplicates.warning() for c in usable if c.duplicates is not None and c.duplicates.rows]
        return ValidationReport(
            root=str(self.metadata_root), on_error=self.on_error, now=self.now, files_checked=len(self.shards),
            files_quarantined=dropped_files, subjects_checked=int(subjects.size),
            subjects_quarantined=dropped_subjects, rows_checked=sum(c.rows_checked for c in seen),
            elapsed_s=perf_counter() - self.started, quarantine=quarantine, warnings=warnings)

    @property
    def metadata_root(self) -> Path | str:
        """The dataset root as `MedsDataset.root` gives it (a local path, or a URI)."""
        location = resolve(self.root)
        return Path(self.root) if location.is_local else location.uri


def _cross_shard_issues(checks: Sequence[ShardCheck]) -> list[MedsIssue]:
    """Subjects found in more than one shard (none possible when the shards' id ranges do not overlap)."""
    ranged = sorted((int(c.subjects[0]), int(c.subjects[-1])) for c in checks  # type: ignore[index]
                    if c.subjects is not None and c.subjects.size)
    if all(high < low for (_, high), (low, _) in zip(ranged, ranged[1:])):
        return []
    return cross_shard_issues(checks)  # type: ignore[arg-type]  # uses .shard and .subjects only


METADATA_READERS = ((CODES_FILE, read_code_catalog), (DATASET_FILE, read_dataset_metadata),
                    (SPLITS_FILE, read_split_subjects))


def _metadata_warnings(step: ValidateStep, quarantine: QuarantineReport, present: np.ndarray
                       ) -> list[DatasetWarning]:
    """Read the three metadata files (raising, or recording in ``quarantine``, a broken one) and warn about missing
    ones and about a splits file that disagrees with the data (``present``: the subjects found, dropped or not)."""
    warnings: list[DatasetWarning] = []
    splits: np.ndarray | None = None
    root = step.metadata_root
    metadata_root = root if isinstance(root, Path) else resolve(root)
    for file, read in METADATA_READERS:
        try:
            found = read(metadata_root)  # type: ignore[arg-type]
        except MedsMetadataError as exc:
            if step.on_error == "raise":
                raise
            quarantine.add(MedsIssue(IssueKind.METADATA, IssueScope.FILE, exc.file, exc.problem, field=exc.field))
            continue
        if found is None:
            warnings.append(DatasetWarning(kind="metadata", file=file, problem=MISSING_METADATA[file]))
        elif file == SPLITS_FILE:
            splits = found  # type: ignore[assignment]
    if splits is not None:
        coverage = splits_coverage(splits, present)
        unreadable = sum(1 for f in quarantine.files if f in step.shards)
        warnings += [DatasetWarning(kind="splits", file=SPLITS_FILE, problem=problem, count=count)
                     for problem, count in coverage.findings(unsearched_files=unreadable)]
    return warnings


def deduplicate_dataset(root: str | Path, out: str | Path, *, now: datetime | None = None,
                        batch_size: int = DEFAULT_BATCH_SIZE) -> list[ShardDuplicates]:
    """Write a copy of the dataset at ``root`` to ``out`` without its exact duplicate rows (first copy kept, order
    kept; metadata and any other file copied unchanged). The dataset is checked first and must have no problem
    (`MedsDataError` otherwise): a copy would carry the problems along, or silently lose an unreadable file."""
    dataset = MedsDataset(root, on_error="raise", now=now, batch_size=batch_size)
    dataset.validate()
    for _, read in METADATA_READERS:
        read(dataset.root)  # a broken metadata file raises, naming itself
    return write_deduplicated(dataset.root, dataset.shards, out, batch_size=batch_size)
