"""Errors of the evaluation (messages name the file, subject and field at fault)."""

from __future__ import annotations

from vista.shared.errors import UserError


class EvaluationError(ValueError, UserError):
    """Ground truth or displays the evaluation cannot use."""
