"""What a cohort job works on: one task per (subject, prediction time), read from a label file or a MEDS dataset.

A job's plan is decided once, on the driver, from the task keys alone (two int/timestamp columns, a few MB for
100,000 patients): which tasks are selected (``--limit`` takes the first N in key order, ``--sample`` a seeded
random N), which already have an output (skipped) and which are left to run. The same command therefore selects
the same patients on every restart. A task's key is `vista.meds.task_key.TaskKey`.

>>> keys = [TaskKey(s, datetime(2020, 1, 1)) for s in (5, 3, 9, 1)]
>>> plan = plan_tasks(keys, done={TaskKey(3, datetime(2020, 1, 1)): "ok"}, limit=3)
>>> [k.subject_id for k in plan.selected], [k.subject_id for k in plan.todo], plan.skipped
([1, 3, 5], [1, 5], 1)
>>> plan = plan_tasks(keys, done={TaskKey(3, datetime(2020, 1, 1)): "transient"}, limit=3,
...                   rerun=lambda state: state == "transient")  # the retry policy decides per recorded state
>>> [k.subject_id for k in plan.todo], plan.retried
([1, 3, 5], 1)

A case–control label file (``matched_to``: a control's case) keeps its matching under ``--limit``/``--sample``:
whole matched groups are taken (`MatchGroups`), never a case without its controls.

>>> groups = MatchGroups({TaskKey(s): g for s, g in ((1, 1), (2, 1), (3, 3), (4, 3), (5, 5), (6, 5))},
...                      {TaskKey(s): s % 2 == 1 for s in range(1, 7)})
>>> plan = plan_tasks([TaskKey(s) for s in range(1, 7)], {}, limit=5, groups=groups)
>>> [k.subject_id for k in plan.selected], groups.describe(plan.selected)
([1, 2, 3, 4], '2 whole matched group(s): 2 cases, 2 controls')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vista.meds.task_key import TaskKey

from jobs.errors import JobInputError

SUBJECT_ID = "subject_id"
PREDICTION_TIME = "prediction_time"
BOOLEAN_VALUE = "boolean_value"
LABEL_COLUMNS = (SUBJECT_ID, PREDICTION_TIME, BOOLEAN_VALUE)

TASK_SCHEMA = pa.schema([
    pa.field(SUBJECT_ID, pa.int64(), nullable=False),
    pa.field(PREDICTION_TIME, pa.timestamp("us"), nullable=True),
    pa.field(BOOLEAN_VALUE, pa.bool_(), nullable=True),
])
"""The columns a task row carries through Ray Data (``prediction_time`` null: the whole record)."""


@dataclass(frozen=True, slots=True)
class TaskPlan:
    """The tasks a run selected, those already done (skipped) and those it will run, in key order."""

    selected: list[TaskKey]
    todo: list[TaskKey]
    skipped: int = 0
    retried: int = field(default=0, metadata={"doc": "tasks with an output selected again by the retry policy"})
    outside_selection: int = field(default=0, metadata={"doc": "outputs present for tasks this run did not select"})


@dataclass(frozen=True)
class MatchGroups:
    """The matched groups of a case–control label file: each task's group (its case's subject id) and role."""

    group_of: Mapping[TaskKey, int]
    is_case: Mapping[TaskKey, bool | None]

    def describe(self, selected: Iterable[TaskKey]) -> str:
        """'N whole matched group(s): C cases, K controls' of ``selected`` (for the plan line)."""
        selected = list(selected)
        groups = {self.group_of.get(k, -1 - i) for i, k in enumerate(selected)}
        cases = sum(1 for k in selected if self.is_case.get(k) is True)
        controls = sum(1 for k in selected if self.is_case.get(k) is False)
        return f"{len(groups)} whole matched group(s): {cases} cases, {controls} controls"


def _whole_groups(ordered: list[TaskKey], groups: MatchGroups, at_most: int, order: list[int] | None = None
                  ) -> list[TaskKey]:
    """Whole groups (in key order of their first task, or in ``order``) while they fit ``at_most`` tasks; the first
    group whole even when it alone is larger."""
    members: dict[int, list[TaskKey]] = {}
    for i, key in enumerate(ordered):
        members.setdefault(groups.group_of.get(key, -1 - i), []).append(key)
    listed = list(members.values())
    chosen: list[TaskKey] = []
    for index in order if order is not None else range(len(listed)):
        group = listed[index]
        if chosen and len(chosen) + len(group) > at_most:
            continue
        chosen += group
        if len(chosen) >= at_most:
            break
    return sorted(chosen, key=TaskKey.sort_key)


def plan_tasks(
    keys: Iterable[TaskKey],
    done: Mapping[TaskKey, str],
    *,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    retry_failed: bool = False,
    failed_statuses: frozenset[str] = frozenset({"failed", "error"}),
    rerun: Callable[[object], bool] | None = None,
    groups: MatchGroups | None = None,
) -> TaskPlan:
    """Select tasks (first ``limit`` in key order, or a seeded random ``sample``), then drop those already done.

    ``done`` maps each task with an output to its recorded state; a task runs again when ``rerun(state)`` is true
    (the job's retry policy) or, without ``rerun``, with ``retry_failed`` when its state is in ``failed_statuses``.
    With ``groups`` (a case–control label file) the selection takes whole matched groups: at most ``limit`` (or
    ``sample``) tasks, the first group whole even when it alone is larger.
    """
    if rerun is None:
        rerun = (lambda state: state in failed_statuses) if retry_failed else (lambda state: False)
    if limit is not None and sample is not None:
        raise ValueError("choose either limit or sample, not both")
    ordered = sorted(set(keys), key=TaskKey.sort_key)
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit must be positive, not {limit}")
        ordered = _whole_groups(ordered, groups, limit) if groups is not None else ordered[:limit]
    elif sample is not None:
        if sample < 1:
            raise ValueError(f"sample must be positive, not {sample}")
        if groups is not None and sample < len(ordered):
            count = len({groups.group_of.get(k, -1 - i) for i, k in enumerate(ordered)})
            ordered = _whole_groups(ordered, groups, sample,
                                    order=np.random.default_rng(seed).permutation(count).tolist())
        elif sample < len(ordered):
            picked = np.random.default_rng(seed).choice(len(ordered), size=sample, replace=False)
            ordered = [ordered[i] for i in sorted(picked.tolist())]
    todo: list[TaskKey] = []
    skipped = retried = 0
    for key in ordered:
        status = done.get(key)
        if status is None:
            todo.append(key)
        elif rerun(status):
            todo.append(key)
            retried += 1
        else:
            skipped += 1
    selected = set(ordered)
    outside = sum(1 for key in done if key not in selected)
    return TaskPlan(ordered, todo, skipped, retried, outside)


# ------------------------------------------------------------------------------------------------ scheduling
def schedule(keys: Iterable[TaskKey], lengths: Mapping[TaskKey, int], *, ratio: float = 1.5) -> list[TaskKey]:
    """Longest first, by length class: tasks whose estimated chain lengths differ by less than a factor ``ratio``
    share a class and keep key order inside it, so the longest chains never start last and the patients of one
    block (and their reads) stay close in subject order. Unknown lengths count as 0.

    >>> keys = [TaskKey(s) for s in (1, 2, 3, 4, 5)]
    >>> [k.subject_id for k in schedule(keys, {TaskKey(1): 20, TaskKey(2): 700, TaskKey(3): 24, TaskKey(4): 800})]
    [2, 4, 1, 3, 5]
    """
    if ratio <= 1.0:
        raise ValueError(f"ratio must be above 1, not {ratio}")

    def order(key: TaskKey) -> tuple[int, int, datetime]:
        length = lengths.get(key, 0)
        band = math.floor(math.log(length + 1) / math.log(ratio))
        return (-band, *key.sort_key())

    return sorted(keys, key=order)


def estimate_lengths(dataset: Path | str, keys: Iterable[TaskKey]) -> dict[TaskKey, int]:
    """Each task's MEDS rows before its prediction time (static rows included; every row without one): a cheap
    stand-in for its chain length, from two columns of the data files, scanned by polars on the driver."""
    import polars as pl

    from vista.meds.reader import MedsDataset
    from vista.storage import scan_parquet

    keys = list(keys)
    if not keys:
        return {}
    meds = MedsDataset(dataset)  # a path or an object-store URI
    files = [meds.location / shard for shard in meds.shards]
    tasks = pl.from_arrow(keys_table(keys)).lazy()
    rows = scan_parquet(files).select(pl.col(SUBJECT_ID).cast(pl.Int64), pl.col("time").cast(pl.Datetime("us")))
    counted = (
        rows.join(tasks, on=SUBJECT_ID, how="inner")
        .filter(pl.col(PREDICTION_TIME).is_null() | pl.col("time").is_null() | (pl.col("time") < pl.col(PREDICTION_TIME)))
        .group_by([SUBJECT_ID, PREDICTION_TIME]).agg(pl.len().alias("rows"))
        .collect(engine="streaming")
    )
    return {TaskKey(int(s), t): int(n) for s, t, n in zip(counted[SUBJECT_ID].to_list(), counted[PREDICTION_TIME].to_list(),
                                                          counted["rows"].to_list())}


def read_label_tasks(path: Path | str) -> pa.Table:
    """The task columns of a MEDS label file (``subject_id``, ``prediction_time``, ``boolean_value``), checked.

    Any file `vista.meds.labels.read_label_table` accepts (MEDS labels, ACES's outputs) is read the same way. Raises
    `JobInputError` naming the file and the field for a missing file or column, nulls, or duplicate keys.
    """
    from vista.meds.labels import LabelFileError, read_label_table

    try:
        table = read_label_table(path).select(list(LABEL_COLUMNS)).cast(TASK_SCHEMA.remove_metadata())
    except LabelFileError as exc:
        raise JobInputError(str(exc)) from None
    keys = pa.table({SUBJECT_ID: table.column(SUBJECT_ID), PREDICTION_TIME: table.column(PREDICTION_TIME)})
    distinct = keys.group_by([SUBJECT_ID, PREDICTION_TIME]).aggregate([([], "count_all")])
    repeated = distinct.filter(pc.greater(distinct.column("count_all"), 1))
    if repeated.num_rows:
        first = repeated.slice(0, 1).to_pylist()[0]
        raise JobInputError(
            f"{path}: subject {first[SUBJECT_ID]}: field 'prediction_time': {repeated.num_rows} (subject, prediction_time) "
            f"pair(s) appear more than once (first: {first[PREDICTION_TIME]}); a label file must list each task once"
        )
    return table


def read_match_groups(path: Path | str) -> MatchGroups | None:
    """The matched groups of a case–control label file (`trajonco cohort`'s ``matched_to``: a control's case;
    null for cases), or None when the file has no ``matched_to`` column (any MEDS label file)."""
    from vista.meds.labels import LabelFileError, read_label_table

    try:
        table = read_label_table(path)
    except LabelFileError as exc:
        raise JobInputError(str(exc)) from None
    if "matched_to" not in table.column_names:
        return None
    keys = task_keys(table)
    matched = table.column("matched_to").to_pylist()
    labels = table.column(BOOLEAN_VALUE).to_pylist()
    group_of = {k: int(m) if m is not None else k.subject_id for k, m in zip(keys, matched)}
    return MatchGroups(group_of, dict(zip(keys, labels)))


def task_keys(table: pa.Table) -> list[TaskKey]:
    """The `TaskKey` of every row of a task table."""
    subjects = table.column(SUBJECT_ID).to_pylist()
    times = table.column(PREDICTION_TIME).to_pylist() if PREDICTION_TIME in table.column_names else [None] * len(subjects)
    return [TaskKey(int(s), t) for s, t in zip(subjects, times)]


def keys_table(keys: Iterable[TaskKey]) -> pa.Table:
    """Task keys as a two-column arrow table (for broadcasting a plan to Ray workers)."""
    keys = list(keys)
    return pa.table({
        SUBJECT_ID: pa.array([k.subject_id for k in keys], pa.int64()),
        PREDICTION_TIME: pa.array([k.prediction_time for k in keys], pa.timestamp("us")),
    })
