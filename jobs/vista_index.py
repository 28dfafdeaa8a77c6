"""The VISTA job's last step: register the graphs its actors wrote in the output directory's graph store manifest.

The actors already wrote each graph (GraphML + columnar copy) and one node-index part per batch; each task's row in
``patients.parquet`` names its graph file and index part. Registering reads those columns only (no graph, no index
row is read or rewritten) and appends one manifest part with the tasks whose entry changed
(`vista.graph.GraphStore.register`), so a rerun that rebuilt nothing writes nothing. Query the cohort with
``GraphStore(OUT).scan_index()`` (polars, lazily over the parts), or open a patient with ``vista ask --store OUT``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from vista.graph.store import INDEX_DIR, GraphStore, StoreEntry

from jobs.errors import JobError

_COLUMNS = ["task", "subject_id", "prediction_time", "content_hash", "graph_file", "n_nodes", "n_edges", "source",
            "finished_at", "index_file"]


@dataclass(frozen=True, slots=True)
class IndexReport:
    path: Path  # the store's index directory
    graphs: int  # graphs registered in the manifest (this run's and earlier runs')
    nodes: int
    changed: int  # manifest entries added or superseded by this run


def _naive(value: datetime | None) -> datetime:
    return (value or datetime.now()).replace(tzinfo=None, microsecond=0)


def register_graphs(out: Path, patients: Path) -> IndexReport:
    """Register in the store at ``out`` every graph the rows of ``patients`` (a ``patients.parquet``) name."""
    try:
        rows = pq.read_table(patients, columns=_COLUMNS).to_pylist()
    except (OSError, pa.ArrowException, KeyError) as exc:
        raise JobError(f"{patients}: cannot read the task rows to register their graphs ({exc})") from None
    entries = [StoreEntry(task=r["task"], subject_id=r["subject_id"], prediction_time=r["prediction_time"],
                          content_hash=r["content_hash"], file=r["graph_file"], nodes=r["n_nodes"], edges=r["n_edges"],
                          source=r["source"] or "", built_at=_naive(r["finished_at"]), index_part=r["index_file"])
               for r in rows if r["content_hash"] and r["graph_file"] and r["index_file"]]
    missing = [e.index_part for e in entries if not (Path(out) / e.index_part).is_file()]
    if missing:
        raise JobError(f"{Path(out) / missing[0]}: graph index part named by {patients.name} is missing "
                       f"({len(missing)} task(s)); rerun into another --out to rebuild the store (graphs rebuild in "
                       "milliseconds)")
    store = GraphStore(out)
    changed = store.register(entries)
    return IndexReport(Path(out) / INDEX_DIR, len(entries), sum(e.nodes for e in entries), changed)
