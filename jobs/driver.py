"""What every job's driver does around its Ray Data pipeline: run ids, the work dataset, the status stream.

The work dataset holds task keys only, built from the planned tasks the driver already holds (`task_dataset`: blocks
in the driver's scheduling order, no Ray Data read or repartition task, so nothing but the actors needs a CPU).
The driver never holds patients' rows: actors read them from the MEDS dataset and write their outputs; the driver
only consumes one short status row per task, on a thread, while its main thread watches for a stall (`stream_status`).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from datetime import datetime

import pyarrow as pa

from vista.shared.meds.labels import BOOLEAN_VALUE
from vista.shared.meds.tasks import TASK_SCHEMA
from vista.shared.runs.errors import JobError
from vista.shared.runs.progress import ProgressTracker


def new_run_id(now: datetime | None = None) -> str:
    """A sortable, unique run id such as ``20261130T141503-3fa2``."""
    return f"{(now or datetime.now()).strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(2)}"


MAX_BLOCKS = 1000
"""Most blocks `task_dataset` makes: the driver puts each into the object store (a few ms each)."""


def block_sizes(rows: int, small: int, *, head: int = 0, max_blocks: int = MAX_BLOCKS) -> list[int]:
    """Rows of each block: ``small`` for the first ``head`` rows (the longest tasks, spread over the actors), then
    blocks large enough that there are at most ``max_blocks`` in all.

    >>> block_sizes(10, 3)
    [3, 3, 3, 1]
    >>> sizes = block_sizes(100_000, 5, head=400)
    >>> sizes[:3], len(sizes), sum(sizes), max(sizes)
    ([5, 5, 5], 994, 100000, 109)
    """
    sizes = [small] * (min(head, rows) // small)
    done = sum(sizes)
    rest = rows - done
    if rest > 0:
        room = max(1, max_blocks - len(sizes))
        large = max(small, -(-rest // room))
        sizes += [large] * (rest // large) + ([rest % large] if rest % large else [])
    return sizes


PLAN_RANK = "plan_rank"
"""The column of a task row holding its place in the run's planned order (0 starts first)."""


def task_dataset(tasks: pa.Table, block_rows: int, *, head_rows: int = 0, max_blocks: int = MAX_BLOCKS):
    """Ray Data: ``tasks`` (`TASK_SCHEMA` rows, in the order they should start; a missing ``boolean_value`` is
    null) as blocks (`block_sizes`).

    The blocks are put into the object store by the driver and handed to the actors in this order, each row with
    its place in it (`PLAN_RANK`): an actor receives several blocks at once and Ray may start their calls in any
    order, so the actor ranks its tasks by that column, not by arrival (`jobs.actor_base`). Their metadata is
    computed here (`ray.data.from_blocks`), so no task at all runs before the actors: `ray.data.from_arrow` would
    run a 1-CPU metadata task per block, which costs a second or two of start-up on a small machine and waits
    forever behind an actor pool holding the CPUs.
    """
    import ray.data

    if BOOLEAN_VALUE not in tasks.column_names:
        tasks = tasks.append_column(BOOLEAN_VALUE, pa.nulls(tasks.num_rows, pa.bool_()))
    tasks = tasks.select(TASK_SCHEMA.names).cast(TASK_SCHEMA)
    tasks = tasks.append_column(PLAN_RANK, pa.array(range(tasks.num_rows), pa.int64()))
    blocks, start = [], 0
    for size in block_sizes(tasks.num_rows, block_rows, head=head_rows, max_blocks=max_blocks):
        blocks.append(tasks.slice(start, size).combine_chunks())
        start += size
    return ray.data.from_blocks(blocks or [tasks])


EXIT_STALLED = 4
"""Exit status of a job its watchdog stopped (no task finished for ``--stall-timeout`` seconds)."""


class JobStalled(JobError):
    """No task finished for longer than the stall timeout: the job stops instead of waiting forever."""


def stream_status(dataset, tracker: ProgressTracker, *, stall_timeout_s: float | None = None,
                  stall_hint: Callable[[], str] | None = None, poll_s: float = 1.0) -> None:
    """Run the pipeline, counting each status row as it arrives (the only data the driver receives).

    Rows are consumed on a thread; this (main) thread watches them. When no row arrives for ``stall_timeout_s``
    seconds it raises `JobStalled` with one line saying what was seen (``stall_hint()`` may add what to check);
    the caller's cleanup then disconnects from Ray, which ends the job's actors. Ctrl-C works the same way.
    """
    failure: list[BaseException] = []
    finished = threading.Event()

    def consume() -> None:
        try:
            for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
                tracker.update(batch)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            failure.append(exc)
        finally:
            finished.set()

    thread = threading.Thread(target=consume, name=f"{tracker.job}-status", daemon=True)
    thread.start()
    while not finished.wait(poll_s):
        if stall_timeout_s is not None and tracker.idle_s() > stall_timeout_s:
            seen = (f"no task has finished since the last one {tracker.idle_s():.0f} s ago" if tracker.first_row_s is not None
                    else f"no task has finished in the {tracker.elapsed_s:.0f} s since the start")
            hint = stall_hint() if stall_hint is not None else ""
            _quiet_abandoned_pipeline()
            raise JobStalled(f"[{tracker.job}] stopped: {seen} ({tracker.finished}/{tracker.to_run} done; --stall-timeout "
                             f"{stall_timeout_s:g} s){'; ' + hint if hint else ''}")
    if failure:
        raise failure[0]


def _quiet_abandoned_pipeline() -> None:
    """The stalled pipeline is abandoned: Ray's complaints while it is torn down (the status thread's iterator losing
    its connection) would bury the one line that says why the job stopped — and that thread must not start a new
    local Ray when it finds the connection gone (Ray's auto-init)."""
    import logging

    logging.getLogger("ray.data").setLevel(logging.CRITICAL)
    logging.getLogger("ray").setLevel(logging.ERROR)
    try:
        from ray._private import auto_init_hook

        auto_init_hook.enable_auto_connect = False
    except ImportError:  # pragma: no cover - a Ray without the hook has no auto-init either
        pass


def job_main(build_parser, run, argv: list[str] | None = None, exit_status=None) -> int:
    """The ``main`` of a job module: parse options, set logging, run; user errors print one line and exit 2.

    Exit status: ``exit_status(summary)`` when given, else 0 when every task ended (ok or recorded error) and 1
    when the run stopped short; 4 when the watchdog stopped a stalled run (`JobStalled`).
    """
    import logging
    import sys

    from jobs.errors import job_user_errors

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from vista.shared.atomic import apply_data_umask

    try:
        apply_data_umask()  # the job's outputs are private (VISTA_DATA_MODE, vista.shared.atomic)
        summary = run(args)
    except JobStalled as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_STALLED
    except job_user_errors() as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if exit_status is not None:
        return exit_status(summary)
    return 0 if summary.complete else 1
