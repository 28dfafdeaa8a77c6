"""Serialize a MEDS Graph to compact text in temporal order, one block per encounter, every line led by its event id.

Each clinical event is one line ``[e12] 2020-01-05 LOINC//718-7 Hemoglobin = 11.2 g/dL``; a note is a line for
the note followed by its sections' text lines, indented, each section's header line marked ``##``, each section line
led by the note's id so a chunk boundary can never strip a line of its provenance. Encounters open with a header
naming the visit (its ``ENCOUNTER//`` row id when it is a real visit).

>>> from datetime import datetime
>>> from vista.graph import build_graph
>>> from vista.shared.records import CodeCatalog, CodeInfo, Event, PatientRecord
>>> rec = PatientRecord(7, "data/train/0.parquet", 0, [
...     Event("e0", datetime(2020, 1, 5, 9), "ENCOUNTER//AMB", None, None),
...     Event("e1", datetime(2020, 1, 5, 9, 30), "LOINC//718-7", 11.2, None),
...     Event("e2", datetime(2020, 1, 5, 10), "NOTE//RADIOLOGY", None, "Findings: 2 cm nodule.\\nImpression: suspicious."),
... ])
>>> graph = build_graph(rec, CodeCatalog([CodeInfo("LOINC//718-7", "Hemoglobin", unit="g/dL")]))
>>> print("\\n".join(serialize_graph(graph)[0].lines))
=== encounter e0 AMB 2020-01-05 ===
[e1] 2020-01-05 LOINC//718-7 Hemoglobin = 11.2 g/dL
[e2] 2020-01-05 NOTE//RADIOLOGY
[e2]   ## Findings: 2 cm nodule.
[e2]   ## Impression: suspicious.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from vista.graph import GraphEncounter, GraphEvent, NodeType, PatientGraph


@dataclass(frozen=True, slots=True)
class EncounterBlock:
    """The serialized lines of one encounter and the event ids they carry (header first)."""

    encounter_id: str
    start: dt.date
    lines: tuple[str, ...]
    event_ids: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def record_head(event_id: str, when: str, code: str, description: str | None, value: float | None,
                unit: str | None) -> str:
    """The head of a record event's line, as every prompt and printout of the record shows it: id, time, code,
    description and value/unit (``[e1] 2020-01-05 LOINC//718-7 Hemoglobin = 11.2 g/dL``)."""
    parts = [f"[{event_id}]", when, code]
    if description:
        parts.append(description)
    if value is not None:
        parts.append(f"= {value:.6g}" + (f" {unit}" if unit else ""))
    return " ".join(parts)


def record_line(event: GraphEvent) -> str:
    """The one-line form of a graph event: `record_head` (dated by day) and, for a non-note, its short text."""
    line = record_head(event.event_id, event.time.date().isoformat() if event.time else "static", event.code,
                       event.description, event.value, event.unit)
    if event.text and event.type is not NodeType.NOTE:
        line += f" : {' '.join(event.text.split())}"
    return line


def note_lines(graph: PatientGraph, note: GraphEvent) -> list[str]:
    """A note's line and its sections' non-blank text lines (indented; each section's header line marked ``##``)."""
    ref = f"[{note.event_id}]"
    lines = [record_line(note)]
    for section in graph.sections(note):
        text = [line.strip() for line in section.text.splitlines() if line.strip()]
        if section.title:
            if text and text[0].startswith(section.title):
                text[0] = f"## {text[0]}"  # the section's own header line, marked
            else:
                text.insert(0, f"## {section.title}")
        lines.extend(f"{ref}   {line}" for line in text)
    return lines


def encounter_header(encounter: GraphEncounter) -> str:
    name = encounter.event_id or encounter.node_id
    return f"=== encounter {name} {encounter.encounter_type} {encounter.start.date().isoformat()} ==="


def serialize_encounter(graph: PatientGraph, encounter: GraphEncounter) -> EncounterBlock:
    lines = [encounter_header(encounter)]
    ids: list[str] = []
    for event in graph.events_of(encounter):
        ids.append(event.event_id)
        lines.extend(note_lines(graph, event) if event.type is NodeType.NOTE else [record_line(event)])
    return EncounterBlock(encounter.node_id, encounter.start.date(), tuple(lines), tuple(ids))


def serialize_graph(graph: PatientGraph, *, start: dt.date | None = None, end: dt.date | None = None) -> list[EncounterBlock]:
    """Blocks of the encounters (with at least one event) in start order, optionally only those starting in [start, end]."""
    blocks = []
    for encounter in graph.encounters():
        day = encounter.start.date()
        if (start is not None and day < start) or (end is not None and day > end):
            continue
        block = serialize_encounter(graph, encounter)
        if block.event_ids:
            blocks.append(block)
    return blocks


def serialize_text(graph: PatientGraph) -> str:
    """The whole patient as one text (the blocks joined), e.g. for hashing or a single-call baseline."""
    return "".join(block.text for block in serialize_graph(graph))
