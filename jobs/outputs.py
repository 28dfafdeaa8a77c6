"""Per-task output files that double as "done" markers, written atomically, and the lock of an output directory.

Every finished task leaves exactly one marker file under ``<root>/<kind>/<bucket>/``: ``<name>.json`` when it
produced a result, ``<name>.failed.json`` when it ended with an error row. Files are written to a temporary name in
the same folder and renamed into place (atomic on POSIX), so a reader — or a job restarted after a crash — sees
either the whole file or none. ``bucket`` (subject id mod 100) keeps folders small for 100,000-patient cohorts.

>>> import tempfile
>>> from datetime import datetime
>>> from jobs.tasks import TaskKey
>>> store = MarkerStore(Path(tempfile.mkdtemp()), "patients")
>>> key = TaskKey(7, datetime(2020, 1, 1))
>>> store.write(key, b'{"status": "error"}', failed=True).name
'7_20200101T000000.failed.json'
>>> store.scan()
{TaskKey(subject_id=7, prediction_time=datetime.datetime(2020, 1, 1, 0, 0)): 'failed'}
>>> _ = store.write(key, b'{"status": "ok"}', failed=False)  # a retry that succeeded replaces the error row
>>> store.scan(), store.read(key)
({TaskKey(subject_id=7, prediction_time=datetime.datetime(2020, 1, 1, 0, 0)): 'done'}, b'{"status": "ok"}')
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Literal

from filelock import FileLock, Timeout

from vista.atomic import atomic_write_bytes, make_dirs
from vista.storage import is_remote

from jobs.errors import JobError
from jobs.tasks import TaskKey

log = logging.getLogger(__name__)

MarkerStatus = Literal["done", "failed"]
FAILED_SUFFIX = ".failed.json"
DONE_SUFFIX = ".json"
BUCKETS = 100


class MarkerStore:
    """The marker files of one kind of output (``patients``, ``timelines``) under an output root."""

    def __init__(self, root: Path, kind: str):
        self.root = Path(root)
        self.folder = self.root / kind

    def bucket(self, key: TaskKey) -> Path:
        return self.folder / f"{key.subject_id % BUCKETS:02d}"

    def path(self, key: TaskKey, *, failed: bool) -> Path:
        return self.bucket(key) / (key.name + (FAILED_SUFFIX if failed else DONE_SUFFIX))

    def status(self, key: TaskKey) -> MarkerStatus | None:
        """The marker present for ``key`` (a result wins over a stale error row), or None."""
        if self.path(key, failed=False).is_file():
            return "done"
        if self.path(key, failed=True).is_file():
            return "failed"
        return None

    def write(self, key: TaskKey, data: bytes, *, failed: bool) -> Path:
        """Write the task's marker atomically and remove the other kind, so each task keeps one marker."""
        path = self.path(key, failed=failed)
        atomic_write_bytes(path, data, fsync=True)
        self.path(key, failed=not failed).unlink(missing_ok=True)
        return path

    def read(self, key: TaskKey) -> bytes | None:
        """The bytes of the task's marker (the result when both exist), or None."""
        for failed in (False, True):
            try:
                return self.path(key, failed=failed).read_bytes()
            except FileNotFoundError:
                continue
        return None

    def scan(self) -> dict[TaskKey, MarkerStatus]:
        """Every task with a marker and its status (temporary files of interrupted writes are ignored)."""
        found: dict[TaskKey, MarkerStatus] = {}
        if not self.folder.is_dir():
            return found
        for bucket in os.scandir(self.folder):
            if not bucket.is_dir():
                continue
            for entry in os.scandir(bucket.path):
                name = entry.name
                if name.startswith(".") or not name.endswith(DONE_SUFFIX):
                    continue
                failed = name.endswith(FAILED_SUFFIX)
                stem = name[: -len(FAILED_SUFFIX if failed else DONE_SUFFIX)]
                try:
                    key = TaskKey.from_name(stem)
                except ValueError:
                    continue  # not one of ours
                if failed and key in found:
                    continue
                found[key] = "failed" if failed else "done"
        return found

    def remove_stale_temporaries(self) -> int:
        """Delete temporary files left by writes that were interrupted (call before any writer starts)."""
        removed = 0
        if not self.folder.is_dir():
            return removed
        for path in self.folder.glob("*/.*.tmp"):
            path.unlink(missing_ok=True)
            removed += 1
        return removed


class OutputLock:
    """An exclusive lock on an output directory, so two runs never write the same outputs at once.

    A `filelock.FileLock` (``flock``) on ``<root>/.lock``, held by the driver, which writes its process id and host
    into the file; the kernel releases the lock when the process dies, so a killed run never blocks its own restart.
    A second run is refused at once with one line naming the folder and the holder.

    An object store (``--out s3://…``) has neither flock nor an atomic create that pyarrow exposes, and a lock object
    that outlived a killed driver would block its restart; there the lock is not taken: one driver per output
    prefix is the user's rule (logged once). Two drivers would still never corrupt a file — every object is written
    whole, part files have unique names — but they would run the same tasks twice.
    """

    def __init__(self, root: Path | str):
        self.remote = is_remote(root)
        self.root = root
        self.path = Path(root) / ".lock" if not self.remote else None
        self._lock: FileLock | None = None

    def __enter__(self) -> OutputLock:
        if self.path is None:
            log.warning("%s: object storage has no lock; run one job at a time in this output prefix", self.root)
            return self
        make_dirs(self.path.parent)  # the job's output folder, private (vista.atomic)
        lock = FileLock(self.path, mode=0o600, blocking=False, fallback_to_soft=False, on_acquired=_write_holder)
        try:
            lock.acquire()
        except Timeout:
            raise JobError(f"{self.path.parent}: another run is writing to this output directory "
                           f"({_holder(self.path)}lock {self.path})") from None
        self._lock = lock
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None


def _write_holder(fd: int) -> None:
    """Write ``<pid> <host>`` into the lock file just acquired (its descriptor), for the message of a refused run."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)


def _holder(path: Path) -> str:
    """``held by process 123 on host; `` from the lock file, or nothing when it cannot be read."""
    try:
        pid, host = path.read_text().split()
    except (OSError, ValueError):
        return ""
    return f"held by process {pid} on {host}; "
