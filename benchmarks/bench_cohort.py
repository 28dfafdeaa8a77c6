"""Cohort build speed at scale: a 100k-subject / ~10M-row MEDS dataset, lung and any-cancer definitions.

Writes a plain random MEDS dataset (vectorised numpy, no clinical realism — only the row count and layout matter
here), then times `build_cohort` and prints rows/s and peak memory. Run: ``python -m benchmarks.bench_cohort``.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from trajonco.cohorts import build_cohort, load_definition
from vista.shared.meds import schema

OTHER_CODES = np.array(
    [f"LOINC//{i}-{i % 9}" for i in range(200)]
    + [f"ICD10CM//E{i:02d}.{i % 10}" for i in range(100)]
    + [f"RXNORM//{1000 + i}" for i in range(200)]
)
LUNG_CODES = np.array(["ICD10CM//C34.11", "ICD10CM//C34.90", "ICD9CM//162.3"])
BREAST_CODES = np.array(["ICD10CM//C50.911", "ICD10CM//C50.412"])


def write_random_dataset(
    root: Path,
    n_subjects: int,
    *,
    visits_mean: float = 20.0,
    codes_per_visit: int = 4,
    shard_subjects: int = 10_000,
    seed: int = 0,
) -> int:
    """Write a MEDS dataset with ≈ n·(2 + visits·(1 + codes)) rows; returns the row count."""
    rng = np.random.default_rng(seed)
    base = np.datetime64("2005-01-01T09:00", "us")
    day = np.timedelta64(1, "D").astype("timedelta64[us]")
    (root / "metadata").mkdir(parents=True, exist_ok=True)
    split_names = rng.choice(["train", "tuning", "held_out"], size=n_subjects, p=[0.7, 0.1, 0.2])
    pq.write_table(
        pa.table(
            {"subject_id": np.arange(n_subjects, dtype=np.int64), "split": split_names},
            schema=schema.SUBJECT_SPLIT_SCHEMA,
        ),
        root / schema.SPLITS_FILE,
    )
    total = 0
    for shard, lo in enumerate(range(0, n_subjects, shard_subjects)):
        ids = np.arange(lo, min(lo + shard_subjects, n_subjects), dtype=np.int64)
        n = ids.size
        n_visits = np.maximum(rng.poisson(visits_mean, n), 1)
        visit_sid = np.repeat(ids, n_visits)
        starts = rng.integers(0, 3000, n)
        gaps = rng.exponential(90.0, visit_sid.size).astype(np.int64) + 1
        first_of_subject = np.r_[0, np.cumsum(n_visits)[:-1]]
        gaps[first_of_subject] = 0
        offsets = np.cumsum(gaps)
        offsets -= np.repeat(offsets[first_of_subject], n_visits)
        visit_time = base + (np.repeat(starts, n_visits) + offsets) * day
        code_sid = np.repeat(visit_sid, codes_per_visit)
        code_time = np.repeat(visit_time, codes_per_visit)
        codes = rng.choice(OTHER_CODES, code_sid.size)
        # 3 % lung and 2 % breast: two codes 20 days apart at a random visit
        target_sid, target_time, target_code = [], [], []
        for share, vocabulary in ((0.03, LUNG_CODES), (0.02, BREAST_CODES)):
            pick = rng.random(n) < share
            at_visit = first_of_subject[pick] + (rng.random(pick.sum()) * n_visits[pick]).astype(np.int64)
            for extra_days in (0, 20):
                target_sid.append(ids[pick])
                target_time.append(visit_time[at_visit] + extra_days * day)
                target_code.append(rng.choice(vocabulary, pick.sum()))
        births = base - rng.integers(30 * 365, 85 * 365, n) * day
        sid = np.concatenate([ids, ids, visit_sid, code_sid, *target_sid])
        t = np.concatenate(
            [np.full(n, np.datetime64("NaT"), "datetime64[us]"), births, visit_time, code_time, *target_time]
        )
        code = np.concatenate(
            [
                rng.choice(["GENDER//F", "GENDER//M"], n),
                np.full(n, schema.BIRTH_CODE),
                np.full(visit_sid.size, "ENCOUNTER//AMB"),
                codes,
                *target_code,
            ]
        )
        order = np.lexsort((np.where(np.isnat(t), np.datetime64("1700-01-01", "us"), t), sid))
        table = pa.table(
            {
                "subject_id": sid[order],
                "time": pa.array(t[order], type=pa.timestamp("us")),
                "code": code[order],
                "numeric_value": pa.nulls(sid.size, pa.float32()),
                "text_value": pa.nulls(sid.size, pa.large_string()),
            },
            schema=schema.DATA_SCHEMA,
        )
        (root / "data").mkdir(exist_ok=True)
        pq.write_table(table, root / "data" / f"{shard}.parquet")
        total += table.num_rows
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--subjects", type=int, default=100_000)
    parser.add_argument("--dataset", type=Path, help="reuse/write the dataset here instead of a temporary folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.dataset or Path(tmp) / "meds"
        started = time.perf_counter()
        rows = write_random_dataset(root, args.subjects) if not (root / "data").exists() else None
        if rows is not None:
            print(f"wrote {rows:,} rows for {args.subjects:,} subjects in {time.perf_counter() - started:.1f} s")
        for name in ("lung", "any_cancer"):
            started = time.perf_counter()
            result = build_cohort(root, load_definition(name), Path(tmp) / f"cohort-{name}")
            seconds = time.perf_counter() - started
            m = result.manifest
            train = m.train.cases if m.train else 0
            print(
                f"{name:>10}: {seconds:5.2f} s  test {m.test.cases} cases/{m.test.controls} controls,"
                f" train {train} cases" + (f", {rows / seconds / 1e6:.1f} M rows/s" if rows else "")
            )
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak resident memory {peak:,.0f} MiB (includes writing the dataset)")


if __name__ == "__main__":
    main()
