"""Content-addressed on-disk cache of validated answers, shared safely by concurrent processes.

The key is the sha256 of everything that determines an answer (the backend kind, the endpoint's identity, the
model asked for and the model the endpoint serves under that name, sampling parameters, messages, schema, schema
mode), so a rerun pays nothing for calls already made
and changing a prompt, the model, a parameter, the schema or the server misses exactly the affected
calls. The endpoint identity is the backend's (`Backend` ``identity``): an HTTP endpoint's base URL,
or the embedded GGUF file's sha256 and context size; two servers that both call their model
``local`` never share answers, and neither do two models one server answers the same name with (a llama.cpp
server answers any name with the file it loaded: its ``/v1/models`` listing names it).

On a local disk the answers of a patient are lines appended to its bucket's file, ``<root>/buckets/<h[:3]>.jsonl``
with ``h`` the sha256 of the patient id (no ids in file names): 4,096 files however many patients (a million
patients are not a million files), each patient's answers in one of them. A line is ``<key>TAB<entry JSON>`` and
ends with a newline, written with one ``write`` on a file kept open in append mode (O_APPEND: the lines of
concurrent writers — other actors, other nodes' processes — land whole, one after the other). Creating and renaming
a file per answer cost 50–270 µs of system time on the job's event loop; an append costs a few. A lookup opens the
bucket's file afresh and reads what was appended since this process last read it (an index of the lines read so far,
offsets only, is kept for the files used most recently), so an answer appended by another process — another actor,
the one replacing a lost node's, a resumed run — is found by the next lookup; the last readable line of a key wins (an
answer asked again after it no longer validated replaces the first), and two writers of the same key both win.
JSON never holds a raw tab or newline, so ``<key>TAB`` only ever starts an entry, even one glued to the torn line of
a writer killed mid-write: a line with no newline yet is still being written (a miss, said nothing of), a finished
line that does not parse is reported as unreadable (a miss). The first lookup in a bucket reads its file once (the
cache's size over 4,096: about 30 KB for 100k patients of two answers each); later ones read only what was appended,
while the file's index is kept (`INDEXED_ENTRIES` lines in all: past that, the least recently used files are
dropped, and read again when next asked).
Caches written before are read as they are, keys unchanged: one file per patient
(``<root>/patients/<h[:2]>/<h[:32]>.jsonl``, asked after the bucket) and, for calls with no patient and the oldest
caches, JSON files in 256 sharded folders (``<root>/<key[:2]>/<key>.json``), written to a temporary file and renamed
into place (atomic on POSIX); lookups read the patient's bucket first, then these.

The cache may also live on an object store (``cache_dir`` an ``s3://…`` URI, `vista.shared.storage`; a job whose
``--out`` is a URI keeps it under ``OUT/llm_cache`` there by default): each entry is then one object, written with
one PUT of the whole entry, so the same guarantees hold without a rename, and every node of a cluster — including
one that replaces a lost node — sees every answer already paid for. A lookup costs one GET (tens of ms next to an
LLM call's seconds).

>>> import tempfile
>>> cache = ResponseCache(tempfile.mkdtemp())
>>> for n in range(3):
...     cache.put(f"{n:064x}", CachedAnswer('{"level": "Low"}', "m", "Risk", 10, 2), patient="P1")
>>> cache.get(f"{1:064x}", patient="P1").content, cache.get(f"{7:064x}", patient="P1"), len(cache)
('{"level": "Low"}', None, 3)
>>> [str(p.relative_to(cache.root)) for p in cache.root.rglob("*") if p.is_file()]  # the patient's bucket
['buckets/fbe.jsonl']
>>> cache.close()
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from vista.shared.atomic import atomic_write_text, data_mode, make_dirs
from vista.shared.llm.messages import Message
from vista.shared.storage import Location, is_remote, resolve

log = logging.getLogger(__name__)

CACHE_FORMAT = 3  # bump when the key recipe or the entry layout changes (2: the endpoint; 3: backend, served model)
BUCKET_DIGITS = 3  # hex digits of the patient's hash naming its bucket: 16**3 = 4,096 files
OPEN_FILES = 256  # bucket files kept open for appending (least recently written closed first)
INDEXED_ENTRIES = 250_000  # lines kept indexed, over the files used most recently (about 100-200 bytes each: the
# index of a whole 100k-patient cache; of a bigger one, the least recently looked-up files are dropped first)
_KEY = re.compile(r"[0-9a-f]{64}")  # a cache key: what may stand before the tab of a line
_KEY_BYTES = re.compile(rb"[0-9a-f]{64}")
_TAIL_BYTES = 96  # bytes of a file checked before reading on from where the last lookup stopped


def cache_key(
    *,
    endpoint: str,
    model: str,
    messages: Sequence[Message],
    schema: Mapping[str, object] | None,
    schema_mode: str,
    parameters: Mapping[str, object],
    backend: str = "",
    served_model: str | None = None,
    schema_json: str | None = None,
) -> str:
    """sha256 (hex) of the canonical JSON of one request's answer-determining inputs.

    ``schema_json``: ``schema`` already in canonical JSON (`canonical_json`), as a gateway keeps it for each response
    model: the key is the same, without encoding the schema again for every call.

    >>> ask = dict(model="m", messages=[Message("user", "hi")], schema=None, schema_mode="none", parameters={})
    >>> k = cache_key(endpoint="http://a:8000/v1", **ask)
    >>> k == cache_key(endpoint="http://a:8000/v1", **ask)
    True
    >>> k == cache_key(endpoint="http://b:8000/v1", **ask)  # another server with a model of the same name
    False
    >>> k == cache_key(endpoint="http://a:8000/v1", **(ask | {"messages": [Message("user", "hi!")]}))
    False
    >>> k == cache_key(endpoint="http://a:8000/v1", served_model="B.gguf", **ask)  # the server now serves another model
    False
    """
    material = {  # each value encoded alone, then joined in key order: the same text as canonical_json(material)
        "format": canonical_json(CACHE_FORMAT),
        "backend": canonical_json(backend),
        "endpoint": canonical_json(endpoint),
        "model": canonical_json(model),
        "served_model": canonical_json(served_model),
        "messages": canonical_json([m.to_wire() for m in messages]),
        "schema": schema_json if schema_json is not None else canonical_json(schema),
        "schema_mode": canonical_json(schema_mode),
        "parameters": canonical_json(dict(parameters)),
    }
    canonical = "{" + ",".join(f"{canonical_json(name)}:{material[name]}" for name in sorted(material)) + "}"
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def canonical_json(value: object) -> str:
    """The JSON a cache key is made of: sorted keys, no spaces, non-ASCII as is.

    >>> canonical_json({"b": [1, "é"], "a": None})
    '{"a":null,"b":[1,"é"]}'
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    """A validated answer as it was first received."""

    content: str
    model: str
    schema_name: str
    prompt_tokens: int
    completion_tokens: int
    served_model: str | None = None  # the model as the server named it when it answered

    def to_json(self) -> str:
        """The entry as written (one JSON object, its fields by name)."""
        return json.dumps({name: getattr(self, name) for name in _ANSWER_FIELDS}, ensure_ascii=False)


