"""The exception types that mean "the input is wrong", shown to users as one clear line rather than a traceback."""

from __future__ import annotations

import importlib

_USER_ERROR_TYPES = (
    ("vista.meds.errors", "MedsDataError"),
    ("trajonco.cohorts", "CohortError"),
    ("vista.synth", "SynthOutputError"),
    ("vista.timeline", "TimelineError"),
    ("trajonco.chunking", "ChunkingError"),
    ("vista.tokens", "TokenizerUnavailableError"),
    ("trajonco.agents.budget", "BudgetError"),
    ("trajonco.cancers", "UnknownCancerError"),
    ("vista.llm.errors", "LLMConfigError"),
    ("trajonco.cli", "CommandLineError"),
)


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception classes whose message alone tells the user what to fix (plus FileNotFoundError)."""
    found: list[type[BaseException]] = [FileNotFoundError]
    for module_name, attr in _USER_ERROR_TYPES:
        try:
            found.append(getattr(importlib.import_module(module_name), attr))
        except (ImportError, AttributeError):
            continue
    return tuple(found)
