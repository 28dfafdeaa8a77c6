"""build-graphs: a MEDS dataset [+ a label file] -> one persisted, provenance-carrying timeline per patient, on Ray.

    python -m jobs.build_graphs --dataset MEDS --out out/timelines [--labels COHORT/labels/test.parquet] [--limit N]

Until the VISTA graph lands, each patient's artifact is the XML timeline plus its provenance table (element id ->
MEDS shard and row): ``OUT/timelines/<bucket>/<name>.xml``, ``<name>.provenance.parquet`` and the done marker
``<name>.json``; at the end ``OUT/timelines.parquet`` indexes them (one row per patient, errors included).

Tasks: with ``--labels``, one per label row (events strictly before its prediction time); without, one per
subject of the dataset (the whole record) — subjects are listed by Ray Data tasks reading only the ``subject_id``
column of each shard. As in the predict job, patients' rows are read inside the actors by the targeted MEDS reader
(no shuffle, nothing collected on the driver), outputs are written atomically, failures become error rows, and
rerunning the same command resumes where a killed run stopped.
"""

from __future__ import annotations

import argparse
import logging
from datetime import datetime
from pathlib import Path

import pyarrow as pa
from rich.console import Console

from jobs.consolidate import consolidate
from jobs.driver import job_main, keep_planned, label_dataset, new_run_id, stream_status
from jobs.errors import JobInputError
from jobs.manifest import check_manifest
from jobs.outputs import MarkerStore, OutputLock
from jobs.progress import ProgressPrinter, ProgressTracker
from jobs.ray_runtime import LIGHT_TASK_CPUS, RayOptions, add_ray_arguments, connect, shutdown
from jobs.summary import RunSummary
from jobs.tasks import TaskKey, keys_table, plan_tasks, read_label_tasks, task_keys
from jobs.timeline_actor import (
    TIMELINE_SCHEMA,
    TIMELINES,
    TimelineActor,
    TimelineSettings,
    list_shard_subjects,
    timeline_row_from_json,
    timeline_rows_to_table,
)

log = logging.getLogger("jobs.build_graphs")
FORMAT_VERSION = 1  # of the persisted artifacts; part of the resume check


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs.build_graphs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    io = parser.add_argument_group("inputs and outputs")
    io.add_argument("--dataset", required=True, type=Path, help="MEDS dataset root (data/**/*.parquet, metadata/)")
    io.add_argument("--out", required=True, type=Path, help="output directory; rerunning the same command resumes there")
    io.add_argument("--labels", type=Path, help="optional MEDS label parquet: one timeline per row, cut at its "
                    "prediction_time (default: every subject, whole record)")
    pick = parser.add_argument_group("which patients")
    chosen = pick.add_mutually_exclusive_group()
    chosen.add_argument("--limit", type=int, help="only the first N tasks in (subject_id, prediction_time) order")
    chosen.add_argument("--sample", type=int, help="a random sample of N tasks (seeded by --seed)")
    pick.add_argument("--seed", type=int, default=0, help="seed of --sample (default 0)")
    pick.add_argument("--retry-failed", action="store_true", help="run again the tasks whose earlier output is an error row")
    group = parser.add_argument_group("actors")
    group.add_argument("--actors", type=int, help="timeline actors (default: one per CPU, at least 1)")
    group.add_argument("--actor-cpus", type=float, default=0.5, help="CPUs each actor asks for (default 0.5)")
    group.add_argument("--batch-size", type=int, default=16, help="patients per Ray Data batch (default 16)")
    run = parser.add_argument_group("run")
    run.add_argument("--progress-every", type=float, default=10.0, help="seconds between progress lines (default 10)")
    add_ray_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser


def _subject_source(dataset: Path):
    """Ray Data: one row per subject of the dataset (a task per shard reads its subject_id column)."""
    import ray.data

    from vista.meds.reader import MedsDataset

    shards = MedsDataset(dataset).shards
    return ray.data.from_items([{"shard": s} for s in shards], override_num_blocks=len(shards)).map_batches(
        list_shard_subjects, fn_kwargs={"root": str(dataset)}, batch_size=1, batch_format="pyarrow",
        num_cpus=LIGHT_TASK_CPUS,
    )


