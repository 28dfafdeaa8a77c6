"""``python -m jobs.data_steps validate``: `trajonco validate` with a Ray task per shard
(`vista.shared.meds.validation.ValidateStep`) — the same options, checks, report, messages and exit status."""

from __future__ import annotations

import argparse

from jobs.data_steps import DataStepCommand, ShardRunner, register


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    from trajonco.cli import add_validate_arguments

    add_validate_arguments(parser)


def _execute(args: argparse.Namespace, run: ShardRunner) -> int:
    from trajonco.cli import validate_command

    return validate_command(args, run=run)


COMMAND = register(DataStepCommand(
    name="validate",
    summary="check a MEDS dataset (schema, order, values, times, duplicates) with a Ray task per shard",
    add_arguments=_add_arguments,
    execute=_execute,
))
