"""The polars featurizer and the benchmark's independent pandas version give the same matrices on random MEDS data."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from baselines.features import SummaryFeaturizer
from benchmarks.bench_features import max_abs_difference, pandas_featurize
from vista.shared.meds.schema import DATA_SCHEMA


def random_meds(root, n_subjects: int, seed: int):
    """Shards of random patients (static sex, birth, visits with diagnoses and labs, some same-time ties) + labels."""
    rng = np.random.default_rng(seed)
    codes = [f"ICD10CM//C{i:02d}" for i in range(30)] + [f"LOINC//{i}-0" for i in range(6)] + ["ENCOUNTER//AMB"]
    rows, labels = [], []
    for sid in range(n_subjects):
        start = datetime(2010, 1, 1) + timedelta(days=int(rng.integers(0, 2000)))
        rows.append((sid, None, "GENDER//" + "FM"[int(rng.integers(2))], None, None))
        if rng.random() < 0.95:  # a few subjects without a birth row
            rows.append((sid, start - timedelta(days=int(rng.integers(7000, 30000))), "MEDS_BIRTH", None, None))
        for _ in range(int(rng.integers(1, 40))):
            code = codes[int(rng.choice(len(codes), p=np.r_[np.full(36, 0.8 / 36), 0.2]))]
            when = start + timedelta(days=int(rng.integers(0, 1500)), hours=int(rng.integers(0, 3)))
            value = float(rng.integers(0, 50)) / 4 if code.startswith("LOINC") else None
            rows.append((sid, when, code, value, None))
        labels.append((sid, start + timedelta(days=int(rng.integers(0, 1600))), bool(rng.random() < 0.5)))
    rows.sort(key=lambda r: (r[0], r[1] is not None, r[1] or datetime.min))
    table = pl.DataFrame(rows, schema=["subject_id", "time", "code", "numeric_value", "text_value"], orient="row",
                         schema_overrides={"time": pl.Datetime("us"), "numeric_value": pl.Float32}).to_arrow()
    (root / "data").mkdir(parents=True)
    half = table.num_rows // 2
    cut = int(np.searchsorted(table["subject_id"].to_numpy(), table["subject_id"][half].as_py()))
    files = [root / "data" / "0.parquet", root / "data" / "1.parquet"]
    pq.write_table(table.slice(0, cut).cast(DATA_SCHEMA), files[0])
    pq.write_table(table.slice(cut).cast(DATA_SCHEMA), files[1])
    label_frame = pl.DataFrame(labels, schema=["subject_id", "prediction_time", "boolean_value"], orient="row",
                               schema_overrides={"prediction_time": pl.Datetime("us")})
    return files, label_frame


def test_polars_and_pandas_featurizers_agree(tmp_path):
    files, labels = random_meds(tmp_path, 400, seed=11)
    train, test = labels.filter(pl.col("subject_id") % 5 != 0), labels.filter(pl.col("subject_id") % 5 == 0)
    events = pl.scan_parquet(files)
    featurizer = SummaryFeaturizer()
    X_train, X_test = featurizer.fit_transform(events, train), featurizer.transform(events, test)
    P_train, P_test, names = pandas_featurize(files, train.to_pandas(), test.to_pandas())
    assert tuple(names) == X_train.feature_names
    assert len(names) > 50 and X_train.X.nnz > 5000
    assert max_abs_difference(P_train, X_train.X) < 1e-4
    assert max_abs_difference(P_test, X_test.X) < 1e-4
