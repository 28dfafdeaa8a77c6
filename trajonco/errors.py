"""The exception types that mean "the input is wrong" (vista's plus TrajOnco's), shown as one line, not a traceback."""

from __future__ import annotations

from vista.errors import CommandLineError
from vista.errors import user_errors as vista_user_errors

__all__ = ["CommandLineError", "user_errors"]

_TRAJONCO_USER_ERRORS = (
    ("trajonco.cohorts", "CohortError"),
    ("trajonco.chunking", "ChunkingError"),
    ("trajonco.agents.budget", "BudgetError"),
    ("trajonco.cancers", "UnknownCancerError"),
    ("trajonco.insights.errors", "InsightsInputError"),
    ("trajonco.prediction_files", "PredictionFilesError"),
)


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception classes whose message alone tells the user what to fix (vista's and TrajOnco's)."""
    return vista_user_errors(_TRAJONCO_USER_ERRORS)
