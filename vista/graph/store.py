"""`GraphStore`: a cohort's MEDS Graphs in one directory — the one layout `vista graph` and `jobs.build_graphs` write
and every ``vista`` command (``ask``, ``source``, ``display``, ``evaluate``, ``timeline``) opens.

Layout::

    <root>/graphs/<bucket>/pack-<n>.vgp       the bucket's graphs, appended one record each (`vista.graph.packs`): a
                                             graph's GraphML (the exchange format) and its columnar copy
                                             (`vista.graph.columnar`, what `load` memory-maps), a new pack past 1 GiB
    <root>/graphs/<bucket>/index.tsv          task, content hash and locator of each record, appended (writers'
                                             lock; what a writer without the manifest looks a task up in)
    <root>/index/part-<stamp>-<id>.parquet     node index rows (`vista.graph.index.TASK_INDEX_SCHEMA`), one part
                                               per checkpoint (or per job batch); never rewritten
    <root>/manifest/part-<seq>-<id>.parquet    manifest rows (`MANIFEST_SCHEMA`), one part per checkpoint, appended;
                                               a later row of a task supersedes earlier ones
    <root>/toa/<subject>.json, <root>/display/<subject>.json   timelines and displays (`vista.toa`, `vista.display`)

A graph's ``file`` (manifest column, a job row's ``graph_file``) is its **locator**,
``graphs/<bucket>/pack-<n>.vgp@<offset>+<length>``: the pack and byte range, so a load is one seek, whatever the
store's size (`read_stored_graph`, `stored_graphml` for the GraphML document). A store of N patients holds about
2 × `BUCKETS` graph files plus its index and manifest parts, not three files per patient.

A **task** is one graph: a patient's whole record (task name = the subject id; what ``subject_ids``/``load`` list
and open) or, in a label-driven job, the record cut at a prediction time (``<subject>_<time>``; `load_task`).
``<bucket>`` is the task's key modulo 100 (two digits).

A graph is rewritten only when its **content hash** changed — a digest of everything it is built from: the rows (ids,
times, codes, values, texts, provenance, units), demographics, stated encounters, the catalog entries of its codes
and their ancestors, the build settings and the graph format version. The hash travels in the columnar copy's
metadata, so a writer without the manifest (a job's actor) can tell too (`persist_graph`).

Writes are append-only, so a checkpoint costs the same at the 100,000th patient as at the first (rewriting one whole
index file, then one whole manifest, made a build quadratic): every ``checkpoint_every`` built patients and at the
end (also when a build stops on an error, so an interrupted run resumes where it stopped), the index rows of the
graphs built since the last checkpoint are written as one new part, then one manifest part naming them. When more
than `MAX_MANIFEST_PARTS` manifest parts pile up they are merged into one (amortized: a merge every 64 checkpoints).
A rebuilt graph's rows in an older index part are stale: `GraphStore.scan_index` keeps only the rows of the part
the manifest names, and a part no graph points to any more is deleted. One manifest writer per store (a job's actors write graph records and index parts, `vista.graph.task_graphs`,
several at once: each record is appended under its bucket's lock; only the job's driver writes the manifest, after
they finished, `GraphStore.register_rows`). Stores of the former layouts are still read: per-graph files
(``graphs/<bucket>/<task>.graphml`` and its ``.nodes.arrow``/``.edges.arrow`` copy) load as they are, and a build
leaves an unchanged one where it is (a changed one is rebuilt into a pack and its files removed); the first layout
(``patients/<sid>.graphml``, one ``manifest.parquet``, perhaps one ``index.parquet``) loads from GraphML until rebuilt.

>>> import tempfile
>>> from datetime import datetime
>>> from vista.shared.records import CodeCatalog, Event, PatientRecord
>>> rec = PatientRecord(7, "data/0.parquet", 0, [Event("e0", datetime(2021, 3, 1, 9), "ENCOUNTER//AMB", None, None)])
>>> store = GraphStore(tempfile.mkdtemp())
>>> store.build_records([rec], CodeCatalog()).built, store.build_records([rec], CodeCatalog()).skipped
(1, 1)
>>> store.load(7).events_in_order(), store.subject_ids(), store.file_of(7).startswith("graphs/07/pack-00000.vgp@")
([], [7], True)
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields, replace
from datetime import datetime
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from vista.graph.build import DEFAULT_CONFIG, GraphConfig, GraphSource, build_graph, source_from_record
from vista.graph.columnar import columnar_paths, read_columnar, read_columnar_metadata
from vista.graph.errors import GraphFileError, GraphInputError
from vista.graph.graphml import read_graph
from vista.graph.index import TASK_INDEX_SCHEMA, task_index_table
from vista.graph.model import PatientGraph, attributes_texts
from vista.graph.packs import (
    GRAPHS_DIR,
    append_graph,
    is_locator,
    lookup,
    packed_facts,
    packed_graphml,
    read_packed,
    record_present,
)
from vista.graph.xml_input import source_from_xml
from vista.shared.meds.reader import MedsDataset
from vista.shared.atomic import atomic_path
from vista.shared.records import CodeCatalog, PatientRecord

logger = logging.getLogger(__name__)

GRAPH_FORMAT_VERSION = "vista.graph/2"
"""Part of every content hash: bump it when the graph built from the same rows changes, to rebuild every store."""

BUCKETS = 100
INDEX_DIR = "index"
MANIFEST_DIR = "manifest"
MAX_MANIFEST_PARTS = 64
MANIFEST_FILE = "manifest.parquet"
"""The single manifest file of stores of the former layout (still read; new stores write ``manifest/`` parts)."""
LEGACY_INDEX_FILE = "index.parquet"
"""The single index file of stores written before the index was partitioned (still read)."""
LEGACY_PATIENTS_DIR = "patients"
MANIFEST_SCHEMA = pa.schema([
    pa.field("task", pa.string(), nullable=False),
    pa.field("subject_id", pa.int64(), nullable=False),
    pa.field("prediction_time", pa.timestamp("us")),
    pa.field("content_hash", pa.string(), nullable=False),
    pa.field("file", pa.string(), nullable=False),
    pa.field("nodes", pa.int64(), nullable=False),
    pa.field("edges", pa.int64(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("built_at", pa.timestamp("us"), nullable=False),
    pa.field("index_part", pa.string(), nullable=False),
])
_PART_NAME = re.compile(r"part-(\d+)-[0-9a-f]+\.parquet$")


class _DigestSink:
    """A write-only file that feeds a digest (the IPC stream of the rows is hashed, not kept)."""

    closed = False

    def __init__(self, digest) -> None:
        self.digest = digest

    def write(self, data) -> int:
        self.digest.update(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


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
        "attributes": pa.array(attributes_texts(source.attributes) if source.attributes else
                               [None] * len(events), pa.string()),
    })
    with pa.ipc.new_stream(_DigestSink(digest), table.schema) as writer:  # hashed as written, never held whole
        writer.write_table(table)
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


def is_graph_store(root: str | os.PathLike) -> bool:
    """True when ``root`` holds a graph store manifest (either layout)."""
    root = Path(root)
    return (root / MANIFEST_FILE).is_file() or any((root / MANIFEST_DIR).glob("part-*.parquet"))


def bucket_of(key: int) -> str:
    """The two-digit folder of a task key (the subject id, or an XML task's file key)."""
    return f"{key % BUCKETS:02d}"


def graph_file(task: str, key: int) -> str:
    """Where the former per-graph layout kept a task's GraphML, relative to the store root (its columnar copy beside
    it); still read, no longer written.

    >>> graph_file("7", 7), graph_file("7_20210301T000000", 7)
    ('graphs/07/7.graphml', 'graphs/07/7_20210301T000000.graphml')
    """
    return f"{GRAPHS_DIR}/{bucket_of(key)}/{task}.graphml"


@dataclass(frozen=True, slots=True)
class StoreReport:
    """What one build call did."""

    built: int
    skipped: int
    nodes_built: int
    seconds: float


@dataclass(frozen=True, slots=True)
class StoreEntry:
    """One manifest row: a task's graph, its file (relative to the root) and the index part holding its rows."""

    task: str
    subject_id: int
    prediction_time: datetime | None
    content_hash: str
    file: str
    nodes: int
    edges: int
    source: str
    built_at: datetime
    index_part: str


_ENTRY_FIELDS = tuple(f.name for f in fields(StoreEntry))


@dataclass(frozen=True, slots=True)
class GraphFacts:
    """What a stored graph's columnar copy says about it (its ``extra`` metadata)."""

    content_hash: str
    subject_id: int
    source: str
    n_nodes: int
    n_edges: int
    n_events: int
    n_encounters: int


@dataclass(frozen=True, slots=True)
class GraphOutcome:
    """One persisted graph: its facts, GraphML file (relative to the root), whether it was written now, its index
    rows (`TASK_INDEX_SCHEMA`) and the graph (None when unchanged on disk and not asked for)."""

    facts: GraphFacts
    file: str
    rebuilt: bool
    index: pa.Table
    graph: PatientGraph | None

    def entry(self, task: str, prediction_time: datetime | None, index_part: str) -> StoreEntry:
        """The manifest row of this graph once its index rows are in ``index_part``."""
        f = self.facts
        return StoreEntry(task, f.subject_id, prediction_time, f.content_hash, self.file, f.n_nodes, f.n_edges,
                          f.source, datetime.now().replace(microsecond=0), index_part)


@dataclass(frozen=True, slots=True)
class RegisterReport:
    """What registering a job's task rows did (`GraphStore.register_rows`)."""

    path: Path  # the store's index directory
    graphs: int  # graphs registered in the manifest (this run's and earlier runs')
    nodes: int
    changed: int  # manifest entries added or superseded by this call


TASK_ROW_COLUMNS = ("task", "subject_id", "prediction_time", "content_hash", "graph_file", "n_nodes", "n_edges",
                    "source", "finished_at", "index_file")
"""The columns of a job's task table (`vista.pipeline.rows.VistaRow`) that `GraphStore.register_rows` reads."""


def stored_facts(root: str | os.PathLike, file: str) -> GraphFacts | None:
    """The facts of the graph stored at ``file`` (a pack locator or a former per-graph file, relative to ``root``),
    or None: no complete record or columnar copy there, or one this version did not write (the graph is then rebuilt)."""
    try:
        facts = GraphFacts(**(packed_facts(root, file) if is_locator(file) else read_columnar_metadata(Path(root) / file)))
    except (GraphFileError, TypeError):
        return None
    return facts if stored_graph_present(root, file) else None


def stored_graph_present(root: str | os.PathLike, file: str) -> bool:
    """Whether the graph stored at ``file`` is all on disk (its pack's byte range; or the former layout's GraphML
    and columnar copy) — a check without reading it."""
    if is_locator(file):
        return record_present(root, file)
    path = Path(root) / file
    return path.is_file() and all(p.is_file() for p in columnar_paths(path))


def read_stored_graph(root: str | os.PathLike, file: str, *, graphml: bool = False) -> PatientGraph:
    """The graph stored at ``file``: from its columnar copy (memory-mapped), or with ``graphml`` parsed from its
    GraphML; a former per-graph file without a columnar copy loads from GraphML."""
    if is_locator(file):
        return read_packed(root, file, graphml=graphml)
    path = Path(root) / file
    if not graphml and columnar_paths(path)[0].is_file():
        return read_columnar(path)
    return read_graph(path)


def stored_graphml(root: str | os.PathLike, file: str) -> bytes:
    """The GraphML document of the graph stored at ``file`` (what networkx, igraph, Gephi open)."""
    if is_locator(file):
        return packed_graphml(root, file)
    try:
        return (Path(root) / file).read_bytes()
    except OSError as exc:
        raise GraphFileError(f"{Path(root) / file}: cannot read ({exc.strerror or exc})") from None


def graph_facts(graph: PatientGraph, index: pa.Table, digest: str) -> GraphFacts:
    return GraphFacts(
        content_hash=digest, subject_id=graph.subject_id, source=graph.info.source, n_nodes=graph.n_nodes,
        n_edges=graph.n_edges, n_events=index.num_rows - index.column("row").null_count,
        n_encounters=int(pc.sum(pc.equal(index.column("type"), "encounter")).as_py() or 0),
    )


def _build(source: GraphSource, config: GraphConfig, digest: str, xml_file: Path | None) -> PatientGraph:
    try:
        graph = build_graph(source, config=config)
    except GraphInputError as exc:
        if xml_file is None or exc.source == str(xml_file):
            raise
        # an XML file that states its MEDS rows: the build names the shard; say which file as well
        raise GraphInputError(f"{xml_file} (rows of {exc.source})", exc.problem, patient=exc.patient, field=exc.field,
                              element=exc.element) from None
    return PatientGraph(replace(graph.info, content_hash=digest), graph.nodes, graph.edges)


def persist_graph(root: str | os.PathLike, source: GraphSource, *, task: str | None = None, key: int | None = None,
                  prediction_time: datetime | None = None, config: GraphConfig = DEFAULT_CONFIG,
                  need_graph: bool = False, xml_file: Path | None = None, digest: str | None = None) -> GraphOutcome:
    """Build and write one task's graph (GraphML, then its columnar copy carrying the facts), or reuse the stored
    one when its content hash is the same; either way return its index rows. The manifest is not touched: the
    caller registers the outcome (`GraphOutcome.entry`) once the index rows are in a part (`write_index_part`).

    ``task``/``key`` default to the source's subject id (a whole record); ``xml_file`` names the XML file in
    errors about rows it points to. Safe to call from many processes at once for different tasks.
    """
    root = Path(root)
    task = task if task is not None else str(source.subject_id)
    bucket = bucket_of(key if key is not None else source.subject_id)
    digest = digest or content_hash(source, config)
    packed = lookup(root, bucket, task)
    legacy = graph_file(task, key if key is not None else source.subject_id)
    for file in ([packed[1]] if packed is not None and packed[0] == digest else []) + [legacy]:
        stored = stored_facts(root, file)
        if stored is not None and stored.content_hash == digest:
            graph = read_stored_graph(root, file)
            return GraphOutcome(stored, file, False, task_index_table(graph, task, prediction_time),
                                graph if need_graph else None)
    graph = _build(source, config, digest, xml_file)
    index = task_index_table(graph, task, prediction_time)
    facts = graph_facts(graph, index, digest)
    file = append_graph(root, bucket, task, digest, graph, {f: getattr(facts, f) for f in GraphFacts.__slots__})
    _remove_per_graph_files(root / legacy)
    return GraphOutcome(facts, file, True, index, graph)


def _remove_per_graph_files(graphml: Path) -> None:
    """Delete a task's files of the former per-graph layout once its graph lives in a pack."""
    for path in (graphml, *columnar_paths(graphml)):
        path.unlink(missing_ok=True)


def write_index_part(root: str | os.PathLike, tables: Iterable[pa.Table]) -> str:
    """One new index part holding ``tables`` (`TASK_INDEX_SCHEMA` rows), atomically; its path relative to ``root``."""
    part = f"{INDEX_DIR}/part-{datetime.now():%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:12]}.parquet"
    tables = list(tables)
    table = pa.concat_tables(tables) if tables else TASK_INDEX_SCHEMA.empty_table()
    with atomic_path(Path(root) / part) as tmp:
        pq.write_table(table, tmp, compression="zstd", row_group_size=128 * 1024)
    return part


# ---------------------------------------------------------------------------------------------- the manifest
def _manifest_parts(root: Path) -> list[tuple[int, Path]]:
    found = []
    for path in (root / MANIFEST_DIR).glob("part-*.parquet"):
        match = _PART_NAME.search(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def _legacy_rows(table: pa.Table) -> pa.Table:
    """Manifest rows of the former single-file layout in `MANIFEST_SCHEMA` (task = subject id, whole records)."""
    if "index_part" not in table.column_names:  # written before the index was partitioned
        table = table.append_column("index_part", pa.array([LEGACY_INDEX_FILE] * table.num_rows, pa.string()))
    if "task" not in table.column_names:
        table = table.append_column("task", pc.cast(table.column("subject_id"), pa.string()))
    if "prediction_time" not in table.column_names:
        table = table.append_column("prediction_time", pa.nulls(table.num_rows, pa.timestamp("us")))
    return table


def read_manifest(root: str | os.PathLike) -> dict[str, StoreEntry]:
    """Every task of the store at ``root`` (the newest row of each), in manifest order."""
    root = Path(root)
    paths = ([root / MANIFEST_FILE] if (root / MANIFEST_FILE).is_file() else []) + [p for _, p in _manifest_parts(root)]
    entries: dict[str, StoreEntry] = {}
    for path in paths:
        try:
            rows = _legacy_rows(pq.read_table(path)).select(list(_ENTRY_FIELDS)).to_pylist()
        except (OSError, pa.ArrowException, KeyError) as exc:
            raise GraphFileError(f"{path}: unreadable graph store manifest ({type(exc).__name__}: {exc})") from None
        for row in rows:
            entries[row["task"]] = StoreEntry(**row)
    return entries


def _entries_table(entries: Iterable[StoreEntry]) -> pa.Table:
    rows = list(entries)
    return pa.table({name: [getattr(e, name) for e in rows] for name in _ENTRY_FIELDS}, schema=MANIFEST_SCHEMA)


def append_manifest(root: str | os.PathLike, entries: Iterable[StoreEntry], *, everything: dict[str, StoreEntry]) -> None:
    """Append one manifest part with ``entries``; merge all parts into one when there are too many (``everything``:
    the store's whole manifest after this append)."""
    root = Path(root)
    entries = list(entries)
    if not entries:
        return
    parts = _manifest_parts(root)
    seq = parts[-1][0] + 1 if parts else 1
    if len(parts) + 1 > MAX_MANIFEST_PARTS or (root / MANIFEST_FILE).is_file():
        entries = list(everything.values())  # one merged part replaces the others (and the former single file)
    path = root / MANIFEST_DIR / f"part-{seq:08d}-{uuid.uuid4().hex[:8]}.parquet"
    with atomic_path(path) as tmp:
        pq.write_table(_entries_table(sorted(entries, key=lambda e: e.task)), tmp)
    if len(entries) == len(everything) and (parts or (root / MANIFEST_FILE).is_file()):
        for _, old in parts:
            old.unlink(missing_ok=True)
        (root / MANIFEST_FILE).unlink(missing_ok=True)


def remove_unused_parts(root: str | os.PathLike, entries: Iterable[StoreEntry]) -> None:
    """Delete the index parts no manifest entry points to (call only when no writer is adding parts)."""
    root = Path(root)
    used = {entry.index_part for entry in entries}
    for path in [*(root / INDEX_DIR).glob("part-*.parquet"), root / LEGACY_INDEX_FILE]:
        if path.is_file() and str(path.relative_to(root)) not in used:
            path.unlink(missing_ok=True)


class GraphStore:
    """A directory of patient graphs with a manifest (content hashes) and a node index; see the module docstring."""

    def __init__(self, root: str | os.PathLike, *, config: GraphConfig = DEFAULT_CONFIG, checkpoint_every: int = 500):
        if checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be positive, not {checkpoint_every}")
        self.root = Path(root)
        self.config = config
        self.checkpoint_every = checkpoint_every
        self._entries = read_manifest(self.root)
        self._subjects = {e.subject_id: e.task for e in self._entries.values() if e.prediction_time is None}
        self._pending: dict[int, GraphOutcome] = {}  # by subject: built since the last checkpoint
        self._unwritten: list[StoreEntry] = []  # manifest rows not written yet

    # ------------------------------------------------------------------------------------------ reading
    def subject_ids(self) -> list[int]:
        """Subjects with a whole-record graph in the store, sorted."""
        return sorted(self._subjects)

    def tasks(self) -> list[str]:
        """Every graph of the store by task name (whole records and records cut at a prediction time), sorted."""
        return sorted(self._entries)

    def __contains__(self, subject_id: object) -> bool:
        return subject_id in self._subjects

    def __len__(self) -> int:
        return len(self._subjects)

    def entry(self, subject_id: int) -> StoreEntry:
        """The manifest row of ``subject_id``'s whole-record graph (KeyError naming the store if it has none)."""
        if subject_id not in self._subjects:
            raise KeyError(f"{self.root}: no graph for subject {subject_id}")
        return self._entries[self._subjects[subject_id]]

    def file_of(self, subject_id: int) -> str:
        """The subject's GraphML file, relative to the root."""
        return self.entry(subject_id).file

    def path_of(self, subject_id: int) -> Path:
        """The file holding the subject's graph: its pack (or its GraphML in a store of a former layout)."""
        file = self.entry(subject_id).file
        return self.root / (file.partition("@")[0] if is_locator(file) else file)

    def content_hash_of(self, subject_id: int) -> str | None:
        task = self._subjects.get(subject_id)
        return self._entries[task].content_hash if task is not None else None

    def load(self, subject_id: int) -> PatientGraph:
        """The stored graph of ``subject_id``, from its columnar copy (GraphML when it has none, as in stores of
        the first layout); KeyError naming the store if it has none."""
        return read_stored_graph(self.root, self.entry(subject_id).file)

    def load_task(self, task: str) -> PatientGraph:
        """The stored graph of a task by name (e.g. ``7_20210301T000000``)."""
        if task not in self._entries:
            raise KeyError(f"{self.root}: no graph for task {task}")
        return read_stored_graph(self.root, self._entries[task].file)

    def load_graphml(self, subject_id: int) -> PatientGraph:
        """The stored graph of ``subject_id`` parsed from its GraphML (the exchange copy; slower)."""
        return read_stored_graph(self.root, self.entry(subject_id).file, graphml=True)

    def graphml(self, subject_id: int) -> bytes:
        """The GraphML document of ``subject_id``'s stored graph (for networkx, igraph, Gephi…)."""
        return stored_graphml(self.root, self.entry(subject_id).file)

    def manifest(self) -> pl.DataFrame:
        """The manifest (`MANIFEST_SCHEMA`) of the subjects' whole-record graphs, by subject."""
        return pl.from_arrow(_entries_table(self._entries[self._subjects[s]] for s in sorted(self._subjects)))

    def scan_index(self, *, all_tasks: bool = False) -> pl.LazyFrame:
        """The node index (`TASK_INDEX_SCHEMA`) as a polars LazyFrame over its parts (empty when nothing was built):
        the subjects' whole-record graphs, or with ``all_tasks`` every graph (label tasks' cut records too).

        Rows come part by part. When a part holds rows of other graphs (rebuilt since, or not selected), only the
        current rows are kept.
        """
        chosen = list(self._entries.values()) if all_tasks else [self._entries[t] for t in self._subjects.values()]
        parts: dict[str, list[str]] = {}
        nodes: dict[str, int] = {}
        for entry in chosen:
            parts.setdefault(entry.index_part, []).append(entry.task)
            nodes[entry.index_part] = nodes.get(entry.index_part, 0) + entry.nodes
        if not parts:
            return pl.from_arrow(TASK_INDEX_SCHEMA.empty_table()).lazy()
        paths = {part: str(self.root / part) for part in sorted(parts)}
        try:
            footers = {part: pq.read_metadata(path) for part, path in paths.items()}
        except (OSError, pa.ArrowException) as exc:
            raise GraphFileError(f"{self.root}: unreadable node index part ({type(exc).__name__}: {exc})") from None
        stale = any(footer.num_rows != nodes[part] for part, footer in footers.items())
        legacy = any("task" not in footer.schema.names for footer in footers.values())  # parts of the former layout
        scan = pl.scan_parquet(list(paths.values()), include_file_paths="_part", **(
            {"missing_columns": "insert", "schema": pl.from_arrow(TASK_INDEX_SCHEMA.empty_table()).schema}
            if legacy else {}))
        if legacy:
            scan = scan.with_columns(pl.coalesce("task", pl.col("subject_id").cast(pl.String)).alias("task"),
                                     pl.col("prediction_time").cast(pl.Datetime("us")))
        scan = scan.select(*TASK_INDEX_SCHEMA.names, "_part")
        if not stale:
            return scan.drop("_part")
        current = pl.DataFrame({"task": [task for part in parts for task in parts[part]],
                                "_part": [paths[part] for part in parts for _ in parts[part]]},
                               schema={"task": pl.String, "_part": pl.String})
        return scan.join(current.lazy(), on=["task", "_part"], how="semi", maintain_order="left").drop("_part")

    # ------------------------------------------------------------------------------------------ building
    def build(self, sources: Iterable[GraphSource]) -> StoreReport:
        """Build and store the graph of every source whose content hash changed; skip the others. Two sources of
        one subject in one build are a `GraphInputError` naming both (the second would silently replace the first)."""
        started = time.perf_counter()
        built = skipped = nodes = 0
        origin: dict[int, str] = {}
        try:
            for source in sources:
                first = origin.setdefault(source.subject_id, source.origin)
                if first != source.origin:
                    raise GraphInputError(source.origin, f"is also in {first} (one file or shard per patient)",
                                          patient=str(source.subject_id))
                task = self._subjects.get(source.subject_id, str(source.subject_id))
                entry = self._entries.get(task)
                digest = content_hash(source, self.config)
                if entry is not None and self._is_current(entry, digest):
                    skipped += 1
                    continue
                outcome = persist_graph(self.root, source, task=str(source.subject_id), config=self.config,
                                        digest=digest)
                self._pending[source.subject_id] = outcome
                if outcome.rebuilt:
                    built += 1
                    nodes += outcome.facts.n_nodes
                else:  # on disk from a build cut short before its checkpoint: only its rows are written
                    skipped += 1
                if len(self._pending) >= self.checkpoint_every:
                    self.flush()
        finally:
            self.flush()
        report = StoreReport(built, skipped, nodes, time.perf_counter() - started)
        logger.info("%s: built %d graphs, skipped %d unchanged, in %.2f s", self.root, built, skipped, report.seconds)
        return report

    def _is_current(self, entry: StoreEntry, digest: str) -> bool:
        return entry.content_hash == digest and stored_graph_present(self.root, entry.file)

    def build_records(self, records: Iterable[PatientRecord], catalog: CodeCatalog) -> StoreReport:
        """`build` over MEDS patient records described by ``catalog``."""
        return self.build(source_from_record(record, catalog) for record in records)

    def build_dataset(self, dataset: MedsDataset, subject_ids: Iterable[int] | None = None) -> StoreReport:
        """`build` over a MEDS dataset (all patients, or ``subject_ids``), streaming patients shard by shard."""
        return self.build_records(dataset.iter_patients(subject_ids), dataset.code_catalog())

    def build_xml(self, paths: Iterable[str | os.PathLike], catalog: CodeCatalog | None = None) -> StoreReport:
        """`build` over patient XML files (any shape `vista.graph.xml_input` reads, ``<eventstream>`` included)."""
        return self.build(_xml_sources(paths, catalog))

    def flush(self) -> None:
        """Write the index rows of the graphs built since the last flush as a new part, then one manifest part
        naming it (both atomically), then delete the index parts no graph points to any more."""
        if not self._pending:
            return
        pending = {sid: self._pending[sid] for sid in sorted(self._pending)}
        part = self._write_index({sid: outcome.index for sid, outcome in pending.items()})
        self.register([outcome.entry(str(sid), None, part) for sid, outcome in pending.items()])
        self._pending.clear()

    def _write_index(self, pending: dict[int, pa.Table]) -> str:
        """One new part with the index rows of ``pending`` (in subject order); its path relative to the root."""
        return write_index_part(self.root, pending.values())

    def _write_manifest(self) -> None:
        """Append the manifest rows not written yet as one part."""
        append_manifest(self.root, self._unwritten, everything=self._entries)
        self._unwritten = []

    def register(self, entries: Iterable[StoreEntry]) -> int:
        """Add (or supersede) manifest rows — e.g. of the graphs a job's actors wrote — appending one manifest part
        with those that differ from the current ones; then delete unused index parts. Returns how many changed."""
        changed = []
        for entry in entries:
            old = self._entries.get(entry.task)
            if old is None or replace(old, built_at=entry.built_at) != entry:
                changed.append(entry)
            self._entries[entry.task] = entry
            if entry.prediction_time is None:
                self._subjects[entry.subject_id] = entry.task
        self._unwritten += changed
        self._write_manifest()
        remove_unused_parts(self.root, self._entries.values())
        return len(changed)

    def register_rows(self, table: str | os.PathLike) -> RegisterReport:
        """Register every graph the task rows of ``table`` name (a job's ``patients.parquet``, whose actors wrote the
        graphs and one index part per batch into this store): reads those columns only (no graph, no index row is
        read or rewritten) and appends one manifest part with the tasks whose entry changed, so a rerun that rebuilt
        nothing writes nothing. Rows without a graph (error rows) are left out; a missing index part is a
        `GraphFileError` naming it."""
        table = Path(table)
        try:
            rows = pq.read_table(table, columns=list(TASK_ROW_COLUMNS)).to_pylist()
        except (OSError, pa.ArrowException, KeyError) as exc:
            raise GraphFileError(f"{table}: cannot read the task rows to register their graphs ({exc})") from None
        entries = [StoreEntry(task=r["task"], subject_id=r["subject_id"], prediction_time=r["prediction_time"],
                              content_hash=r["content_hash"], file=r["graph_file"], nodes=r["n_nodes"],
                              edges=r["n_edges"], source=r["source"] or "", built_at=_naive(r["finished_at"]),
                              index_part=r["index_file"])
                   for r in rows if r["content_hash"] and r["graph_file"] and r["index_file"]]
        missing = [e.index_part for e in entries if not (self.root / e.index_part).is_file()]
        if missing:
            raise GraphFileError(f"{self.root / missing[0]}: graph index part named by {table.name} is missing "
                                 f"({len(missing)} task(s)); rerun into another --out to rebuild the store (graphs "
                                 "rebuild in milliseconds)")
        changed = self.register(entries)
        return RegisterReport(self.root / INDEX_DIR, len(entries), sum(e.nodes for e in entries), changed)


def _naive(value: datetime | None) -> datetime:
    """A row's finish time as a manifest ``built_at``: naive, whole seconds (now when missing)."""
    return (value or datetime.now()).replace(tzinfo=None, microsecond=0)


def _xml_sources(paths: Iterable[str | os.PathLike], catalog: CodeCatalog | None) -> Iterator[GraphSource]:
    for path in paths:
        yield source_from_xml(Path(path), path=str(path), catalog=catalog)
