"""A job starts its local Ray in the background while it checks the endpoint and plans (`jobs.ray_runtime.LazyRay`),
and leaves nothing running: neither after a run, nor when it fails while Ray is still starting.

Each case runs in a fresh process with its own Ray temp directory, so that the processes it started can be found."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import short_ray_dir

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[1]

RUN = """
import time, ray
from jobs.ray_runtime import LazyRay, RayOptions
with LazyRay(RayOptions(num_cpus=1)) as lazy:
    lazy.start()
    started = time.monotonic()
    runtime = lazy.runtime()
    @ray.remote
    def one():
        return 1
    assert ray.get(one.remote()) == 1 and runtime.started_locally and runtime.cpus == 1.0
print("ran", flush=True)
assert not ray.is_initialized()
"""

FAIL_WHILE_STARTING = """
import sys, time, ray
from jobs.ray_runtime import LazyRay, RayOptions
began = time.monotonic()
try:
    with LazyRay(RayOptions(num_cpus=1)) as lazy:
        lazy.start()
        raise ValueError("the endpoint refused the key")
except ValueError as exc:
    # the holder thread sets Ray up process-wide: not yet initialised means the error came before Ray was up
    print(f"error: {exc} after {time.monotonic() - began:.2f} s, ray up: {ray.is_initialized()}", flush=True)
    sys.exit(2)
"""

FAIL_WHEN_UP = """
import ray
from jobs.ray_runtime import LazyRay, RayOptions
try:
    with LazyRay(RayOptions(num_cpus=1)) as lazy:
        lazy.runtime()
        raise ValueError("no task finished for --stall-timeout")
except ValueError:
    assert not ray.is_initialized()  # left (and the local Ray stopped) before the error goes up
    print("stopped", flush=True)
"""


def _ray_processes(tmp: str) -> list[str]:
    found = subprocess.run(["pgrep", "-af", tmp], capture_output=True, text=True).stdout.splitlines()
    return [line for line in found if "pgrep" not in line]


def _run(code: str, tmp: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_TMPDIR": tmp, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=180, cwd=ROOT)


@pytest.fixture
def ray_tmp():
    with short_ray_dir("rbg_") as tmp:
        yield str(tmp)


def test_ray_started_in_the_background_runs_tasks_and_is_stopped_at_the_end(ray_tmp):
    done = _run(RUN, ray_tmp)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ran" in done.stdout
    time.sleep(1.0)
    assert _ray_processes(ray_tmp) == []


def test_a_job_failing_while_ray_starts_says_so_at_once_and_leaves_no_ray_behind(ray_tmp):
    done = _run(FAIL_WHILE_STARTING, ray_tmp)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "ray up: False" in done.stdout, done.stdout  # the error at once, not after Ray has started (and stopped)
    deadline = time.monotonic() + 30  # whatever of the local Ray had started is stopped, or dies with the process
    while _ray_processes(ray_tmp) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _ray_processes(ray_tmp) == []


def test_a_job_failing_once_ray_is_up_leaves_it_before_the_error_goes_up(ray_tmp):
    done = _run(FAIL_WHEN_UP, ray_tmp)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "stopped" in done.stdout
    time.sleep(1.0)
    assert _ray_processes(ray_tmp) == []
