"""The data steps on Ray: a `vista.shared.meds.shard_step.ShardStep` run as Ray Data over a dataset's shards — one
task per shard at a fractional CPU, each returning its shard's small summary, and the step's reduce on the driver.
The result is the one `run_local` gives (the test compares them row for row on a two-node cluster), so a dataset
too big for one machine's patience runs on a cluster with the same outputs.

    python -m jobs.data_steps cohort lung --dataset MEDS --out out/cohorts/lung --address HEAD:6379
    ray job submit --working-dir . -- python -m jobs.data_steps cohort lung --dataset MEDS --out out/cohorts/lung

Each sub-command registers a `DataStepCommand` (a module in `STEP_MODULES`): its own options, and ``execute``,
which does the command's work and calls ``run(step, shards)`` — here Ray Data, in the ``trajonco`` commands
`run_local` — for each shard step it needs. Ray is joined (``--address``, ``RAY_ADDRESS``) or started locally in the
background while the command checks its input, as the other jobs do; ``trajonco cohort --address ADDR`` is this job.
"""

from __future__ import annotations

import argparse
import functools
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pyarrow as pa

from jobs.ray_runtime import LIGHT_TASK_CPUS, LazyRay, RayOptions, add_ray_arguments
from vista.shared.cli_kit import ArgumentParser, HelpFormatter
from vista.shared.meds.shard_step import ShardStep

R = TypeVar("R")
ShardRunner = Callable[[ShardStep[R], Sequence[Path]], R]
"""``run(step, shards)``: the step's result over the shards (`run_on_ray` here, `run_local` in one process)."""

SHARD_TASK_CPUS = 0.5
"""CPU share of one shard's task by default: polars reads a shard on its own thread pool, and a whole CPU per task
would leave the 2-core machines of DESIGN.md's Ray notes with no room for Ray Data's own tasks."""


@dataclass(frozen=True, slots=True)
class DataStepCommand:
    """One sub-command of ``python -m jobs.data_steps``.

    ``add_arguments`` adds its options; ``execute(args, run)`` does the work, running each shard step it needs
    with ``run(step, shards)`` (which returns the step's reduced result), and returns the exit status.
    """

    name: str
    summary: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    execute: Callable[[argparse.Namespace, ShardRunner], int]


COMMANDS: dict[str, DataStepCommand] = {}
"""The registered sub-commands, by name (see `register`)."""

STEP_MODULES = ("jobs.data_step_cohort", "jobs.data_step_validate", "jobs.data_step_features")
"""Modules that `register` a sub-command when imported (imported by `build_parser`, so ``--help`` stays light)."""


def trajonco_command(name: str, summary: str, *, arguments: str, command: str) -> DataStepCommand:
    """A sub-command that is a `trajonco` command run with a Ray task per shard: its options are added by
    ``trajonco.cli.<arguments>(parser)`` and its work done by ``trajonco.cli.<command>(args, run=run)`` — the same
    options, checks, outputs, messages and exit status as the local command (imported lazily: ``--help`` stays light)."""

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        getattr(importlib.import_module("trajonco.cli"), arguments)(parser)

    def execute(args: argparse.Namespace, run: ShardRunner) -> int:
        return getattr(importlib.import_module("trajonco.cli"), command)(args, run=run)

    return DataStepCommand(name=name, summary=summary, add_arguments=add_arguments, execute=execute)


def register(command: DataStepCommand) -> DataStepCommand:
    """Add a sub-command (each data step's module-level registration below)."""
    COMMANDS[command.name] = command
    return command


def _map_shards(step: ShardStep[object], batch: pa.Table) -> pa.Table:
    """Ray Data's batch function: the summaries of the batch's shards (one shard per batch), as one table."""
    tables = [step.map_shard(Path(shard)) for shard in batch.column("shard").to_pylist()]
    return pa.concat_tables(tables, promote_options="default") if len(tables) != 1 else tables[0]