def _dataset_tasks(dataset: Path) -> list[TaskKey]:
    keys: list[TaskKey] = []
    for batch in _subject_source(dataset).iter_batches(batch_size=None, batch_format="pyarrow"):
        keys.extend(TaskKey(int(s)) for s in batch.column("subject_id").to_pylist())
    return keys


def run(args: argparse.Namespace, console: Console | None = None) -> RunSummary:
    from ray.data import ActorPoolStrategy

    from vista.meds.reader import MedsDataset

    console = console or Console(width=110)
    started_at = datetime.now().astimezone()
    run_id = new_run_id()
    for flag, value in (("--limit", args.limit), ("--sample", args.sample), ("--actors", args.actors),
                        ("--batch-size", args.batch_size)):
        if value is not None and value < 1:
            raise JobInputError(f"{flag} must be at least 1, not {value}")
    MedsDataset(args.dataset)  # fails here, naming the path, when there is no dataset
    label_tasks = read_label_tasks(args.labels) if args.labels is not None else None
    out = args.out.resolve()
    settings = TimelineSettings(dataset=args.dataset.resolve(), out=out, retry_failed=args.retry_failed, run_id=run_id)
    store = MarkerStore(out, TIMELINES)
    with OutputLock(out):
        check_manifest(out, "build-graphs", {
            "dataset": str(settings.dataset), "labels": str(args.labels.resolve()) if args.labels else None,
            "format": FORMAT_VERSION,
        })
        store.remove_stale_temporaries()
        runtime = connect(RayOptions.from_args(args))
        try:
            keys = task_keys(label_tasks) if label_tasks is not None else _dataset_tasks(settings.dataset)
            plan = plan_tasks(keys, store.scan(), limit=args.limit, sample=args.sample, seed=args.seed,
                              retry_failed=args.retry_failed)
            tracker = ProgressTracker("build-graphs", to_run=len(plan.todo), skipped_before=plan.skipped)
            actors = args.actors or max(1, int(runtime.cpus))
            where = "local Ray" if runtime.started_locally else f"cluster {runtime.address}"
            console.print(f"[build-graphs] run {run_id}: {len(plan.selected)} selected, {plan.skipped} already done, "
                          f"{len(plan.todo)} to run on {where} ({runtime.cpus:g} CPUs): {actors} actor(s) x "
                          f"{args.actor_cpus:g} CPU", markup=False, highlight=False, soft_wrap=True)
            if plan.todo:
                planned = keys_table(plan.todo)
                if args.labels is not None:
                    work = label_dataset(args.labels, planned, args.batch_size)
                else:
                    work = _subject_source(settings.dataset).map_batches(
                        _with_null_times, batch_format="pyarrow", batch_size=None, num_cpus=LIGHT_TASK_CPUS,
                    ).map_batches(
                        keep_planned, fn_kwargs={"planned": planned}, batch_format="pyarrow", batch_size=None,
                        num_cpus=LIGHT_TASK_CPUS,
                    ).repartition(target_num_rows_per_block=args.batch_size)
                results = work.map_batches(
                    TimelineActor, fn_constructor_kwargs={"settings": settings}, batch_size=args.batch_size,
                    batch_format="pyarrow", compute=ActorPoolStrategy(size=actors, max_tasks_in_flight_per_actor=2),
                    num_cpus=args.actor_cpus,
                )
                with ProgressPrinter(tracker, interval_s=args.progress_every):
                    stream_status(results, tracker)
        finally:
            shutdown(runtime)
        report = consolidate(store, plan.selected, out / "timelines.parquet", parse=timeline_row_from_json,
                             to_table=timeline_rows_to_table, schema=TIMELINE_SCHEMA, status_of=lambda row: row.status)
        summary = RunSummary.from_tracker(
            tracker, run_id=run_id, started_at=started_at, selected=len(plan.selected), skipped=plan.skipped,
            retried=plan.retried, complete=report.complete, outputs={"timelines": str(report.path)},
            totals=dict(sorted(report.statuses.items())),
        )
        summary.write(out)
    summary.print(console)
    return summary


def _with_null_times(batch: pa.Table) -> pa.Table:
    return batch.append_column("prediction_time", pa.nulls(batch.num_rows, pa.timestamp("us")))


def main(argv: list[str] | None = None) -> int:
    return job_main(build_parser, run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
