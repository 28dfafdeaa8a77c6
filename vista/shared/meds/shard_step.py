"""A data step that works shard by shard: each MEDS shard is reduced to a small Arrow table, then the tables are
reduced to the step's result — so memory is bounded by one shard plus the summaries, whatever the dataset's size.

The same step runs in one process (`run_local`) or as Ray Data over the shard list (``python -m jobs.data_steps``,
one task per shard, the reduce on the driver); only ``jobs`` imports Ray, so a step lives here or above and knows
nothing of where it runs. Both routes must give the same result, so a step's ``reduce`` may not depend on the
order in which the summaries arrive, nor on how they are grouped into tables (Ray Data may merge or split them):
sort by a key the summaries carry (the shard, the subject) before anything order-sensitive.

>>> from dataclasses import dataclass
>>> import pyarrow as pa
>>> @dataclass(frozen=True)
... class CountRows:
...     name: str = "count"
...     def map_shard(self, shard: Path) -> pa.Table:
...         return pa.table({"shard": [shard.name], "rows": [len(shard.name)]})
...     def reduce(self, tables: Sequence[pa.Table]) -> int:
...         return sum(sum(t.column("rows").to_pylist()) for t in tables)
>>> run_local(CountRows(), [Path("a.parquet"), Path("bb.parquet")])
19
>>> run_local(CountRows(), [Path("a.parquet"), Path("bb.parquet")], workers=2)
19
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol, TypeVar, runtime_checkable

import pyarrow as pa

R_co = TypeVar("R_co", covariant=True)


@runtime_checkable
class ShardStep(Protocol[R_co]):
    """One data step: ``map_shard`` reads one shard and returns its small summary; ``reduce`` turns every summary
    into the result. Instances are pickled to the Ray workers: plain frozen dataclasses of settings, defined in a
    package module (not a test or ``__main__``)."""

    name: str

    def map_shard(self, shard: Path) -> pa.Table:
        """The summary of one shard (a few rows per subject at most, never the shard's rows)."""
        ...

    def reduce(self, tables: Sequence[pa.Table]) -> R_co:
        """The result from every shard's summary, in any order and grouping (see the module doc)."""
        ...


def run_local(step: ShardStep[R_co], shards: Sequence[Path], *, workers: int = 1) -> R_co:
    """Run ``step`` in this process, ``workers`` shards at a time on threads (polars and pyarrow release the GIL
    while they read and compute), holding only the summaries — and ``workers`` shards' rows at the peak."""
    if workers <= 1 or len(shards) <= 1:
        return step.reduce([step.map_shard(Path(shard)) for shard in shards])
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"shard-{step.name}") as pool:
        return step.reduce(list(pool.map(step.map_shard, map(Path, shards))))
