"""Exceptions of the TOA layer: bad profiles and bad persisted timelines, each naming the file and field."""

from __future__ import annotations

from vista.shared.errors import UserError


class TOAError(UserError):
    """Base class of the TOA layer's own errors."""


class ProfileError(TOAError):
    """An event-definition profile file is missing, unreadable or inconsistent (the message names file and field)."""


class TimelineFileError(TOAError):
    """A persisted timeline (``<store>/toa/<sid>.json``) cannot be read back (the message names file and subject)."""


class ChunkingError(TOAError, ValueError):
    """The chunk budget is too small to hold an encounter's header plus any text."""


class StaleProvenanceError(TOAError, ValueError):
    """A stored timeline or display was built from another version of the patient's MEDS Graph: its ``e<k>`` refs
    would open different rows, so it is refused (the message names the patient, the file and what changed)."""
