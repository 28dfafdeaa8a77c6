"""The exceptions that mean "the input is wrong", shown to users as one clear line rather than a traceback.

Every such exception class has `UserError` among its bases: it says so where it is defined, so nothing has to list
it, and a class renamed or moved stays one line for the user. The `vista` and `trajonco` commands and the Ray jobs
catch `user_errors()` (`UserError` plus FileNotFoundError).
"""

from __future__ import annotations



class UserError(Exception):
    """Base of every error whose message alone tells the user what to fix (a file, patient, field or option).

    Mixed into a library's own exception classes (``class QueryError(ValueError, UserError)``); the commands print
    it as ``error: <message>`` and exit with status 2 (`vista.shared.cli_kit.run_command`).

    >>> class BadShard(ValueError, UserError):
    ...     pass
    >>> isinstance(BadShard("data/0.parquet: field 'time': null"), UserError)
    True
    """


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


class LocatedError(ValueError, UserError):
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


class CommandLineError(ValueError, UserError):
    """A command-line value that cannot be used (shown as one line)."""
