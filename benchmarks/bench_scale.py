"""How the data steps grow with the dataset: 100k and 1M subjects (10M with ``--ten-million``), each step beside a
plain polars streaming pass over the same shards.

The datasets come from `benchmarks.bench_cohort.write_random_dataset` (seed 0: about 102 rows per subject, shards of
10,000 subjects), written once into ``--data-dir`` (default /work/scale-data/<100k|1m|10m>) under a temporary name
and renamed when complete, so a dataset another run is writing, or has written, is reused, never half-read. Each
step runs as its own process; its figures come from ``os.wait4``: wall, CPU seconds of the process (every thread,
and any child it waited for) and its peak resident memory. Steps:

- ``pass``      the honest alternative: one polars streaming pass (per subject: rows, first/last time, first lung
                code), what any hand-written script over the shards costs;
- ``validate``  ``trajonco validate`` (every check, duplicates included);
- ``profile``   ``trajonco profile`` (the default 200k-row sample) and ``profile-all`` (``--all-rows``);
- ``cohort``    ``trajonco cohort lung``;
- ``features``  summary features of the lung cohort's train and test labels, shard by shard
                (`baselines.feature_step.FeatureStep` in one process: each shard read once for both);
- ``meds-reader-convert`` and ``meds-reader``: PyPI ``meds_reader``'s one-off conversion, then reading every
                subject's events through it (when installed; by default only up to 100k subjects: its conversion
                alone takes minutes per 100k subjects here).

It prints a dated markdown table: per size and step, wall, CPU-s, peak RSS, ratios to the pass, and growth exponents
between sizes (log(cost ratio) / log(size ratio): 1 = linear, 0 = flat). The machine is shared, so CPU-s and peak
RSS are the figures to trust; wall is printed beside them.

    python -m benchmarks.bench_scale                    # 100k and 1M
    python -m benchmarks.bench_scale --ten-million      # and 10M (about a billion rows, 10 GB of parquet)
    python -m benchmarks.bench_scale --sizes 100k --steps pass validate
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

SIZES = {"100k": 100_000, "1m": 1_000_000, "10m": 10_000_000}
STEPS = ("pass", "validate", "profile", "profile-all", "cohort", "features", "meds-reader-convert", "meds-reader")
MEDS_READER_STEPS = ("meds-reader-convert", "meds-reader")
DEFAULT_DATA_DIR = Path("/work/scale-data")
SHARD_SUBJECTS = 10_000
LUNG_CODES = ["ICD10CM//C34.11", "ICD10CM//C34.90", "ICD9CM//162.3"]


# ------------------------------------------------------------------------------------------------ datasets
def dataset(data_dir: Path, size: str) -> Path:
    """The dataset of ``size`` under ``data_dir``: reused when complete, else written by a child process (under a
    temporary name, then renamed)."""
    final = data_dir / size
    if not _complete(final, SIZES[size]):
        subprocess.run([sys.executable, "-m", "benchmarks.bench_scale", "--write", size, "--data-dir", str(data_dir)],
                       check=True)
    return final


def write(data_dir: Path, size: str) -> int:
    """Write the dataset of ``size`` (child mode: the runner itself stays small, see `measure`)."""
    from benchmarks.bench_cohort import write_random_dataset

    final = data_dir / size
    data_dir.mkdir(parents=True, exist_ok=True)
    staging = data_dir / f".{size}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    print(f"writing {SIZES[size]:,} subjects into {final} ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    rows = write_random_dataset(staging, SIZES[size], shard_subjects=SHARD_SUBJECTS, seed=0)
    try:
        os.rename(staging, final)
    except OSError:  # written meanwhile by another run: keep theirs
        shutil.rmtree(staging, ignore_errors=True)
        if not _complete(final, SIZES[size]):
            raise
    print(f"  {rows:,} rows in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return 0


def _complete(root: Path, subjects: int) -> bool:
    """True when ``root`` holds a whole dataset of the writer: the splits file and every shard (a dataset is only
    renamed into place once written, so their presence is enough)."""
    shards = -(-subjects // SHARD_SUBJECTS)
    return ((root / "metadata" / "subject_splits.parquet").is_file()
            and all((root / "data" / f"{i}.parquet").is_file() for i in range(shards)))


# ------------------------------------------------------------------------------------------------ the steps (children)
def _polars_pass(root: Path) -> str:
    import polars as pl

    out = (pl.scan_parquet(str(root / "data" / "*.parquet")).group_by("subject_id").agg(
        rows=pl.len(), first=pl.col("time").min(), last=pl.col("time").max(),
        lung=pl.col("time").filter(pl.col("code").is_in(LUNG_CODES)).min()).collect(engine="streaming"))
    return f"{out.height:,} subjects, {int(out['rows'].sum()):,} rows, {out['lung'].is_not_null().sum():,} with lung"


def _features(root: Path, work: Path) -> str:
    import polars as pl

    from baselines.feature_step import feature_step
    from vista.shared.meds.shard_scan import checked_shards
    from vista.shared.meds.shard_step import run_local

    labels = work / "lung" / "labels"
    train, test = (pl.read_parquet(labels / f"{name}.parquet") for name in ("train", "test"))
    step = feature_step(checked_shards(root), train, test)
    X_train, X_test = run_local(step, step.shards)  # each shard read once for both label sets
    return (f"train {X_train.X.shape} nnz {X_train.X.nnz:,}, test {X_test.X.shape} nnz {X_test.X.nnz:,} "
            f"({train.height:,} + {test.height:,} label rows)")


def _meds_reader_convert(root: Path, work: Path) -> str:
    convert = Path(sys.executable).parent / "meds_reader_convert"
    database = work / "meds_reader_db"
    shutil.rmtree(database, ignore_errors=True)
    subprocess.run([str(convert), str(root), str(database), "--num_threads", "2"], check=True, capture_output=True)
    return f"converted into {database}"


def _meds_reader(work: Path) -> str:
    import meds_reader

    database = meds_reader.SubjectDatabase(str(work / "meds_reader_db"))
    events = sum(len(database[subject].events) for subject in database)
    return f"{len(database):,} subjects, {events:,} events"


def _cli(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "trajonco.cli", *args]


def step_command(step: str, root: Path, work: Path) -> list[str] | None:
    """The process that runs ``step``: a ``trajonco`` command, or this module in child mode."""
    if step == "validate":
        return _cli(["validate", str(root)])
    if step == "profile":
        return _cli(["profile", str(root)])
    if step == "profile-all":
        return _cli(["profile", str(root), "--all-rows"])
    if step == "cohort":
        return _cli(["cohort", "lung", "--dataset", str(root), "--out", str(work / "lung"), "--overwrite"])
    if step in MEDS_READER_STEPS:
        try:
            import meds_reader  # noqa: F401
        except ImportError:
            return None
    return [sys.executable, "-m", "benchmarks.bench_scale", "--child", step, "--dataset", str(root),
            "--work", str(work)]


def run_child(step: str, root: Path, work: Path) -> int:
    runner = {"pass": lambda: _polars_pass(root), "features": lambda: _features(root, work),
              "meds-reader-convert": lambda: _meds_reader_convert(root, work),
              "meds-reader": lambda: _meds_reader(work)}[step]
    print(runner(), flush=True)
    return 0


# ------------------------------------------------------------------------------------------------ measuring
@dataclass(frozen=True)
class Figures:
    size: str
    step: str
    wall_s: float
    cpu_s: float
    peak_gb: float
    status: int
    note: str


def measure(step: str, size: str, command: list[str]) -> Figures:
    """Run ``command``; wall, CPU (user + system of it and its waited-for children) and peak RSS from ``wait4``.

    A child's peak RSS counts the memory of the process it was forked from (Linux carries the high-water mark across
    exec), so this runner imports nothing heavy: the figures are the steps' own (a bare Python is about 10 MB)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, text=True,
                                   env={**os.environ, "PYTHONWARNINGS": "ignore"})
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        out.seek(0)
        lines = [line.strip() for line in out.read().splitlines() if line.strip()]
    note = lines[-1][:110] if lines else ""
    return Figures(size, step, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024 / 1024,
                   process.returncode, note)


