"""`scan_shards`: a checked MEDS dataset as one polars LazyFrame per shard, for work that goes shard by shard.

`MedsDataset.scan` gives every row as one frame, after the reader's own validation; a step that reduces each shard
on its own (summary features of a cohort, `baselines.features`) wants the same rows split by shard, so that one
shard is in memory at a time. The frames are those of `MedsDataset.scan` — the five MEDS columns, quarantined
files and subjects left out, codes in canonical spelling — and the dataset is checked first with
`vista.shared.meds.validation.validate_dataset` (shard by shard, in parallel).

>>> import tempfile
>>> from datetime import datetime
>>> import pyarrow as pa, pyarrow.parquet as pq
>>> root = Path(tempfile.mkdtemp()); (root / "data").mkdir()
>>> for shard, sid in enumerate([1, 2]):
...     pq.write_table(pa.table({"subject_id": pa.array([sid], pa.int64()),
...         "time": pa.array([datetime(2020, 1, sid)], pa.timestamp("us")), "code": ["LOINC//718-7"],
...         "numeric_value": pa.array([1.5], pa.float32())}), root / "data" / f"{shard}.parquet")
>>> [frame.collect()["subject_id"].to_list() for frame in scan_shards(root)]
[[1], [2]]
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import polars as pl

from vista.shared.coding import CodingProfile
from vista.shared.meds.reader import POLARS_SCHEMA, MedsDataset, canonical_codes
from vista.shared.meds.reports import OnError
from vista.shared.meds.schema import SUBJECT_ID
from vista.shared.meds.validation import validate_dataset
from vista.shared.storage import StorageError

__all__ = ["ShardScan", "checked_shards", "scan_shards"]


@dataclass(frozen=True, eq=False)
class ShardScan:
    """A checked dataset's usable shards and how to read each as `MedsDataset.scan` reads it (settings only: a
    shard step carries it to the Ray workers)."""

    root: str
    shards: tuple[str, ...]
    profile: CodingProfile
    dropped_subjects: tuple[int, ...]

    def frame(self, shard: str) -> pl.LazyFrame:
        """One shard's rows: the five MEDS columns, quarantined subjects left out, codes in canonical spelling."""
        frame = pl.scan_parquet(str(Path(self.root) / shard), schema=POLARS_SCHEMA, missing_columns="insert",
                                extra_columns="ignore")
        if self.dropped_subjects:
            frame = frame.filter(~pl.col(SUBJECT_ID).is_in(list(self.dropped_subjects)))
        return canonical_codes(frame, self.profile)


def checked_shards(root: str | Path, *, profile: str | Path | CodingProfile | None = None,
                   on_error: OnError = "raise", now: datetime | None = None) -> ShardScan:
    """The dataset at ``root`` checked (`validate_dataset`, duplicates aside) and its usable shards, as `ShardScan`.

    ``on_error`` as in `validate_dataset`: the first problem raises, or the subjects and files concerned are left
    out. ``profile`` as in `MedsDataset` (detected when None).
    """
    dataset = MedsDataset(root, on_error=on_error, now=now, profile=profile)
    if not dataset.location.is_local:
        raise StorageError(f"{dataset.root}: scanning a whole dataset (cohort building, features) over object storage "
                           "is not supported yet; copy the dataset to a local or shared path")
    report = validate_dataset(root, on_error=on_error, now=dataset.now, duplicates=False)
    dropped_files = set(report.quarantine.files)
    return ShardScan(str(root), tuple(s for s in dataset.shards if s not in dropped_files), dataset.profile,
                     tuple(report.quarantine.subjects))


def scan_shards(root: str | Path, *, profile: str | Path | CodingProfile | None = None, on_error: OnError = "raise",
                now: datetime | None = None) -> list[pl.LazyFrame]:
    """The usable shards of the dataset at ``root`` as LazyFrames (dataset order), after checking every row (see
    `checked_shards`)."""
    scan = checked_shards(root, profile=profile, on_error=on_error, now=now)
    return [scan.frame(shard) for shard in scan.shards]
