"""`GraphStore`: a cohort's MEDS Graphs in one directory, built once and rebuilt only when a patient's rows change.

Layout::

    <root>/patients/<subject_id>.graphml   one GraphML file per patient (written atomically)
    <root>/manifest.parquet                subject_id, content_hash, file, nodes, edges, source, built_at, index_part
    <root>/index/part-<stamp>-<id>.parquet the node index (see `vista.graph.index`), one part per checkpoint

A patient is skipped when the manifest holds the same **content hash** — a digest of everything its graph is built
from: the rows (ids, times, codes, values, texts, provenance, units), demographics, stated encounters, the catalog
entries of its codes and their ancestors, the build settings and the graph format version — and its file exists.
Every ``checkpoint_every`` built patients and at the end (also when a build stops on an error, so an interrupted run
resumes where it stopped), the index rows of the graphs built since the last checkpoint are written as one new part
and then the manifest, which names each graph's part (both atomically). No part is ever rewritten, so a checkpoint
costs the same at the 100,000th patient as at the first (rewriting one whole index file made a build quadratic). A
rebuilt graph's rows in an older part are stale: `GraphStore.scan_index` keeps only the rows of the part the
manifest names, and a part no graph points to any more is deleted. One writer per store. (A store written before
the index was partitioned, with one ``index.parquet``, is read as a store whose graphs all point to that file.)

>>> import tempfile
>>> from datetime import datetime
>>> from vista.records import CodeCatalog, Event, PatientRecord
>>> rec = PatientRecord(7, "data/0.parquet", 0, [Event("e0", datetime(2021, 3, 1, 9), "ENCOUNTER//AMB", None, None)])
>>> store = GraphStore(tempfile.mkdtemp())
>>> store.build_records([rec], CodeCatalog()).built, store.build_records([rec], CodeCatalog()).skipped
(1, 1)
>>> store.load(7).events_in_order(), store.subject_ids()
([], [7])
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from vista.graph.build import DEFAULT_CONFIG, GraphConfig, GraphSource, build_graph, source_from_record
from vista.graph.errors import GraphFileError
from vista.graph.graphml import read_graph, write_graph
from vista.graph.index import INDEX_SCHEMA, index_table
from vista.graph.model import PatientGraph, attributes_text
from vista.graph.xml_input import source_from_xml
from vista.meds.reader import MedsDataset
from vista.meds.writer import atomic_path
from vista.records import CodeCatalog, PatientRecord

logger = logging.getLogger(__name__)

GRAPH_FORMAT_VERSION = "vista.graph/2"
"""Part of every content hash: bump it when the graph built from the same rows changes, to rebuild every store."""

PATIENTS_DIR = "patients"
MANIFEST_FILE = "manifest.parquet"
INDEX_DIR = "index"
LEGACY_INDEX_FILE = "index.parquet"
"""The single index file of stores written before the index was partitioned (still read)."""
MANIFEST_SCHEMA = pa.schema([
    pa.field("subject_id", pa.int64(), nullable=False),
    pa.field("content_hash", pa.string(), nullable=False),
    pa.field("file", pa.string(), nullable=False),
    pa.field("nodes", pa.int64(), nullable=False),
    pa.field("edges", pa.int64(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("built_at", pa.timestamp("us"), nullable=False),
    pa.field("index_part", pa.string(), nullable=False),
])


def content_hash(source: GraphSource, config: GraphConfig = DEFAULT_CONFIG) -> str:
    """Digest of everything the graph of ``source`` is built from (hex, 32 characters)."""
    digest = hashlib.blake2b(digest_size=16)
    head = (GRAPH_FORMAT_VERSION, config.fingerprint(), source.subject_id, source.origin, source.source_format,
            source.first_row, source.demographics, source.given_encounters, tuple(source.providers),
            tuple(source.care_sites))
    digest.update(repr(head).encode("utf-8"))
    events = source.events
    table = pa.table({
        "id": pa.array([e.event_id for e in events], pa.string()),
        "time": pa.array([e.time for e in events], pa.timestamp("us")),
        "code": pa.array([e.code for e in events], pa.string()),
        "value": pa.array([e.numeric_value for e in events], pa.float64()),
        "text": pa.array([e.text_value for e in events], pa.large_string()),
        "row": pa.array(source.rows, pa.int64()),
        "unit": pa.array(source.units, pa.string()),
        "source_code": pa.array([e.source_code for e in events], pa.string()),
        "visit_id": pa.array([e.visit_id for e in events], pa.string()),
        "attributes": pa.array([attributes_text(a) for a in source.attributes] if source.attributes else
                               [None] * len(events), pa.string()),
    })
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    digest.update(sink.getvalue())
    catalog = source.catalog
    seen: set[str] = set()
    todo = sorted({e.code for e in events})
    entries = []
    while todo:
        code = todo.pop()
        if code in seen:
            continue
        seen.add(code)
        info = catalog.describe(code)
        entries.append((code, info.description, info.parent_codes, info.unit))
        todo.extend(info.parent_codes)
    digest.update(repr(sorted(entries)).encode("utf-8"))
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class StoreReport:
    """What one build call did."""

    built: int
    skipped: int
    nodes_built: int
    seconds: float


@dataclass(frozen=True, slots=True)
class _Entry:
    content_hash: str
    file: str
    nodes: int
    edges: int
    source: str
    built_at: datetime
    index_part: str  # the index file holding the graph's rows, relative to the store root


class GraphStore:
    """A directory of patient graphs with a manifest (content hashes) and a node index; see the module docstring."""

    def __init__(self, root: str | os.PathLike, *, config: GraphConfig = DEFAULT_CONFIG, checkpoint_every: int = 500):
        if checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be positive, not {checkpoint_every}")
        self.root = Path(root)
        self.config = config
        self.checkpoint_every = checkpoint_every
        self._manifest = self._read_manifest()
        self._pending: dict[int, pa.Table] = {}

    # ------------------------------------------------------------------------------------------ reading
    def _read_manifest(self) -> dict[int, _Entry]:
        path = self.root / MANIFEST_FILE
        if not path.exists():
            return {}
        try:
            table = pq.read_table(path)
            if "index_part" not in table.column_names:  # written before the index was partitioned
                table = table.append_column("index_part", pa.array([LEGACY_INDEX_FILE] * table.num_rows, pa.string()))
            rows = table.select(MANIFEST_SCHEMA.names).to_pylist()
        except (OSError, pa.ArrowException, KeyError) as exc:
            raise GraphFileError(f"{path}: unreadable graph store manifest ({type(exc).__name__}: {exc})") from None
        return {row.pop("subject_id"): _Entry(**row) for row in rows}

    def subject_ids(self) -> list[int]:
        """Subjects with a graph in the store, sorted."""
        return sorted(self._manifest)

    def __contains__(self, subject_id: object) -> bool:
        return subject_id in self._manifest

    def __len__(self) -> int:
        return len(self._manifest)

    def path_of(self, subject_id: int) -> Path:
        return self.root / PATIENTS_DIR / f"{subject_id}.graphml"

    def content_hash_of(self, subject_id: int) -> str | None:
        entry = self._manifest.get(subject_id)
        return entry.content_hash if entry else None

    def load(self, subject_id: int) -> PatientGraph:
        """The stored graph of ``subject_id`` (KeyError naming the store if it has none)."""
        if subject_id not in self._manifest:
            raise KeyError(f"{self.root}: no graph for subject {subject_id}")
        return read_graph(self.root / self._manifest[subject_id].file)

    def manifest(self) -> pl.DataFrame:
        rows = [{"subject_id": sid, **{f: getattr(e, f) for f in _Entry.__slots__}} for sid, e in sorted(self._manifest.items())]
        return pl.from_arrow(pa.Table.from_pylist(rows, schema=MANIFEST_SCHEMA))

    def scan_index(self) -> pl.LazyFrame:
        """The node index of the whole cohort as a polars LazyFrame over its parts (empty when nothing was built).

        Rows come part by part (each part in subject order). When a part holds rows of graphs rebuilt since (its
        row count exceeds the nodes of the graphs the manifest points to it), only the current rows are kept.
        """
        parts: dict[str, list[int]] = {}
        nodes: dict[str, int] = {}
        for sid, entry in self._manifest.items():
            if not entry.index_part:  # built, its rows not written yet (see `flush`)
                continue
            parts.setdefault(entry.index_part, []).append(sid)
            nodes[entry.index_part] = nodes.get(entry.index_part, 0) + entry.nodes
        if not parts:
            return pl.from_arrow(INDEX_SCHEMA.empty_table()).lazy()
        paths = {part: str(self.root / part) for part in sorted(parts)}
        try:
            stale = any(pq.read_metadata(path).num_rows != nodes[part] for part, path in paths.items())
        except (OSError, pa.ArrowException) as exc:
            raise GraphFileError(f"{self.root}: unreadable node index part ({type(exc).__name__}: {exc})") from None
        if not stale:
            return pl.scan_parquet(list(paths.values()))
        current = pl.DataFrame({"subject_id": [sid for part in parts for sid in parts[part]],
                                "_part": [paths[part] for part in parts for _ in parts[part]]},
                               schema={"subject_id": pl.Int64, "_part": pl.String})
        return (pl.scan_parquet(list(paths.values()), include_file_paths="_part")
                .join(current.lazy(), on=["subject_id", "_part"], how="semi", maintain_order="left")
                .drop("_part"))

    # ------------------------------------------------------------------------------------------ building
    def build(self, sources: Iterable[GraphSource]) -> StoreReport:
        """Build and store the graph of every source whose content hash changed; skip the others."""
        started = time.perf_counter()
        built = skipped = nodes = 0
        try:
            for source in sources:
                digest = content_hash(source, self.config)
                entry = self._manifest.get(source.subject_id)
                if entry is not None and entry.content_hash == digest and (self.root / entry.file).exists():
                    skipped += 1
                    continue
                graph = build_graph(source, config=self.config)
                graph = PatientGraph(replace(graph.info, content_hash=digest), graph.nodes, graph.edges)
                self._store(graph, digest)
                built += 1
                nodes += graph.n_nodes
                if len(self._pending) >= self.checkpoint_every:
                    self.flush()
        finally:
            self.flush()
        report = StoreReport(built, skipped, nodes, time.perf_counter() - started)
        logger.info("%s: built %d graphs, skipped %d unchanged, in %.2f s", self.root, built, skipped, report.seconds)
        return report

    def build_records(self, records: Iterable[PatientRecord], catalog: CodeCatalog) -> StoreReport:
        """`build` over MEDS patient records described by ``catalog``."""
        return self.build(source_from_record(record, catalog) for record in records)

    def build_dataset(self, dataset: MedsDataset, subject_ids: Iterable[int] | None = None) -> StoreReport:
        """`build` over a MEDS dataset (all patients, or ``subject_ids``), streaming patients shard by shard."""
        return self.build_records(dataset.iter_patients(subject_ids), dataset.code_catalog())

    def build_xml(self, paths: Iterable[str | os.PathLike], catalog: CodeCatalog | None = None) -> StoreReport:
        """`build` over patient XML files (any shape `vista.graph.xml_input` reads, ``<eventstream>`` included)."""
        return self.build(_xml_sources(paths, catalog))

    def _store(self, graph: PatientGraph, digest: str) -> None:
        path = write_graph(graph, self.path_of(graph.subject_id))
        # index_part is set when the graph's rows are written (flush); until then the entry is not in the manifest file
        self._manifest[graph.subject_id] = _Entry(digest, str(path.relative_to(self.root)), graph.n_nodes, graph.n_edges,
                                                  graph.info.source, datetime.now().replace(microsecond=0), "")
        self._pending[graph.subject_id] = index_table(graph)

    def flush(self) -> None:
        """Write the index rows of the graphs built since the last flush as a new part, then the manifest (both
        atomically), then delete the parts no graph points to any more."""
        if not self._pending:
            return
        part = self._write_index(self._pending)
        for sid in self._pending:
            self._manifest[sid] = replace(self._manifest[sid], index_part=part)
        self._write_manifest()
        self._pending.clear()
        self._remove_unused_parts()

    def _write_index(self, pending: dict[int, pa.Table]) -> str:
        """One new part with the rows of ``pending`` (in subject order); its path relative to the root."""
        part = f"{INDEX_DIR}/part-{datetime.now():%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}.parquet"
        table = pa.concat_tables([pending[sid] for sid in sorted(pending)])
        with atomic_path(self.root / part) as tmp:
            pq.write_table(table, tmp, compression="zstd")
        return part

    def _write_manifest(self) -> None:
        written = {sid: e for sid, e in self._manifest.items() if e.index_part}  # not those still pending
        columns = {"subject_id": sorted(written)}
        for name in _Entry.__slots__:
            columns[name] = [getattr(written[sid], name) for sid in columns["subject_id"]]
        with atomic_path(self.root / MANIFEST_FILE) as tmp:
            pq.write_table(pa.table(columns, schema=MANIFEST_SCHEMA), tmp)

    def _remove_unused_parts(self) -> None:
        used = {entry.index_part for entry in self._manifest.values()}
        candidates = [*(self.root / INDEX_DIR).glob("part-*.parquet"), self.root / LEGACY_INDEX_FILE]
        for path in candidates:
            if path.is_file() and str(path.relative_to(self.root)) not in used:
                path.unlink(missing_ok=True)


def _xml_sources(paths: Iterable[str | os.PathLike], catalog: CodeCatalog | None) -> Iterator[GraphSource]:
    from vista.graph.errors import GraphInputError

    for path in paths:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise GraphInputError(str(path), f"cannot read the file ({exc.strerror or exc})") from None
        yield source_from_xml(data, path=str(path), catalog=catalog)