def machine_speed() -> float:
    """Seconds for a Python loop of 10 M additions (the project's yardstick of a machine's speed)."""
    started = time.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    return time.perf_counter() - started


def _exponent(small: float, large: float, ratio: float) -> str:
    if small <= 0 or large <= 0:
        return "—"
    return f"{math.log(large / small) / math.log(ratio):.2f}"


def table(figures: list[Figures], speed: float) -> str:
    """The dated markdown table: figures, ratios to the pass, growth exponents to the previous size."""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()[0]
    lines = [f"bench_scale, {when}: {os.cpu_count()} cores, a Python loop of 10 M additions in {speed:.2f} s, "
             f"load average {load:.1f} at the end",
             "",
             "| size | step | wall s | CPU-s | peak RSS GB | wall ÷ pass | CPU ÷ pass "
             "| growth wall / CPU / RSS | note |",
             "|---|---|---:|---:|---:|---:|---:|---|---|"]
    by_key = {(f.size, f.step): f for f in figures}
    sizes = [s for s in SIZES if any(f.size == s for f in figures)]
    for f in figures:
        base = by_key.get((f.size, "pass"))
        wall_ratio = f"{f.wall_s / base.wall_s:.1f}×" if base and f.step != "pass" else "—"
        cpu_ratio = f"{f.cpu_s / base.cpu_s:.1f}×" if base and f.step != "pass" else "—"
        index = sizes.index(f.size)
        previous = by_key.get((sizes[index - 1], f.step)) if index else None
        growth = "—"
        if previous is not None:
            ratio = SIZES[f.size] / SIZES[previous.size]
            growth = " / ".join(_exponent(getattr(previous, k), getattr(f, k), ratio)
                                for k in ("wall_s", "cpu_s", "peak_gb"))
        failed = f"exit {f.status}: " if f.status not in (0, 1) else ""
        lines.append(f"| {f.size} | {f.step} | {f.wall_s:.1f} | {f.cpu_s:.1f} | {f.peak_gb:.2f} | {wall_ratio} | "
                     f"{cpu_ratio} | {growth} | {failed}{f.note.replace('|', '/')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="where the datasets are kept "
                        f"(default {DEFAULT_DATA_DIR})")
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=["100k", "1m"])
    parser.add_argument("--ten-million", action="store_true", help="add the 10M-subject dataset (~1B rows)")
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS))
    parser.add_argument("--meds-reader-max", choices=list(SIZES), default="100k",
                        help="largest size meds_reader converts and reads (default 100k)")
    parser.add_argument("--child", choices=STEPS, help=argparse.SUPPRESS)
    parser.add_argument("--write", choices=list(SIZES), help=argparse.SUPPRESS)
    parser.add_argument("--dataset", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return run_child(args.child, args.dataset, args.work)
    if args.write:
        return write(args.data_dir, args.write)
    sizes = list(dict.fromkeys(args.sizes + (["10m"] if args.ten_million else [])))
    steps = [s for s in STEPS if s in args.steps]
    if "features" in steps and "cohort" not in steps:
        steps.insert(steps.index("features"), "cohort")  # the features are those of the lung cohort's labels
    figures: list[Figures] = []
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        for size in sizes:
            root = dataset(args.data_dir, size)
            work = Path(tmp) / size
            work.mkdir()
            for step in steps:
                if step in MEDS_READER_STEPS and SIZES[size] > SIZES[args.meds_reader_max]:
                    continue
                command = step_command(step, root, work)
                if command is None:
                    print(f"{size} {step}: skipped (not installed)", file=sys.stderr, flush=True)
                    continue
                found = measure(step, size, command)
                figures.append(found)
                print(f"{size} {step}: {found.wall_s:.1f} s, {found.cpu_s:.1f} CPU-s, {found.peak_gb:.2f} GB "
                      f"(exit {found.status}) {found.note}", file=sys.stderr, flush=True)
    print(table(figures, machine_speed()))
    peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n(this runner's own peak: {peak_self:,.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
