"""The exception types that mean "the input is wrong", shown to users as one clear line rather than a traceback.

Each package lists its own types by import path (resolved lazily, so a CLI's ``--help`` imports nothing heavy);
`user_errors` collects them for the `vista` and `trajonco` commands and the Ray jobs.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterable

VISTA_USER_ERRORS: tuple[tuple[str, str], ...] = (
    ("vista.meds.errors", "MedsDataError"),
    ("vista.synth", "SynthOutputError"),
    ("vista.timeline", "TimelineError"),
    ("vista.tokens", "TokenizerUnavailableError"),
    ("vista.llm.errors", "LLMConfigError"),
    ("vista.graph.errors", "GraphInputError"),
    ("vista.graph.errors", "GraphFileError"),
    ("vista.toa.errors", "TOAError"),
    ("vista.query.errors", "QueryError"),
    ("vista.display.model", "DisplayError"),
    ("vista.rag.errors", "RagError"),
    ("vista.evaluation.errors", "EvaluationError"),
)


class CommandLineError(ValueError):
    """A command-line value that cannot be used (shown as one line)."""


def user_errors(extra: Iterable[tuple[str, str]] = ()) -> tuple[type[BaseException], ...]:
    """Exception classes whose message alone tells the user what to fix: FileNotFoundError, `CommandLineError`,
    vista's own, and ``extra`` (module, class name) pairs.

    >>> FileNotFoundError in user_errors() and CommandLineError in user_errors()
    True
    """
    found: list[type[BaseException]] = [FileNotFoundError, CommandLineError]
    for module_name, attr in (*VISTA_USER_ERRORS, *extra):
        try:
            found.append(getattr(importlib.import_module(module_name), attr))
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def run_command(args: argparse.Namespace, errors: tuple[type[BaseException], ...]) -> int:
    """Run a parsed sub-command (``args.handler``); ``errors`` print as one line on stderr with exit status 2."""
    try:
        return args.handler(args)
    except errors as exc:  # errors the user can act on: one line, no traceback
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
