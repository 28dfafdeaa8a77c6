"""The radiology safety net: imaging dates the structured data proves but the timeline lacks are verified and added.

Candidates come deterministically from the graph: events whose code is a diagnostic-radiology CPT code (70010–76999,
77001–77099 guidance/breast/bone density, 78000–78999 nuclear medicine incl. PET) or a ``NOTE//RADIOLOGY`` note.
A candidate date with no timeline event of the profile's imaging type within ±``window_days`` goes to a per-date
verifier sub-agent, which sees every line dated that day. A confirmed study is added as an imaging event whose refs
are the verifier's cited ids that are events of that day — or, when it cites none of them, the candidate rows that
raised the date (they are the structured evidence the check started from). An unconfirmed date adds nothing.

>>> [is_imaging_code(c) for c in ("CPT//71250", "CPT//78815", "CPT//77427", "NOTE//RADIOLOGY", "LOINC//718-7")]
[True, True, False, True, False]
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from vista.graph import NodeType, PatientGraph
from vista.graph.model import GraphEvent
from vista.llm import LLMGateway
from vista.toa.model import ImagingVerdict, RejectedEvent, TimelineEvent
from vista.coding.model import Category
from vista.coding.terminology import is_imaging, table_category
from vista.toa.profile import EventProfile
from vista.toa.agent_prompts import verification_messages
from vista.toa.serialize import event_line, note_lines

log = logging.getLogger(__name__)

VERIFIER_AGENT = "toa_imaging_verifier"
IMAGING_NOTE_CODES = frozenset({"NOTE//RADIOLOGY"})


def is_imaging_code(code: str, kind: str | None = None) -> bool:
    """True for diagnostic imaging procedures (CPT ranges and SNOMED CT concepts of `vista.coding.terminology`, or a
    row whose source table says imaging) and radiology notes (radiation-oncology CPT 77261–77799 excluded)."""
    if code in IMAGING_NOTE_CODES or kind == Category.IMAGING.value:
        return True
    vocabulary, _, value = code.partition("//")
    return is_imaging(vocabulary, value)


def _stated_kind(event: GraphEvent) -> str | None:
    """The category the event's source states: its ``kind`` attribute (MEDS ``table`` column) or its XML type."""
    kind = event.attribute("kind")
    if kind is None:
        table = table_category(event.attribute("table"))
        kind = table.value if table is not None else None
    return kind


def imaging_candidates(graph: PatientGraph, start: dt.date | None = None,
                       end: dt.date | None = None) -> dict[dt.date, tuple[str, ...]]:
    """Dates (optionally within [start, end]) of structured imaging evidence and the event ids on each, in date order."""
    found: dict[dt.date, list[str]] = {}
    for event in graph.events_in_order():
        if event.time is None or (start is not None and event.time.date() < start):
            continue
        if (end is None or event.time.date() <= end) and is_imaging_code(event.code, _stated_kind(event)):
            found.setdefault(event.time.date(), []).append(event.event_id)
    return {day: tuple(ids) for day, ids in sorted(found.items())}


def missing_dates(candidates: dict[dt.date, Sequence[str]], timeline: Sequence[TimelineEvent], imaging_type: str,
                  window_days: int = 3) -> list[dt.date]:
    """Candidate dates with no ``imaging_type`` timeline event within ±``window_days``."""
    covered = [e.date for e in timeline if e.type == imaging_type]
    window = dt.timedelta(days=window_days)
    return [day for day in candidates if not any(abs(day - d) <= window for d in covered)]


def day_lines(graph: PatientGraph, day: dt.date) -> tuple[list[str], frozenset[str]]:
    """Serialized lines of every clinical event dated ``day`` and their ids."""
    lines, ids = [], set()
    for event in graph.events_in_order():
        if event.time is not None and event.time.date() == day:
            ids.add(event.event_id)
            lines.extend(note_lines(graph, event) if event.type is NodeType.NOTE else [event_line(event)])
    return lines, frozenset(ids)


@dataclass(frozen=True, slots=True)
class SafetyNetResult:
    candidates: int
    checked: tuple[dt.date, ...]
    added: tuple[TimelineEvent, ...]
    rejected: tuple[RejectedEvent, ...]
    failed: int


async def verify_date(gateway: LLMGateway, graph: PatientGraph, profile: EventProfile, day: dt.date,
                      candidate_refs: Sequence[str], *, max_tokens: int | None = None) -> TimelineEvent | RejectedEvent | None:
    """The added imaging event, a rejection record (call failed), or None when the verifier says no study happened."""
    lines, ids = day_lines(graph, day)
    result = await gateway.complete(verification_messages(profile, day, lines), ImagingVerdict, agent=VERIFIER_AGENT,
                                    patient_id=graph.subject_id, max_tokens=max_tokens)
    if not result.ok:
        return RejectedEvent(chunk=None, reason=f"imaging verifier failed for {day.isoformat()}: {result.error.kind.value}")
    verdict = result.output
    if not verdict.imaging_performed:
        return None
    cited = tuple(dict.fromkeys(r.strip() for r in verdict.source_event_refs if r.strip() in ids and graph.has_event(r.strip())))
    refs = cited or tuple(candidate_refs)
    subtype = verdict.subtype.strip().lower()
    if subtype not in profile.subtypes_of(profile.imaging_type):
        subtype = "other"
    description = verdict.description.strip() or f"Imaging study on {day.isoformat()} (verified from structured data)."
    return TimelineEvent(event_id=f"s{day.isoformat()}", date=day, type=profile.imaging_type, subtype=subtype,
                         description=description, source_event_refs=refs, origin="safety_net")


async def radiology_safety_net(gateway: LLMGateway, graph: PatientGraph, profile: EventProfile,
                               timeline: Sequence[TimelineEvent], *, window_days: int = 3,
                               max_tokens: int | None = None, start: dt.date | None = None,
                               end: dt.date | None = None) -> SafetyNetResult:
    """Verify (concurrently, one call per date) the imaging dates (within [start, end]) missing from ``timeline``."""
    candidates = imaging_candidates(graph, start, end)
    todo = missing_dates(candidates, timeline, profile.imaging_type, window_days)
    outcomes = await asyncio.gather(*(verify_date(gateway, graph, profile, d, candidates[d], max_tokens=max_tokens)
                                      for d in todo))
    added = tuple(o for o in outcomes if isinstance(o, TimelineEvent))
    rejected = tuple(o for o in outcomes if isinstance(o, RejectedEvent))
    return SafetyNetResult(len(candidates), tuple(todo), added, rejected, len(rejected))
