"""Drops one known false alarm of Ray core from a job's stderr, forwarding everything else unchanged.

Ray Data puts every map function in the object store (``ray.put``) and starts its actors with ``max_restarts=-1``;
Ray core then logs, at error level and from C++, that each such actor "has constructor arguments in the object store
and max_restarts > 0 ... the actor restart will fail" (ray-project/ray#57733, open upstream). In our jobs the driver
holds that object for the whole run and its primary copy lives on the driver's node, whose loss ends the job anyway,
so a restarted actor always finds it: the line is a false alarm that users read as a failure. (Turning restarts off
would remove it, and with it the recovery from a lost worker node that ``tests/test_jobs_multinode.py`` checks.)

C++ writes straight to file descriptor 2, past Python's logging, so this module puts a pipe in front of fd 2 and a
thread forwards each chunk, minus the lines that carry the marker. ``--verbose`` skips it.
"""

from __future__ import annotations

import atexit
import os
import select
import sys
import threading

FALSE_ALARMS = (b"has constructor arguments in the object store and max_restarts > 0",)
"""Markers of the lines dropped (each names the whole false alarm; nothing else of Ray's is touched)."""

_installed = False
_lock = threading.Lock()


def drop_lines(chunk: bytes, markers: tuple[bytes, ...] = FALSE_ALARMS) -> bytes:
    """``chunk`` without the lines that hold one of ``markers`` (other bytes, partial lines included, unchanged).

    >>> drop_lines(b"ok\\n[E core_worker.cc] Actor X has constructor arguments in the object store and max_restarts > 0.\\nnext\\n")
    b'ok\\nnext\\n'
    >>> drop_lines(b"progress 3/4\\r")
    b'progress 3/4\\r'
    """
    if not any(m in chunk for m in markers):
        return chunk
    return b"".join(line for line in chunk.splitlines(keepends=True) if not any(m in line for m in markers))


def drop_known_ray_false_alarms() -> None:
    """Install the filter in front of this process's stderr (once; a no-op where fd 2 cannot be replaced)."""
    global _installed
    with _lock:
        if _installed:
            return
        try:
            sys.stderr.flush()
            read_end, write_end = os.pipe()
            original = os.dup(2)
            os.dup2(write_end, 2)
            os.close(write_end)
        except OSError:
            return
        _installed = True
    stop = threading.Event()
    thread = threading.Thread(target=_forward, args=(read_end, original, stop), name="ray-stderr-filter", daemon=True)
    thread.start()

    def restore() -> None:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(original, 2)  # later writes go straight to the terminal; the thread drains what is in the pipe
        stop.set()
        thread.join(timeout=1.0)

    atexit.register(restore)


def _forward(read_end: int, original: int, stop: threading.Event) -> None:
    """Drain the pipe until the process ends: a write that fails is dropped, never a reason to stop reading (a pipe
    nobody drains would block every later write to stderr once its buffer is full)."""
    while True:
        try:
            ready, _, _ = select.select([read_end], [], [], 0.1)
            if not ready:
                if stop.is_set():
                    return
                continue
            chunk = os.read(read_end, 65536)
        except OSError:
            return  # the pipe itself is gone (closed at exit): nothing left to drain
        if not chunk:
            return
        kept = drop_lines(chunk)
        if kept:
            try:
                os.write(original, kept)
            except OSError:
                pass
