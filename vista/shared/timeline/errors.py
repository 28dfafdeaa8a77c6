"""The error raised when a patient record or a timeline document cannot be turned into a timeline."""

from __future__ import annotations

from vista.shared.errors import UserError


class TimelineError(ValueError, UserError):
    """Bad input for a timeline: the message names the source (shard or document), the subject and the field."""
