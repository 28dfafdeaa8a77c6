"""The parser and option groups every cohort job shares (`jobs.predict`, `jobs.build_graphs`, `jobs.evaluate`): which
tasks, how the actors are sized, how a run behaves, how Ray is reached.

Light imports only, so ``--help`` answers at once.

>>> parser = job_parser("job", "A job.", "See the docs.")
>>> _ = add_selection_arguments(parser), add_job_arguments(parser, task="patient")
>>> args = parser.parse_args(["--limit", "5", "--retry", "none"])
>>> args.limit, args.retry, args.stall_timeout, args.flush_rows, args.verbose
(5, 'none', None, 256, False)
"""

from __future__ import annotations

import argparse

from jobs.ray_runtime import add_ray_arguments
from jobs.resources import add_resource_arguments
from vista.shared.cli_kit import ArgumentParser, HelpFormatter
from vista.shared.runs.manifest import add_manifest_arguments

RETRY_POLICIES = ("transient", "all", "none")
"""``--retry``: which tasks with a row that is not ok run again (`vista.shared.runs.retry`)."""

__all__ = ["add_job_arguments", "add_selection_arguments", "job_parser"]


def job_parser(prog: str, description: str, epilog: str, usage: str | None = None) -> ArgumentParser:
    """A job's parser: its description and epilog as written (examples keep their lines)."""
    return ArgumentParser(prog=prog, usage=usage, description=description, epilog=epilog,
                          formatter_class=HelpFormatter)


def add_selection_arguments(parser: argparse.ArgumentParser, *, order_note: str = "") -> argparse._ArgumentGroup:
    """``--limit``/``--sample``/``--seed`` and the retry policy (``--retry``, ``--retry-failed``)."""
    pick = parser.add_argument_group("which patients")
    chosen = pick.add_mutually_exclusive_group()
    chosen.add_argument("--limit", type=int, help=f"only the first N tasks in (subject_id, prediction_time) order{order_note}")
    chosen.add_argument("--sample", type=int, help="a random sample of N tasks (seeded by --seed; same N and seed, same tasks)")
    pick.add_argument("--seed", type=int, default=0, help="seed of --sample (default 0)")
    pick.add_argument("--retry", choices=RETRY_POLICIES, default=None,
                      help="which tasks with a row that is not ok run again: transient (default: failures that may "
                           "pass — rate limit, timeout, server error, connection, LLM calls that failed), all "
                           "(permanent ones too: bad answers, rejected requests, bad data), none")
    pick.add_argument("--retry-failed", action="store_true", help="same as --retry all (kept for older commands)")
    return pick


def add_run_arguments(parser: argparse.ArgumentParser, *, task: str) -> argparse._ArgumentGroup:
    """Time limits, the no-progress watchdog, part-file flushing, progress lines and the manifest's options."""
    run = parser.add_argument_group("run")
    run.add_argument("--patient-timeout", type=float, default=3600.0,
                     help=f"seconds after which a {task} still running gets an error row (default 3600)")
    run.add_argument("--stall-timeout", type=float, help="stop the job (exit 4) when no task finishes for this many "
                     "seconds (default: --patient-timeout + 600, so a slow patient is never mistaken for a stall)")
    run.add_argument("--startup-timeout", type=float, default=600.0, help="seconds the first actors may take to start "
                     "(resources found, process up) before the job stops (default 600)")
    run.add_argument("--flush-rows", type=int, default=256, help="rows an actor buffers before writing a part file "
                     "(default 256)")
    run.add_argument("--flush-seconds", type=float, default=10.0, help="longest a finished row waits in an actor "
                     "before it is written (default 10)")
    run.add_argument("--progress-every", type=float, default=10.0, help="seconds between progress lines (default 10; 0: "
                     "only at the end)")
    add_manifest_arguments(run)
    return run


def add_job_arguments(parser: argparse.ArgumentParser, *, task: str, two_stage_options: bool = False,
                      resource_note: str | None = None) -> argparse._ArgumentGroup:
    """The groups after a job's own: its actors' sizing (`jobs.resources`), the run's (returned, for the job's
    additions), Ray's (`jobs.ray_runtime`) and ``--verbose``."""
    add_resource_arguments(parser, two_stage_options=two_stage_options, note=resource_note)
    run = add_run_arguments(parser, task=task)
    add_ray_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="debug logging, and Ray's own logs (start-up, warnings, progress bars); quiet by default")
    return run
