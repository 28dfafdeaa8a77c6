"""Connecting a job to Ray: an existing cluster (``--address``, or ``RAY_ADDRESS`` under ``ray job submit``) or a
local Ray started by the job itself (no dashboard) when neither is given.

Also the Ray Data settings every job shares: Ray Data's own progress bars are off (the job prints its own progress
line, which reads well in ``ray job logs``) and the read/repartition tasks ask for a small CPU share, so actors that
hold most CPUs of a small machine never starve them.

Quiet by default (`quiet_ray`): a local Ray keeps Ray's default token authentication (its notice about that default
and the token it generated stay in Ray's logs), Ray's and Ray Data's INFO/WARNING chatter stays out of the user's
terminal, one known false alarm of Ray core is dropped (`ray_stderr_filter`), and a lost node's raylet log dump
stays in Ray's logs while the job says which node it lost (`ray_node_loss`). ``--verbose`` shows all of Ray's own
logs.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass
from typing import ClassVar

from jobs.ray_stderr_filter import drop_known_ray_false_alarms

log = logging.getLogger(__name__)

LIGHT_TASK_CPUS = 0.1
"""CPU share of the jobs' own Ray Data tasks (reading label files, listing subjects): they only move keys."""


@dataclass(frozen=True, slots=True)
class RayOptions:
    """How to reach Ray."""

    address: str | None = None
    num_cpus: int | None = None  # local Ray only
    ray_progress_bars: bool = False
    verbose: bool = False  # Ray's own logs (INFO, warnings, Ray Data's progress bars) as Ray prints them
    job: str = "job"  # the name of the job's own lines ("[predict] lost Ray node ...")

    @classmethod
    def from_args(cls, args: argparse.Namespace, job: str = "job") -> RayOptions:
        verbose = bool(getattr(args, "verbose", False))
        return cls(address=args.address, num_cpus=args.num_cpus, ray_progress_bars=args.ray_progress_bars or verbose,
                   verbose=verbose, job=job)


@dataclass(frozen=True, slots=True)
class RayRuntime:
    """The Ray the job runs on."""

    address: str  # the GCS address (HOST:PORT)
    started_locally: bool  # this job started the Ray it runs on
    connected_here: bool  # this job called ray.init (and so disconnects at the end)
    cpus: float


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    """The options shared by every job for reaching Ray."""
    group = parser.add_argument_group("Ray")
    group.add_argument(
        "--address", default=None,
        help="Ray cluster to join ('auto', 'HOST:6379' or 'ray://HOST:10001'); default: $RAY_ADDRESS (set by "
             "`ray job submit`), else start a local Ray for this job",
    )
    group.add_argument("--num-cpus", type=int, default=None,
                       help="CPUs of the local Ray this job starts when no cluster is given (default: all of this machine)")
    group.add_argument("--ray-progress-bars", action="store_true",
                       help="also show Ray Data's own progress bars (off by default; the job prints its own progress line)")


RAY_CHATTER = ("ray", "ray.data", "ray._private.authentication")
"""Loggers whose INFO/WARNING lines a job keeps out of the user's terminal unless --verbose (they stay in Ray's
session logs); errors still show."""


def quiet_ray() -> None:
    """Ray as quiet as a job's user needs: Ray's and Ray Data's chatter (start-up notices, the token-auth default,
    "progress bars disabled", "execution finished") at ERROR, and the one false alarm of Ray core dropped from stderr
    (see `jobs.ray_stderr_filter`). Nothing Ray would raise, and no error line, is hidden."""
    for name in RAY_CHATTER:
        logging.getLogger(name).setLevel(logging.ERROR)
    drop_known_ray_false_alarms()


