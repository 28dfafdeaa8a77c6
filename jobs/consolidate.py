"""The final consolidated parquet of a job whose outputs are per-task marker files (build-graphs): one row per
selected task, read back from the markers. (The predict job's rows are parquet part files written by its actors;
their consolidation is a polars scan, `jobs.row_parts.consolidate_parts`.)

Rows are streamed into a `pyarrow.parquet.ParquetWriter` a few thousand at a time (memory stays flat for 100,000
patients) and the file is renamed into place when complete, so readers never see half a table. Each task has one
marker file, so each appears once — whichever run computed it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from vista.atomic import atomic_path

from jobs.outputs import MarkerStore
from jobs.tasks import TaskKey

R = TypeVar("R", bound=BaseModel)


@dataclass(slots=True)
class Consolidation(Generic[R]):
    """What went into the consolidated file."""

    path: Path
    rows: int = 0
    missing: list[TaskKey] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)

    @property
    def complete(self) -> bool:
        return not self.missing


def consolidate(
    store: MarkerStore,
    keys: Iterable[TaskKey],
    path: Path,
    *,
    parse: Callable[[bytes, str], R],
    to_table: Callable[[list[R]], pa.Table],
    schema: pa.Schema,
    status_of: Callable[[R], str],
    chunk_rows: int = 5000,
) -> Consolidation[R]:
    """Write the rows of every key that has a marker, in key order, to ``path`` (atomically)."""
    report: Consolidation[R] = Consolidation(Path(path))
    with atomic_path(path) as tmp:
        with pq.ParquetWriter(str(tmp), schema) as writer:
            pending: list[R] = []
            for key in sorted(keys, key=TaskKey.sort_key):
                data = store.read(key)
                if data is None:
                    report.missing.append(key)
                    continue
                row = parse(data, str(store.path(key, failed=False)))
                report.statuses[status_of(row)] += 1
                pending.append(row)
                if len(pending) >= chunk_rows:
                    writer.write_table(to_table(pending))
                    report.rows += len(pending)
                    pending = []
            if pending:
                writer.write_table(to_table(pending))
                report.rows += len(pending)
    return report
