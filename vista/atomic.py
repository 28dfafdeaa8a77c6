"""Atomic writes of local files: the one "temporary file in the same folder, then rename" of the project.

A reader of ``path`` sees the old file, no file, or the whole new one — never half of it — and a write that fails
(an exception, a full disk, Ctrl-C) leaves ``path`` as it was and no temporary file behind. The temporary file lives
in the target's folder (a rename across filesystems is a copy, not atomic) under a hidden name
(``.<name>.<random>.tmp``), so globs for ``*.json`` or ``*.parquet`` never pick it up. The final file gets the
permissions a plain ``open(path, "w")`` would give (``0o666`` minus the umask), not `tempfile.mkstemp`'s ``0o600``.
``fsync=True`` also flushes the data to disk before the rename (for files a crash must not lose: job markers,
outputs), at the price of a disk round trip per file.

Object stores have no rename; `vista.storage.Location.write_bytes` handles them (one PUT of the whole object) and
uses this module for local paths.

>>> import tempfile, pathlib
>>> target = pathlib.Path(tempfile.mkdtemp()) / "out" / "a.txt"
>>> _ = atomic_write_text(target, "one\\n")
>>> try:
...     with atomic_path(target) as tmp:
...         _ = tmp.write_text("half")
...         raise RuntimeError("interrupted")
... except RuntimeError:
...     pass
>>> target.read_text(), sorted(p.name for p in target.parent.iterdir())
('one\\n', ['a.txt'])
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_UMASK = os.umask(0)
os.umask(_UMASK)  # read once at import: os.umask can only be read by setting it, which is not thread-safe later
FILE_MODE = 0o666 & ~_UMASK
"""The permissions of a written file: those of a file opened for writing the ordinary way."""


@contextmanager
def atomic_path(path: str | os.PathLike, *, fsync: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``path`` (its folder created if missing) for the block to write; rename it
    onto ``path`` only if the block succeeds, else delete it. ``fsync`` flushes the file to disk before the rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, FILE_MODE)
        if fsync:
            _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, fsync: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically (see `atomic_path`); ``path`` as a `Path`."""
    with atomic_path(path, fsync=fsync) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str, *, fsync: bool = False) -> Path:
    """Write ``text`` as UTF-8 to ``path`` atomically, byte for byte (no newline translation); ``path`` as a `Path`."""
    return atomic_write_bytes(path, text.encode("utf-8"), fsync=fsync)
