"""Where patient search reads a store: its node index (a polars LazyFrame) and, only when a question needs text,
the graphs of a few patients. Every store access of `vista.patient_search` goes through this module.

The store is a `vista.graph.GraphStore` directory — what ``vista graph`` and ``jobs.build_graphs --out`` both write.
Its whole-record graphs are the cohort (a label-driven job's cut records are not patients of their own). Used:
`vista.graph.store.is_graph_store`, `GraphStore.subject_ids`, `GraphStore.scan_index` (one row per node,
`vista.graph.index.INDEX_SCHEMA` columns: ``subject_id``, ``node_id``, ``type``, ``code``, ``time`` … but no
text) and `GraphStore.load` (the columnar copy), so text predicates load the graphs of candidate patients only.
TOA timelines, when the store holds them (``<root>/toa/<subject>.json``, `vista.toa.store.TimelineStore`), are
read only when current: built from the graph the store holds now (their ``graph_hash``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path

import polars as pl
import pyarrow as pa

from vista.patient_search.errors import PatientSearchError
from vista.graph.index import INDEX_SCHEMA
from vista.graph.model import NodeType, PatientGraph
from vista.toa.model import PatientTimeline

INDEX_COLUMNS = tuple(INDEX_SCHEMA.names)


@dataclass(frozen=True, slots=True)
class NodeText:
    """The text of one node of a patient's graph (a note, or an event with a text value)."""

    subject_id: int
    node_id: str
    code: str | None
    time: datetime | None
    text: str


class CohortSource:
    """A graph store opened for cohort questions (see the module docstring)."""

    def __init__(self, root: str | os.PathLike):
        from vista.graph.store import GraphStore, is_graph_store

        self.root = Path(root)
        if not self.root.is_dir():
            raise PatientSearchError(f"{self.root}: no such store directory")
        if not is_graph_store(self.root):
            raise PatientSearchError(f"{self.root}: not a graph store (made by `vista graph` or `jobs.build_graphs`)")
        self._store = GraphStore(self.root)

    def scan_index(self) -> pl.LazyFrame:
        """Every node of every patient's whole-record graph, `vista.graph.index.INDEX_SCHEMA` columns."""
        return self._store.scan_index().select(INDEX_COLUMNS)

    @cached_property
    def index(self) -> pl.DataFrame:
        """`scan_index` collected once (a clear error for an unreadable index)."""
        try:
            return self.scan_index().collect()
        except (OSError, pl.exceptions.PolarsError, pa.ArrowException) as exc:
            raise PatientSearchError(f"{self.root}: unreadable node index ({type(exc).__name__}: {exc})") from None

    def subject_ids(self) -> list[int]:
        """Subjects with a whole-record graph, sorted."""
        return self._store.subject_ids()

    def check_subject(self, subject_id: int) -> None:
        if subject_id not in self._store:
            raise PatientSearchError(f"{self.root}: no graph for subject {subject_id}")

    def graph(self, subject_id: int) -> PatientGraph:
        """The stored graph of one patient."""
        self.check_subject(subject_id)
        return self._store.load(subject_id)

    def texts(self, subject_id: int) -> list[NodeText]:
        """The texts of a patient's notes and of its events with a text value, in node order."""
        nodes = self.graph(subject_id).nodes
        types = nodes.column("type").to_pylist()
        wanted = {NodeType.NOTE.code, NodeType.EVENT.code}
        columns = (nodes.column(c).to_pylist() for c in ("id", "code", "time", "text"))
        return [NodeText(subject_id, node_id, code, time, text)
                for kind, node_id, code, time, text in zip(types, *columns) if text and kind in wanted]

    def timelines(self) -> tuple[dict[int, PatientTimeline], list[int]]:
        """The stored TOA timelines built from the current graphs, and the subjects whose stored timeline is stale
        (built from another version of the graph). Patients without a timeline are in neither."""
        from vista.toa.store import TimelineStore

        store = TimelineStore(self.root)
        current: dict[int, PatientTimeline] = {}
        stale: list[int] = []
        for sid in self.subject_ids():
            if not store.path_of(sid).is_file():
                continue
            timeline = store.load(sid)  # TimelineFileError naming the file when unreadable
            if timeline.graph_hash is not None and timeline.graph_hash == self._store.content_hash_of(sid):
                current[sid] = timeline
            else:
                stale.append(sid)
        return current, stale


def open_source(root: str | os.PathLike) -> CohortSource:
    """Open a graph store (``vista graph`` or ``jobs.build_graphs`` output) for cohort questions."""
    return CohortSource(root)
