"""Summary features computed shard by shard (`scan_shards`) equal those computed over the whole scan."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from baselines.errors import EventDataError
from baselines.features import FeatureConfig, SummaryFeaturizer, window_features
from vista.shared.meds.reader import MedsDataset
from vista.shared.meds.shard_scan import scan_shards


@pytest.fixture(scope="module")
def synth_root(tmp_path_factory):
    from vista.shared.synth import SynthConfig, generate

    root = tmp_path_factory.mktemp("features_shards") / "meds"
    generate(SynthConfig(n_subjects=60, seed=11, workers=1), root, progress=False)
    return root


def _labels(events: pl.LazyFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    spans = (events.filter(pl.col("time").is_not_null()).group_by("subject_id")
             .agg(first=pl.col("time").min(), last=pl.col("time").max()).sort("subject_id").collect())
    rng = np.random.default_rng(0)
    labels = spans.select("subject_id", prediction_time=(pl.col("first") + (pl.col("last") - pl.col("first"))
                                                         * pl.Series(rng.random(spans.height)) + timedelta(days=1))
                          .dt.cast_time_unit("us"),
                          boolean_value=pl.Series(rng.random(spans.height) < 0.5))
    return labels.filter(pl.col("subject_id") % 4 != 0), labels.filter(pl.col("subject_id") % 4 == 0)


def test_features_shard_by_shard_equal_the_whole_scan(synth_root):
    whole = MedsDataset(synth_root).scan()
    shards = scan_shards(synth_root)
    assert len(shards) > 1
    train, test = _labels(whole)
    reference, sharded = SummaryFeaturizer(), SummaryFeaturizer()
    expected = [reference.fit_transform(whole, train), reference.transform(whole, test)]
    found = [sharded.fit_transform(shards, train), sharded.transform(shards, test)]
    for a, b in zip(expected, found):
        assert a.feature_names == b.feature_names and len(a.feature_names) > 20
        assert (a.X != b.X).nnz == 0 and a.X.nnz > 0
        assert np.array_equal(a.subject_ids, b.subject_ids) and np.array_equal(a.y, b.y)
    order = ["_sample", "kind", pl.col("key").cast(pl.String)]
    long_whole = window_features(whole, train, FeatureConfig()).sort(order)
    long_shards = window_features(shards, train, FeatureConfig()).sort(order)
    assert long_whole.with_columns(pl.col("key").cast(pl.String)).equals(
        long_shards.with_columns(pl.col("key").cast(pl.String)))


def test_a_labelled_subject_missing_from_every_shard_is_named(synth_root):
    shards = scan_shards(synth_root)
    train, _ = _labels(MedsDataset(synth_root).scan())
    ghost = train.head(1).with_columns(subject_id=pl.lit(10**9, pl.Int64))
    with pytest.raises(EventDataError, match="1 labelled subject"):
        SummaryFeaturizer().fit(shards, pl.concat([train, ghost]))


def test_the_feature_step_in_one_process_equals_the_featurizer(synth_root):
    from baselines.feature_step import feature_step
    from vista.shared.meds.shard_scan import checked_shards
    from vista.shared.meds.shard_step import run_local

    shards = scan_shards(synth_root)
    train, test = _labels(MedsDataset(synth_root).scan())
    featurizer = SummaryFeaturizer()
    expected = [featurizer.fit_transform(shards, train), featurizer.transform(shards, test)]
    step = feature_step(checked_shards(synth_root), train, test)
    for a, b in zip(expected, run_local(step, step.shards)):
        assert a.feature_names == b.feature_names and (a.X != b.X).nnz == 0 and a.X.nnz > 0
        assert np.array_equal(a.subject_ids, b.subject_ids) and np.array_equal(a.prediction_times, b.prediction_times)
