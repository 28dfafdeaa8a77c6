"""``python -m jobs.data_steps validate``: `trajonco validate` with a Ray task per shard
(`vista.shared.meds.validation.ValidateStep`) — the same options, checks, report, messages and exit status."""

from __future__ import annotations

from jobs.data_steps import register, trajonco_command

COMMAND = register(trajonco_command(
    "validate", "check a MEDS dataset (schema, order, values, times, duplicates) with a Ray task per shard",
    arguments="add_validate_arguments", command="validate_command",
))