_ANSWER_FIELDS = tuple(f.name for f in fields(CachedAnswer))


def _entries(data: bytes, start: int, stop: int) -> Iterator[tuple[bytes, int, int]]:
    """(key, offset, length) of every finished entry of ``data[start:stop]`` (``stop`` just after a newline), also
    one glued to a torn line: a tab (JSON holds none) after 64 hex digits, its entry running to the next newline.

    >>> a, b = b"a" * 64, b"b" * 64
    >>> data = a + b'\\t{"x": 1}\\n' + a + b'\\t{"tor' + b + b'\\t{"y": 2}\\n'  # the second line torn, then glued
    >>> [(key[:1], data[at:at + n][:12]) for key, at, n in _entries(data, 0, len(data))]  # the torn one won't parse
    [(b'a', b'{"x": 1}'), (b'a', b'{"torbbbbbbb'), (b'b', b'{"y": 2}')]
    """
    at = data.find(b"\t", start, stop)
    while at >= 0:
        end = data.find(b"\n", at, stop)
        if end < 0:
            return
        if at - 64 >= start and _KEY_BYTES.fullmatch(data, at - 64, at):
            yield data[at - 64:at], at + 1, end - at - 1
        at = data.find(b"\t", at + 1, stop)


@dataclass(slots=True)
class _FileIndex:
    """Where each key's entries are in one file of lines (a bucket, or an older cache's patient file), for every
    finished line before ``read_to`` (offsets, not the entries: an index costs about a hundred bytes an answer)."""

    path: str
    read_to: int = 0
    entries: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # key -> (offset, length), in file order
    tail: bytes = b""  # the last bytes before read_to, checked on each read: another file there is read anew
    count: int = 0  # lines indexed

    def lookup(self, key: str) -> list[bytes] | None:
        """``key``'s entries (JSON, in file order) after reading what was appended since the last lookup, through a
        fresh descriptor (an NFS client revalidates what it caches on open); None when the file does not exist."""
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            self._reset()
            return None
        try:
            self._read_on(fd)
            return [os.pread(fd, length, at) for at, length in self.entries.get(key, ())]
        finally:
            os.close(fd)

    def _read_on(self, fd: int) -> None:
        start = self.read_to - len(self.tail)
        data = _read_from(fd, start)
        if not data.startswith(self.tail):  # truncated or replaced since (a cleared cache): read it anew
            self._reset()
            start, data = 0, _read_from(fd, 0)
        finished = data.rfind(b"\n") + 1  # a last line without its newline is still being written: read it later
        at = self.read_to - start
        if finished <= at:
            return
        for key, offset, length in _entries(data, at, finished):
            self.entries.setdefault(key.decode("ascii"), []).append((start + offset, length))
            self.count += 1
        self.read_to = start + finished
        self.tail = data[max(0, finished - _TAIL_BYTES):finished]

    def _reset(self) -> None:
        self.read_to, self.entries, self.tail, self.count = 0, {}, b"", 0


