"""Open source events of the MEDS Graph for a reader (no model call): content, note excerpt and MEDS row provenance.

This is the "traverse to source only to verify" step: a timeline event's ``source_event_refs`` (or any ``e<k>`` ids)
resolve, one dictionary lookup each, to the rows the timeline was abstracted from.

>>> excerpt("Findings: 3.1 cm spiculated mass in the right upper lobe.", 30)
'Findings: 3.1 cm spiculated …'
>>> excerpt("short", 30)
'short'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from vista.graph import NodeType, PatientGraph
from vista.query.errors import UnknownEventError
from vista.query.model import SourceEvent
from vista.toa import TimelineEvent

DEFAULT_EXCERPT_CHARS = 600
ELLIPSIS = "…"


def excerpt(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its longest prefix of whole words under it, marked "…"."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 1)]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[: space + 1]
    return cut + ELLIPSIS


def open_sources(graph: PatientGraph, refs: Iterable[str], *, excerpt_chars: int = DEFAULT_EXCERPT_CHARS) -> list[SourceEvent]:
    """The source events ``refs`` (duplicates once, in the order given) with their provenance.

    Raises `UnknownEventError` naming every id that is not a source event of the patient's graph.
    """
    ordered = list(dict.fromkeys(ref.strip() for ref in refs))
    unknown = [ref for ref in ordered if not graph.has_event(ref)]
    if unknown:
        raise UnknownEventError(graph.subject_id, unknown, where=f"its MEDS Graph (from {graph.info.source})")
    unit = graph.info.provenance_unit
    opened = []
    for ref in ordered:
        event = graph.event(ref)
        text = event.text
        opened.append(SourceEvent(
            event_id=event.event_id, kind=_KIND[event.type], time=event.time, code=event.code,
            description=event.description, value=event.value, unit=event.unit,
            text=excerpt(text, excerpt_chars) if text is not None else None, text_chars=len(text) if text else 0,
            encounter=event.encounter, source=event.provenance.shard, row=event.provenance.row, provenance_unit=unit))
    return opened


_KIND = {NodeType.EVENT: "event", NodeType.NOTE: "note", NodeType.ENCOUNTER: "encounter"}


def source_refs_of(events: Sequence[TimelineEvent]) -> tuple[str, ...]:
    """The graph ids behind ``events``: each event's refs in order, each id once."""
    return tuple(dict.fromkeys(ref for event in events for ref in event.source_event_refs))
