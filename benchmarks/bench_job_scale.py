"""Benchmark: a job's cost follows its cohort — ``jobs.build_graphs --stages graph --limit 100`` on a 100k- and a
1M-subject MEDS dataset, side by side, with the 1M/100k ratio.

``--limit N`` takes the N lowest subject ids, read from the shards whose footer statistics say they may hold them
(`vista.shared.meds.subjects.first_subjects`); beside it, the same job with ``--sample 100``, which still lists every
subject of the dataset first (on Ray, a task per shard), as ``--limit`` did before — an upper bound of that cost, not
the same run: the sampled patients are spread over every shard, so the actors also read more shards' layouts. Each job runs under
`benchmarks.tree_cpu` on its own local Ray (wall from launch to exit, Ray's start-up included; CPU of the whole
process tree: driver, raylet, GCS, workers) with a fresh output directory; the driver's peak RSS is its own
``ru_maxrss``. The datasets are `benchmarks.bench_cohort`'s writer (about 102 rows a subject, shards of 10k
subjects), written once under ``--data`` (to a temporary name, then renamed: a complete dataset is reused). On a
loaded machine compare CPU-s and RSS, not wall. Figures are printed, not asserted.

    python -m benchmarks.bench_job_scale                       # 100k and 1M subjects (~8 minutes on 2 cores)
    python -m benchmarks.bench_job_scale --sizes 100000 --limit 20
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.bench_anchor import job_env
from benchmarks.bench_cohort import write_random_dataset
from benchmarks.tree_cpu import TreeUsage, run_counted

DRIVER = """import resource, runpy, sys
sys.argv = ["jobs.build_graphs", *sys.argv[1:]]
try:
    runpy.run_module("jobs.build_graphs", run_name="__main__")
finally:
    print(f"driver peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss} KiB", flush=True)
"""


@dataclass(frozen=True, slots=True)
class Run:
    """One counted job."""

    usage: TreeUsage
    driver_mib: float
    ran: int  # tasks the job ran (its summary's "ran")


def dataset(root: Path, subjects: int) -> Path:
    """``root/<name>``: reused when complete, else written to a temporary name and renamed (another writer may race)."""
    name = f"{subjects // 1_000_000}m" if subjects % 1_000_000 == 0 else f"{subjects // 1000}k"
    final = root / name
    if (final / "data").is_dir() and (final / "metadata").is_dir():
        return final
    root.mkdir(parents=True, exist_ok=True)
    scratch = root / f".{name}.tmp-{os.getpid()}"
    rows = write_random_dataset(scratch, subjects)
    try:
        scratch.rename(final)
        print(f"wrote {final}: {rows:,} rows", flush=True)
    except OSError:  # written meanwhile by someone else
        shutil.rmtree(scratch, ignore_errors=True)
    return final


def counted(data: Path, choice: list[str], timeout_s: float) -> Run:
    """``jobs.build_graphs --stages graph`` with ``choice`` on ``data`` under the tree counter, on its own Ray."""
    import json

    work = Path(tempfile.mkdtemp(prefix="jobscale_", dir="/tmp"))  # short: Ray's socket paths are limited
    try:
        argv = [sys.executable, "-c", DRIVER, "--dataset", str(data), "--out", str(work / "out"), "--stages", "graph",
                *choice, "--progress-every", "0"]
        done = run_counted(argv, env=job_env(str(work / "ray")), timeout_s=timeout_s)
        if done.usage.returncode != 0:
            print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
        found = re.search(r"driver peak RSS (\d+) KiB", done.stdout)
        summary = work / "out" / "summary.json"
        ran = json.loads(summary.read_text()).get("ran", 0) if summary.is_file() else 0
        return Run(done.usage, int(found[1]) / 1024 if found else float("nan"), ran)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs=2, default=[100_000, 1_000_000], metavar=("SMALL", "LARGE"),
                        help="subjects of the two datasets (default 100000 1000000)")
    parser.add_argument("--limit", type=int, default=100, help="patients the job runs (default 100)")
    parser.add_argument("--data", type=Path, default=Path("/work/scale-data"), help="where the datasets live")
    parser.add_argument("--no-listing", action="store_true", help="skip the --sample arm (the full listing)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one job may take")
    args = parser.parse_args(argv)
    roots = [dataset(args.data, n) for n in args.sizes]
    arms = {f"--limit {args.limit}": ["--limit", str(args.limit)]}
    if not args.no_listing:
        arms[f"--sample {args.limit} (lists all)*"] = ["--sample", str(args.limit)]
    results: dict[str, list[Run]] = {}
    for arm, choice in arms.items():
        results[arm] = []
        for size, root in zip(args.sizes, roots):
            run = counted(root, choice, args.timeout)
            results[arm].append(run)
            print(f"  {arm} on {size:,}: exit {run.usage.returncode}, ran {run.ran}, {run.usage.wall_s:.1f} s wall, "
                  f"{run.usage.cpu_s:.1f} CPU-s ({run.usage.method}), driver {run.driver_mib:,.0f} MiB", flush=True)
    small, large = (f"{n:,}" for n in args.sizes)
    print(f"\njobs.build_graphs --stages graph, {args.limit} patients; CPU of the whole process tree (Ray included)")
    print(f"{'':<28}{small + ' CPU-s':>14}{large + ' CPU-s':>16}{'ratio':>7}{'wall (s)':>16}{'driver MiB':>16}")
    for arm, (a, b) in results.items():
        print(f"{arm:<28}{a.usage.cpu_s:>14.1f}{b.usage.cpu_s:>16.1f}{b.usage.cpu_s / a.usage.cpu_s:>7.2f}"
              f"{f'{a.usage.wall_s:.0f} / {b.usage.wall_s:.0f}':>16}{f'{a.driver_mib:.0f} / {b.driver_mib:.0f}':>16}")
    if not args.no_listing:
        print("* lists every subject first, as --limit did before; its patients spread over every shard")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
