"""Graph packs: many patients' graphs in a few append-only files per bucket, each graph found in O(1) by its locator.

A store of millions of patients cannot keep three files per graph (10M patients: 30M files). Each bucket folder of a
graph store (``graphs/<bucket>/``) holds instead:

    pack-<n>.vgp   records appended one after another; a new pack starts when the last passes `PACK_LIMIT_BYTES`
    index.tsv      one line per record appended: ``task <TAB> content hash <TAB> locator``; the newest line of a
                   task is its current graph

A **record** is one graph: its GraphML document (the exchange format, streamed block by block), its columnar copy
(the node and edge tables as two Arrow IPC files, what `read_packed` memory-maps), then a JSON trailer (task,
content hash, the `GraphFacts`, the parts' offsets), the trailer's length and a magic line. A graph's **locator**
``graphs/<bucket>/pack-<n>.vgp@<offset>+<length>`` names its pack and byte range, so reading it is one open, one
seek, no scan; the store's manifest and a job's rows carry it where they carried the GraphML path.

**Several writers** (a job's Ray actors, two `vista graph` runs): a writer takes an exclusive ``flock`` on the
bucket's ``index.tsv`` (created private, 0600 in a 0700 folder, as every store file), appends its record to the
current pack, then its index line, and releases it; so records and lines never interleave and a crash leaves at
worst an unreferenced tail (a record without its line) that later appends skip over. Readers take no lock: they
read only byte ranges a complete index line or manifest row names. `flock` is per host; several hosts writing one
store need a filesystem whose ``flock`` spans them (NFSv4, Lustre), as the former layout's renames did not.

A record is never rewritten: a rebuilt graph is a new record and its old one is dead space (no compaction yet).

>>> import tempfile
>>> from datetime import datetime
>>> from pathlib import Path
>>> from vista.graph.build import build_graph
>>> from vista.shared.records import CodeCatalog, Event, PatientRecord
>>> graph = build_graph(PatientRecord(7, "data/0.parquet", 0, [Event("e0", datetime(2021, 3, 1), "ENCOUNTER//AMB",
...                                                                   None, None)]), CodeCatalog())
>>> root = Path(tempfile.mkdtemp())
>>> locator = append_graph(root, "07", "7", "abc", graph, {"content_hash": "abc"})
>>> locator.startswith("graphs/07/pack-00000.vgp@0+")
True
>>> read_packed(root, locator) == graph, lookup(root, "07", "7") == ("abc", locator), packed_facts(root, locator)
(True, True, {'content_hash': 'abc'})
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pyarrow as pa

from vista.graph.columnar import columnar_buffers, columnar_from_buffers
from vista.graph.errors import GraphFileError
from vista.graph.graphml import read_graph, write_graphml_to
from vista.graph.model import PatientGraph
from vista.shared.atomic import make_dirs, open_private

GRAPHS_DIR = "graphs"
PACK_LIMIT_BYTES = 1 << 30
"""A pack past this size is closed: the next record starts a new one (a bucket's files stay few and each bounded)."""
INDEX_NAME = "index.tsv"
PACK_FORMAT = "vista.graph.pack/1"
_MAGIC = b"\nVGPACK1\n"
_TAIL = struct.Struct("<I")
_PACK_NAME = re.compile(r"pack-(\d{5,})\.vgp$")
_LOCATOR = re.compile(r"^(?P<pack>.+\.vgp)@(?P<offset>\d+)\+(?P<length>\d+)$")


def is_locator(file: str) -> bool:
    """True when a manifest ``file`` names a record of a pack (not a per-graph file of the former layout)."""
    return _LOCATOR.match(file) is not None


@dataclass(frozen=True, slots=True)
class Locator:
    """Where a record lives: its pack (relative to the store root) and its byte range."""

    pack: str
    offset: int
    length: int

    @classmethod
    def parse(cls, file: str) -> Locator:
        match = _LOCATOR.match(file)
        if match is None:
            raise GraphFileError(f"{file}: not a graph pack locator (<pack>.vgp@<offset>+<length>)")
        return cls(match["pack"], int(match["offset"]), int(match["length"]))

    def __str__(self) -> str:
        return f"{self.pack}@{self.offset}+{self.length}"


def bucket_dir(root: Path, bucket: str) -> Path:
    return Path(root) / GRAPHS_DIR / bucket


@contextmanager
def _bucket_lock(folder: Path) -> Iterator[IO[bytes]]:
    """The bucket's index file, open for appending under an exclusive lock (held until the block ends)."""
    index = open_private(folder / INDEX_NAME, "a+b")
    try:
        fcntl.flock(index.fileno(), fcntl.LOCK_EX)
        yield index
    finally:
        index.close()  # closing releases the lock


def _current_pack(folder: Path) -> Path:
    """The pack new records go to: the highest-numbered one, or the next when it is full."""
    numbers = [int(m.group(1)) for m in map(_PACK_NAME.search, os.listdir(folder)) if m]
    n = max(numbers, default=0)
    path = folder / f"pack-{n:05d}.vgp"
    if path.exists() and path.stat().st_size >= PACK_LIMIT_BYTES:
        path = folder / f"pack-{n + 1:05d}.vgp"
    return path


@dataclass(frozen=True, slots=True)
class PackItem:
    """One graph to append: its task, content hash, graph and facts (JSON-serializable, kept in the trailer)."""

    task: str
    content_hash: str
    graph: PatientGraph
    facts: dict[str, object]


def append_graph(root: str | os.PathLike, bucket: str, task: str, content_hash: str, graph: PatientGraph,
                 facts: dict[str, object]) -> str:
    """Append one graph record (GraphML, columnar copy, trailer) to the bucket's current pack and its line to the
    bucket's index, under the bucket's lock; the record's locator."""
    return append_graphs(root, bucket, [PackItem(task, content_hash, graph, facts)])[0]


def append_graphs(root: str | os.PathLike, bucket: str, items: list[PackItem]) -> list[str]:
    """`append_graph` for several graphs of one bucket under one lock (one open of the pack and of the index)."""
    for item in items:
        if "\t" in item.task or "\n" in item.task:
            raise ValueError(f"task name {item.task!r} cannot hold a tab or a newline")
    root = Path(root)
    folder = make_dirs(bucket_dir(root, bucket))
    locators: list[str] = []
    with _bucket_lock(folder) as index:
        lines = []
        path = _current_pack(folder)
        pack, name = open_private(path, "ab"), path.relative_to(root).as_posix()
        try:
            for item in items:
                if pack.tell() >= PACK_LIMIT_BYTES:
                    pack.close()
                    path = _current_pack(folder)
                    pack, name = open_private(path, "ab"), path.relative_to(root).as_posix()
                start = pack.seek(0, os.SEEK_END)
                _write_record(pack, item)
                locator = str(Locator(name, start, pack.tell() - start))
                locators.append(locator)
                lines.append(f"{item.task}\t{item.content_hash}\t{locator}\n")
        finally:
            pack.close()  # flushed before the index names its records
        end = index.seek(0, os.SEEK_END)
        if end and os.pread(index.fileno(), 1, end - 1) != b"\n":
            index.write(b"\n")  # a line torn by a crashed writer ends here; ours start clean
        index.write("".join(lines).encode("utf-8"))
    return locators


def _write_record(pack: IO[bytes], item: PackItem) -> None:
    nodes, edges = columnar_buffers(item.graph, extra=item.facts)
    graphml = write_graphml_to(item.graph, pack)
    pack.write(nodes)
    pack.write(edges)
    trailer = json.dumps({"format": PACK_FORMAT, "task": item.task, "content_hash": item.content_hash,
                          "facts": item.facts, "graphml": [0, graphml], "nodes": [graphml, nodes.size],
                          "edges": [graphml + nodes.size, edges.size]}).encode("utf-8")
    pack.write(trailer + _TAIL.pack(len(trailer)) + _MAGIC)


@dataclass(frozen=True, slots=True)
class _Record:
    trailer: dict
    body: pa.Buffer  # the whole record, memory-mapped


def _record(root: Path, file: str) -> _Record:
    where = Locator.parse(file)
    path = root / where.pack
    try:
        with pa.memory_map(str(path), "r") as source:
            if source.size() < where.offset + where.length:
                raise GraphFileError(f"{path}: ends before the record {file} (a truncated pack? rebuild the graph)")
            source.seek(where.offset)
            body = source.read_buffer(where.length)
    except FileNotFoundError:
        raise GraphFileError(f"{path}: no such graph pack (record {file})") from None
    except OSError as exc:
        raise GraphFileError(f"{path}: cannot read ({exc})") from None
    tail = len(_MAGIC) + _TAIL.size
    end = where.length
    if end < tail or body.slice(end - len(_MAGIC)).to_pybytes() != _MAGIC:
        raise GraphFileError(f"{path}: no graph record at {file} (a torn or foreign record)")
    (size,) = _TAIL.unpack(body.slice(end - tail, _TAIL.size).to_pybytes())
    try:
        trailer = json.loads(body.slice(end - tail - size, size).to_pybytes()) if size <= end - tail else None
    except ValueError:
        trailer = None
    if not isinstance(trailer, dict) or trailer.get("format") != PACK_FORMAT:
        raise GraphFileError(f"{path}: the record at {file} has no readable trailer")
    return _Record(trailer, body)


def _part(record: _Record, name: str) -> pa.Buffer:
    offset, length = record.trailer[name]
    return record.body.slice(offset, length)


def read_packed(root: str | os.PathLike, file: str, *, graphml: bool = False) -> PatientGraph:
    """The graph of a pack record from its columnar copy (memory-mapped, no copy), or parsed from its GraphML."""
    root = Path(root)
    record = _record(root, file)
    if graphml:
        return read_graph(root / file, memoryview(_part(record, "graphml")))
    return columnar_from_buffers(_part(record, "nodes"), _part(record, "edges"), str(root / file))


def packed_graphml(root: str | os.PathLike, file: str) -> bytes:
    """The GraphML document of a pack record (for `networkx.read_graphml`, Gephi…)."""
    return _part(_record(Path(root), file), "graphml").to_pybytes()


def packed_facts(root: str | os.PathLike, file: str) -> dict[str, object]:
    """The facts a pack record's trailer holds (`GraphFileError` naming the pack when there is no such record)."""
    return dict(_record(Path(root), file).trailer["facts"])


def record_present(root: str | os.PathLike, file: str) -> bool:
    """Whether the pack a locator names holds its whole byte range (a cheap check, no read)."""
    where = Locator.parse(file)
    try:
        return (Path(root) / where.pack).stat().st_size >= where.offset + where.length
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------- bucket index
@dataclass(slots=True)
class _IndexView:
    """What one process has read of a bucket's index: the newest (hash, locator) per task, up to ``read`` bytes."""

    inode: int = -1
    read: int = 0
    tasks: dict[str, tuple[str, str]] = field(default_factory=dict)


_VIEWS: dict[Path, _IndexView] = {}
_MAX_VIEWS = 4096


def lookup(root: str | os.PathLike, bucket: str, task: str) -> tuple[str, str] | None:
    """(content hash, locator) of a task's newest record in its bucket, or None.

    The process keeps what it read of each bucket's index and reads only the lines appended since, so a writer's
    lookups cost one ``stat`` each plus, once per bucket, reading its index (about 80 bytes a graph).
    """
    path = bucket_dir(Path(root), bucket) / INDEX_NAME
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    view = _VIEWS.get(path)
    if view is None or view.inode != stat.st_ino or stat.st_size < view.read:
        if len(_VIEWS) >= _MAX_VIEWS:
            _VIEWS.clear()
        view = _VIEWS[path] = _IndexView(stat.st_ino)
    if stat.st_size > view.read:
        with open(path, "rb") as index:
            index.seek(view.read)
            chunk = index.read(stat.st_size - view.read)
        complete = chunk.rfind(b"\n") + 1  # a line still being written is read next time
        for line in chunk[:complete].decode("utf-8", "replace").splitlines():
            parts = line.split("\t")
            if len(parts) == 3 and is_locator(parts[2]):  # a line torn by a crashed writer is skipped
                view.tasks[parts[0]] = (parts[1], parts[2])
        view.read += complete
    return view.tasks.get(task)
