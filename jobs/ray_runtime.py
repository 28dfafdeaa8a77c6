"""Connecting a job to Ray: an existing cluster (``--address``, or ``RAY_ADDRESS`` under ``ray job submit``) or a
local Ray started by the job itself (no dashboard) when neither is given.

Also the Ray Data settings every job shares: Ray Data's own progress bars are off (the job prints its own progress
line, which reads well in ``ray job logs``) and the read/repartition tasks ask for a small CPU share, so actors that
hold most CPUs of a small machine never starve them.
"""

from __future__ import annotations

import argparse
import logging
import os
from dataclasses import dataclass

log = logging.getLogger(__name__)

LIGHT_TASK_CPUS = 0.1
"""CPU share of the jobs' own Ray Data tasks (reading label files, listing subjects): they only move keys."""


@dataclass(frozen=True, slots=True)
class RayOptions:
    """How to reach Ray."""

    address: str | None = None
    num_cpus: int | None = None  # local Ray only
    ray_progress_bars: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RayOptions:
        return cls(address=args.address, num_cpus=args.num_cpus, ray_progress_bars=args.ray_progress_bars)


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


def connect(options: RayOptions) -> RayRuntime:
    """Join the given cluster, or start a local Ray; then configure Ray Data for the jobs."""
    import ray
    from ray.data import DataContext

    address = options.address or os.environ.get("RAY_ADDRESS") or None
    connect_here = not ray.is_initialized()
    if not connect_here:  # already connected (e.g. a test session or a notebook): use that Ray, leave it running
        started = False
    elif address:
        if options.num_cpus is not None:
            log.warning("--num-cpus is ignored when joining an existing cluster (%s)", address)
        ray.init(address=address, log_to_driver=True)
        started = False
    else:
        ray.init(num_cpus=options.num_cpus or os.cpu_count() or 1, include_dashboard=False, log_to_driver=True)
        started = True
    context = DataContext.get_current()
    context.enable_progress_bars = options.ray_progress_bars
    context.print_on_execution_start = options.ray_progress_bars
    cpus = float(ray.cluster_resources().get("CPU", 0.0))
    return RayRuntime(address=str(ray.get_runtime_context().gcs_address), started_locally=started, connected_here=connect_here,
                      cpus=cpus)


def shutdown(runtime: RayRuntime) -> None:
    """Disconnect if this job connected, stopping the local Ray it started (a cluster it joined keeps running)."""
    import ray

    if runtime.connected_here and ray.is_initialized():
        ray.shutdown()
