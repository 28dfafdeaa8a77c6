"""Checks the events agents report against what they actually read, and links final events to MEDS rows.

An id the agent was not shown (a typo, an id from another chunk, an invention) is dropped and counted; the
event itself is kept, as its date and description still stand. An event dated at or after the prediction
time cannot come from the input (it holds only earlier events), so it is dropped and counted. A final event
left citing nothing, or dated outside the record the agents read (before its first event, birth included, or
after its last one before the prediction time: `RecordSpan`), is kept and flagged (`EvidenceEvent.flags`), so it
is shown as what the agent said, never as a fact; rows and the report count the flagged events.

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
from datetime import date, datetime, time

from trajonco.agents.memory import MemoryEvent, normalize_text
from trajonco.agents.results import EvidenceEvent, EvidenceFlag, SourceRow
from trajonco.agents.schemas import ExtractedEvent
from vista.shared.meds import schema
from vista.shared.records import PatientRecord


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


@dataclass(frozen=True, slots=True)
class RecordSpan:
    """The dates a patient's record covers as the agents read it: its first timed event (birth included) through
    its last event before the prediction time. Evidence dated outside it cannot come from the record.

    >>> from trajonco.agents.memory import MemoryEvent
    >>> from vista.shared.records import Event, PatientRecord
    >>> rec = PatientRecord(4, "data/train/0.parquet", 0, [Event("e0", datetime(2065, 3, 1), "MEDS_BIRTH", None, None),
    ...     Event("e1", datetime(2090, 5, 2, 9), "LOINC//718-7", 12.0, None),
    ...     Event("e2", datetime(2095, 1, 1), "LOINC//718-7", 9.0, None)])
    >>> span = RecordSpan.of(rec, datetime(2091, 1, 1))
    >>> span
    RecordSpan(first=datetime.date(2065, 3, 1), last=datetime.date(2090, 5, 2))
    >>> [e.flags for e in with_provenance([MemoryEvent(date(2020, 1, 1), "Cough", (), 0),
    ...     MemoryEvent(date(2090, 5, 2), "Low Hb", ("e1",), 0), MemoryEvent(date(2090, 9, 1), "Hb 9", ("e1",), 0)],
    ...     rec, span)]
    [('unsourced', 'before_record'), (), ('after_record',)]
    """

    first: date | None
    last: date | None

    @classmethod
    def of(cls, record: PatientRecord, prediction_time: datetime | None = None) -> RecordSpan:
        """The span of ``record`` read strictly before ``prediction_time`` (the whole record when None)."""
        times = [e.time for e in record.events if e.time is not None]
        seen = [t for t in times if prediction_time is None or t < prediction_time]
        return cls(min(times).date() if times else None, max(seen).date() if seen else None)

    def flags(self, day: date) -> tuple[EvidenceFlag, ...]:
        """``before_record`` / ``after_record`` when ``day`` lies outside the span, else ()."""
        if self.first is not None and day < self.first:
            return ("before_record",)
        if self.last is not None and day > self.last:
            return ("after_record",)
        return ()


def with_provenance(events: Iterable[MemoryEvent], record: PatientRecord,
                    span: RecordSpan | None = None) -> tuple[EvidenceEvent, ...]:
    """Final events with the MEDS row of every cited id (ids were already checked against the timeline), each
    flagged when it cites nothing the agents read or is dated outside ``span`` (default: the whole record). Flagged
    events are kept — what the agents said is shown — but marked, so no reader takes them for facts."""
    span = span if span is not None else RecordSpan.of(record)
    out = []
    for event in events:
        sources = []
        for event_id in event.event_ids:
            row = record.provenance(event_id)
            sources.append(SourceRow(event_id=event_id, shard=row.shard, row=row.row))
        flags: tuple[EvidenceFlag, ...] = (("unsourced",) if not sources else ()) + span.flags(event.time)
        out.append(EvidenceEvent(timestamp=event.time, description=event.description, sources=tuple(sources),
                                 flags=flags))
    return tuple(out)


FLAG_WORDS: dict[EvidenceFlag, str] = {
    "unsourced": "cites no record element", "before_record": "dated before the record starts",
    "after_record": "dated after the record ends"}


def flag_note(flags: Iterable[EvidenceFlag]) -> str:
    """How a flagged event is marked wherever it is shown (tables, the judge's prompt): as the agent said, not as a
    fact.

    >>> flag_note(("unsourced", "before_record"))
    ' [FLAGGED: cites no record element; dated before the record starts]'
    """
    words = [FLAG_WORDS[f] for f in flags]
    return f" [FLAGGED: {'; '.join(words)}]" if words else ""
