"""Errors of the coding layer: one line naming the file or profile and what is wrong."""

from __future__ import annotations

from vista.shared.errors import UserError


class CodingProfileError(ValueError, UserError):
    """A coding profile that cannot be loaded or does not fit the dataset it is asked to read."""
