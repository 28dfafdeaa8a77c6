"""The errors a job reports to the user as one clear line (exit status 2) instead of a traceback."""

from __future__ import annotations

from vista.shared.runs.errors import JobError


def job_user_errors() -> tuple[type[BaseException], ...]:
    """Every exception class whose message alone tells the user what to fix."""
    from vista.shared.cli_kit import user_errors
    from vista.shared.llm.errors import LLMEndpointFailure

    return (*user_errors(), JobError, LLMEndpointFailure)
