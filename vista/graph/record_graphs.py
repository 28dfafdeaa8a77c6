"""The MEDS Graphs a cohort job persists from the records it already read for another system (``jobs.predict
--graphs STORE``: one read of the cohort serves TrajOnco and VISTA), into the store `vista build` writes.

Per block of patients: each whole-record graph built from its loaded record and persisted (`persist_graph`; one the
store's manifest holds with the same content hash, files on disk, is neither rebuilt nor indexed again), then one
node-index part for those written. Each patient's outcome is a `RecordGraph`, whose `GRAPH_SCHEMA` cells go into the
job's row; a graph that fails is that row's ``graph_status``/``graph_error`` (the job keeps its own result). At the
end the job's driver registers the graphs its rows name in the manifest (`register_record_graphs`), so ``vista
source/ask/similar --store STORE`` open them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from vista.shared.cli_kit import check_output_dir
from vista.shared.errors import CommandLineError
from vista.graph.build import source_from_record
from vista.graph.errors import GraphFileError
from vista.graph.store import (
    INDEX_DIR,
    GraphOutcome,
    GraphStore,
    RegisterReport,
    StoreEntry,
    content_hash,
    persist_graph,
    read_manifest,
    stored_graph_present,
    write_index_part,
)
from vista.shared.records import CodeCatalog, PatientRecord

log = logging.getLogger(__name__)

GRAPH_SCHEMA = pa.schema([
    pa.field("graph_status", pa.string()),  # ok | error (the job's own result is kept either way)
    pa.field("graph_error", pa.string()),
    pa.field("graph_file", pa.string()),  # where the store holds it (`vista.graph.store.read_stored_graph`)
    pa.field("graph_hash", pa.string()),
    pa.field("graph_nodes", pa.int64()),
    pa.field("graph_edges", pa.int64()),
    pa.field("graph_source", pa.string()),
    pa.field("graph_index_file", pa.string()),  # the node-index part holding its rows, relative to the store
    pa.field("graph_rebuilt", pa.bool_()),  # False: unchanged on disk (content hash), not rewritten
    pa.field("graph_s", pa.float64()),
])
"""The graph columns of a job row whose patient's graph was persisted (part files and the job's details file)."""

_MAX_GRAPH_ERROR_CHARS = 2000


@dataclass(frozen=True, slots=True)
class RecordGraph:
    """One patient's graph in the store (its file, hash, size and index part), or why it could not be persisted."""

    seconds: float
    file: str | None = None
    content_hash: str | None = None
    nodes: int | None = None
    edges: int | None = None
    source: str | None = None
    rebuilt: bool | None = None
    index_file: str | None = None
    error: str | None = None

    @classmethod
    def failed(cls, exc: BaseException, seconds: float = 0.0) -> RecordGraph:
        return cls(seconds, error=f"{type(exc).__name__}: {exc}"[:_MAX_GRAPH_ERROR_CHARS])

    @classmethod
    def written(cls, outcome: GraphOutcome, index_file: str, seconds: float) -> RecordGraph:
        f = outcome.facts
        return cls(seconds, outcome.file, f.content_hash, f.n_nodes, f.n_edges, f.source, outcome.rebuilt, index_file)

    @classmethod
    def registered(cls, entry: StoreEntry, seconds: float) -> RecordGraph:
        """A graph the store's manifest already holds, unchanged (neither rewritten nor indexed again)."""
        return cls(seconds, entry.file, entry.content_hash, entry.nodes, entry.edges, entry.source, False,
                   entry.index_part)

    def columns(self) -> dict[str, object]:
        """This graph's `GRAPH_SCHEMA` cells."""
        return {"graph_status": "error" if self.error else "ok", "graph_error": self.error, "graph_file": self.file,
                "graph_hash": self.content_hash, "graph_nodes": self.nodes, "graph_edges": self.edges,
                "graph_source": self.source, "graph_index_file": self.index_file, "graph_rebuilt": self.rebuilt,
                "graph_s": self.seconds}


