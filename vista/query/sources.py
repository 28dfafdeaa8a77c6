"""Open source events of the MEDS Graph for a reader (no model call): content, note excerpt and MEDS row provenance.

This is the "traverse to source only to verify" step: a timeline event's ``source_event_refs`` (or any ``e<k>`` ids)
resolve, one dictionary lookup each, to the rows the timeline was abstracted from.

Ids are positional, so a ref copied from an earlier answer may name another row once the data changed. A ref list
may therefore carry the graph version it was made against as an item ``@<version>`` (a prefix of at least 8
characters of `vista.toa.refs.graph_version`, as `vista ask` prints it): `open_sources` refuses the refs when the
graph is now another version (`StaleProvenanceError`, naming the patient and both versions).

>>> excerpt("Findings: 3.1 cm spiculated mass in the right upper lobe.", 30)
'Findings: 3.1 cm spiculated …'
>>> excerpt("short", 30)
'short'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from vista.graph import NodeType, PatientGraph
from vista.query.errors import QueryError, UnknownEventError
from vista.query.model import SourceEvent
from vista.toa import TimelineEvent
from vista.toa.errors import StaleProvenanceError
from vista.toa.refs import TABLE_VERSION_PREFIX, graph_version

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

    Raises `UnknownEventError` naming every id that is not a source event of the patient's graph, and
    `StaleProvenanceError` when an ``@<version>`` item names another version of the graph than ``graph``.
    """
    items = [ref.strip() for ref in refs]
    check_version(graph, [item[1:] for item in items if item.startswith(VERSION_MARK)])
    ordered = list(dict.fromkeys(item for item in items if not item.startswith(VERSION_MARK)))
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
VERSION_MARK = "@"
VERSION_CHARS = 12
"""Characters of the graph version `version_tag` prints (at least 8 are required back)."""


def version_tag(version: str) -> str:
    """The ``@<version>`` item that pins a ref list to one graph version (a 12-character prefix).

    >>> version_tag("0123456789abcdef0123456789abcdef")
    '@0123456789ab'
    """
    return VERSION_MARK + version.removeprefix(TABLE_VERSION_PREFIX)[:VERSION_CHARS]


def check_version(graph: PatientGraph, versions: Sequence[str]) -> None:
    """Refuse refs pinned (``@<version>``) to another version of ``graph`` than the current one."""
    current = graph_version(graph).removeprefix(TABLE_VERSION_PREFIX)
    for version in versions:
        if len(version) < 8:
            raise QueryError(f"subject {graph.subject_id}: graph version {VERSION_MARK}{version} is too short "
                             "(give at least 8 characters, as `vista ask` prints it)")
        if not current.startswith(version):
            raise StaleProvenanceError(
                f"subject {graph.subject_id}: the refs were made against version {version} of the patient's MEDS Graph "
                f"but the graph is now version {current[:VERSION_CHARS]} (the data or the graph build changed), so "
                "they may open different rows; they are refused: ask again (`vista ask`) for current refs")


def source_refs_of(events: Sequence[TimelineEvent]) -> tuple[str, ...]:
    """The graph ids behind ``events``: each event's refs in order, each id once."""
    return tuple(dict.fromkeys(ref for event in events for ref in event.source_event_refs))
