"""The errors the reproduction report raises: each names the file (or input), subject and field to fix.

>>> str(ReportInputError("predictions/one_stage.parquet", "column is missing", field="model"))
"predictions/one_stage.parquet: field 'model': column is missing"
"""

from __future__ import annotations

from vista.shared.errors import LocatedError


class ReportError(Exception):
    """Base class of every error raised by `benchmarks.report`."""


class ReportInputError(ReportError, LocatedError):
    """An input of the report (prediction file, usage ledger, label table, settings) cannot be used as given."""