class RecordGraphs:
    """The store's whole-record graphs as one worker persists them: the manifest is read once, at the start (only the
    job's driver writes it, at the end)."""

    def __init__(self, store: Path):
        self.store = Path(store)
        self.stored = {task: e for task, e in read_manifest(self.store).items() if e.prediction_time is None}

    def persist(self, records: Mapping[int, PatientRecord | Exception], catalog: CodeCatalog) -> dict[int, RecordGraph]:
        """The block's patients' graphs in the store (each failure that patient's only; a record that is an
        exception is its failure) and one index part with the node rows of those written or changed."""
        done: dict[int, RecordGraph] = {}
        built: dict[int, tuple[GraphOutcome, float]] = {}
        for subject, record in records.items():
            started = time.perf_counter()
            try:
                if not isinstance(record, PatientRecord):
                    raise record
                source = source_from_record(record, catalog)
                digest = content_hash(source)
                entry = self.stored.get(str(subject))
                if entry is not None and entry.content_hash == digest and self._on_disk(entry):
                    done[subject] = RecordGraph.registered(entry, time.perf_counter() - started)
                    continue
                built[subject] = (persist_graph(self.store, source, digest=digest), time.perf_counter() - started)
            except Exception as exc:  # noqa: BLE001 - failure isolation: the row keeps the job's own result
                done[subject] = RecordGraph.failed(exc, time.perf_counter() - started)
                log.warning("subject %s: no graph (%s)", subject, type(exc).__name__)
        if built:
            try:
                part = write_index_part(self.store, (outcome.index for outcome, _ in built.values()))
            except Exception as exc:  # noqa: BLE001 - the block's graphs are unregistered, their rows say why
                done |= {subject: RecordGraph.failed(exc, seconds) for subject, (_, seconds) in built.items()}
            else:
                done |= {subject: RecordGraph.written(outcome, part, seconds) for subject, (outcome, seconds) in built.items()}
        return done

    def _on_disk(self, entry: StoreEntry) -> bool:
        """Whether a manifest entry's graph (its pack record, or a former layout's files) and index part are in the
        store."""
        return stored_graph_present(self.store, entry.file) and (self.store / entry.index_part).is_file()


def check_graph_store(store: Path, option: str = "--graphs") -> None:
    """``store`` is a directory this run may write, whose manifest (if any) is readable: else one line naming
    ``option`` (`CommandLineError`)."""
    check_output_dir(store, option, resumable=True)
    try:
        read_manifest(store)
    except GraphFileError as exc:
        raise CommandLineError(f"{option} {store}: {exc}") from None


@dataclass(frozen=True, slots=True)
class GraphRegistration:
    """What `register_record_graphs` did: the manifest's side and the rows without a graph."""

    index: RegisterReport
    failed: int


def register_record_graphs(store: Path, details: Path | str) -> GraphRegistration:
    """Register in the manifest of the store at ``store`` the graph of every subject whose newest row in ``details``
    (a job's rows with `GRAPH_SCHEMA` and ``finished_at`` columns, local or remote) has one; a missing index part is
    a `GraphFileError` naming it."""
    import polars as pl

    from vista.shared.storage import resolve, scan_parquet

    rows = scan_parquet([resolve(details)]).select("subject_id", "finished_at", *GRAPH_SCHEMA.names).collect()
    newest = (rows.filter(pl.col("graph_status") == "ok").sort("finished_at").unique("subject_id", keep="last")
              .sort("subject_id").to_dicts())
    entries = [StoreEntry(task=str(r["subject_id"]), subject_id=r["subject_id"], prediction_time=None,
                          content_hash=r["graph_hash"], file=r["graph_file"], nodes=r["graph_nodes"],
                          edges=r["graph_edges"], source=r["graph_source"] or "",
                          built_at=r["finished_at"].replace(tzinfo=None, microsecond=0), index_part=r["graph_index_file"])
               for r in newest]
    missing = [e for e in entries if not (store / e.index_part).is_file()]
    if missing:
        raise GraphFileError(f"{store / missing[0].index_part}: graph index part of subject {missing[0].subject_id} "
                             f"is missing ({len(missing)} subject(s)); rerun with another --out to write them again")
    changed = GraphStore(store).register(entries)
    index = RegisterReport(store / INDEX_DIR, len(entries), sum(e.nodes for e in entries), changed)
    return GraphRegistration(index, rows.filter(pl.col("graph_status") != "ok").height)
