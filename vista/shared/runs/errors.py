"""The errors of a cohort run's outputs and options, shown to the user as one line (exit status 2): every one is a
`vista.shared.errors.UserError`, so the commands and the jobs catch it without listing it."""

from __future__ import annotations

from vista.shared.errors import UserError


class JobError(UserError):
    """Base of the cohort jobs' own errors (an output directory in use, a stalled job...)."""


class JobInputError(JobError, ValueError):
    """A job input (label file, dataset, option) is unusable; the message names the file, subject and field."""


class JobSettingsMismatch(JobError):
    """The output directory holds a run made with different result-determining settings (resuming would mix them)."""
