"""Benchmark: summary features of 100,000 patients (≥ 10M MEDS rows) with polars, against a plain pandas version.

Builds (once, cached under /tmp) a synthetic MEDS dataset with `vista.shared.synth`, gives every subject one label row
(a seeded prediction time inside its record), splits the subjects 80:20 into training and test labels, then times

- ``polars``: `SummaryFeaturizer.fit_transform` on the training labels + `transform` on the test labels, over
  `MedsDataset(root).scan()` (the dataset's validation is timed separately: it runs once per dataset);
- ``pandas``: `pandas_featurize`, the same features written the straightforward pandas way (read the shards,
  merge with the labels, filter the window, ``groupby`` per feature family).

It checks that both give the same matrices and prints rows, seconds, rows/s and the pandas / polars ratio.

    python -m benchmarks.bench_features                 # 100,000 subjects (target: polars < 60 s)
    python -m benchmarks.bench_features --subjects 10000 --no-pandas
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import scipy.sparse as sp

from baselines.features import AGE_KEY, DAYS_PER_YEAR, ENCOUNTER_PREFIX, FeatureConfig, FeatureKind, SummaryFeaturizer
from vista.shared.meds import schema

SID, TIME, CODE, VALUE = schema.SUBJECT_ID, schema.TIME, schema.CODE, schema.NUMERIC_VALUE
PT = "prediction_time"
TARGET_SECONDS = 60.0
MIN_ROWS = 10_000_000


# ------------------------------------------------------------------------------------------------ data
def cached_dataset(n_subjects: int, seed: int, cache: Path) -> Path:
    """A synthetic MEDS dataset of ``n_subjects``, generated once into ``cache`` (reused while the config matches)."""
    from vista.shared.synth import SynthConfig, generate

    config = SynthConfig(n_subjects=n_subjects, seed=seed, workers=2)
    marker = cache / "bench_config.json"
    wanted = config.model_dump_json()
    if marker.is_file() and marker.read_text() == wanted:
        return cache
    print(f"generating {n_subjects:,} synthetic subjects into {cache} (once) ...", flush=True)
    started = time.perf_counter()
    generate(config, cache, progress=False, overwrite=True)
    marker.write_text(wanted)
    print(f"  generated in {time.perf_counter() - started:.0f} s", flush=True)
    return cache


def benchmark_labels(events: pl.LazyFrame, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One label row per subject: prediction time uniformly inside its record, random outcome; 80:20 subject split."""
    spans = (events.filter(pl.col(TIME).is_not_null() & (pl.col(CODE) != schema.BIRTH_CODE))
             .group_by(SID).agg(first=pl.col(TIME).min(), last=pl.col(TIME).max()).sort(SID).collect())
    rng = np.random.default_rng(seed)
    u = rng.random(spans.height)
    labels = spans.select(
        SID,
        (pl.col("first") + (pl.col("last") - pl.col("first")) * pl.Series(u) + pl.duration(days=1)).alias(PT),
        boolean_value=pl.Series(rng.random(spans.height) < 0.5),
    ).with_columns(pl.col(PT).dt.cast_time_unit("us"))
    is_test = pl.Series(rng.random(labels.height) < 0.2)
    return labels.filter(~is_test), labels.filter(is_test)


