"""Session-wide test fixtures: one local Ray head for every Ray test (started once, stopped at the end).

The head is started with ``ray start --head`` from the venv (the dashboard on, so ``ray job submit`` works) on
127.0.0.1, on free ports and in its own temp dir, and stopped in teardown by ending exactly the processes that
run under that temp dir (never ``ray stop``, which would end other Ray instances on the machine).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

TEST_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled", "RAY_DATA_DISABLE_PROGRESS_BARS": "1"}
for _name, _value in TEST_ENV.items():
    os.environ.setdefault(_name, _value)

RAY = Path(sys.executable).with_name("ray")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def short_ray_dir(prefix: str = "ray_") -> Iterator[Path]:
    """A fresh folder directly under /tmp for a Ray of a test's own, removed afterwards: Ray puts AF_UNIX sockets in
    it, whose paths must fit in 107 bytes (under pytest-xdist, ``tmp_path`` alone is ~60)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def own_ray_env() -> Iterator[dict[str, str]]:
    """The environment of a job that starts its own local Ray, as a user's first run does: none of the session
    head's ``RAY_`` variables (the usage-stats opt-out kept), and ``RAY_TMPDIR`` a short folder of its own."""
    with short_ray_dir() as ray_dir:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") or k == "RAY_USAGE_STATS_ENABLED"}
        yield {**env, "RAY_TMPDIR": str(ray_dir)}


def processes_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text`` (this process excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(entry.name))
    return found


