"""The error a user can fix when searching a graph store's patients: a store that cannot be opened, an unknown
subject, a malformed query. One line naming the store, the subject or the query term."""

from __future__ import annotations

from vista.shared.errors import UserError


class PatientSearchError(ValueError, UserError):
    """A graph store, subject or query that cannot be used as given (the message says which and why)."""