# ------------------------------------------------------------------------------------------------ pandas reference
def _pandas_long(events: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    """The long-format features (sample, kind, key, value) of ``labels``, computed with pandas."""
    lab = labels[[SID, PT]].copy()
    lab["sample"] = np.arange(len(lab))
    window = events.merge(lab, on=SID, how="inner")
    window = window[window[TIME].isna() | (window[TIME] < window[PT])]
    timed = window[window[TIME].notna()]
    clinical = timed[timed[CODE] != schema.BIRTH_CODE]
    parts = []

    per_code = clinical.groupby(["sample", CODE], observed=True).agg(
        n=(TIME, "size"), last=(TIME, "max"), pt=(PT, "first")).reset_index()
    parts.append(pd.DataFrame({"sample": per_code["sample"], "kind": FeatureKind.COUNT.value, "key": per_code[CODE],
                               "value": per_code["n"].astype(float)}))
    years = (per_code["pt"] - per_code["last"]).dt.total_seconds() / 86400 / DAYS_PER_YEAR
    parts.append(pd.DataFrame({"sample": per_code["sample"], "kind": FeatureKind.RECENCY.value, "key": per_code[CODE],
                               "value": 1.0 / (1.0 + years)}))

    labs = clinical[clinical[VALUE].notna()].sort_values(["sample", CODE, TIME, VALUE])
    last = labs.groupby(["sample", CODE], observed=True)[VALUE].last().reset_index()
    parts.append(pd.DataFrame({"sample": last["sample"], "kind": FeatureKind.LAST_VALUE.value, "key": last[CODE],
                               "value": last[VALUE].astype(float)}))

    static = window[window[TIME].isna()][["sample", CODE]].drop_duplicates()
    parts.append(pd.DataFrame({"sample": static["sample"], "kind": FeatureKind.STATIC.value, "key": static[CODE],
                               "value": 1.0}))

    birth = timed[timed[CODE] == schema.BIRTH_CODE].groupby("sample").agg(birth=(TIME, "min"), pt=(PT, "first"))
    age = (birth["pt"].dt.normalize() - birth["birth"].dt.normalize()).dt.days / DAYS_PER_YEAR
    parts.append(pd.DataFrame({"sample": birth.index, "kind": FeatureKind.DEMOGRAPHIC.value, "key": AGE_KEY,
                               "value": age.to_numpy()}))

    clinical = clinical.assign(day=clinical[TIME].dt.normalize())
    grouped = clinical.groupby("sample")
    summary = pd.DataFrame({
        "n_events": grouped.size().astype(float),
        "event_days": grouped["day"].nunique(),
        "record_years": (grouped[PT].first() - grouped[TIME].min()).dt.total_seconds() / 86400 / DAYS_PER_YEAR,
    })
    visit_days = clinical[clinical[CODE].str.startswith(ENCOUNTER_PREFIX)].groupby("sample")["day"].nunique()
    summary["visit_days"] = visit_days.reindex(summary.index).fillna(0)
    has_visits = summary["visit_days"] > 0
    summary["n_visit_days"] = np.where(has_visits, summary["visit_days"], summary["event_days"]).astype(float)
    for key in ("n_events", "n_visit_days", "record_years"):
        parts.append(pd.DataFrame({"sample": summary.index, "kind": FeatureKind.SUMMARY.value, "key": key,
                                   "value": summary[key].to_numpy()}))
    return pd.concat(parts, ignore_index=True)


def _pandas_matrix(long: pd.DataFrame, n_rows: int, names: list[str]) -> sp.csr_matrix:
    column = pd.Series(np.arange(len(names)), index=names)
    full = long["kind"] + ":" + long["key"].astype(str)
    keep = full.isin(column.index)
    cols = column.loc[full[keep]].to_numpy()
    return sp.csr_matrix((long.loc[keep, "value"].to_numpy(np.float32), (long.loc[keep, "sample"].to_numpy(), cols)),
                         shape=(n_rows, len(names)))


def pandas_featurize(data_files: list[Path], train: pd.DataFrame, test: pd.DataFrame,
                     min_prevalence: float = 0.01) -> tuple[sp.csr_matrix, sp.csr_matrix, list[str]]:
    """Training and test matrices and feature names, computed with pandas (the straightforward way)."""
    events = pd.concat([pd.read_parquet(f, columns=[SID, TIME, CODE, VALUE]) for f in data_files], ignore_index=True)
    events[TIME] = events[TIME].astype("datetime64[us]")
    train_long = _pandas_long(events, train)
    presence = train_long.groupby(["kind", "key"]).size()
    min_count = FeatureConfig(min_prevalence=min_prevalence).min_count(len(train))
    kind_order = {k.value: i for i, k in enumerate(FeatureKind)}
    kept = sorted(((k, key) for (k, key), n in presence.items() if n >= min_count),
                  key=lambda kind_key: (kind_order[kind_key[0]], kind_key[1]))
    names = [f"{k}:{key}" for k, key in kept]
    test_long = _pandas_long(events, test)
    return _pandas_matrix(train_long, len(train), names), _pandas_matrix(test_long, len(test), names), names


# ------------------------------------------------------------------------------------------------ run
def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def max_abs_difference(a: sp.csr_matrix, b: sp.csr_matrix) -> float:
    diff = (a.astype(np.float64) - b.astype(np.float64)).tocsr()
    return float(np.abs(diff.data).max()) if diff.nnz else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subjects", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", type=Path, default=None, help="dataset cache (default /tmp/trajonco-bench/synth-<N>)")
    parser.add_argument("--no-pandas", action="store_true", help="skip the pandas comparison")
    args = parser.parse_args(argv)
    from vista.shared.meds.reader import MedsDataset

    root = cached_dataset(args.subjects, args.seed, args.cache or Path(f"/tmp/trajonco-bench/synth-{args.subjects}"))
    started = time.perf_counter()
    dataset = MedsDataset(root)
    events = dataset.scan()
    validate_s = time.perf_counter() - started
    n_rows = events.select(pl.len()).collect().item()
    train, test = benchmark_labels(events, args.seed)
    print(f"dataset {root}: {args.subjects:,} subjects, {n_rows:,} rows, {len(dataset.shards)} shards "
          f"(validated in {validate_s:.1f} s); labels: {train.height:,} training + {test.height:,} test rows")

    started = time.perf_counter()
    featurizer = SummaryFeaturizer()
    X_train = featurizer.fit_transform(events, train)
    X_test = featurizer.transform(events, test)
    polars_s = time.perf_counter() - started
    polars_rss = _peak_rss_mb()
    vocabulary = featurizer.vocabulary
    assert vocabulary is not None
    print(f"polars : {polars_s:7.2f} s  ({n_rows / polars_s / 1e6:5.2f} M rows/s, peak RSS {polars_rss:,.0f} MB) "
          f"→ train {X_train.X.shape} nnz {X_train.X.nnz:,}, test {X_test.X.shape}; "
          f"{len(vocabulary.names)} of {vocabulary.candidates} candidate features kept (≥ {vocabulary.min_count} rows)")
    if args.subjects >= 100_000:
        verdict = "PASS" if polars_s < TARGET_SECONDS and n_rows >= MIN_ROWS else "FAIL"
    else:
        verdict = "n/a (the target is for 100,000 subjects)"
    print(f"target : {args.subjects:,} patients, >= {MIN_ROWS:,} rows in < {TARGET_SECONDS:.0f} s on 2 cores: {verdict}")

    result = {"subjects": args.subjects, "rows": n_rows, "validate_s": round(validate_s, 2), "polars_s": round(polars_s, 2),
              "features": len(vocabulary.names), "verdict": verdict}
    if not args.no_pandas:
        started = time.perf_counter()
        files = [root / s for s in dataset.shards]
        P_train, P_test, names = pandas_featurize(files, train.to_pandas(), test.to_pandas())
        pandas_s = time.perf_counter() - started
        same = (tuple(names) == X_train.feature_names and max_abs_difference(P_train, X_train.X) < 1e-4
                and max_abs_difference(P_test, X_test.X) < 1e-4)
        print(f"pandas : {pandas_s:7.2f} s  ({n_rows / pandas_s / 1e6:5.2f} M rows/s, peak RSS {_peak_rss_mb():,.0f} MB) "
              f"→ same matrices: {same}")
        print(f"ratio  : pandas / polars = {pandas_s / polars_s:.1f}×")
        result.update(pandas_s=round(pandas_s, 2), ratio=round(pandas_s / polars_s, 2), same_matrices=same)
        if not same:
            print("ERROR: pandas and polars matrices differ", file=sys.stderr)
            print(json.dumps(result))
            return 1
    print(json.dumps(result))
    return 0 if verdict != "FAIL" else 1


if __name__ == "__main__":
    sys.exit(main())
