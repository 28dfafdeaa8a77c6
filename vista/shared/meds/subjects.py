"""Listing the subjects of a MEDS dataset shard by shard, each unreadable shard named rather than fatal.

A whole-dataset run lists its subjects from every shard's ``subject_id`` column (`list_shard_subjects`, run once
per shard by the job's Ray Data tasks); a shard whose ids cannot be read comes back as one `SHARD_PROBLEM` row, and
`unlistable_error` words them all in one line. `check_listable` finds unusable footers and schemas before any read.

A ``--limit N`` run needs only the N lowest ids (`first_subjects`): the footers' subject-id statistics say which
shards may hold them, so it reads the ids of those shards only, and its cost follows N, not the dataset.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from vista.shared.meds.errors import MedsFileError, one_line
from vista.shared.meds.labels import SUBJECT_ID

SHARD_PROBLEM = "shard_problem"
"""Column of the subject listing: null for a subject row; for a shard whose subject ids cannot be read, the one row
naming the shard and the problem (subject_id null). A Ray Data UDF that raised would reach the driver as a Ray
traceback, without the message."""


def list_shard_subjects(batch: pa.Table, root: str) -> pa.Table:
    """The distinct subject ids of each shard path in ``batch["shard"]`` (ids are unique to a shard), or a
    `SHARD_PROBLEM` row for a shard that cannot be read (a Ray Data UDF: a batch in, a table out)."""
    ids, problems = [], []
    for shard in batch.column("shard").to_pylist():
        try:
            column = pq.read_table(Path(root) / shard, columns=[SUBJECT_ID]).column(SUBJECT_ID)
            found = column.unique().cast(pa.int64())
        except (OSError, pa.ArrowException) as exc:
            ids.append(pa.nulls(1, pa.int64()))
            problems.append(pa.array([f"{shard}: cannot read column subject_id ({one_line(exc)})"], pa.string()))
            continue
        found = found.combine_chunks() if isinstance(found, pa.ChunkedArray) else found
        ids.append(found)
        problems.append(pa.nulls(len(found), pa.string()))
    empty = not ids
    return pa.table({SUBJECT_ID: pa.array([], pa.int64()) if empty else pa.concat_arrays(ids),
                     SHARD_PROBLEM: pa.array([], pa.string()) if empty else pa.concat_arrays(problems)})


def unusable_shards(dataset: Path) -> list[str]:
    """The shards of the MEDS dataset whose footer or schema is unusable (truncated, not parquet, empty, a column
    missing or mistyped), one line each naming the file; reads no rows. A dataset without data/ or shards raises
    `MedsFileError`."""
    from vista.shared.meds.reader import MedsDataset

    meds = MedsDataset(dataset, on_error="quarantine")
    meds.check_files()
    return [str(entry) for entry in meds.quarantine.entries]


def unlistable_error(dataset: Path, problems: list[str]) -> MedsFileError:
    """One line naming the shards whose subjects cannot be listed (the first five) and what to do."""
    shown = "; ".join(sorted(problems)[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
    return MedsFileError(str(dataset), f"the subjects of {len(problems)} shard(s) cannot be listed: {shown}. Fix or "
                         f"move those files (`trajonco validate {dataset} --quarantine` lists every problem), or pass "
                         "--labels to run the subjects of a label file (theirs then get error rows)")


def check_listable(dataset: Path) -> None:
    """`MedsFileError` naming every unusable shard (footer, schema) of the dataset: a whole-dataset run lists its
    subjects from every shard, so it cannot start without them."""
    problems = unusable_shards(dataset)
    if problems:
        raise unlistable_error(dataset, problems)


@dataclass(frozen=True, slots=True)
class FirstSubjects:
    """The lowest subject ids of a dataset, and the shards whose ``subject_id`` column was read to find them."""

    subject_ids: list[int]
    shards_read: tuple[str, ...]


def first_subjects(dataset: Path, count: int) -> FirstSubjects:
    """The ``count`` lowest subject ids of the MEDS dataset (all of them when it has fewer), as the whole listing
    sorted and cut would give, reading the ids of only the shards that may hold them.

    Shards are visited by the lowest id their footer's statistics give (a shard without statistics first: it may hold
    any id); the walk stops at the first shard whose lowest id is above the ``count``-th lowest id found so far. A
    shard whose ids cannot be read raises `unlistable_error`, as the whole listing does.
    """
    from vista.shared.meds.reader import MedsDataset

    if count < 1:
        raise ValueError(f"count must be positive, not {count}")
    meds = MedsDataset(dataset, on_error="quarantine")
    ranges = [(shard, meds.subject_range(shard)) for shard in meds.check_files()]
    ranges.sort(key=lambda item: (item[1] is not None, item[1][0] if item[1] is not None else 0, item[0]))
    kept = np.zeros(0, np.int64)
    read: list[str] = []
    problems: list[str] = []
    for shard, subject_range in ranges:
        if kept.size >= count and subject_range is not None and subject_range[0] > kept[count - 1]:
            break
        listed = list_shard_subjects(pa.table({"shard": [shard]}), str(dataset))
        read.append(shard)
        problems += [p for p in listed.column(SHARD_PROBLEM).to_pylist() if p is not None]
        ids = listed.column(SUBJECT_ID).drop_null().to_numpy()
        kept = np.union1d(kept, ids)[:count]  # sorted, distinct
    if problems:
        raise unlistable_error(dataset, problems)
    return FirstSubjects(kept.tolist(), tuple(read))