def connect(options: RayOptions) -> RayRuntime:
    """Join the given cluster, or start a local Ray; then configure Ray Data for the jobs."""
    import ray
    from ray.data import DataContext

    address = options.address or os.environ.get("RAY_ADDRESS") or None
    connect_here = not ray.is_initialized()
    level = logging.INFO if options.verbose else logging.ERROR
    if connect_here and not options.verbose:
        quiet_ray()
    if not connect_here:  # already connected (e.g. a test session or a notebook): use that Ray, leave it running
        started = False
    elif address:
        if options.num_cpus is not None:
            log.warning("--num-cpus is ignored when joining an existing cluster (%s)", address)
        ray.init(address=address, log_to_driver=True, logging_level=level, runtime_env=_data_mode_env())
        started = False
    else:
        ray.init(num_cpus=options.num_cpus or os.cpu_count() or 1, include_dashboard=False, log_to_driver=True,
                 logging_level=level, runtime_env=_data_mode_env())
        started = True
    context = DataContext.get_current()
    context.enable_progress_bars = options.ray_progress_bars
    context.print_on_execution_start = options.ray_progress_bars
    if not options.verbose:  # Ray Data sets its loggers up when first used: quiet them again after import
        for name in RAY_CHATTER:
            logging.getLogger(name).setLevel(logging.ERROR)
    if connect_here and not options.verbose:
        from jobs.ray_node_loss import watch_node_loss

        watch_node_loss(lambda text: print(f"[{options.job}] {text}", flush=True))
    cpus = float(ray.cluster_resources().get("CPU", 0.0))
    return RayRuntime(address=str(ray.get_runtime_context().gcs_address), started_locally=started, connected_here=connect_here,
                      cpus=cpus)


class LazyRay:
    """Ray for one job: joined (or started) on first use, or in the background from `start` while the driver goes on
    checking and planning; left at the end of the ``with`` block (or at `close`) if this job joined it.

    Ray is joined on a thread of its own that holds it until `close`: the processes of a local Ray die with the
    *thread* that started them (Linux's parent-death signal), so that thread must outlive the job's use of Ray. The
    thread is not a daemon: a job that fails while Ray is still starting prints its error at once, and the process
    ends when the thread has stopped what of that Ray had started (a next job in the same process first waits).
    """

    _holders: ClassVar[list[threading.Thread]] = []  # threads still holding (or stopping) a Ray, in this process

    def __init__(self, options: RayOptions):
        self.options = options
        self._thread: threading.Thread | None = None
        self._up = threading.Event()
        self._done = threading.Event()
        self._runtime: RayRuntime | None = None
        self._error: BaseException | None = None

    def start(self) -> None:
        """Join or start Ray in the background (nothing if already started, or if this process is already
        connected: that Ray is used as it is)."""
        import ray

        if self._thread is not None or self._runtime is not None:
            return
        for holder in LazyRay._holders:  # an earlier job of this process still stopping the Ray it started
            holder.join()
        LazyRay._holders.clear()
        if ray.is_initialized():
            self._runtime = connect(self.options)
            return
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _exit_on_sigterm)  # what ray.init sets on a main thread: `finally` runs
        self._thread = threading.Thread(target=self._hold, name="ray-connection")
        self._thread.start()
        LazyRay._holders.append(self._thread)

    def runtime(self) -> RayRuntime:
        """The Ray the job runs on, waiting for it if it is still starting."""
        self.start()
        if self._runtime is None:
            self._up.wait()
        if self._error is not None:
            raise self._error
        assert self._runtime is not None
        return self._runtime

    def close(self) -> None:
        """Leave Ray (stopping a local Ray this job started) once it is up; `__exit__` waits for that, except while
        Ray is still starting under a failing job (the non-daemon thread then finishes on its own)."""
        self._done.set()
        if self._thread is None and self._runtime is not None:
            shutdown(self._runtime)
            self._runtime = None

    def _hold(self) -> None:
        try:
            self._runtime = connect(self.options)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller of `runtime`
            self._error = exc
        finally:
            self._up.set()
        self._done.wait()
        if self._runtime is not None:
            shutdown(self._runtime)

    def __enter__(self) -> LazyRay:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        self.close()
        if self._thread is not None and (exc_type is None or self._up.is_set()):
            self._thread.join()


def _exit_on_sigterm(signum: int, frame: object) -> None:
    sys.exit(signum)


def _data_mode_env() -> dict[str, object] | None:
    """The driver's ``VISTA_DATA_MODE`` for every worker of the job (the actors set their umask from it; see
    `vista.shared.atomic`); None for the default (private), which needs nothing. A job submitted with ``ray job submit``
    takes its workers' environment from the job's runtime env: put the variable there (docs/cluster.md)."""
    from vista.shared.atomic import DATA_MODE_ENV, data_mode

    mode = data_mode()
    return None if mode.name == "private" else {"env_vars": {DATA_MODE_ENV: mode.name}}


def shutdown(runtime: RayRuntime) -> None:
    """Disconnect if this job connected, stopping the local Ray it started (a cluster it joined keeps running)."""
    import ray

    if runtime.connected_here and ray.is_initialized():
        ray.shutdown()
