"""Benchmark of the synthetic EHR generator: subjects, rows, wall seconds, rows/s and peak memory (measured).

Targets: 100,000 subjects in under 2 minutes on 2 cores with memory bounded by the shard size, and 20,000 default
subjects in well under 15 s with at least 400 incident lung cancers diagnosed 2+ years after the record starts.

    .venv/bin/python -m benchmarks.bench_synth --subjects 100000
    .venv/bin/python -m benchmarks.bench_synth --subjects 20000 --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from vista.shared.synth import SynthConfig, generate


def lung_cases_with_history(out: Path, years: float = 2.0) -> int:
    """Incident lung cancers (ground truth) diagnosed at least ``years`` after the start of their record."""
    s = pl.read_parquet(out / "ground_truth" / "subjects.parquet")
    lung = s.filter((pl.col("cancer") == "lung") & pl.col("is_incident_case"))
    return lung.filter((pl.col("diagnosis_date") - pl.col("record_start")).dt.total_days() >= years * 365.25).height


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subjects", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shard-size", type=int, default=10_000)
    ap.add_argument("--out", type=Path, default=None, help="output directory (default: a temporary one, removed afterwards)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = ap.parse_args(argv)

    tmp = None
    out = args.out
    if out is None:
        tmp = tempfile.mkdtemp(prefix="bench_synth_")
        out = Path(tmp)
    config = SynthConfig(n_subjects=args.subjects, seed=args.seed, workers=args.workers, shard_size=args.shard_size)
    cpu0 = os.times()
    t0 = time.perf_counter()
    summary = generate(config, out, progress=False, overwrite=True)
    wall = time.perf_counter() - t0
    cpu1 = os.times()
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    size_mb = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 1e6
    lung2y = lung_cases_with_history(out)
    figures = {
        "subjects": summary.subjects,
        "rows": summary.rows,
        "notes": summary.notes,
        "shards": summary.shards,
        "workers": args.workers,
        "wall_seconds": round(wall, 2),
        "rows_per_second": round(summary.rows / wall),
        "cpu_seconds_parent": round((cpu1.user - cpu0.user) + (cpu1.system - cpu0.system), 2),
        "cpu_seconds_workers": round((cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system), 2),
        "peak_rss_parent_mb": round(summary.parent_peak_rss_mb, 1),
        "peak_rss_workers_mb": {str(k): round(v, 1) for k, v in summary.worker_peak_rss_mb.items()},
        "peak_rss_total_mb": round(summary.parent_peak_rss_mb + sum(summary.worker_peak_rss_mb.values()), 1),
        "largest_child_rss_mb": round(children, 1),
        "dataset_mb": round(size_mb, 1),
        "incident_cases": sum(summary.incident_cases.values()),
        "incident_lung_cases_2y_history": lung2y,
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:32s} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
