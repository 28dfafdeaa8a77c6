"""The lock of an output directory, so two runs never write the same outputs at once."""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path
from typing import IO

from vista.atomic import make_dirs, open_private
from vista.storage import is_remote

from jobs.errors import JobError

log = logging.getLogger(__name__)


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
