"""Where a job's files live: a local (or NFS) path or an object-store URI, resolved to a `pyarrow.fs` filesystem.

Every reader and writer of datasets, label files, job outputs and the LLM response cache goes through `Location`, so
``--dataset``, ``--labels`` and ``--out`` may each be a path or a URI (``s3://bucket/meds``, ``gs://…``, any scheme
``pyarrow.fs.FileSystem.from_uri`` knows). An S3-compatible server other than AWS (MinIO, Ceph, a test server) is
named by the ``AWS_ENDPOINT_URL`` environment variable, which pyarrow reads itself, or by the URI's own
``?endpoint_override=http://host:9000`` query; credentials come from the usual ``AWS_*`` variables or files of
each node, never from the URI.

What "atomic" means where. On a local or NFS path a write goes to a temporary file in the same folder, is fsynced
and renamed into place. An object store has no rename, but it never shows half an object: `Location.write_bytes`
sends the complete bytes as one PUT to the final key. A file too large to hold in memory (`Location.publish`)
is streamed to a temporary key and copied server-side into place, so the final key only ever holds whole files.

>>> import tempfile
>>> root = resolve(tempfile.mkdtemp())
>>> (root / "runs" / "a.json").write_text('{"ok": true}')
>>> [p.name for p in root.files(suffix=".json")], (root / "runs" / "a.json").read_text()
(['a.json'], '{"ok": true}')
>>> root.is_local, (root / "runs").is_dir(), (root / "nothing").exists()
(True, True, False)
>>> normalize("s3://bucket/out/"), is_remote("s3://bucket/out"), is_remote("out/run1")
('s3://bucket/out', True, False)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from vista.shared.atomic import atomic_path, atomic_write_bytes, make_dirs
from vista.shared.errors import UserError

LOCAL_SCHEMES = ("", "file")


class StorageError(OSError, UserError):
    """A storage URI that cannot be opened (unknown scheme, bad query), named with the reason."""


def _scheme(target: str) -> str:
    if "://" not in target:
        return ""
    return urlsplit(target).scheme.lower()


def is_remote(target: str | Path) -> bool:
    """Whether ``target`` names an object store (a URI whose scheme is not ``file``), not a local path."""
    return not isinstance(target, Path) and _scheme(str(target)) not in LOCAL_SCHEMES


def normalize(target: str | Path) -> str:
    """The form a job records and ships to its actors: an absolute local path, or the URI without a trailing ``/``."""
    if is_remote(target):
        return str(target).rstrip("/")
    text = str(target)
    if text.startswith("file://"):
        text = urlsplit(text).path
    return str(resolve_local(text))


def resolve_local(path: str | Path) -> Path:
    """The absolute form of a local path; `StorageError` in one line for one that cannot be resolved (a symbolic
    link loop, a component that is not readable) — the one place every command's dataset path goes through."""
    try:
        return Path(path).resolve()
    except RuntimeError as exc:  # Python < 3.13 says "Symlink loop from '…'" this way
        raise StorageError(f"{path}: cannot be opened: a symbolic link loop ({exc})") from None
    except OSError as exc:
        raise StorageError(f"{path}: cannot be opened ({exc.strerror or exc})") from None


def join(target: str | Path, *names: str) -> str:
    """``target`` with ``names`` appended (a URI keeps its query).

    >>> join("s3://b/out?endpoint_override=http://127.0.0.1:9000", "llm_cache")
    's3://b/out/llm_cache?endpoint_override=http://127.0.0.1:9000'
    >>> join("/data/out", "llm_cache")
    '/data/out/llm_cache'
    """
    if not is_remote(target):
        return str(Path(target).joinpath(*names))
    base, sep, query = str(target).partition("?")
    return "/".join([base.rstrip("/"), *names]) + (sep + query)


