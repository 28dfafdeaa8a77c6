"""`FeatureStep`: a cohort's summary features (`baselines.features`) as a shard step, so they run as a Ray task per
shard (``python -m jobs.data_steps features``) with the matrices `SummaryFeaturizer` gives in one process.

Each shard's task computes the long-format features of the label rows whose subjects live in that shard (train and
test labels both) and which labelled subjects it holds; the driver's reduce checks that every labelled subject was
found, fits the vocabulary on the training rows and assembles both matrices, exactly as
`SummaryFeaturizer.fit_transform` / `transform` over `vista.shared.meds.shard_scan.scan_shards` do. What travels is
a few values per label row and code: it follows the cohort, not the dataset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa

from baselines.features import (
    KIND_ENUM,
    SAMPLE,
    FeatureConfig,
    FeatureMatrix,
    _assemble,
    _check_subjects_present,
    _part_features,
    _targets,
    check_events,
    fit_vocabulary,
)
from baselines.labels import SUBJECT_ID, check_labels
from vista.shared.meds.shard_scan import ShardScan

__all__ = ["FeatureStep", "feature_step"]

PARTS = ("train", "test")
_SCHEMA = pa.schema([("part", pa.string()), (SAMPLE, pa.uint32()), ("kind", pa.string()), ("key", pa.string()),
                     ("value", pa.float64()), ("present", pa.int64())])
"""A shard's summary: feature rows (``present`` null) and one row per labelled subject the shard holds."""


@dataclass(frozen=True, eq=False)
class FeatureStep:
    """Settings of the step (pickled to the workers): the checked shards, the two label tables, the config."""

    scan: ShardScan
    train: pl.DataFrame
    test: pl.DataFrame
    sources: tuple[str, str] = ("training labels", "labels")
    config: FeatureConfig = field(default_factory=FeatureConfig)
    name: str = "features"

    @property
    def shards(self) -> list[Path]:
        return [Path(shard) for shard in self.scan.shards]

    def map_shard(self, shard: Path) -> pa.Table:
        events = check_events(self.scan.frame(shard.as_posix()), "MEDS events")
        tables = []
        for part, labels in zip(PARTS, (self.train, self.test)):
            present = (events.select(SUBJECT_ID).join(labels.lazy().select(SUBJECT_ID), on=SUBJECT_ID, how="semi")
                       .unique().collect())
            long = _part_features(events, _targets(labels), labels, self.config)
            tables.append(long.select(part=pl.lit(part), _sample=SAMPLE, kind=pl.col("kind").cast(pl.String),
                                      key=pl.col("key").cast(pl.String), value="value",
                                      present=pl.lit(None, pl.Int64)).to_arrow().cast(_SCHEMA))
            tables.append(present.select(part=pl.lit(part), _sample=pl.lit(None, pl.UInt32),
                                         kind=pl.lit(None, pl.String), key=pl.lit(None, pl.String),
                                         value=pl.lit(None, pl.Float64), present=SUBJECT_ID).to_arrow().cast(_SCHEMA))
        return pa.concat_tables(tables)

    def reduce(self, tables: Sequence[pa.Table]) -> tuple[FeatureMatrix, FeatureMatrix]:
        found = pl.from_arrow(pa.concat_tables(tables).cast(_SCHEMA) if tables else _SCHEMA.empty_table())
        assert isinstance(found, pl.DataFrame)
        longs = []
        for part, labels, source in zip(PARTS, (self.train, self.test), self.sources):
            rows = found.filter(pl.col("part") == part)
            present = rows.filter(pl.col("present").is_not_null()).select(pl.col("present").alias(SUBJECT_ID))
            _check_subjects_present([present.lazy()], labels, source)
            longs.append(rows.filter(pl.col("present").is_null()).select(
                SAMPLE, kind=pl.col("kind").cast(KIND_ENUM), key=pl.col("key").cast(pl.Categorical), value="value"))
        vocabulary = fit_vocabulary(longs[0], self.train.height, self.config)
        return _assemble(longs[0], self.train, vocabulary), _assemble(longs[1], self.test, vocabulary)


def feature_step(scan: ShardScan, train: pl.DataFrame, test: pl.DataFrame, *,
                 sources: tuple[str, str] = ("training labels", "labels"),
                 config: FeatureConfig | None = None) -> FeatureStep:
    """The step for these labels, checked first as `SummaryFeaturizer` checks them."""
    train = check_labels(train, sources[0], require_outcome=False)
    test = check_labels(test, sources[1], require_outcome=False)
    return FeatureStep(scan, train, test, sources, config or FeatureConfig())
