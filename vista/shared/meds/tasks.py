"""The tasks of a cohort run as tables: a label file's (subject, prediction time) rows, checked, with the matched
groups of a case–control file, and each task's MEDS row count as a cheap stand-in for its chain length.

A task's key is `vista.shared.meds.task_key.TaskKey`; a task table has the `TASK_SCHEMA` columns (what travels through Ray
Data). `read_label_tasks` reads the label file once and returns both its task table and its `MatchGroups`.

>>> import tempfile
>>> from datetime import datetime
>>> import pyarrow.parquet as pq
>>> path = Path(tempfile.mkdtemp()) / "labels.parquet"
>>> pq.write_table(pa.table({"subject_id": [1, 2, 3], "prediction_time": [datetime(2020, 1, 1)] * 3,
...                          "boolean_value": [True, False, False], "matched_to": [None, 1, 1]}), path)
>>> tasks = read_label_tasks(path)
>>> tasks.table.column_names, [k.subject_id for k in task_keys(tasks.table)]
(['subject_id', 'prediction_time', 'boolean_value'], [1, 2, 3])
>>> tasks.groups.describe(task_keys(tasks.table))
'1 whole matched group(s): 1 cases, 2 controls'
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from vista.shared.meds.labels import BOOLEAN_VALUE, LABEL_COLUMNS, PREDICTION_TIME, SUBJECT_ID, LabelFileError, read_label_table
from vista.shared.meds.task_key import TaskKey

MATCHED_TO = "matched_to"
"""Column of a case–control label file (`trajonco cohort`): a control's case (its subject id); null for a case."""

TASK_SCHEMA = pa.schema([
    pa.field(SUBJECT_ID, pa.int64(), nullable=False),
    pa.field(PREDICTION_TIME, pa.timestamp("us"), nullable=True),
    pa.field(BOOLEAN_VALUE, pa.bool_(), nullable=True),
])
"""The columns a task row carries through Ray Data (``prediction_time`` null: the whole record)."""


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


@dataclass(frozen=True)
class LabelTasks:
    """A label file read once: its task table (`TASK_SCHEMA`) and, when it has one, its ``matched_to`` column."""

    table: pa.Table
    matched_to: pa.ChunkedArray | None = None

    @functools.cached_property
    def groups(self) -> MatchGroups | None:
        """The matched groups (None: no ``matched_to`` column); built on first use, from the one read."""
        if self.matched_to is None:
            return None
        keys = task_keys(self.table)
        group_of = {k: int(m) if m is not None else k.subject_id for k, m in zip(keys, self.matched_to.to_pylist())}
        return MatchGroups(group_of, dict(zip(keys, self.table.column(BOOLEAN_VALUE).to_pylist())))


def read_label_tasks(path: Path | str) -> LabelTasks:
    """The tasks of a MEDS label file (``subject_id``, ``prediction_time``, ``boolean_value``), checked, and its
    matched groups, from one read.

    Any file `vista.shared.meds.labels.read_label_table` accepts (MEDS labels, ACES's outputs) is read the same way. Raises
    `LabelFileError` naming the file and the field for a missing file or column, nulls, or duplicate keys.
    """
    full = read_label_table(path)
    table = full.select(list(LABEL_COLUMNS)).cast(TASK_SCHEMA.remove_metadata())
    keys = pa.table({SUBJECT_ID: table.column(SUBJECT_ID), PREDICTION_TIME: table.column(PREDICTION_TIME)})
    distinct = keys.group_by([SUBJECT_ID, PREDICTION_TIME]).aggregate([([], "count_all")])
    repeated = distinct.filter(pc.greater(distinct.column("count_all"), 1))
    if repeated.num_rows:
        first = repeated.slice(0, 1).to_pylist()[0]
        raise LabelFileError(str(path), f"{repeated.num_rows} (subject, prediction_time) pair(s) appear more than "
                             f"once (first: {first[PREDICTION_TIME]}); a label file must list each task once",
                             subject_id=first[SUBJECT_ID], field=PREDICTION_TIME)
    return LabelTasks(table, full.column(MATCHED_TO) if MATCHED_TO in full.column_names else None)


