"""``python -m jobs.data_steps cohort``: `trajonco cohort` with its shard step (`trajonco.cohorts.shards`) run as Ray
Data — the same options, checks, outputs and messages, the same labels and manifest row for row."""

from __future__ import annotations

import argparse

from jobs.data_steps import DataStepCommand, ShardRunner, register


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    from trajonco.cli import add_cohort_arguments

    add_cohort_arguments(parser)


def _execute(args: argparse.Namespace, run: ShardRunner) -> int:
    from trajonco.cli import cohort_command

    return cohort_command(args, run=run)


COMMAND = register(DataStepCommand(
    name="cohort",
    summary="build a matched case-control cohort (MEDS labels + manifest) with a Ray task per shard",
    add_arguments=_add_arguments,
    execute=_execute,
))
