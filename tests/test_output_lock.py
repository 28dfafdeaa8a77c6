"""The output directory's lock (`vista.shared.runs.lock.OutputLock`, a filelock): a second run is refused in one line naming
the folder and the run holding it; a killed holder never blocks the restart; object storage takes no lock."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time

import pytest

from vista.shared.runs.errors import JobError
from vista.shared.runs.lock import OutputLock

HOLD = "import sys, time; from vista.shared.runs.lock import OutputLock\nwith OutputLock(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)"


def _holding_process(root) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(root)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_run_is_refused_naming_the_folder_and_the_holder(tmp_path):
    out = tmp_path / "out"
    holder = _holding_process(out)
    try:
        with pytest.raises(JobError) as err:
            with OutputLock(out):
                pass
        message = str(err.value)
        assert "\n" not in message
        assert message.startswith(f"{out}: another run is writing to this output directory")
        assert f"held by process {holder.pid} on {socket.gethostname()}" in message
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with OutputLock(out):  # the kernel released the killed holder's lock: the restart runs
        assert (out / ".lock").read_text().split() == [str(os.getpid()), socket.gethostname()]
    assert stat.S_IMODE((out / ".lock").stat().st_mode) == 0o600 and (out / ".lock").exists()


def test_the_lock_is_exclusive_inside_one_process_and_released_on_exit(tmp_path):
    with OutputLock(tmp_path):
        with pytest.raises(JobError, match=rf"{tmp_path}: another run is writing .*held by process {os.getpid()}"):
            with OutputLock(tmp_path):
                pass
    started = time.monotonic()
    with OutputLock(tmp_path):
        pass
    assert time.monotonic() - started < 1.0  # never waits: refused or taken at once


def test_object_storage_takes_no_lock_and_says_so(caplog):
    with caplog.at_level("WARNING", logger="vista.shared.runs.lock"):
        with OutputLock("s3://bucket/run"):
            with OutputLock("s3://bucket/run"):
                pass
    assert "object storage has no lock" in caplog.text
