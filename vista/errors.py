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
    ("vista.storage", "StorageError"),
    ("vista.coding.errors", "CodingProfileError"),
    ("vista.synth", "SynthOutputError"),
    ("vista.timeline", "TimelineError"),
    ("vista.tokens", "TokenizerUnavailableError"),
    ("vista.llm.errors", "LLMConfigError"),
    ("vista.graph.errors", "GraphInputError"),
    ("vista.graph.errors", "GraphFileError"),
    ("vista.graph.xml_files", "XmlDirectoryError"),
    ("vista.xml_reading", "XmlReadError"),
    ("vista.toa.errors", "TOAError"),
    ("vista.query.errors", "QueryError"),
    ("vista.display.model", "DisplayError"),
    ("vista.rag.errors", "RagError"),
    ("vista.evaluation.errors", "EvaluationError"),
    ("vista.cohort.errors", "CohortError"),
)


def describe_location(source: str, subject_id: int | None, field: str | None, problem: str) -> str:
    """``source: subject N: field 'x': problem``, leaving out the parts that are unknown.

    >>> describe_location("labels/train.parquet", 12, "prediction_time", "null value")
    "labels/train.parquet: subject 12: field 'prediction_time': null value"
    """
    parts = [source]
    if subject_id is not None:
        parts.append(f"subject {subject_id}")
    if field is not None:
        parts.append(f"field {field!r}")
    parts.append(problem)
    return ": ".join(parts)


class LocatedError(ValueError):
    """Bad input located by its source (a file, or a name for an in-memory table), subject and field.

    The base of the MEDS, baseline and report input errors; picklable, so Ray workers and worker processes can ship
    it back with its location intact.
    """

    def __init__(self, source: str, problem: str, *, subject_id: int | None = None, field: str | None = None):
        self.source = str(source)
        self.problem = problem
        self.subject_id = subject_id
        self.field = field
        super().__init__(describe_location(self.source, subject_id, field, problem))

    def __reduce__(self):  # keyword-only arguments: teach pickle how to rebuild the error
        return (_rebuild_located, (type(self), self.source, self.problem, self.subject_id, self.field))


def _rebuild_located(cls: type[LocatedError], source: str, problem: str, subject_id: int | None, field: str | None):
    return cls(source, problem, subject_id=subject_id, field=field)


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
    from vista.atomic import DataModeError, apply_data_umask

    try:
        apply_data_umask()  # what this command writes is private (VISTA_DATA_MODE, vista.atomic)
        return args.handler(args)
    except (*errors, DataModeError) as exc:  # errors the user can act on: one line, no traceback
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
