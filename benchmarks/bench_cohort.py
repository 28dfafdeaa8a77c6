"""Cohort build speed at scale: a 100k-subject / ~10M-row MEDS dataset, lung and any-cancer definitions.

Writes a plain random MEDS dataset (vectorised numpy, no clinical realism — only the row count and layout matter
here), then times `build_cohort` and prints rows/s and peak memory. Run: ``python -m benchmarks.bench_cohort``.

``--side-by-side`` instead runs, each in a fresh process, the honest alternative — one polars streaming pass over
the same shards (per subject: rows, first/last time, first lung code) — and ``trajonco cohort lung``, alternating
``--repeat`` times, and prints wall, CPU-s (the process's own getrusage: both run in one process) and peak RSS side
by side with the ratios. The machine is shared: CPU-s and peak RSS are the figures to trust, wall is indicative.

    python -m benchmarks.bench_cohort --dataset /work/scale-data/1m --subjects 1000000 --side-by-side --repeat 2
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
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


POLARS_PASS = """
import sys, polars as pl
rows = pl.scan_parquet(sys.argv[1] + "/data/*.parquet")
lung = pl.col("code").str.starts_with("ICD10CM//C34") | pl.col("code").str.starts_with("ICD9CM//162")
summary = rows.group_by("subject_id").agg(
    rows=pl.len(), first_time=pl.col("time").min(), last_time=pl.col("time").max(),
    first_lung=pl.col("time").filter(lung).min(),
).collect(engine="streaming")
print(f"{summary.height} subjects")
"""
COHORT = "import sys; from trajonco.cli import main; sys.exit(main(sys.argv[1:]))"


@dataclass(frozen=True)
class Usage:
    """One fresh process: wall seconds, CPU seconds (user + system) and peak resident memory (MiB)."""

    wall_s: float
    cpu_s: float
    peak_mib: float


def measured(command: list[str], *, pythonpath: Path | None = None) -> Usage:
    """Run ``command`` as a child and read its own rusage (``wait4``): CPU and peak RSS of that process
    (``pythonpath``: import the project from that checkout instead)."""
    env = None if pythonpath is None else {**os.environ, "PYTHONPATH": str(pythonpath)}
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{command[:4]} exited with {os.waitstatus_to_exitcode(status)}")
    return Usage(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def side_by_side(root: Path, definition: str, repeat: int, before: Path | None = None) -> None:
    """The polars pass and the cohort build (and the build of the ``before`` checkout), alternating, each in a fresh
    process; one line each, then the ratios."""
    cohort = [sys.executable, "-c", COHORT, "cohort", definition, "--dataset", str(root), "--overwrite", "--out"]
    runs: dict[str, list[Usage]] = {"polars streaming pass": [], f"trajonco cohort {definition}": []}
    if before is not None:
        runs["  the same, --before"] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeat):
            runs["polars streaming pass"].append(measured([sys.executable, "-c", POLARS_PASS, str(root)]))
            runs[f"trajonco cohort {definition}"].append(measured([*cohort, f"{tmp}/cohort"]))
            if before is not None:
                runs["  the same, --before"].append(measured([*cohort, f"{tmp}/before"], pythonpath=before))
    best = {name: min(found, key=lambda u: u.wall_s) for name, found in runs.items()}
    print(f"{'step':<26} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9}   (best wall of {repeat}; every run's wall)")
    for name, usage in best.items():
        walls = ", ".join(f"{u.wall_s:.1f}" for u in runs[name])
        print(f"{name:<26} {usage.wall_s:8.1f} {usage.cpu_s:8.1f} {usage.peak_mib:9,.0f}   ({walls})")
    base, cohort = list(best.values())[:2]
    print(f"cohort / pass: wall {cohort.wall_s / base.wall_s:.2f}x, CPU {cohort.cpu_s / base.cpu_s:.2f}x,"
          f" peak RSS {cohort.peak_mib / base.peak_mib:.2f}x")


SCALE_DATA = Path("/work/scale-data")
"""Where the scale benchmarks share their datasets (one per size, written once by whichever runs first)."""


def size_name(n_subjects: int) -> str:
    """``100k``, ``1m``, ``10m``… (the folder of a size under `SCALE_DATA`).

    >>> size_name(100_000), size_name(1_000_000), size_name(2_500)
    ('100k', '1m', '2500')
    """
    for unit, scale in (("m", 1_000_000), ("k", 1_000)):
        if n_subjects % scale == 0:
            return f"{n_subjects // scale}{unit}"
    return str(n_subjects)


def write_shared_dataset(root: Path, n_subjects: int) -> None:
    """Write the dataset under a temporary name beside ``root`` and rename it into place (several runs may share
    ``root``: the first to finish wins, the others' copies are dropped)."""
    partial = root.with_name(f"{root.name}.partial-{os.getpid()}")
    started = time.perf_counter()
    rows = write_random_dataset(partial, n_subjects)
    try:
        partial.rename(root)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
    print(f"wrote {rows:,} rows for {n_subjects:,} subjects in {time.perf_counter() - started:.0f} s to {root}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subjects", type=int, default=100_000)
    parser.add_argument("--dataset", type=Path, help="reuse/write the dataset here instead of a temporary folder")
    parser.add_argument("--side-by-side", action="store_true",
                        help="time the polars pass and `trajonco cohort` in fresh processes instead (see above)")
    parser.add_argument("--definition", default="lung", help="--side-by-side: the cohort definition (default lung)")
    parser.add_argument("--repeat", type=int, default=1, help="--side-by-side: runs of each, alternating")
    parser.add_argument("--before", type=Path, help="--side-by-side: also time the cohort of this checkout (e.g. "
                        "`git archive REV | tar -x -C DIR`)")
    args = parser.parse_args()
    if args.side_by_side:
        root = args.dataset or SCALE_DATA / size_name(args.subjects)
        if not (root / "data").exists():
            write_shared_dataset(root, args.subjects)
        side_by_side(root, args.definition, args.repeat, args.before)
        return
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
