"""Errors of the RAG baseline (messages name the patient and what was wrong)."""

from __future__ import annotations


class RagError(ValueError):
    """A patient whose record cannot be indexed or a setting the baseline cannot honour."""
