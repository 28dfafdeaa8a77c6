"""Atomic writes of local files: the one "temporary file in the same folder, then rename" of the project.

A reader of ``path`` sees the old file, no file, or the whole new one — never half of it — and a write that fails
(an exception, a full disk, Ctrl-C) leaves ``path`` as it was and no temporary file behind. The temporary file lives
in the target's folder (a rename across filesystems is a copy, not atomic) under a hidden name
(``.<name>.<random>.tmp``), so globs for ``*.json`` or ``*.parquet`` never pick it up.

Patient data at rest is private: the final file gets the data mode's file permissions (``0o600``) and every folder
this module creates its folder permissions (``0o700``), whatever the umask — the project's outputs, graph stores
and LLM caches hold notes and predictions that no other local user may read. One setting relaxes it, for a team sharing results through a Unix
group: ``VISTA_DATA_MODE=group`` gives ``0o640`` files and ``0o750`` folders (group members read, nobody else).
This module is its one home: every writer of the project goes through `atomic_path` / `make_dirs` / `protect`,
and the command-line entry points and the jobs' Ray actors also set the process umask from it
(`apply_data_umask`), so files that libraries write themselves (pyarrow, polars, lock files) follow it too. An
existing folder keeps its mode.

``fsync=True`` also flushes the data to disk before the rename (for files a crash must not lose: job markers,
outputs), at the price of a disk round trip per file.

Object stores have no rename; `vista.shared.storage.Location.write_bytes` handles them (one PUT of the whole object) and
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

import itertools
import os
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from vista.shared.errors import UserError

DATA_MODE_ENV = "VISTA_DATA_MODE"
"""The setting that relaxes the private default (``private``, the default, or ``group``)."""


class DataModeError(ValueError, UserError):
    """``VISTA_DATA_MODE`` holds something other than ``private`` or ``group``."""


@dataclass(frozen=True, slots=True)
class DataMode:
    """The permissions of the project's files and folders under one setting of ``VISTA_DATA_MODE``."""

    name: str
    file: int
    folder: int

    @property
    def umask(self) -> int:
        return 0o777 & ~self.folder


DATA_MODES = {"private": DataMode("private", 0o600, 0o700), "group": DataMode("group", 0o640, 0o750)}


def data_mode(name: str | None = None) -> DataMode:
    """The mode named ``name``, else by ``VISTA_DATA_MODE`` (unset or empty: private).

    >>> oct(data_mode().file), oct(data_mode("group").folder)
    ('0o600', '0o750')
    >>> data_mode("world")
    Traceback (most recent call last):
    ...
    vista.shared.atomic.DataModeError: VISTA_DATA_MODE=world: expected private (files 0600, folders 0700) or group (0640/0750)
    """
    name = (name if name is not None else os.environ.get(DATA_MODE_ENV, "")).strip().lower() or "private"
    try:
        return DATA_MODES[name]
    except KeyError:
        raise DataModeError(f"{DATA_MODE_ENV}={name}: expected private (files 0600, folders 0700) or group "
                            f"(0640/0750)") from None


def apply_data_umask(name: str | None = None) -> DataMode:
    """Set this process's umask (and ``VISTA_DATA_MODE``, for what it starts) from the data mode: for the
    command-line entry points and the jobs' actors, so that every file written in the process is private, also by
    libraries that create files themselves. Returns the mode."""
    mode = data_mode(name)
    os.environ[DATA_MODE_ENV] = mode.name
    os.umask(mode.umask)
    return mode


def make_dirs(path: str | os.PathLike) -> Path:
    """Create ``path`` and its missing parents with the data mode's folder permissions (``mkdir -p``, private);
    folders that exist keep theirs. Returns ``path`` as a `Path`."""
    path = Path(path)
    missing: list[Path] = []
    for folder in (path, *path.parents):
        if folder.is_dir():
            break
        missing.append(folder)
    mode = data_mode().folder
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=mode)
        except FileExistsError:  # another process made it meanwhile
            if not folder.is_dir():
                raise
            continue
        os.chmod(folder, mode)  # mkdir's mode is masked by the umask
    return path


def protect(path: str | os.PathLike) -> Path:
    """Give a file written in place by another library the data mode's file permissions; returns it as a `Path`."""
    os.chmod(path, data_mode().file)
    return Path(path)


def open_private(path: str | os.PathLike, mode: str = "a+", **kwargs) -> IO:
    """``open(path, mode)`` for a file kept open and written in place (a lock file, a log), created with the data
    mode's file permissions (an existing file is given them too); its folder is made if missing."""
    path = Path(path)
    make_dirs(path.parent)
    flags = os.O_CREAT | (os.O_RDWR if "+" in mode else os.O_WRONLY) | (os.O_APPEND if "a" in mode else 0)
    flags |= os.O_TRUNC if "w" in mode else 0
    fd = os.open(path, flags, data_mode().file)
    try:
        os.fchmod(fd, data_mode().file)
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


@contextmanager
def atomic_path(path: str | os.PathLike, *, fsync: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``path`` (its folder created if missing, private) for the block to write;
    give it the data mode's permissions and rename it onto ``path`` only if the block succeeds, else delete it.
    ``fsync`` flushes the file to disk before the rename."""
    path = Path(path)
    make_dirs(path.parent)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, data_mode().file)
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


_TEMP_NAMES = itertools.count()
_TEMP_TOKEN = secrets.token_hex(4)  # with the process id: temporaries of two hosts sharing a folder never collide


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, fsync: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically, as `atomic_path` does (a private temporary next to it, the data mode's
    permissions, a rename), in the fewest system calls: one exclusive create of a unique name, write, rename — the
    LLM cache writes one entry per answer, on the job's event loop (mkstemp, a second open and a chmod by path were
    a sixth of a busy actor's loop). ``path`` as a `Path`."""
    path = Path(path)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{_TEMP_TOKEN}.{next(_TEMP_NAMES)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, 0o600)
    except FileNotFoundError:
        make_dirs(path.parent)
        fd = os.open(tmp, flags, 0o600)
    try:
        try:
            os.fchmod(fd, data_mode().file)  # exactly the data mode, whatever the umask
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str, *, fsync: bool = False) -> Path:
    """Write ``text`` as UTF-8 to ``path`` atomically, byte for byte (no newline translation); ``path`` as a `Path`."""
    return atomic_write_bytes(path, text.encode("utf-8"), fsync=fsync)
