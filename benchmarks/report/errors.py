"""The errors the reproduction report raises: each names the file (or input), subject and field to fix.

>>> str(ReportInputError("predictions/one_stage.parquet", "column is missing", field="model"))
"predictions/one_stage.parquet: field 'model': column is missing"
"""

from __future__ import annotations

from vista.meds.errors import describe_location


class ReportError(Exception):
    """Base class of every error raised by `benchmarks.report`."""


class ReportInputError(ReportError, ValueError):
    """An input of the report (prediction file, usage ledger, label table, settings) cannot be used as given."""

    def __init__(self, source: str, problem: str, *, subject_id: int | None = None, field: str | None = None):
        self.source = str(source)
        self.problem = problem
        self.subject_id = subject_id
        self.field = field
        super().__init__(describe_location(self.source, subject_id, field, problem))

    def __reduce__(self):  # keyword-only arguments: teach pickle (worker processes ship exceptions back)
        return (_rebuild, (type(self), self.source, self.problem, self.subject_id, self.field))


def _rebuild(cls: type[ReportInputError], source: str, problem: str, subject_id: int | None, field: str | None):
    return cls(source, problem, subject_id=subject_id, field=field)
