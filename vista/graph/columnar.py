"""The columnar copy of a `PatientGraph`: its node and edge tables as two Arrow IPC files, loaded by default.

GraphML (`vista.graph.graphml`) is the exchange format — any graph tool opens it — but parsing XML is slow: ~1 s
for a 10k-node patient, longer than building the graph. The graph's in-memory model already *is* two Arrow tables
(`NODE_SCHEMA`, `EDGE_SCHEMA`), so its columnar copy is those tables written as they are:

    <stem>.edges.arrow   the edge table (written first)
    <stem>.nodes.arrow   the node table; its schema metadata holds the patient (`PatientInfo`, as the GraphML graph
                         attributes) and the edge count, so a nodes file is the copy's "complete" sign

Both files are uncompressed Arrow IPC (the "Feather v2" format polars, pandas and DuckDB read) and are memory-mapped
on reading, so loading costs about what validating the schemas does (≈1 ms for 10k nodes; see
``benchmarks/bench_graph.py``). Extra metadata (``extra``: strings, e.g. the job's facts about the graph) rides in
the nodes file and is read without touching the tables (`read_columnar_metadata`).

>>> import tempfile
>>> from datetime import datetime
>>> from pathlib import Path
>>> from vista.graph.build import build_graph
>>> from vista.shared.records import CodeCatalog, Event, PatientRecord
>>> graph = build_graph(PatientRecord(7, "data/0.parquet", 0, [Event("e0", datetime(2021, 3, 1), "ENCOUNTER//AMB",
...                                                                   None, None)]), CodeCatalog())
>>> stem = Path(tempfile.mkdtemp()) / "7"
>>> _ = write_columnar(graph, stem, extra={"note": "hello"})
>>> read_columnar(stem) == graph, read_columnar_metadata(stem)["note"]
(True, 'hello')
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from vista.graph.errors import GraphFileError
from vista.graph.graphml import graph_info
from vista.graph.model import EDGE_SCHEMA, NODE_SCHEMA, PatientGraph
from vista.shared.atomic import atomic_path

COLUMNAR_FORMAT = "vista.graph.columnar/1"
NODES_SUFFIX = ".nodes.arrow"
EDGES_SUFFIX = ".edges.arrow"
_INFO_KEY = b"vista.graph.info"
_EXTRA_KEY = b"vista.graph.extra"
_FORMAT_KEY = b"vista.graph.format"
_EDGES_KEY = b"vista.graph.edges"


def columnar_paths(stem: str | os.PathLike) -> tuple[Path, Path]:
    """(nodes file, edges file) of the copy at ``stem`` (a path without suffix, or the graph's ``.graphml`` path)."""
    stem = Path(stem)
    if stem.suffix == ".graphml":
        stem = stem.with_suffix("")
    return stem.with_name(stem.name + NODES_SUFFIX), stem.with_name(stem.name + EDGES_SUFFIX)


def _write_table(table: pa.Table, path: Path) -> None:
    with atomic_path(path) as tmp, ipc.new_file(str(tmp), table.schema) as writer:
        writer.write_table(table)


def _node_metadata(graph: PatientGraph, extra: dict[str, object] | None) -> dict[bytes, bytes]:
    attributes = {name: str(value) for name, value in graph.graph_attributes().items() if value is not None}
    return {_FORMAT_KEY: COLUMNAR_FORMAT.encode(), _INFO_KEY: json.dumps(attributes).encode("utf-8"),
            _EDGES_KEY: str(graph.n_edges).encode(), _EXTRA_KEY: json.dumps(extra or {}).encode("utf-8")}


def write_columnar(graph: PatientGraph, stem: str | os.PathLike, *, extra: dict[str, object] | None = None) -> Path:
    """Write the columnar copy of ``graph`` at ``stem`` (edges first, then nodes; each atomically); the nodes path.

    ``extra``: JSON-serializable facts stored with the copy (read back by `read_columnar_metadata`).
    """
    nodes_path, edges_path = columnar_paths(stem)
    _write_table(graph.edges.combine_chunks(), edges_path)
    _write_table(graph.nodes.combine_chunks().replace_schema_metadata(_node_metadata(graph, extra)), nodes_path)
    return nodes_path


def columnar_buffers(graph: PatientGraph, *, extra: dict[str, object] | None = None) -> tuple[pa.Buffer, pa.Buffer]:
    """(nodes, edges) of the columnar copy as two in-memory Arrow IPC files (what a graph pack stores)."""
    out = []
    for table in (graph.nodes.combine_chunks().replace_schema_metadata(_node_metadata(graph, extra)),
                  graph.edges.combine_chunks()):
        sink = pa.BufferOutputStream()
        with ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        out.append(sink.getvalue())
    return out[0], out[1]


def columnar_from_buffers(nodes: pa.Buffer, edges: pa.Buffer, where: str) -> PatientGraph:
    """The `PatientGraph` of a columnar copy held in two IPC buffers (e.g. slices of a memory-mapped pack);
    `GraphFileError` naming ``where`` when they are not one."""
    try:
        node_table, edge_table = ipc.open_file(nodes).read_all(), ipc.open_file(edges).read_all()
    except (OSError, pa.ArrowException) as exc:
        raise GraphFileError(f"{where}: not a readable columnar graph ({type(exc).__name__}: {exc})") from None
    return _graph(Path(where), node_table, edge_table, Path(where))


def _open(path: Path) -> pa.Table:
    try:
        with pa.memory_map(str(path), "r") as source:
            return ipc.open_file(source).read_all()
    except FileNotFoundError:
        raise GraphFileError(f"{path}: no such columnar graph file") from None
    except (OSError, pa.ArrowException) as exc:
        raise GraphFileError(f"{path}: not a readable Arrow IPC file ({type(exc).__name__}: {exc})") from None


def _metadata(path: Path, schema: pa.Schema) -> dict[bytes, bytes]:
    metadata = schema.metadata or {}
    if metadata.get(_FORMAT_KEY) != COLUMNAR_FORMAT.encode():
        raise GraphFileError(f"{path}: not a columnar graph written by vista.graph.columnar "
                             f"(format {metadata.get(_FORMAT_KEY)!r}, expected {COLUMNAR_FORMAT!r})")
    return metadata


def read_columnar_metadata(stem: str | os.PathLike) -> dict[str, object]:
    """The ``extra`` facts stored with the copy at ``stem`` (reads the nodes file's schema only)."""
    nodes_path, _ = columnar_paths(stem)
    try:
        with pa.memory_map(str(nodes_path), "r") as source:
            schema = ipc.open_file(source).schema
    except FileNotFoundError:
        raise GraphFileError(f"{nodes_path}: no such columnar graph file") from None
    except (OSError, pa.ArrowException) as exc:
        raise GraphFileError(f"{nodes_path}: not a readable Arrow IPC file ({type(exc).__name__}: {exc})") from None
    try:
        return json.loads(_metadata(nodes_path, schema)[_EXTRA_KEY])
    except (KeyError, ValueError) as exc:
        raise GraphFileError(f"{nodes_path}: its extra metadata is not JSON ({exc})") from None


def read_columnar(stem: str | os.PathLike) -> PatientGraph:
    """The `PatientGraph` whose copy `write_columnar` wrote at ``stem`` (`GraphFileError` naming the file otherwise)."""
    nodes_path, edges_path = columnar_paths(stem)
    return _graph(nodes_path, _open(nodes_path), _open(edges_path), edges_path)


def _graph(nodes_path: Path, nodes: pa.Table, edges: pa.Table, edges_path: Path) -> PatientGraph:
    metadata = _metadata(nodes_path, nodes.schema)
    try:
        attributes = json.loads(metadata[_INFO_KEY])
        n_edges = int(metadata[_EDGES_KEY])
    except (KeyError, ValueError) as exc:
        raise GraphFileError(f"{nodes_path}: its patient metadata is missing or not JSON ({exc})") from None
    if edges.num_rows != n_edges:
        raise GraphFileError(f"{edges_path}: {edges.num_rows} edges, but {nodes_path.name} says {n_edges} "
                             "(an interrupted write? rebuild the graph)")
    nodes = nodes.replace_schema_metadata(None)
    edges = edges.replace_schema_metadata(None)
    if not nodes.schema.equals(NODE_SCHEMA) or not edges.schema.equals(EDGE_SCHEMA):
        raise GraphFileError(f"{nodes_path}: node/edge columns are not those of this version's graphs "
                             "(rebuild the graph)")
    return PatientGraph(graph_info(nodes_path, attributes), nodes, edges)
