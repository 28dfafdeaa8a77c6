"""Errors of the RAG baseline (messages name the patient and what was wrong)."""

from __future__ import annotations

from vista.shared.errors import UserError


class RagError(ValueError, UserError):
    """A patient whose record cannot be indexed or a setting the baseline cannot honour."""
