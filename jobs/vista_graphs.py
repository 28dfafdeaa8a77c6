"""The VISTA job's graph stage: one task's MEDS Graph built from its source and persisted, skipped when unchanged.

Each task owns a folder ``OUT/vista/<bucket>/<task name>/`` (many actors write at once, so unlike the single-writer
`vista.graph.GraphStore` there is no shared manifest): ``graph.graphml`` (written first) and ``index.parquet`` (the
graph's node index, `vista.graph.INDEX_SCHEMA` plus the task's ``task`` and ``prediction_time``; written last, its
file metadata holds the graph's content hash and counts, so it doubles as the graph's "complete" sign). The TOA and
display stores put ``toa/`` and ``display/`` in the same folder. A rerun computes the content hash of the source
(`vista.graph.content_hash`: rows, provenance, catalog entries, build settings) and rewrites nothing when the stored
index carries the same hash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from vista.graph import (
    DEFAULT_CONFIG,
    INDEX_SCHEMA,
    GraphConfig,
    GraphInputError,
    GraphSource,
    PatientGraph,
    build_graph,
    content_hash,
    index_table,
    source_from_record,
    source_from_xml,
    write_graph,
)
from vista.meds.writer import atomic_path
from vista.records import CodeCatalog, PatientRecord

from jobs.outputs import BUCKETS
from jobs.tasks import TaskKey

VISTA_DIR = "vista"
GRAPH_FILE = "graph.graphml"
INDEX_FILE = "index.parquet"
_META_KEY = b"vista.job.graph"

TASK_INDEX_SCHEMA = pa.schema([pa.field("task", pa.string(), nullable=False),
                               pa.field("prediction_time", pa.timestamp("us")), *INDEX_SCHEMA])
"""Rows of a task's ``index.parquet`` and of the cohort's ``OUT/index.parquet``: one per node of its graph."""


def task_folder(out: Path, key: TaskKey) -> Path:
    """``OUT/vista/<bucket>/<task name>``: where a task's graph, timeline and display live."""
    return Path(out) / VISTA_DIR / f"{key.subject_id % BUCKETS:02d}" / key.name


@dataclass(frozen=True, slots=True)
class GraphFacts:
    """What the stored index says about its graph."""

    content_hash: str
    subject_id: int
    source: str
    n_nodes: int
    n_edges: int
    n_events: int
    n_encounters: int


@dataclass(frozen=True, slots=True)
class GraphOutcome:
    """The graph stage of one task: the facts, the files (relative to OUT), whether it was written now, the graph."""

    facts: GraphFacts
    graph_file: str
    index_file: str
    rebuilt: bool
    graph: PatientGraph | None  # None when unchanged on disk and no later stage needs it


def meds_source(record: PatientRecord, catalog: CodeCatalog, prediction_time: datetime | None) -> GraphSource:
    """The graph source of a MEDS task: the whole record, or static rows and events strictly before the time."""
    return source_from_record(record if prediction_time is None else record.before(prediction_time), catalog)


def xml_source(path: Path, profile: str | None = None) -> GraphSource:
    """The graph source of a patient XML file (`GraphInputError` naming the file for unreadable or bad documents);
    ``profile`` spells an ``<eventstream>`` file's codes (default: the VISTA XML profile)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise GraphInputError(str(path), f"cannot read the file ({exc.strerror or exc})") from None
    return source_from_xml(data, path=str(path)) if profile is None else source_from_xml(data, path=str(path),
                                                                                        profile=profile)


def stored_facts(folder: Path) -> GraphFacts | None:
    """The facts in the folder's ``index.parquet`` metadata, or None (no index, or not one of ours)."""
    try:
        metadata = pq.read_schema(folder / INDEX_FILE).metadata or {}
        return GraphFacts(**json.loads(metadata[_META_KEY]))
    except (OSError, KeyError, ValueError, TypeError, pa.ArrowException):
        return None


def _build(source: GraphSource, config: GraphConfig, digest: str, file: Path | None) -> PatientGraph:
    try:
        graph = build_graph(source, config=config)
    except GraphInputError as exc:
        if file is None or exc.source == str(file):
            raise
        # an XML file that states its MEDS rows: the build names the shard; say which file as well
        raise GraphInputError(f"{file} (rows of {exc.source})", exc.problem, patient=exc.patient, field=exc.field,
                              element=exc.element) from None
    return PatientGraph(replace(graph.info, content_hash=digest), graph.nodes, graph.edges)


def _facts(graph: PatientGraph, index: pa.Table, digest: str) -> GraphFacts:
    return GraphFacts(
        content_hash=digest, subject_id=graph.subject_id, source=graph.info.source, n_nodes=graph.n_nodes,
        n_edges=graph.n_edges, n_events=index.num_rows - index.column("row").null_count,
        n_encounters=int(pc.sum(pc.equal(index.column("type"), "encounter")).as_py() or 0),
    )


def persist_graph(source: GraphSource, out: Path, key: TaskKey, *, config: GraphConfig = DEFAULT_CONFIG,
                  need_graph: bool, xml_file: Path | None = None) -> GraphOutcome:
    """Build and write the task's graph and index, or reuse them when the stored content hash is the same."""
    folder = task_folder(out, key)
    graph_path, index_path = folder / GRAPH_FILE, folder / INDEX_FILE
    files = (str(graph_path.relative_to(out)), str(index_path.relative_to(out)))
    digest = content_hash(source, config)
    stored = stored_facts(folder)
    if stored is not None and stored.content_hash == digest and graph_path.is_file():
        graph = _build(source, config, digest, xml_file) if need_graph else None
        return GraphOutcome(stored, *files, rebuilt=False, graph=graph)
    graph = _build(source, config, digest, xml_file)
    write_graph(graph, graph_path)
    nodes = index_table(graph)
    index = pa.table([pa.array([key.name] * nodes.num_rows, pa.string()),
                      pa.array([key.prediction_time] * nodes.num_rows, pa.timestamp("us")), *nodes.columns],
                     schema=TASK_INDEX_SCHEMA)
    facts = _facts(graph, nodes, digest)
    metadata = {_META_KEY: json.dumps({f: getattr(facts, f) for f in GraphFacts.__slots__}).encode()}
    with atomic_path(index_path) as tmp:
        pq.write_table(index.replace_schema_metadata(metadata), tmp)
    return GraphOutcome(facts, *files, rebuilt=True, graph=graph)
