"""What can be wrong with a MEDS dataset: one issue record and one exception hierarchy naming file, subject and field.

Every problem the reader or the validator finds becomes a `MedsIssue` (so quarantine mode can record it) and,
when it must stop the run, the matching `MedsDataError` subclass (so ``except MedsDataError`` catches them all).

>>> issue = MedsIssue(IssueKind.VALUE, IssueScope.SUBJECT, "data/train/0.parquet",
...                   "3 NaN/inf values (first at row 12345)", subject_id=1042, field="numeric_value", row=12345)
>>> str(issue)
"data/train/0.parquet: subject 1042: field 'numeric_value': 3 NaN/inf values (first at row 12345)"
>>> err = issue.to_error()
>>> type(err).__name__, isinstance(err, ValueError), err.subject_id, err.field
('MedsValueError', True, 1042, 'numeric_value')
>>> str(MedsFileError("data/1.parquet", "file is empty (0 bytes)"))
'data/1.parquet: file is empty (0 bytes)'
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from vista.shared.errors import LocatedError, describe_location


def one_line(exc: BaseException) -> str:
    """``Type: message`` of a library exception on one line (pyarrow's messages often span several).

    >>> one_line(OSError("Couldn't deserialize thrift:\\nInvalid data\\n"))
    "OSError: Couldn't deserialize thrift: Invalid data"
    """
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


class MedsDataError(LocatedError):
    """Bad MEDS input. ``file`` is relative to the dataset root when the file is inside it."""

    @property
    def file(self) -> str:
        """The data file (or directory) the problem is in: the error's ``source``."""
        return self.source


class MedsFileError(MedsDataError):
    """A data file (or the data directory) is missing, empty, unreadable or not parquet."""


class MedsSchemaError(MedsDataError):
    """A required column is missing or a column has the wrong arrow type."""


class MedsOrderError(MedsDataError):
    """Rows are out of MEDS order: subject ids decreasing, a subject's rows split, or time decreasing."""


class MedsValueError(MedsDataError):
    """A value is impossible: null/empty code, NaN/inf numeric value, time before 1900 or in the future."""


class MedsMetadataError(MedsDataError):
    """A file under ``metadata/`` is unreadable or breaks its schema."""


class MedsSubjectNotFoundError(MedsDataError):
    """Subjects were requested that the dataset does not hold."""


class IssueKind(StrEnum):
    """What kind of problem an issue is; decides the exception type it raises as."""

    FILE = "file"
    SCHEMA = "schema"
    ORDER = "order"
    VALUE = "value"
    METADATA = "metadata"


class IssueScope(StrEnum):
    """What quarantine mode drops because of the issue (a dataset without data/ or shards always raises)."""

    FILE = "file"  # the whole file is dropped
    SUBJECT = "subject"  # only that subject is dropped


_ERROR_TYPES: dict[IssueKind, type[MedsDataError]] = {
    IssueKind.FILE: MedsFileError,
    IssueKind.SCHEMA: MedsSchemaError,
    IssueKind.ORDER: MedsOrderError,
    IssueKind.VALUE: MedsValueError,
    IssueKind.METADATA: MedsMetadataError,
}


@dataclass(frozen=True, slots=True)
class MedsIssue:
    """One problem found in the data. ``row`` is the first offending row inside ``file`` when known."""

    kind: IssueKind
    scope: IssueScope
    file: str
    problem: str
    subject_id: int | None = None
    field: str | None = None
    row: int | None = None

    def __str__(self) -> str:
        return describe_location(self.file, self.subject_id, self.field, self.problem)

    def to_error(self) -> MedsDataError:
        return _ERROR_TYPES[self.kind](self.file, self.problem, subject_id=self.subject_id, field=self.field)
