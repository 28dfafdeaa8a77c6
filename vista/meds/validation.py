"""`validate_dataset`: check a whole MEDS dataset and summarise what was found (the `trajonco validate` command).

The checks themselves live in `vista.meds.checks` (schema, values, time order) and `vista.meds.layout` (subject
order and contiguity); `MedsDataset.validate` runs them shard by shard, reading every column but the note text.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from vista.meds.reader import DEFAULT_BATCH_SIZE, MedsDataset
from vista.meds.reports import OnError, QuarantineReport, ValidationReport

__all__ = ["QuarantineReport", "ValidationReport", "validate_dataset"]


def validate_dataset(root: str | Path, *, on_error: OnError = "raise", now: datetime | None = None,
                     batch_size: int = DEFAULT_BATCH_SIZE) -> ValidationReport:
    """Check every file, subject and row of the dataset at ``root``.

    ``on_error="raise"`` raises `MedsDataError` at the first problem; ``"quarantine"`` records every problem, drops
    the subjects/files concerned and returns the report (``report.quarantine`` can be written as JSON or parquet).
    """
    return MedsDataset(root, on_error=on_error, now=now, batch_size=batch_size).validate()
