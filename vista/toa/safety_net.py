"""The radiology safety net: imaging studies the structured data proves but the timeline lacks are verified and added.

Candidates come deterministically from the graph: events whose code is a diagnostic-radiology CPT code (70010–76999,
77001–77099 guidance/breast/bone density, 78000–78999 nuclear medicine incl. PET) or a ``NOTE//RADIOLOGY`` note.
Candidate dates are first clustered into **studies** (`study_clusters`): dates within ±``window_days`` of a
study's first day are that study (the scan on Monday and its report on Wednesday are one CT, not two). A study
with no timeline event of the profile's imaging type within ±``window_days`` of any of its days goes to a
verifier sub-agent, which sees every line dated on the study's days. A confirmed study is added as *one* imaging
event on its first day whose refs are the verifier's cited ids that are events of those days — or, when it cites
none of them, the candidate rows that raised the study (the structured evidence the check started from). An
unconfirmed study adds nothing.

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
from vista.shared.llm import LLMGateway
from vista.toa.model import ImagingVerdict, RejectedEvent, TimelineEvent
from vista.shared.coding.model import Category
from vista.shared.coding.terminology import is_imaging, table_category
from vista.toa.profile import EventProfile
from vista.toa.agent_prompts import verification_messages
from vista.toa.serialize import note_lines, record_line

log = logging.getLogger(__name__)

VERIFIER_AGENT = "toa_imaging_verifier"
IMAGING_NOTE_CODES = frozenset({"NOTE//RADIOLOGY"})


def is_imaging_code(code: str, kind: str | None = None) -> bool:
    """True for diagnostic imaging procedures (CPT ranges and SNOMED CT concepts of `vista.shared.coding.terminology`, or a
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


@dataclass(frozen=True, slots=True)
class CandidateStudy:
    """One imaging study as the structured data shows it: its candidate dates (first = scan day) and their rows."""

    days: tuple[dt.date, ...]
    refs: tuple[str, ...]


def study_clusters(candidates: dict[dt.date, Sequence[str]], window_days: int = 3) -> list[CandidateStudy]:
    """Candidate dates grouped into studies: a study starts at the earliest date not yet taken and holds every
    candidate date at most ``window_days`` after it (so a study never spans more than the window).

    >>> import datetime as dt
    >>> [c.days for c in study_clusters({dt.date(2020, 1, 1): ("e1",), dt.date(2020, 1, 3): ("e2",)}, 3)]
    [(datetime.date(2020, 1, 1), datetime.date(2020, 1, 3))]
    """
    studies: list[CandidateStudy] = []
    days = sorted(candidates)
    while days:
        first = days[0]
        members = [d for d in days if (d - first).days <= window_days]
        days = days[len(members):]
        studies.append(CandidateStudy(tuple(members), tuple(dict.fromkeys(r for d in members for r in candidates[d]))))
    return studies


def missing_studies(studies: Sequence[CandidateStudy], timeline: Sequence[TimelineEvent], imaging_type: str,
                    window_days: int = 3) -> list[CandidateStudy]:
    """Studies with no ``imaging_type`` timeline event within ±``window_days`` of any of their days."""
    covered = set(missing_dates({d: () for s in studies for d in s.days}, timeline, imaging_type, window_days))
    return [s for s in studies if all(d in covered for d in s.days)]


def day_lines(graph: PatientGraph, day: dt.date, last_day: dt.date | None = None) -> tuple[list[str], frozenset[str]]:
    """Serialized lines of every clinical event dated ``day`` (through ``last_day``) and their ids."""
    lines, ids = [], set()
    last = last_day or day
    for event in graph.events_in_order():
        if event.time is not None and day <= event.time.date() <= last:
            ids.add(event.event_id)
            lines.extend(note_lines(graph, event) if event.type is NodeType.NOTE else [record_line(event)])
    return lines, frozenset(ids)


@dataclass(frozen=True, slots=True)
class SafetyNetResult:
    """What one safety-net pass did: studies found, first days of those verified, events added, failures."""

    candidates: int
    checked: tuple[dt.date, ...]
    added: tuple[TimelineEvent, ...]
    rejected: tuple[RejectedEvent, ...]
    failed: int


async def verify_study(gateway: LLMGateway, graph: PatientGraph, profile: EventProfile, study: CandidateStudy, *,
                       max_tokens: int | None = None) -> TimelineEvent | RejectedEvent | None:
    """The added imaging event (dated the study's first day), a rejection record (call failed), or None when the
    verifier says no study happened."""
    day, last = study.days[0], study.days[-1]
    lines, ids = day_lines(graph, day, last)
    result = await gateway.complete(verification_messages(profile, day, lines, last), ImagingVerdict,
                                    agent=VERIFIER_AGENT, patient_id=graph.subject_id, max_tokens=max_tokens)
    if not result.ok:
        return RejectedEvent(chunk=None, reason=f"imaging verifier failed for {day.isoformat()}: {result.error.kind.value}")
    verdict = result.output
    if not verdict.imaging_performed:
        return None
    cited = tuple(dict.fromkeys(r.strip() for r in verdict.source_event_refs if r.strip() in ids and graph.has_event(r.strip())))
    refs = cited or study.refs
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
    """Verify (concurrently, one call per study) the imaging studies (dates within [start, end]) missing from
    ``timeline``; ``candidates`` counts studies, ``checked`` holds the first day of each study sent to the verifier."""
    studies = study_clusters(imaging_candidates(graph, start, end), window_days)
    todo = missing_studies(studies, timeline, profile.imaging_type, window_days)
    outcomes = await asyncio.gather(*(verify_study(gateway, graph, profile, s, max_tokens=max_tokens) for s in todo))
    added = tuple(o for o in outcomes if isinstance(o, TimelineEvent))
    rejected = tuple(o for o in outcomes if isinstance(o, RejectedEvent))
    return SafetyNetResult(len(studies), tuple(s.days[0] for s in todo), added, rejected, len(rejected))
