"""Errors of the evaluation (messages name the file, subject and field at fault)."""

from __future__ import annotations


class EvaluationError(ValueError):
    """Ground truth or displays the evaluation cannot use."""
