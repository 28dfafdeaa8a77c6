"""Checks the event ids agents cite against what they actually read, and links final events to MEDS rows.

An id the agent was not shown (a typo, an id from another chunk, an invention) is dropped and counted; the
event itself is kept, as its date and description still stand.

>>> from datetime import date
>>> from trajonco.agents.schemas import ExtractedEvent
>>> ev = ExtractedEvent(timestamp=date(2020, 1, 5), description="Cough", event_ids=["e3", "e99", "e3"])
>>> cleaned, dropped = clean_event(ev, allowed={"e3", "e4"}, chunk_index=0)
>>> cleaned.event_ids, dropped, sorted(cleaned.source_keys)
(('e3',), 1, ['id:e3'])
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable

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


def clean_event(
    event: ExtractedEvent, *, allowed: Collection[str], chunk_index: int, sources: SourceIndex | None = None
) -> tuple[MemoryEvent, int]:
    """The memory form of an agent's event with only ``allowed`` ids, and how many ids were dropped."""
    ids, dropped = keep_known_ids(event.event_ids, allowed)
    keys = (sources or _NO_NOTES).keys(ids)
    return MemoryEvent(event.timestamp, event.description.strip(), ids, chunk_index, keys), dropped


_NO_NOTES = SourceIndex()


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
