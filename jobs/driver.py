"""What every job's driver does around its Ray Data pipeline: run ids, the work dataset, the status stream.

The work dataset is built by Ray Data from the task source (a label parquet file read by Ray Data, or the subjects
listed from the MEDS shards), filtered to the tasks this run planned, and cut into small blocks so the actor pool
receives them in parallel. The driver never holds patients' rows: actors read them from the MEDS dataset and
write their outputs; the driver only consumes one short status row per task.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from jobs.progress import ProgressTracker
from jobs.ray_runtime import LIGHT_TASK_CPUS
from jobs.tasks import BOOLEAN_VALUE, PREDICTION_TIME, SUBJECT_ID, TASK_SCHEMA


def new_run_id(now: datetime | None = None) -> str:
    """A sortable, unique run id such as ``20261130T141503-3fa2``."""
    return f"{(now or datetime.now()).strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(2)}"


def keep_planned(batch: pa.Table, planned: pa.Table) -> pa.Table:
    """The rows of ``batch`` whose (subject_id, prediction_time) is in ``planned``, as `TASK_SCHEMA` columns."""
    if PREDICTION_TIME not in batch.column_names:
        batch = batch.append_column(PREDICTION_TIME, pa.nulls(batch.num_rows, pa.timestamp("us")))
    if BOOLEAN_VALUE not in batch.column_names:
        batch = batch.append_column(BOOLEAN_VALUE, pa.nulls(batch.num_rows, pa.bool_()))
    batch = batch.select(TASK_SCHEMA.names).cast(TASK_SCHEMA)
    if planned.column(PREDICTION_TIME).null_count == planned.num_rows:  # tasks without prediction times
        mask = pc.is_in(batch.column(SUBJECT_ID), value_set=planned.column(SUBJECT_ID))
        return batch.filter(mask)
    marked = planned.select([SUBJECT_ID, PREDICTION_TIME]).append_column("_planned", pa.repeat(True, planned.num_rows))
    joined = batch.join(marked, keys=[SUBJECT_ID, PREDICTION_TIME], join_type="inner")
    return joined.select(TASK_SCHEMA.names).cast(TASK_SCHEMA)


def label_dataset(labels: Path, planned: pa.Table, block_rows: int):
    """Ray Data: the label file's task columns, only the planned tasks, in blocks of at most ``block_rows`` rows."""
    import pyarrow.parquet as pq
    import ray.data

    present = [c for c in TASK_SCHEMA.names if c in pq.read_schema(labels).names]
    ds = ray.data.read_parquet(str(labels), num_cpus=LIGHT_TASK_CPUS).select_columns(present)
    ds = ds.map_batches(keep_planned, fn_kwargs={"planned": planned}, batch_format="pyarrow", batch_size=None,
                        num_cpus=LIGHT_TASK_CPUS)
    return ds.repartition(target_num_rows_per_block=block_rows)


def stream_status(dataset, tracker: ProgressTracker) -> None:
    """Run the pipeline, counting each status row as it arrives (the only data the driver receives)."""
    for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
        tracker.update(batch)


def job_main(build_parser, run, argv: list[str] | None = None, exit_status=None) -> int:
    """The ``main`` of a job module: parse options, set logging, run; user errors print one line and exit 2.

    Exit status: ``exit_status(summary)`` when given, else 0 when every task ended (ok or recorded error) and 1
    when the run stopped short.
    """
    import logging
    import sys

    from jobs.errors import job_user_errors

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        summary = run(args)
    except job_user_errors() as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if exit_status is not None:
        return exit_status(summary)
    return 0 if summary.complete else 1
