"""The lock of an output directory, so two runs never write the same outputs at once."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

from filelock import FileLock, Timeout

from vista.shared.atomic import make_dirs
from vista.shared.runs.errors import JobError
from vista.shared.storage import is_remote

log = logging.getLogger(__name__)


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
        make_dirs(self.path.parent)  # the job's output folder, private (vista.shared.atomic)
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
