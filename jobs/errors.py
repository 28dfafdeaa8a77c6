"""Errors a job reports to the user as one clear line (exit status 2) instead of a traceback."""

from __future__ import annotations


class JobError(Exception):
    """Base of the jobs' own errors."""


class JobInputError(JobError, ValueError):
    """A job input (label file, dataset, option) is unusable; the message names the file, subject and field."""


class JobSettingsMismatch(JobError):
    """The output directory holds a run made with different result-determining settings (resuming would mix them)."""


def job_user_errors() -> tuple[type[BaseException], ...]:
    """Every exception class whose message alone tells the user what to fix."""
    from vista.errors import user_errors
    from vista.llm.errors import LLMEndpointFailure

    return (*user_errors(), JobError, LLMEndpointFailure)