def _read_from(fd: int, at: int) -> bytes:
    """The file from ``at`` to its end (read on if it grows meanwhile)."""
    want = max(0, os.fstat(fd).st_size - at) + 65536
    chunks = []
    while True:
        chunks.append(os.pread(fd, want, at))
        if len(chunks[-1]) < want:
            return b"".join(chunks)
        at, want = at + want, 65536


class ResponseCache:
    """A patient's answers appended to its bucket's ``buckets/<hash[:3]>.jsonl``, others in ``<root>/<key[:2]>/<key>.json``
    files (or objects); an older cache's per-patient files are still read. Unreadable entries count as misses and are
    reported. `close` (the gateway's ``aclose``) closes the bucket files it keeps open."""

    def __init__(self, root: Path | str):
        self.store: Location | None = resolve(root) if is_remote(root) else None  # an object store, else None
        self.root: Path | str = self.store.uri if self.store is not None else Path(root)
        if self.store is None:
            make_dirs(self.root)  # private, like its entries (vista.shared.atomic)
        # an older cache's one file per patient, asked after the bucket (written before buckets: never again)
        self._per_patient = self.store is None and (self.root / _PER_PATIENT).is_dir()  # type: ignore[operator]
        self._buckets = str(Path(self.root) / _BUCKETS)
        self._appending: OrderedDict[str, int] = OrderedDict()  # bucket file -> its descriptor, opened O_APPEND
        self._lock = threading.Lock()  # a descriptor is never closed while another thread writes through it
        self._indexes: OrderedDict[str, _FileIndex] = OrderedDict()  # file -> its lines read so far
        self._indexed = 0  # lines in those indexes (at most INDEXED_ENTRIES, bar the last file looked up)
        self._index_lock = threading.Lock()
        weakref.finalize(self, _close_all, self._appending)

    def path(self, key: str, patient: str | None = None) -> Path | Location:
        """Where the entry is written: the patient's bucket file on a local disk, else its own file or object."""
        if self.store is not None:
            return self.store / key[:2] / f"{key}.json"
        if patient is not None:
            return Path(self._bucket_file(patient))
        return self.root / key[:2] / f"{key}.json"  # type: ignore[operator]

    def get(self, key: str, patient: str | None = None) -> CachedAnswer | None:
        """The answer cached for ``key``: in the patient's bucket (local disk; then in its file of an older cache),
        else in the key's own file."""
        if patient is not None and self.store is None:
            found = self._get_appended(key, self._bucket_file(patient))
            if found is None and self._per_patient:
                found = self._get_appended(key, str(self._patient_file(patient)))
            if found is not None:
                return found
        path = self.path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return CachedAnswer(**data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            log.warning("LLM cache entry %s is unreadable (%s); treating it as a miss", path, type(exc).__name__)
            return None

    def put(self, key: str, answer: CachedAnswer, patient: str | None = None) -> None:
        """Store ``answer``: one line appended to the patient's bucket (local disk), else one file or object."""
        text = answer.to_json()
        if patient is not None and self.store is None:
            if not _KEY.fullmatch(key):
                raise ValueError(f"LLM cache key {key[:80]!r} is not a sha256 hex digest")
            self._append(self._bucket_file(patient), f"{key}\t{text}\n".encode())
            return
        path = self.path(key)
        if isinstance(path, Location):  # one PUT of the whole entry
            path.write_text(text)
            return
        atomic_write_text(path, text)

    def close(self) -> None:
        """Close the bucket files kept open for appending (the cache stays usable: they reopen on demand)."""
        with self._lock:
            _close_all(self._appending)

    def __len__(self) -> int:
        if self.store is not None:
            return sum(1 for f in self.store.files(suffix=".json") if len(f.parent.name) == 2)
        root: Path = self.root  # type: ignore[assignment]
        keys = {path.stem for path in root.glob("??/*.json")}
        for path in [*root.glob(f"{_BUCKETS}/*.jsonl"), *root.glob(f"{_PER_PATIENT}/??/*.jsonl")]:
            data = path.read_bytes()
            for key, offset, length in _entries(data, 0, data.rfind(b"\n") + 1):
                try:
                    CachedAnswer(**json.loads(data[offset:offset + length]))
                except (ValueError, TypeError):
                    continue
                keys.add(key.decode("ascii"))
        return len(keys)

    # ------------------------------------------------------------------ files of lines
    def _bucket_file(self, patient: str) -> str:
        digest = hashlib.sha256(patient.encode("utf-8")).hexdigest()
        return f"{self._buckets}/{digest[:BUCKET_DIGITS]}.jsonl"  # a str: a Path per call costs more than the append

    def _patient_file(self, patient: str) -> Path:
        """The patient's own file in a cache written before buckets (read, never written)."""
        digest = hashlib.sha256(patient.encode("utf-8")).hexdigest()
        return self.root / _PER_PATIENT / digest[:2] / f"{digest[:32]}.jsonl"  # type: ignore[operator]

    def _get_appended(self, key: str, path: str) -> CachedAnswer | None:
        """The last readable line of ``key`` in the file at ``path``, after reading what was appended since this
        process last looked (another process may have written)."""
        with self._index_lock:
            index = self._indexes.get(path)
            if index is None:
                index = self._indexes[path] = _FileIndex(path)
            else:
                self._indexes.move_to_end(path)
            before = index.count
            try:
                entries = index.lookup(key)
            except OSError as exc:
                log.warning("LLM cache file %s is unreadable (%s); treating it as a miss", path, type(exc).__name__)
                return None
            finally:
                self._indexed += index.count - before
                while self._indexed > INDEXED_ENTRIES and len(self._indexes) > 1:
                    self._indexed -= self._indexes.popitem(last=False)[1].count
        if entries is None:
            self._forget(path)  # removed under us (a cleared cache): the next put makes it anew
            return None
        problem: Exception | None = None
        for entry in reversed(entries):
            try:
                return CachedAnswer(**json.loads(entry))
            except (ValueError, TypeError) as exc:  # torn by a writer killed mid-line, then glued to the next
                problem = exc
        if problem is not None:
            log.warning("LLM cache entry %s in %s is unreadable (%s); treating it as a miss", key, path,
                        type(problem).__name__)
        return None

    def _append(self, path: str, line: bytes) -> None:
        with self._lock:
            fd = self._appending.get(path)
            if fd is None:
                fd = self._open_for_append(path)
            else:
                self._appending.move_to_end(path)
            try:
                written = os.write(fd, line)  # one write on O_APPEND: the line lands after every other writer's
                while written < len(line):  # only on a full disk or a signal: finish it (readers skip it if torn)
                    line = line[written:]
                    written = os.write(fd, line)
            except OSError:
                os.close(self._appending.pop(path))  # the next put opens the file anew
                raise

    def _open_for_append(self, path: str) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        mode = data_mode().file
        try:
            fd = os.open(path, flags, mode)
        except FileNotFoundError:
            make_dirs(Path(path).parent)
            fd = os.open(path, flags, mode)
        try:
            if os.fstat(fd).st_mode & 0o777 != mode:  # created under a umask, or by an older run
                os.fchmod(fd, mode)
        except BaseException:
            os.close(fd)
            raise
        self._appending[path] = fd
        if len(self._appending) > OPEN_FILES:
            os.close(self._appending.popitem(last=False)[1])
        return fd

    def _forget(self, path: str) -> None:
        with self._lock:
            fd = self._appending.pop(path, None)
            if fd is not None:
                os.close(fd)


_BUCKETS = "buckets"  # folder of the bucket files
_PER_PATIENT = "patients"  # folder of an older cache's per-patient files


def _close_all(fds: OrderedDict[str, int]) -> None:
    while fds:
        os.close(fds.popitem()[1])