def end_processes(pids: list[int], *, grace_s: float = 5.0) -> None:
    """SIGTERM the given pids, then SIGKILL those still alive after ``grace_s``."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in alive if _alive(p)]
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


def _is_ray(item: pytest.Item) -> bool:
    return item.get_closest_marker("ray") is not None


def _is_heavy(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) for name in ("slow", "llm"))


def _ray_initialized() -> bool:
    ray = sys.modules.get("ray")  # never imported here: a test that did not import Ray started none
    return ray is not None and ray.is_initialized()


@pytest.fixture(autouse=True)
def _no_stray_ray(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test without the ``ray`` marker that leaves a Ray runtime of its own running fails: its cluster would run
    beside the session head for the rest of the session (seen: one left from a worker's test, 9 minutes)."""
    before = _ray_initialized()
    yield
    if not before and _ray_initialized() and not _is_ray(request.node):
        import ray

        ray.shutdown()
        pytest.fail(f"{request.node.nodeid} left a Ray runtime running: mark it `ray` (or shut Ray down)",
                    pytrace=False)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the group into the test id ("...@ray")
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` (scripts/test.sh) every ``ray`` test joins the xdist group "ray", run serially by
    one worker on one session head while the other workers take the rest file by file. The Ray group comes first,
    then the files holding slow or real-model tests, so the longest work starts at once."""
    if not getattr(config.option, "loadgroup", False):
        return
    heavy_files = {item.path for item in items if not _is_ray(item) and _is_heavy(item)}
    for item in items:
        if _is_ray(item):
            item.add_marker(pytest.mark.xdist_group("ray"))
    items.sort(key=lambda item: 0 if _is_ray(item) else 1 if item.path in heavy_files else 2)  # stable


OTHER_TESTS_NICENESS = 19
"""How much lower the CPU priority of a worker taking the files outside the Ray group is (see below): below Ray's
own workers, which Ray starts at niceness 15 (its ``worker_niceness``), so the Ray tests' actors come first."""


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under ``--dist loadgroup`` the serial Ray group is the suite's critical path (about 13 of 21 minutes on its
    own, with ~0.6 of 2 cores to spare): a worker taking the other files lowers its CPU priority once, so they fill
    what the Ray tests leave instead of slowing them (their own subprocesses inherit it). At niceness 0 they
    starved the Ray actors (seen: a 3-patient evaluation job 134 s in the suite, 9 s alone)."""
    if getattr(item.config, "workerinput", None) is None or not getattr(item.config.option, "loadgroup", False):
        return  # (a worker's own ``dist`` option is "no": xdist marks the mode with ``loadgroup``)
    if not _is_ray(item) and os.nice(0) < OTHER_TESTS_NICENESS:  # (once: the process keeps its niceness)
        os.nice(OTHER_TESTS_NICENESS - os.nice(0))


def pytest_configure(config: pytest.Config) -> None:
    """Refuse ``--dist loadgroup`` under pytest 9 (pyproject pins pytest <9): pytest 9 keeps a node's id in ``_id``
    and ignores the group suffix pytest-xdist 3.8 writes to ``_nodeid``, so the scheduler below would split the
    Ray group and run Ray tests on every worker at once (seen: three session heads, load 12 on 2 cores)."""
    if config.getoption("dist", "no") == "loadgroup" and int(pytest.__version__.split(".")[0]) >= 9:
        raise pytest.UsageError(f"pytest {pytest.__version__} cannot group the Ray tests under pytest-xdist's "
                                "--dist loadgroup: install the dev dependencies (pytest <9), e.g. `make setup`")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadgroup``: the "ray" group is one work unit and every other file is one (``--dist loadfile``: a
    module's fixtures are built once), handed out in collection order (``--no-loadscope-reorder``)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class RayGroupOrFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "ray" if nodeid.endswith("@ray") else nodeid.split("::", 1)[0]

    return RayGroupOrFile(config, log)


@dataclass(frozen=True)
class RayHead:
    """A running local head: where to reach it and what identifies its processes."""

    gcs_address: str
    dashboard_url: str
    temp_dir: Path
    cpus: int

    def env(self) -> dict[str, str]:
        """Environment for a subprocess that should talk to this head (jobs, `ray job` commands)."""
        return {**os.environ, **TEST_ENV, "RAY_ADDRESS": self.gcs_address}

    def wait_for_job_agent(self, timeout_s: float = 180.0) -> None:
        """Block until the head's job agent takes submissions.

        ``ray start`` returns before the dashboard agent has registered; a submission in that window fails with
        "No available agent to submit job, please try again later" (seen on a loaded CI machine). A trivial job is
        submitted until it is accepted, then awaited, so the test that follows meets a ready head.
        """
        from ray.job_submission import JobStatus, JobSubmissionClient

        deadline = time.monotonic() + timeout_s
        client = JobSubmissionClient(self.dashboard_url)
        while True:
            try:
                job_id = client.submit_job(entrypoint="true")
                break
            except RuntimeError as error:
                if "No available agent" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(1.0)
        while client.get_job_status(job_id) not in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the probe job {job_id} did not finish in {timeout_s:.0f} s")
            time.sleep(0.5)


@pytest.fixture(scope="session")
def ray_head() -> Iterator[RayHead]:
    """A local Ray head with the dashboard (2 CPUs), for the whole session."""
    # short, as `short_ray_dir` makes, but kept after the session: the head's logs stay for a post-mortem
    temp_dir = Path(tempfile.mkdtemp(prefix="rayjobs_", dir="/tmp"))
    port, dashboard = free_port(), free_port()
    cmd = [
        str(RAY), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=2",
        "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}",
        f"--ray-client-server-port={free_port()}", f"--dashboard-agent-listen-port={free_port()}",
        f"--dashboard-agent-grpc-port={free_port()}", f"--metrics-export-port={free_port()}",
        f"--runtime-env-agent-port={free_port()}", f"--temp-dir={temp_dir}", "--disable-usage-stats",
    ]
    env = {**os.environ, **TEST_ENV}
    env.pop("RAY_ADDRESS", None)
    started = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    if started.returncode != 0:
        end_processes(processes_mentioning(str(temp_dir)))
        pytest.fail(f"ray start failed ({started.returncode}):\n{started.stdout}\n{started.stderr}")
    head = RayHead(f"127.0.0.1:{port}", f"http://127.0.0.1:{dashboard}", temp_dir, cpus=2)
    try:
        yield head
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        end_processes(processes_mentioning(str(temp_dir)))


@pytest.fixture(scope="session")
def ray_session(ray_head: RayHead) -> Iterator[RayHead]:
    """This test process connected to the session's head as a Ray driver."""
    import ray

    if not ray.is_initialized():
        ray.init(address=ray_head.gcs_address, log_to_driver=False)
    yield ray_head


@dataclass(frozen=True)
class SharedCohort:
    """A synthetic MEDS dataset and its lung cohort, built once per session; tests only read it (their outputs go
    to their own tmp dirs)."""

    dataset: Path
    lung: Path

    def first_train_labels(self, n: int):
        """The first ``n`` train labels of the lung cohort, by subject id (a polars frame)."""
        import polars as pl

        return pl.read_parquet(self.lung / "labels" / "train.parquet").sort("subject_id").head(n)


@pytest.fixture(scope="session")
def lung_cohort_1500(tmp_path_factory) -> SharedCohort:
    """1,500 synthetic subjects (seed 3) and their lung cohort: the data of the Ray job tests (ray, stream,
    multinode), generated once for the session instead of once per file."""
    from trajonco.cohorts import build_cohort, load_definition
    from vista.shared.synth import SynthConfig, generate

    root = tmp_path_factory.mktemp("lung_cohort_1500")
    generate(SynthConfig(n_subjects=1500, seed=3, workers=1), root / "meds", progress=False)
    build_cohort(root / "meds", load_definition("lung"), root / "lung")
    return SharedCohort(root / "meds", root / "lung")