def run_on_ray(step: ShardStep[R], shards: Sequence[Path], *, task_cpus: float = SHARD_TASK_CPUS) -> R:
    """Run ``step`` as Ray Data over ``shards`` (Ray already connected): a task per shard at ``task_cpus`` CPU, the
    summaries fetched to the driver and reduced there."""
    import ray
    from ray.data import DataContext

    DataContext.get_current().raise_original_map_exception = True  # a bad shard's own error, for user_error_in
    items = [{"shard": str(shard)} for shard in shards]
    if not items:
        return step.reduce([])
    dataset = ray.data.from_items(items, override_num_blocks=len(items))
    summaries = dataset.map_batches(
        functools.partial(_map_shards, step), batch_size=1, batch_format="pyarrow", num_cpus=task_cpus,
        zero_copy_batch=True,
    )
    try:
        tables = [table for table in ray.get(summaries.to_arrow_refs()) if table.num_rows]
    except Exception as exc:
        found = user_error_in(exc)
        if found is None:
            raise
        raise _first_line(found) from None  # a bad shard: the step's own one-line error, not Ray's wrapping
    return step.reduce(tables)


def _first_line(error: BaseException) -> BaseException:
    """``error`` with its own message only (Ray Data appends its retry advice to the original exception's).

    >>> from vista.shared.errors import CommandLineError
    >>> str(_first_line(CommandLineError("shard 3: bad\\nFailed to apply UDF transform after 1/1 attempts")))
    'shard 3: bad'
    """
    lines = str(error).splitlines()
    try:
        return type(error)(lines[0]) if len(lines) > 1 else error
    except TypeError:  # a class whose constructor takes more than a message: as it is
        return error


def user_error_in(exc: BaseException) -> BaseException | None:
    """The user error (`jobs.errors.job_user_errors`) a shard task raised, found inside Ray's wrappers (Ray Data's
    ``UserCodeException``, ``RayTaskError`` and its ``cause``), or None.

    >>> from vista.shared.errors import CommandLineError
    >>> try:
    ...     try:
    ...         raise CommandLineError("shard 3: bad")
    ...     except CommandLineError as inner:
    ...         raise RuntimeError("task failed") from inner
    ... except RuntimeError as outer:
    ...     found = user_error_in(outer)
    >>> str(found), user_error_in(RuntimeError("no cause"))
    ('shard 3: bad', None)
    """
    from jobs.errors import job_user_errors

    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        cause = getattr(current, "cause", None)
        if isinstance(cause, BaseException):  # a RayTaskError: look at the task's own exception first
            pending.append(cause)
            continue
        if isinstance(current, job_user_errors()):
            return current
        pending += [current.__cause__, current.__context__]
    return None


def build_parser(prog: str = "python -m jobs.data_steps") -> ArgumentParser:
    parser = ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter,
                            epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    sub = parser.add_subparsers(dest="command", required=True, metavar="STEP")
    for module in STEP_MODULES:
        importlib.import_module(module)
    for command in COMMANDS.values():
        p = sub.add_parser(command.name, help=command.summary, description=command.summary,
                           formatter_class=HelpFormatter)
        command.add_arguments(p)
        runner = p.add_argument_group("shard tasks")
        runner.add_argument("--task-cpus", type=float, default=SHARD_TASK_CPUS,
                            help=f"CPU share of each shard's task (default {SHARD_TASK_CPUS})")
        add_ray_arguments(p)
        p.add_argument("-v", "--verbose", action="store_true",
                       help="debug logging, and Ray's own logs (start-up, warnings, progress bars)")
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the sub-command with its shard steps on Ray (joined or started in the background meanwhile)."""
    command = COMMANDS[args.command]
    if args.task_cpus <= 0:
        from vista.shared.errors import CommandLineError

        raise CommandLineError(f"--task-cpus {args.task_cpus}: must be above 0 (e.g. {SHARD_TASK_CPUS})")
    task_cpus = max(args.task_cpus, LIGHT_TASK_CPUS)
    with LazyRay(RayOptions.from_args(args, job=f"data_steps {command.name}")) as ray_here:
        ray_here.start()

        def on_ray(step: ShardStep[R], shards: Sequence[Path]) -> R:
            ray_here.runtime()
            return run_on_ray(step, shards, task_cpus=task_cpus)

        return command.execute(args, on_ray)


def main(argv: list[str] | None = None, prog: str = "python -m jobs.data_steps") -> int:
    """Parse, run; user errors print one line and exit 2 (as every job)."""
    import logging
    import sys

    from jobs.errors import job_user_errors
    from vista.shared.atomic import apply_data_umask

    args = build_parser(prog).parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        apply_data_umask()  # outputs are private (VISTA_DATA_MODE, vista.shared.atomic)
        return run(args)
    except job_user_errors() as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # the sub-commands register in the module `jobs.data_steps`, not in __main__
    from jobs.data_steps import main as _main

    raise SystemExit(_main())