def task_keys(table: pa.Table) -> list[TaskKey]:
    """The `TaskKey` of every row of a task table."""
    subjects = table.column(SUBJECT_ID).to_pylist()
    times = table.column(PREDICTION_TIME).to_pylist() if PREDICTION_TIME in table.column_names else [None] * len(subjects)
    return [TaskKey(int(s), t) for s, t in zip(subjects, times)]


def rows_in_order(tasks: pa.Table, keys: Sequence[TaskKey]) -> pa.Table:
    """The rows of a label table (`TASK_SCHEMA` columns, each with a prediction time, and any others) of ``keys``, in
    that order (an arrow join: a null prediction time matches nothing).

    >>> from datetime import datetime
    >>> keys = [TaskKey(s, datetime(2020, 1, s)) for s in (1, 2, 3)]
    >>> table = keys_table(keys).append_column("boolean_value", pa.array([True, False, None]))
    >>> rows_in_order(table, [keys[2], keys[0]]).column("boolean_value").to_pylist()
    [None, True]
    """
    order = keys_table(keys).append_column("_order", pa.array(range(len(keys)), pa.int64()))
    joined = tasks.join(order, keys=[SUBJECT_ID, PREDICTION_TIME], join_type="inner")
    return joined.sort_by("_order").drop_columns(["_order"])


def keys_table(keys: Iterable[TaskKey]) -> pa.Table:
    """Task keys as a two-column arrow table (for broadcasting a plan to Ray workers)."""
    keys = list(keys)
    return pa.table({
        SUBJECT_ID: pa.array([k.subject_id for k in keys], pa.int64()),
        PREDICTION_TIME: pa.array([k.prediction_time for k in keys], pa.timestamp("us")),
    })


def estimate_lengths(dataset: Path | str, keys: Iterable[TaskKey]) -> dict[TaskKey, int]:
    """Each task's MEDS rows before its prediction time (static rows included; every row without one): a cheap
    stand-in for its chain length, from two columns of the data files, scanned by polars.

    Only the shards whose footer statistics may hold a task's subject are scanned, and the subject filter comes
    before the join, so polars decodes ``time`` only for the tasks' rows: the cost follows the tasks, not the dataset
    (100 tasks over a 1M-subject dataset: 0.2 CPU-s, against 1.6-1.8 scanning every row).
    """
    import numpy as np
    import polars as pl

    from vista.shared.meds.reader import MedsDataset
    from vista.shared.storage import scan_parquet

    keys = list(keys)
    if not keys:
        return {}
    meds = MedsDataset(dataset, on_error="quarantine")  # a path or an object-store URI; unusable shards left out
    wanted = np.unique(np.fromiter((key.subject_id for key in keys), np.int64, len(keys)))
    files = []
    for shard in meds.check_files():
        ids = meds.subject_range(shard)
        if ids is None or np.any((wanted >= ids[0]) & (wanted <= ids[1])):
            files.append(meds.location / shard)
    if not files:
        return {}
    tasks = pl.from_arrow(keys_table(keys)).lazy()
    rows = (scan_parquet(files).select(pl.col(SUBJECT_ID).cast(pl.Int64), pl.col("time").cast(pl.Datetime("us")))
            .filter(pl.col(SUBJECT_ID).is_in(wanted.tolist())))
    counted = (
        rows.join(tasks, on=SUBJECT_ID, how="inner")
        .filter(pl.col(PREDICTION_TIME).is_null() | pl.col("time").is_null() | (pl.col("time") < pl.col(PREDICTION_TIME)))
        .group_by([SUBJECT_ID, PREDICTION_TIME]).agg(pl.len().alias("rows"))
        .collect(engine="streaming")
    )
    return {TaskKey(int(s), t): int(n) for s, t, n in zip(counted[SUBJECT_ID].to_list(), counted[PREDICTION_TIME].to_list(),
                                                          counted["rows"].to_list())}
