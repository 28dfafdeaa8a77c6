"""The cohort's node index, ``OUT/index.parquet``: the per-task graph indexes of a VISTA run joined into one file.

One row per node of every selected task's graph (`jobs.vista_graphs.TASK_INDEX_SCHEMA`), in task order, streamed
task by task into a `pyarrow.parquet.ParquetWriter` (memory stays flat for 100,000 patients) and renamed into place
when complete. Query it with polars without loading a single GraphML file, e.g. every patient with a CT of the thorax:
``pl.scan_parquet("OUT/index.parquet").filter(pl.col("code") == "CPT//71260").select("subject_id").unique()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from vista.meds.writer import atomic_path

from jobs.errors import JobError
from jobs.vista_graphs import TASK_INDEX_SCHEMA

INDEX = "index.parquet"


@dataclass(frozen=True, slots=True)
class IndexReport:
    path: Path
    graphs: int
    nodes: int


def consolidate_index(out: Path, patients: Path) -> IndexReport:
    """Join the index files that the rows of ``patients`` (a ``patients.parquet``) name into ``OUT/index.parquet``."""
    files = [f for f in pq.read_table(patients, columns=["index_file"]).column("index_file").to_pylist() if f]
    path = Path(out) / INDEX
    nodes = 0
    with atomic_path(path) as tmp, pq.ParquetWriter(tmp, TASK_INDEX_SCHEMA) as writer:
        for relative in files:
            source = Path(out) / relative
            try:
                table = pq.read_table(source, schema=TASK_INDEX_SCHEMA)
            except (OSError, pa.ArrowException) as exc:
                raise JobError(f"{source}: graph index named by {patients.name} is unreadable ({exc}); remove that "
                               "task's marker and rerun to rebuild it") from None
            writer.write_table(table.replace_schema_metadata(None))
            nodes += table.num_rows
    return IndexReport(path, len(files), nodes)
