"""Making `Event`s by the million: the same frozen dataclass instances, about four times cheaper each.

A frozen dataclass sets each field in ``__init__`` through ``object.__setattr__`` (its own ``__setattr__`` refuses),
which is most of the 1.1 µs an `Event` costs to make. `_EventSlots` has exactly `Event`'s slot layout and no
``__setattr__`` guard: its ``__init__`` stores the nine fields directly, then turns the object into an `Event`
(``__class__`` assignment, which Python allows between classes of identical layout). What comes out is an ordinary
`Event`: same type, equality, hash and immutability as one made by ``Event(...)``.

>>> made = make_events(["e0", "e1"], [None, datetime(2020, 1, 5)], ["GENDER//F", "LOINC//718-7"], [None, 11.2],
...                    [None, None], [None, None], [None, "g/dL"], [None, "v1"], [None, None])
>>> made[1] == Event("e1", datetime(2020, 1, 5), "LOINC//718-7", 11.2, None, unit="g/dL", visit_id="v1")
True
>>> type(made[0]).__name__, made[0].code
('Event', 'GENDER//F')
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime

from vista.shared.records import Event


class _EventSlots:
    """Builds one `Event` (see the module docstring); never seen outside this module."""

    __slots__ = Event.__slots__

    def __init__(self, event_id: str, time: datetime | None, code: str, numeric_value: float | None,
                 text_value: str | None, source_code: str | None, unit: str | None, visit_id: str | None,
                 kind: str | None) -> None:
        self.event_id = event_id
        self.time = time
        self.code = code
        self.numeric_value = numeric_value
        self.text_value = text_value
        self.source_code = source_code
        self.unit = unit
        self.visit_id = visit_id
        self.kind = kind
        self.__class__ = Event  # type: ignore[assignment]


if _EventSlots.__slots__ != tuple(Event.__dataclass_fields__):  # pragma: no cover - a new Event field must be set above
    raise ImportError(f"vista.shared.events_bulk builds Events with fields {_EventSlots.__slots__}, "
                      f"but Event now has {tuple(Event.__dataclass_fields__)}")


def make_events(event_ids: Sequence[str], times: Sequence, codes: Sequence[str], values: Sequence,
                texts: Sequence, sources: Sequence, units: Sequence, visits: Sequence, kinds: Sequence) -> list[Event]:
    """``Event(*fields)`` for each position of the nine equally long field columns, in `Event`'s field order."""
    return list(map(_EventSlots, event_ids, times, codes, values, texts, sources, units, visits, kinds))


_PAUSE_LOCK = threading.Lock()
_pauses = 0  # threads inside gc_paused()
_resume = False  # whether the collector was on when the first of them came in


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while making events (the reference counts still free what is dropped).

    Each `Event` is a tracked container: made by the million, they trigger collections that walk every young object
    again and again, though events only hold strings, times and floats and can never be part of a cycle. Counted
    across threads, so the collector comes back on when the last one leaves, and only if it was on before.
    """
    global _pauses, _resume
    with _PAUSE_LOCK:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _PAUSE_LOCK:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()
