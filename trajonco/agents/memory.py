"""The long-term memory (LTM): cancer-related events accumulated across the worker chain.

Events are kept in chronological order (ties keep arrival order) and deduplicated. An incoming event is a
duplicate of a stored one when

- both have the same date and the same normalized description, or the same non-empty set of source ids; or
- both have the same normalized description and share a source key: the same timeline element, or a note
  with the same text (a copy-forwarded note repeats an old finding under a new date; it is stored once).

A duplicate adds its source ids to the stored event instead of being stored again. Each worker is shown the
last ``k`` events.

>>> from datetime import date
>>> ltm = LongTermMemory()
>>> ltm.add([MemoryEvent(date(2020, 3, 1), "Hemoglobin 9.1 g/dL (low)", ("e12",), 0),
...          MemoryEvent(date(2019, 1, 5), "Former smoker, 30 pack-years", ("e3",), 0, frozenset({"note:ab12"}))])
AddReport(added=2, duplicates=0)
>>> ltm.add([MemoryEvent(date(2020, 3, 1), "hemoglobin 9.1 g/dl  (LOW).", ("e40",), 1),
...          MemoryEvent(date(2021, 2, 2), "former smoker, 30 pack-years", ("e77",), 1, frozenset({"note:ab12"}))])
AddReport(added=0, duplicates=2)
>>> [(str(e.time), e.event_ids) for e in ltm]
[('2019-01-05', ('e3', 'e77')), ('2020-03-01', ('e12', 'e40'))]
>>> [e.description for e in ltm.last(1)]
['Hemoglobin 9.1 g/dL (low)']
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import date

_NON_WORD = re.compile(r"[^\w.]+")
_LOOSE_DOT = re.compile(r"\.(?!\d)|(?<!\d)\.")


def normalize_text(text: str) -> str:
    """Lower-case, punctuation-free, single-spaced text for duplicate detection (decimal points kept).

    >>> normalize_text("  Hb 9.1 g/dL,  LOW. ")
    'hb 9.1 g dl low'
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_NON_WORD.sub(" ", _LOOSE_DOT.sub(" ", folded)).split())


@dataclass(frozen=True, slots=True)
class MemoryEvent:
    """One remembered event: date, description, source timeline ids, the chunk whose worker found it, source keys.

    ``source_keys`` identify what the sources say rather than where they are (see `evidence.SourceIndex`):
    two copies of the same note share a key.
    """

    time: date
    description: str
    event_ids: tuple[str, ...]
    chunk_index: int
    source_keys: frozenset[str] = frozenset()

    def render(self) -> str:
        """One prompt line: ``- 2020-03-01: description [e12, e40]``."""
        ids = f" [{', '.join(self.event_ids)}]" if self.event_ids else ""
        return f"- {self.time.isoformat()}: {self.description}{ids}"


@dataclass(frozen=True, slots=True)
class AddReport:
    """How many incoming events were stored and how many were duplicates of stored ones."""

    added: int
    duplicates: int


class LongTermMemory:
    """Chronologically ordered, deduplicated store of `MemoryEvent`s."""

    def __init__(self) -> None:
        self._events: list[MemoryEvent] = []
        self._order: list[tuple[date, int]] = []  # sort keys parallel to _events: (date, arrival number)
        self._texts: list[str] = []  # normalized descriptions parallel to _events
        self._arrivals = 0

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[MemoryEvent]:
        return iter(self._events)

    def _find_duplicate(self, event: MemoryEvent) -> int | None:
        text = normalize_text(event.description)
        ids = frozenset(event.event_ids)
        for i, (stored, stored_text) in enumerate(zip(self._events, self._texts)):
            same_text = stored_text == text
            if stored.time == event.time and (same_text or (ids and frozenset(stored.event_ids) == ids)):
                return i
            if same_text and not stored.source_keys.isdisjoint(event.source_keys):
                return i
        return None

    def add(self, events: Iterable[MemoryEvent]) -> AddReport:
        """Store the events that are not duplicates; duplicates lend their source ids to the stored event."""
        added = duplicates = 0
        for event in events:
            found = self._find_duplicate(event)
            if found is not None:
                stored = self._events[found]
                merged = stored.event_ids + tuple(i for i in event.event_ids if i not in stored.event_ids)
                self._events[found] = replace(stored, event_ids=merged, source_keys=stored.source_keys | event.source_keys)
                duplicates += 1
                continue
            key = (event.time, self._arrivals)
            self._arrivals += 1
            at = bisect.bisect_right(self._order, key)
            self._order.insert(at, key)
            self._events.insert(at, event)
            self._texts.insert(at, normalize_text(event.description))
            added += 1
        return AddReport(added, duplicates)

    def last(self, k: int) -> list[MemoryEvent]:
        """The ``k`` latest events, oldest first (all of them when k exceeds the size; none when k <= 0)."""
        return self._events[-k:] if k > 0 else []

    def events(self) -> list[MemoryEvent]:
        """A copy of every stored event in chronological order."""
        return list(self._events)


def render_events(events: Iterable[MemoryEvent]) -> str:
    """Prompt text for a list of events, one per line (``(none yet)`` when empty)."""
    lines = [e.render() for e in events]
    return "\n".join(lines) if lines else "(none yet)"
