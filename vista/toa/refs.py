"""Check proposed events against the graph: unknown refs are dropped, an event left with none is rejected.

Refs must be source events of the patient's graph (`PatientGraph.has_event`); when ``allowed`` is given (the ids a
chunk showed) they must also be among those, so a sub-agent cannot cite rows it never saw. Nothing unverified is
ever kept: the caller gets the surviving event (or None) and a `RejectedEvent` record for what was removed.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from vista.graph import PatientGraph
from vista.toa.model import ExtractedEvent, RejectedEvent
from vista.toa.profile import EventProfile


UNKNOWN_REFS_DROPPED = "unknown refs dropped"
"""Reason of the record left when an event is kept but some of its refs were removed."""


@dataclass(frozen=True, slots=True)
class CheckedEvent:
    """A proposed event whose type is in the profile and whose refs (deduplicated, in order) all resolve."""

    event: ExtractedEvent
    refs: tuple[str, ...]
    subtype: str


def check_event(event: ExtractedEvent, graph: PatientGraph, profile: EventProfile, *, chunk: int | None,
                allowed: Collection[str] | None = None) -> tuple[CheckedEvent | None, RejectedEvent | None]:
    """(the checked event or None, the record of what was dropped or None when nothing was)."""
    if event.type not in profile.type_names:
        return None, RejectedEvent(chunk=chunk, reason=f"type {event.type[:32]!r} is not in profile {profile.name!r}")
    refs = tuple(dict.fromkeys(r.strip() for r in event.source_event_refs))
    good = tuple(r for r in refs if graph.has_event(r) and (allowed is None or r in allowed))
    dropped = tuple(r for r in refs if r not in good)
    subtype = event.subtype.strip().lower() or "other"
    if subtype not in profile.subtypes_of(event.type):
        subtype = "other"
    if not event.description.strip():
        return None, RejectedEvent(chunk=chunk, reason="empty description", dropped_refs=dropped)
    if not good:
        reason = "no source_event_refs" if not refs else "none of its source_event_refs is a shown event of the graph"
        return None, RejectedEvent(chunk=chunk, reason=reason, dropped_refs=dropped)
    record = RejectedEvent(chunk=chunk, reason=UNKNOWN_REFS_DROPPED, dropped_refs=dropped) if dropped else None
    return CheckedEvent(event, good, subtype), record
