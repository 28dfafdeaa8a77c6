"""The error raised for a prediction run the insights cannot read (names the file, the patient and the field)."""

from __future__ import annotations

from vista.shared.errors import LocatedError


class InsightsInputError(LocatedError):
    """A prediction run that is missing, has no usable row, or holds a malformed column value."""
