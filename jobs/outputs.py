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

import fcntl
import logging
import os
from pathlib import Path
from typing import IO, Literal

from vista.atomic import atomic_write_bytes, make_dirs, open_private
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

    Held with ``flock`` on ``<root>/.lock`` by the driver; the kernel releases it when the process dies, so a
    killed run never blocks its own restart.

    An object store (``--out s3://…``) has neither flock nor an atomic create that pyarrow exposes, and a lock object
    that outlived a killed driver would block its restart; there the lock is not taken: one driver per output
    prefix is the user's rule (logged once). Two drivers would still never corrupt a file — every object is written
    whole, part files have unique names — but they would run the same tasks twice.
    """

    def __init__(self, root: Path | str):
        self.remote = is_remote(root)
        self.root = root
        self.path = Path(root) / ".lock" if not self.remote else None
        self._handle: IO[str] | None = None

    def __enter__(self) -> OutputLock:
        if self.path is None:
            log.warning("%s: object storage has no lock; run one job at a time in this output prefix", self.root)
            return self
        make_dirs(self.path.parent)  # the job's output folder, private (vista.atomic)
        handle = open_private(self.path)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise JobError(f"{self.path.parent}: another run is writing to this output directory (lock {self.path})") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None
