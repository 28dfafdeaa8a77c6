"""Episode synthesis: cut the unified timeline into baseline, diagnosis, treatment-line and post-oncological phases.

Deterministic, driven by the profile's flags and the rules a tumor board uses (the paper asks one LLM call for the
boundaries; date-range assignment of events is the same). Episodes are consecutive date ranges — each ends the day
before the next starts, the last ends on the last event's date — so they never overlap, every event falls in
exactly one, and none is empty.

* **diagnosis** opens at the diagnostic work-up that leads to the first diagnosis: the first oncological
  (non-``background``) event at most `WORKUP_DAYS` before the first event of a `DIAGNOSIS_TYPES` type, and runs to
  the day before the first line. Anything earlier — a chest X-ray 15 years before, prior treatment — is history,
  not work-up. A timeline without a diagnosis has no diagnosis episode.
* **baseline**: every event before that (only if any precede it).
* **treatment line**: a line is a regimen. A ``starts_line`` event (systemic therapy, radiation, surgery) opens line
  k+1 when no line is open, when the open line ended on an earlier date, or when it *switches the regimen*: it
  names a drug (`vista.toa.drugs`) outside the line's regimen, more than `REGIMEN_WINDOW_DAYS` after the line
  began, to a line that has a regimen, and its wording does not call it a planned part of the line
  (consolidation, maintenance, adjuvant...). Cycles, maintenance on a subset of the drugs, drugs joining within
  the regimen window and local therapy stay in the open line. A line *ends* at an ``ends_line`` event
  (progression), except that a severity-graded type (subtypes "mild"/"severe", like ``toxicity``) ends it only
  when it stops treatment (`stops_treatment`: severe, grade ≥ 3, "discontinued"...). The ending event stays in
  its line: the next line opens at the next ``starts_line`` event dated strictly after it.
* **post-oncological** opens at the first ``post_oncological`` event (hospice) and runs to the end. (If a hospice
  event shares its date with a line's first day, that date — and so both — is post-oncological.)

>>> import datetime as dt
>>> from vista.toa.profile import load_profile
>>> from vista.toa.model import TimelineEvent
>>> ev = lambda k, day, kind, text="x": TimelineEvent(event_id=f"t{k}", date=dt.date(2020, 1, 1) + dt.timedelta(day),
...     type=kind, subtype="other", description=text, source_event_refs=(f"e{k}",))
>>> tl = [ev(0, 0, "background"), ev(1, 30, "imaging"), ev(2, 40, "diagnosis"), ev(3, 50, "systemic_therapy", "Carboplatin C1"),
...       ev(4, 60, "toxicity", "Grade 1 nausea"), ev(5, 71, "systemic_therapy", "Carboplatin C2"), ev(6, 150, "progression"),
...       ev(7, 160, "systemic_therapy", "Docetaxel"), ev(8, 300, "hospice")]
>>> [(e.kind.value, e.line, e.start.isoformat(), e.event_ids) for e in synthesize_episodes(tl, load_profile())]
... # doctest: +NORMALIZE_WHITESPACE
[('baseline', None, '2020-01-01', ('t0',)), ('diagnosis', None, '2020-01-31', ('t1', 't2')),
 ('treatment_line', 1, '2020-02-20', ('t3', 't4', 't5', 't6')), ('treatment_line', 2, '2020-06-09', ('t7',)),
 ('post_oncological', None, '2020-10-27', ('t8',))]
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass

from vista.toa.drugs import drugs_in, line_regimen
from vista.toa.model import Episode, EpisodeKind, TimelineEvent
from vista.toa.profile import EventProfile, EventType

__all__ = ["DIAGNOSIS_TYPES", "REGIMEN_WINDOW_DAYS", "WORKUP_DAYS", "line_regimen", "stops_treatment",
           "synthesize_episodes"]

WORKUP_DAYS = 90
"""How far before the first diagnosis the diagnostic work-up may start: 90 days covers the usual path from the first
suspicious image through biopsy to the pathology report (guidelines aim at 6-8 weeks; real-world lung-cancer work-ups
take a median of about one to two months; 95-98% of the work-up studies of the generator's cohorts fall inside it),
so an older study is history, not work-up."""
REGIMEN_WINDOW_DAYS = 28
"""Drugs first given within this many days of a line's start belong to its regimen (combinations are often
recorded one drug per event); the usual real-world line-of-therapy convention."""
DIAGNOSIS_TYPES = ("diagnosis", "histology")
"""Event types whose first occurrence dates the diagnosis (a code or a pathology report)."""

_DAY = dt.timedelta(days=1)
_PLANNED = re.compile(r"\b(consolidat\w*|maintenance|adjuvant|neoadjuvant|concurrent\w*|sequential\w*|"
                      r"followed by|continu\w*|resum\w*)\b", re.IGNORECASE)
_STOPS = re.compile(r"\b(discontinu\w*|stopped|stopping|ceased|withdrawn|terminated|permanently|abandoned)\b|"
                    r"\bgrade\s*(?:[345]|iii|iv|v)\b|\bg[345]\b|\blife[- ]threatening\b|\bfatal\b", re.IGNORECASE)
_NEGATION = re.compile(r"\b(not|no|without|never)\b[^.;]*$", re.IGNORECASE)
_GRADED = frozenset({"mild", "severe"})


def stops_treatment(event: TimelineEvent) -> bool:
    """True when a toxicity-like event stopped treatment: subtype ``severe``, grade ≥ 3, life-threatening or fatal,
    or wording like "discontinued"/"stopped" that is not negated nearby ("not discontinued", "no ... stopped").

    >>> import datetime as dt
    >>> tox = lambda text, sub="other": TimelineEvent(event_id="t0", date=dt.date(2020, 1, 1), type="toxicity",
    ...                                              subtype=sub, description=text, source_event_refs=("e1",))
    >>> [stops_treatment(tox(t)) for t in ("Grade 2 rash", "G3 colitis", "Pneumonitis, drug discontinued")]
    [False, True, True]
    >>> stops_treatment(tox("Fatigue; therapy not discontinued")), stops_treatment(tox("Neutropenia", "severe"))
    (False, True)
    """
    if event.subtype == "severe":
        return True
    text = event.description
    return any(not _NEGATION.search(text[max(0, m.start() - 30):m.start()]) for m in _STOPS.finditer(text))


@dataclass(slots=True)
class _Line:
    start: dt.date
    regimen: frozenset[str]
    ended_on: dt.date | None = None

    def switched_by(self, event: TimelineEvent, drugs: frozenset[str]) -> bool:
        """A drug outside the regimen, after the regimen window, not a planned part of this line."""
        return (bool(drugs - self.regimen) and bool(self.regimen) and self.ended_on is None
                and (event.date - self.start).days > REGIMEN_WINDOW_DAYS and not _PLANNED.search(event.description))

    def absorb(self, event: TimelineEvent, drugs: frozenset[str]) -> None:
        if drugs and (not self.regimen or (event.date - self.start).days <= REGIMEN_WINDOW_DAYS
                      or _PLANNED.search(event.description) or drugs <= self.regimen):
            self.regimen |= drugs


@dataclass(frozen=True, slots=True)
class _Opening:
    kind: EpisodeKind
    start: dt.date
    anchor: str
    line: int | None = None


def _ends_line(kind: EventType, event: TimelineEvent) -> bool:
    return kind.ends_line and (not _GRADED & set(kind.subtypes) or stops_treatment(event))


def _workup(events: Sequence[TimelineEvent], flags: dict[str, EventType]) -> TimelineEvent | None:
    """The event opening the diagnosis episode: the first non-background one within the work-up window."""
    diagnosis = next((e for e in events if e.type in DIAGNOSIS_TYPES), None)
    if diagnosis is None:
        return None
    earliest = diagnosis.date - dt.timedelta(days=WORKUP_DAYS)
    return next((e for e in events if e.date >= earliest and not flags[e.type].background), diagnosis)


def _openings(events: Sequence[TimelineEvent], profile: EventProfile) -> list[_Opening]:
    flags = {t.name: t for t in profile.types}
    workup = _workup(events, flags)
    begin = workup.date if workup is not None else events[0].date
    openings = [_Opening(EpisodeKind.BASELINE, events[0].date, events[0].event_id)]
    line: _Line | None = None
    for e in events:
        if e.date < begin:
            continue
        kind = flags[e.type]
        if kind.post_oncological:
            while openings[-1].kind is not EpisodeKind.BASELINE and openings[-1].start >= e.date:
                openings.pop()  # a line opened the same day as hospice: that day is post-oncological
            openings.append(_Opening(EpisodeKind.POST_ONCOLOGICAL, e.date, e.event_id))
            break
        if kind.starts_line:
            drugs = drugs_in(e.description)
            if line is None or (line.ended_on is not None and line.ended_on < e.date) or line.switched_by(e, drugs):
                line = _Line(e.date, drugs)
                number = sum(o.kind is EpisodeKind.TREATMENT_LINE for o in openings) + 1
                openings.append(_Opening(EpisodeKind.TREATMENT_LINE, e.date, e.event_id, number))
            else:
                line.absorb(e, drugs)
        elif line is not None and line.ended_on is None and _ends_line(kind, e):
            line.ended_on = e.date
    if workup is not None and (len(openings) == 1 or openings[1].start > workup.date):
        openings.insert(1, _Opening(EpisodeKind.DIAGNOSIS, workup.date, workup.event_id))
    if len(openings) > 1 and openings[1].start <= openings[0].start:
        openings.pop(0)  # nothing precedes the first phase: no baseline
    return openings


def synthesize_episodes(events: Sequence[TimelineEvent], profile: EventProfile) -> list[Episode]:
    """Consecutive, non-overlapping, non-empty episodes covering every event of ``events`` (any order) exactly once."""
    if not events:
        return []
    ordered = sorted(events, key=lambda e: (e.date, e.event_id))
    openings = _openings(ordered, profile)
    last = ordered[-1].date
    episodes = []
    for k, opening in enumerate(openings):
        end = openings[k + 1].start - _DAY if k + 1 < len(openings) else last
        members = tuple(e.event_id for e in ordered if opening.start <= e.date <= end)
        episodes.append(Episode(episode_id=f"ep{k}", kind=opening.kind, line=opening.line, start=opening.start, end=end,
                                anchor_event_id=opening.anchor, event_ids=members))
    return episodes
