"""Checks the events agents report against what they actually read, and links final events to MEDS rows.

An id the agent was not shown (a typo, an id from another chunk, an invention) is dropped and counted; the
event itself is kept, as its date and description still stand. An event dated at or after the prediction
time cannot come from the input (it holds only earlier events), so it is dropped and counted.

>>> from datetime import date, datetime
>>> from trajonco.agents.schemas import ExtractedEvent
>>> rules = EventRules(frozenset({"e3", "e4"}), cutoff=datetime(2021, 1, 1))
>>> cleaned = clean_events([
...     ExtractedEvent(timestamp=date(2020, 1, 5), description="Cough", event_ids=["e3", "e99", "e3"]),
...     ExtractedEvent(timestamp=date(2021, 1, 1), description="Seen today", event_ids=[]),
... ], rules, chunk_index=0)
>>> [(e.event_ids, sorted(e.source_keys)) for e in cleaned.events], cleaned.dropped_ids, cleaned.dropped_events
([(('e3',), ['id:e3'])], 1, 1)
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, time

from trajonco.agents.memory import MemoryEvent, normalize_text
from trajonco.agents.results import EvidenceEvent, SourceRow
from trajonco.agents.schemas import ExtractedEvent
from vista.meds import schema
from vista.records import PatientRecord


class SourceIndex:
    """Source keys of event ids: a note's key is a hash of its normalized text, so copy-forwarded notes share it;
    any other event's key is its id."""

    def __init__(self, note_keys: dict[str, str] | None = None):
        self._note_keys = note_keys or {}

    @classmethod
    def from_record(cls, record: PatientRecord) -> SourceIndex:
        keys = {}
        for event in record.events:
            if event.text_value and schema.vocabulary(event.code) == schema.NOTE_PREFIX:
                digest = hashlib.sha1(normalize_text(event.text_value).encode()).hexdigest()[:16]
                keys[event.event_id] = f"note:{digest}"
        return cls(keys)

    def keys(self, event_ids: Iterable[str]) -> frozenset[str]:
        return frozenset(self._note_keys.get(i, f"id:{i}") for i in event_ids)


def keep_known_ids(ids: Iterable[str], allowed: Collection[str]) -> tuple[tuple[str, ...], int]:
    """The ids found in ``allowed`` (first occurrence order, repeats removed) and the number of unknown ids dropped."""
    kept: list[str] = []
    dropped = 0
    for event_id in ids:
        if event_id not in allowed:
            dropped += 1
        elif event_id not in kept:
            kept.append(event_id)
    return tuple(kept), dropped


@dataclass(frozen=True, slots=True)
class EventRules:
    """What an agent's events are checked against: the ids it read, the prediction time, the sources' keys."""

    allowed: frozenset[str]
    cutoff: datetime | None = None
    sources: SourceIndex = field(default_factory=SourceIndex)

    def with_ids(self, event_ids: Iterable[str]) -> EventRules:
        """These rules with more allowed ids (a chunk's, on top of the root's static ones)."""
        return replace(self, allowed=self.allowed | frozenset(event_ids))


@dataclass(frozen=True, slots=True)
class CleanedEvents:
    """An agent's events after the checks, and what the checks removed."""

    events: tuple[MemoryEvent, ...] = ()
    dropped_ids: int = 0
    dropped_events: int = 0


def clean_events(reported: Iterable[ExtractedEvent], rules: EventRules, *, chunk_index: int) -> CleanedEvents:
    """The memory form of an agent's events: unknown ids and events dated at or after the cutoff removed."""
    events: list[MemoryEvent] = []
    dropped_ids = dropped_events = 0
    for event in reported:
        if rules.cutoff is not None and datetime.combine(event.timestamp, time.min) >= rules.cutoff:
            dropped_events += 1
            continue
        ids, dropped = keep_known_ids(event.event_ids, rules.allowed)
        dropped_ids += dropped
        events.append(MemoryEvent(event.timestamp, event.description.strip(), ids, chunk_index, rules.sources.keys(ids)))
    return CleanedEvents(tuple(events), dropped_ids, dropped_events)


def with_provenance(events: Iterable[MemoryEvent], record: PatientRecord) -> tuple[EvidenceEvent, ...]:
    """Final events with the MEDS row of every cited id (ids were already checked against the timeline)."""
    out = []
    for event in events:
        sources = []
        for event_id in event.event_ids:
            row = record.provenance(event_id)
            sources.append(SourceRow(event_id=event_id, shard=row.shard, row=row.row))
        out.append(EvidenceEvent(timestamp=event.time, description=event.description, sources=tuple(sources)))
    return tuple(out)
