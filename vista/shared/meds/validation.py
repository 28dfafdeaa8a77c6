"""`validate_dataset`: check a whole MEDS dataset and summarise what was found (the `trajonco validate` command).

The data checks live in `vista.shared.meds.checks` (schema, values, time order) and `vista.shared.meds.layout` (subject order and
contiguity); `MedsDataset.validate` runs them shard by shard. On top of them this module

- checks the ``metadata/`` files (a broken one raises, or is quarantined like a data file);
- warns, dropping nothing, about what MEDS allows but is probably wrong: exact duplicate rows
  (`vista.shared.meds.duplicates`), a ``subject_splits.parquet`` listing subjects the data lacks or omitting subjects it
  has (`vista.shared.meds.metadata.splits_coverage`), a missing metadata file.

`deduplicate_dataset` writes a checked copy of a dataset without its exact duplicate rows.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from time import perf_counter

import numpy as np

from vista.shared.meds.duplicates import ShardDuplicates, find_duplicates, write_deduplicated
from vista.shared.meds.errors import IssueKind, IssueScope, MedsIssue, MedsMetadataError
from vista.shared.meds.metadata import read_code_catalog, read_dataset_metadata, read_subject_splits, splits_coverage
from vista.shared.meds.reader import DEFAULT_BATCH_SIZE, MedsDataset
from vista.shared.meds.reports import DatasetWarning, OnError, QuarantineReport, ValidationReport
from vista.shared.meds.schema import CODES_FILE, DATASET_FILE, SPLITS_FILE

__all__ = ["DatasetWarning", "QuarantineReport", "ValidationReport", "deduplicate_dataset", "validate_dataset"]

MISSING_METADATA: dict[str, str] = {
    CODES_FILE: "not found: codes will have no descriptions, parents or units",
    DATASET_FILE: "not found: the dataset has no name, version or ETL recorded",
    SPLITS_FILE: "not found: no subject has a split, and cohorts take their subjects from the splits",
}
"""What a missing metadata file costs (MEDS makes them optional; the tools work without them, less well)."""


def validate_dataset(root: str | Path, *, on_error: OnError = "raise", now: datetime | None = None,
                     batch_size: int = DEFAULT_BATCH_SIZE, duplicates: bool = True) -> ValidationReport:
    """Check every file, subject and row of the dataset at ``root``, then its metadata, then look for warnings.

    ``on_error="raise"`` raises `MedsDataError` at the first problem; ``"quarantine"`` records every problem, drops
    the subjects/files concerned and returns the report (``report.quarantine`` can be written as JSON or parquet).
    ``duplicates=False`` skips the search for exact duplicate rows (a second read of every column).
    """
    started = perf_counter()
    dataset = MedsDataset(root, on_error=on_error, now=now, batch_size=batch_size)
    report = dataset.validate()
    warnings = _metadata_warnings(dataset, report.quarantine)
    if duplicates:
        usable = [shard for shard in dataset.shards if shard not in set(report.quarantine.files)]
        warnings += [found.warning() for found in find_duplicates(dataset.root, usable, batch_size=batch_size)
                     if found.rows]
    return report.model_copy(update={"warnings": warnings, "elapsed_s": perf_counter() - started})


METADATA_READERS = ((CODES_FILE, read_code_catalog), (DATASET_FILE, read_dataset_metadata),
                    (SPLITS_FILE, read_subject_splits))


def _metadata_warnings(dataset: MedsDataset, quarantine: QuarantineReport) -> list[DatasetWarning]:
    """Read the three metadata files (raising, or recording in ``quarantine``, a broken one) and warn about missing
    ones and about a splits file that disagrees with the data."""
    warnings: list[DatasetWarning] = []
    splits: dict[int, str] | None = None
    for file, read in METADATA_READERS:
        try:
            found = read(dataset.root)
        except MedsMetadataError as exc:
            if dataset.on_error == "raise":
                raise
            quarantine.add(MedsIssue(IssueKind.METADATA, IssueScope.FILE, exc.file, exc.problem, field=exc.field))
            continue
        if found is None:
            warnings.append(DatasetWarning(kind="metadata", file=file, problem=MISSING_METADATA[file]))
        elif file == SPLITS_FILE:
            splits = found  # type: ignore[assignment]
    if splits is not None:
        present = np.asarray(dataset.subject_ids() + quarantine.subjects, dtype=np.int64)
        coverage = splits_coverage(np.fromiter(splits, np.int64, len(splits)), present)
        unreadable = sum(1 for f in quarantine.files if f in dataset.shards)
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
