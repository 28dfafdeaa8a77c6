"""``python -m jobs.data_steps cohort``: `trajonco cohort` with its shard step (`trajonco.cohorts.shards`) run as Ray
Data — the same options, checks, outputs and messages, the same labels and manifest row for row."""

from __future__ import annotations

from jobs.data_steps import register, trajonco_command

COMMAND = register(trajonco_command(
    "cohort", "build a matched case-control cohort (MEDS labels + manifest) with a Ray task per shard",
    arguments="add_cohort_arguments", command="cohort_command",
))
