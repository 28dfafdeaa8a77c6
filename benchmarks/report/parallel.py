"""Run report tasks in worker processes that each load the MEDS events once, or inline when ``workers`` is 1.

The events of a 50,000-subject dataset (≈15M rows, ≈0.6 GB in memory) are collected once per worker at start-up,
so each cohort's featurization is an in-memory join instead of a parquet scan. Workers are spawned (not forked:
polars' thread pool does not survive a fork) and run one task at a time with one thread per model, so two
workers keep two cores busy without oversubscribing them.
"""

from __future__ import annotations

import logging
import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from types import TracebackType

import polars as pl

from benchmarks.report.cohort_tasks import (
    CohortOutcome,
    CohortTask,
    TruncationOutcome,
    TruncationTask,
    run_cohort_task,
    run_truncation_task,
)
from vista.shared.meds.reader import MedsDataset

Task = CohortTask | TruncationTask
Outcome = CohortOutcome | TruncationOutcome

_events: pl.DataFrame | None = None
_root: Path | None = None


def load_events(dataset_root: Path) -> pl.DataFrame:
    """Every MEDS row of the dataset (subject_id, time, code, numeric_value, text_value), in memory."""
    return MedsDataset(dataset_root).scan().collect()


def _init_worker(dataset_root: str, level: int) -> None:
    global _events, _root
    logging.basicConfig(level=level)
    _root = Path(dataset_root)
    _events = load_events(_root)


def run_task(task: Task, events: pl.DataFrame, dataset_root: Path) -> Outcome:
    """Run one task against in-memory events."""
    if isinstance(task, CohortTask):
        return run_cohort_task(task, events, dataset_root)
    if isinstance(task, TruncationTask):
        return run_truncation_task(task, events, dataset_root)
    raise TypeError(f"not a report task: {type(task).__name__}")


def _run_in_worker(task: Task) -> Outcome:
    assert _events is not None and _root is not None, "worker not initialised"
    return run_task(task, _events, _root)


class TaskRunner:
    """Submit tasks; get futures. ``workers == 1`` runs each task at submission, in this process."""

    def __init__(self, dataset_root: Path, workers: int):
        self.dataset_root = Path(dataset_root)
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self._events: pl.DataFrame | None = None

    def __enter__(self) -> TaskRunner:
        if self.workers > 1:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker,
                initargs=(str(self.dataset_root), logging.getLogger().getEffectiveLevel()))
        else:
            self._events = load_events(self.dataset_root)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=exc_type is None, cancel_futures=exc_type is not None)
        self._events = None

    def submit(self, task: Task) -> Future[Outcome]:
        if self._pool is not None:
            return self._pool.submit(_run_in_worker, task)
        future: Future[Outcome] = Future()
        assert self._events is not None, "use TaskRunner as a context manager"
        try:
            future.set_result(run_task(task, self._events, self.dataset_root))
        except BaseException as exc:  # delivered through the future, as the pool would
            future.set_exception(exc)
        return future
