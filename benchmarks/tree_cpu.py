"""CPU seconds of a command's whole process tree, counted exactly: every descendant, daemons included.

``getrusage`` of a Ray driver misses about half of a job's CPU (the raylet, GCS, workers and agents are not its
waited-for children). This runner counts the tree two ways and reports the first that works:

* **a cpuacct cgroup** (``/sys/fs/cgroup/cpuacct``, writable by root): the command starts inside a fresh cgroup,
  which every descendant inherits whatever its parent does, and the kernel's total for the cgroup is read at the
  end (``method: cgroup``);
* **a child subreaper** (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``): every orphaned descendant is re-parented to this
  runner, which reaps them all and reads ``getrusage(RUSAGE_CHILDREN)`` (``method: subreaper``). It counts a
  descendant only if every process between it and the runner waited for it: measured on a Ray job it missed
  three quarters of the CPU (15 of 54 s, against per-process ``/proc`` totals), so it is only the fallback.

Either way the runner waits for the whole tree; descendants still alive ``--grace`` seconds after the command exits
are ended (SIGTERM, then SIGKILL) and reported as ``leftovers``.

    python -m benchmarks.tree_cpu --json usage.json -- python -m jobs.predict ...

`run_counted` does that from Python and returns the figures with the command's output.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True, slots=True)
class TreeUsage:
    """What the command's process tree cost."""

    returncode: int
    wall_s: float  # launch to the command's exit
    user_s: float
    system_s: float
    leftovers: int = 0  # descendants still alive --grace seconds after the command ended (then killed)
    method: str = "subreaper"  # how the tree was counted: cgroup (exact) or subreaper (a lower bound)

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.system_s


@dataclass(frozen=True, slots=True)
class Counted:
    usage: TreeUsage
    stdout: str
    stderr: str


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _reap_all(grace_s: float) -> int:
    """Wait for every remaining child (orphans land here); end those alive after ``grace_s``; how many were ended."""
    deadline, ended, signals = time.monotonic() + grace_s, 0, [signal.SIGTERM, signal.SIGKILL]
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid:
            continue
        if time.monotonic() > deadline and signals:
            alive = _children(os.getpid())
            ended = max(ended, len(alive))
            sig = signals.pop(0)
            for child in alive:
                try:
                    os.kill(child, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 5
        time.sleep(0.05)


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class _Cgroup:
    """A fresh cpuacct cgroup (v1) for the command's tree, or None where there is none to make."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def make(cls) -> _Cgroup | None:
        path = CPUACCT / f"tree_cpu_{os.getpid()}"
        try:
            path.mkdir()
        except OSError:
            return None
        return cls(path)

    def enter(self) -> None:
        """Move the calling process in (a child's ``preexec_fn``: the command and all it starts are counted)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def usage(self) -> tuple[float, float]:
        """(user, system) seconds: the exact total (nanoseconds) split as the kernel's tick counts split it."""
        total = int((self.path / "cpuacct.usage").read_text()) / 1e9
        ticks = dict(line.split() for line in (self.path / "cpuacct.stat").read_text().splitlines())
        user, system = int(ticks.get("user", 0)), int(ticks.get("system", 0))
        share = user / (user + system) if user + system else 1.0
        return total * share, total * (1 - share)

    def remove(self) -> None:
        try:
            self.path.rmdir()
        except OSError:  # a process still in it: leave the empty-to-be folder (the kernel frees it later)
            pass


def measure(command: list[str], *, grace_s: float = 60.0, timeout_s: float | None = None) -> TreeUsage:
    """Run ``command`` (output inherited) as this process's child and count its whole tree (call in a fresh process:
    every child of this one counts)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    cgroup = _Cgroup.make()
    started = time.perf_counter()
    process = subprocess.Popen(command, preexec_fn=cgroup.enter if cgroup is not None else None)
    try:
        code = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        code = process.wait()
    wall = time.perf_counter() - started
    leftovers = _reap_all(grace_s)
    if cgroup is not None:
        user, system = cgroup.usage()
        cgroup.remove()
        return TreeUsage(code, round(wall, 3), round(user, 3), round(system, 3), leftovers, "cgroup")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return TreeUsage(code, round(wall, 3), round(usage.ru_utime, 3), round(usage.ru_stime, 3), leftovers)


def run_counted(command: list[str], *, env: dict[str, str] | None = None, timeout_s: float = 3600.0,
                cwd: Path | None = None) -> Counted:
    """``command`` under this runner in a fresh process: its tree's usage and its captured stdout/stderr."""
    with tempfile.TemporaryDirectory(prefix="tree_cpu_") as tmp:
        report = Path(tmp) / "usage.json"
        done = subprocess.run([sys.executable, "-m", "benchmarks.tree_cpu", "--json", str(report),
                               "--timeout", str(timeout_s), "--", *command],
                              env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout_s + 180)
        if not report.is_file():
            raise RuntimeError(f"tree_cpu wrote no figures (exit {done.returncode}): {done.stderr[-2000:]}")
        usage = TreeUsage(**json.loads(report.read_text()))
    return Counted(usage, done.stdout, done.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True, help="write the figures here")
    parser.add_argument("--grace", type=float, default=60.0, help="seconds to wait for descendants after the command")
    parser.add_argument("--timeout", type=float, help="seconds the command may run")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    usage = measure(command, grace_s=args.grace, timeout_s=args.timeout)
    args.json.write_text(json.dumps(asdict(usage)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
