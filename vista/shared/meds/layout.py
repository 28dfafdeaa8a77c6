"""Where each subject's rows sit in a shard, found from the ``subject_id`` column alone, and the order checks on it.

Reading one int64 column is cheap (≈20 ms for 10M sorted rows here), and the resulting layout lets the reader
fetch a few patients by reading only the row groups that hold them, and check MEDS' two layout rules up front:
a subject's rows are contiguous in exactly one file, and subject ids do not decrease within a file.

>>> import pyarrow as pa
>>> layout, issues = build_layout("data/0.parquet", pa.array([3, 3, 5, 4, 4, 5], pa.int64()), row_group_rows=[4, 2])
>>> layout.run_subjects.tolist(), layout.run_starts.tolist(), layout.run_lengths.tolist()
([3, 5, 4, 5], [0, 2, 3, 5], [2, 1, 2, 1])
>>> for issue in issues:
...     print(issue.subject_id, issue.field, issue.problem)
5 subject_id rows are not contiguous: 2 separate blocks (rows 2-2, then 5-5)
4 subject_id rows out of order: subject 4 starts at row 3 after subject 5 (subject ids must not decrease within a file)
>>> layout.row_group_ranges(np.array([0]), np.array([2]))
[(0, 1)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from vista.shared.meds.errors import IssueKind, IssueScope, MedsIssue
from vista.shared.meds.schema import SUBJECT_ID


@dataclass(frozen=True, eq=False)
class ShardLayout:
    """The runs of equal ``subject_id`` in one shard, in file order, plus the row-group boundaries."""

    shard: str
    run_subjects: np.ndarray  # int64: subject of each run
    run_starts: np.ndarray  # int64: first row of each run
    run_lengths: np.ndarray  # int64: rows in each run
    row_group_starts: np.ndarray  # int64: first row of each row group, then the number of rows
    subjects: np.ndarray = field(init=False)  # sorted distinct subject ids

    def __post_init__(self) -> None:
        object.__setattr__(self, "subjects", np.unique(self.run_subjects))

    @property
    def num_rows(self) -> int:
        return int(self.row_group_starts[-1])

    def runs_of(self, subject_ids: np.ndarray) -> np.ndarray:
        """Indices (in file order) of the runs belonging to any of ``subject_ids``."""
        return np.flatnonzero(np.isin(self.run_subjects, subject_ids))

    def row_group_ranges(self, starts: np.ndarray, stops: np.ndarray) -> list[tuple[int, int]]:
        """The row groups holding rows ``[starts[i], stops[i])``, merged into ranges ``(first, last + 1)``."""
        if len(starts) == 0:
            return []
        first = np.searchsorted(self.row_group_starts, starts, side="right") - 1
        last = np.searchsorted(self.row_group_starts, stops - 1, side="right") - 1
        wanted = np.zeros(len(self.row_group_starts) - 1, dtype=bool)
        for lo, hi in zip(first.tolist(), last.tolist()):
            wanted[lo : hi + 1] = True
        edges = np.flatnonzero(np.diff(np.concatenate(([False], wanted, [False])).astype(np.int8)))
        return [(int(a), int(b)) for a, b in zip(edges[0::2], edges[1::2])]


def build_layout(
    shard: str, subject_ids: pa.Array | pa.ChunkedArray, row_group_rows: Sequence[int]
) -> tuple[ShardLayout | None, list[MedsIssue]]:
    """The layout of a shard from its whole ``subject_id`` column, and the layout issues found in it.

    Null subject ids make the file unusable (a file-level issue, no layout). A subject split into several runs
    is a subject-level issue; so is a subject whose id is smaller than one seen earlier in the file.
    """
    if isinstance(subject_ids, pa.ChunkedArray):
        subject_ids = subject_ids.combine_chunks()
    if subject_ids.null_count:
        valid = np.asarray(subject_ids.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        first = int(np.flatnonzero(~valid)[0])
        count = subject_ids.null_count
        problem = f"{count} null subject id{'' if count == 1 else 's'} (first at row {first})"
        return None, [MedsIssue(IssueKind.VALUE, IssueScope.FILE, shard, problem, field=SUBJECT_ID, row=first)]
    ids = np.asarray(subject_ids.to_numpy(zero_copy_only=False), dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1]))) if ids.size else np.zeros(0, np.int64)
    lengths = np.diff(np.append(starts, ids.size))
    layout = ShardLayout(
        shard, ids[starts], starts.astype(np.int64), lengths.astype(np.int64),
        np.concatenate(([0], np.cumsum(np.asarray(row_group_rows, dtype=np.int64)))).astype(np.int64),
    )
    return layout, _order_issues(layout)


def _order_issues(layout: ShardLayout) -> list[MedsIssue]:
    runs, starts, lengths = layout.run_subjects, layout.run_starts, layout.run_lengths
    issues: list[MedsIssue] = []
    if runs.size < 2:
        return issues
    # Subjects with more than one run: their rows are interleaved with another subject's.
    order = np.argsort(runs, kind="stable")
    sorted_runs = runs[order]
    repeated = np.unique(sorted_runs[1:][sorted_runs[1:] == sorted_runs[:-1]])
    for sid in repeated.tolist():
        where = np.flatnonzero(runs == sid)
        (a, b) = int(starts[where[0]]), int(starts[where[0]] + lengths[where[0]] - 1)
        (c, d) = int(starts[where[1]]), int(starts[where[1]] + lengths[where[1]] - 1)
        problem = f"rows are not contiguous: {where.size} separate blocks (rows {a}-{b}, then {c}-{d})"
        issues.append(MedsIssue(IssueKind.ORDER, IssueScope.SUBJECT, layout.shard, problem,
                                subject_id=sid, field=SUBJECT_ID, row=c))
    # Runs whose subject id is below the largest one seen before them (repeated subjects are reported above).
    running_max = np.maximum.accumulate(runs)
    late = np.flatnonzero(runs[1:] < running_max[:-1]) + 1
    late = late[~np.isin(runs[late], repeated)]
    for i in late.tolist():
        sid, row = int(runs[i]), int(starts[i])
        problem = (f"rows out of order: subject {sid} starts at row {row} after subject {int(running_max[i - 1])} "
                   "(subject ids must not decrease within a file)")
        issues.append(MedsIssue(IssueKind.ORDER, IssueScope.SUBJECT, layout.shard, problem,
                                subject_id=sid, field=SUBJECT_ID, row=row))
    return issues


def cross_shard_issues(layouts: Sequence[ShardLayout], only: np.ndarray | None = None) -> list[MedsIssue]:
    """One subject-level issue per file for every subject found in more than one file (among ``only`` if given).

    >>> a, _ = build_layout("data/a.parquet", pa.array([1, 2], pa.int64()), [2])
    >>> b, _ = build_layout("data/b.parquet", pa.array([2, 3], pa.int64()), [2])
    >>> for issue in cross_shard_issues([a, b]):
    ...     print(issue.file, issue.subject_id, issue.problem)
    data/a.parquet 2 subject also present in data/b.parquet (a subject's rows must all be in one file)
    data/b.parquet 2 subject also present in data/a.parquet (a subject's rows must all be in one file)
    """
    if len(layouts) < 2:
        return []
    per_shard = [lay.subjects if only is None else lay.subjects[np.isin(lay.subjects, only)] for lay in layouts]
    all_ids = np.concatenate(per_shard)
    owner = np.repeat(np.arange(len(layouts)), [len(ids) for ids in per_shard])
    order = np.argsort(all_ids, kind="stable")
    all_ids, owner = all_ids[order], owner[order]
    dup_ids = np.unique(all_ids[1:][all_ids[1:] == all_ids[:-1]])
    issues: list[MedsIssue] = []
    for sid in dup_ids.tolist():
        holders = [layouts[k].shard for k in owner[all_ids == sid].tolist()]
        for shard in holders:
            others = ", ".join(h for h in holders if h != shard)
            problem = f"subject also present in {others} (a subject's rows must all be in one file)"
            issues.append(MedsIssue(IssueKind.ORDER, IssueScope.SUBJECT, shard, problem,
                                    subject_id=sid, field=SUBJECT_ID))
    return issues