@dataclass(frozen=True)
class Location:
    """A file or folder: the filesystem holding it, its path inside that filesystem, and how to name it to people.

    Picklable (pyarrow filesystems are), so a location can travel to Ray workers; credentials are looked up where
    it is used.
    """

    fs: pafs.FileSystem
    path: str
    scheme: str = ""  # "" for local paths

    @property
    def is_local(self) -> bool:
        return self.scheme == ""

    @property
    def uri(self) -> str:
        """The path as a person (or an error message) names it: a local path, or ``scheme://bucket/key``."""
        return self.path if self.is_local else f"{self.scheme}://{self.path}"

    def __str__(self) -> str:
        return self.uri

    def __truediv__(self, name: str) -> Location:
        return Location(self.fs, f"{self.path.rstrip('/')}/{name}", self.scheme)

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> Location:
        return Location(self.fs, self.path.rstrip("/").rsplit("/", 1)[0] or "/", self.scheme)

    def relative_to(self, root: Location) -> str:
        """This location's path below ``root``, with ``/`` separators."""
        prefix = root.path.rstrip("/") + "/"
        if not self.path.startswith(prefix):
            raise ValueError(f"{self.uri} is not inside {root.uri}")
        return self.path[len(prefix):]

    # ------------------------------------------------------------------------------------------- what is there
    def _type(self) -> pafs.FileType:
        return self.fs.get_file_info(self.path).type

    def exists(self) -> bool:
        return self._type() != pafs.FileType.NotFound

    def is_file(self) -> bool:
        return self._type() == pafs.FileType.File

    def is_dir(self) -> bool:
        """A folder; on an object store, a prefix with at least one object under it (or a bucket)."""
        return self._type() == pafs.FileType.Directory

    def size(self) -> int:
        info = self.fs.get_file_info(self.path)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(self.uri)
        return int(info.size or 0)

    def files(self, *, suffix: str = "", recursive: bool = True) -> list[Location]:
        """The files below this folder whose name ends with ``suffix``, sorted by path (none if it does not exist)."""
        selector = pafs.FileSelector(self.path, recursive=recursive, allow_not_found=True)
        found = [Location(self.fs, info.path, self.scheme) for info in self.fs.get_file_info(selector)
                 if info.type == pafs.FileType.File and info.base_name.endswith(suffix)]
        return sorted(found, key=lambda loc: loc.path)

    # ------------------------------------------------------------------------------------------- reading
    def open_input(self) -> pa.NativeFile:
        """A seekable handle (for ``pq.ParquetFile``); `FileNotFoundError` when the file is absent."""
        return self.fs.open_input_file(self.path)

    def read_bytes(self) -> bytes:
        with self.fs.open_input_stream(self.path) as handle:
            return handle.read()

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    # ------------------------------------------------------------------------------------------- writing
    def write_bytes(self, data: bytes) -> None:
        """Write ``data`` so readers see the old file, or none, or the whole new one (see the module docstring)."""
        if self.is_local:
            atomic_write_bytes(self.path, data, fsync=True)
            return
        with self.fs.open_output_stream(self.path) as handle:  # the complete bytes: one PUT of a whole object
            handle.write(data)

    def write_text(self, text: str) -> None:
        self.write_bytes(text.encode("utf-8"))

    @contextmanager
    def publish(self) -> Iterator[BinaryIO | str]:
        """Stream a large file into place: yields a local temporary path (local filesystem) or an output stream
        (object store) under a temporary name; when the block ends without error it is moved into place (a rename,
        or a server-side copy), otherwise removed."""
        if self.is_local:
            with atomic_path(self.path) as tmp:
                yield str(tmp)
            return
        tmp = self.parent / f".{self.name}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            with self.fs.open_output_stream(tmp.path) as handle:
                yield handle
            self.fs.move(tmp.path, self.path)
        except BaseException:
            tmp.delete()
            raise

    def make_dirs(self) -> None:
        """Create the folder (a no-op on object stores, whose prefixes exist once an object is under them)."""
        if self.is_local:
            make_dirs(self.path)

    def delete(self) -> None:
        """Remove the file if present."""
        try:
            self.fs.delete_file(self.path)
        except FileNotFoundError:
            pass


def resolve(target: str | Path | Location) -> Location:
    """The `Location` of a local path (made absolute) or of a URI (``s3://bucket/key?endpoint_override=…``)."""
    if isinstance(target, Location):
        return target
    if not is_remote(target):
        return Location(pafs.LocalFileSystem(), normalize(target), "")
    text = str(target)
    try:
        fs, path = pafs.FileSystem.from_uri(text)
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise StorageError(f"{text.partition('?')[0]}: cannot open this storage URI ({exc})") from None
    return Location(fs, path.rstrip("/"), _scheme(text))


def scan_parquet(files: list[Location]):
    """A polars LazyFrame over parquet ``files`` of one filesystem: polars' own reader for local files, a pyarrow
    dataset on the same `pyarrow.fs` filesystem (same endpoint and credentials) for an object store."""
    import polars as pl

    if not files or files[0].is_local:
        return pl.scan_parquet([f.path for f in files])
    import pyarrow.dataset as pads

    return pl.scan_pyarrow_dataset(pads.dataset([f.path for f in files], filesystem=files[0].fs, format="parquet"))
