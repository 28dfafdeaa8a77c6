"""Episode synthesis: cut the unified timeline into baseline, diagnosis, treatment-line and post-oncological phases.

Deterministic and driven by the profile's flags (the paper asks one LLM call for the boundaries; date-range
assignment of events is the same): episodes are consecutive date ranges — each ends the day before the next
starts, the last ends on the last event's date — so they never overlap and every event falls in exactly one.

* baseline: from the first event up to the day before the first non-``background`` event (only if any precede it);
* diagnosis: from that first oncological event up to the day before the first line starts;
* treatment line k: opens at a ``starts_line`` event (surgery, radiation, systemic therapy) when no line is open,
  or when the open line was closed by an ``ends_line`` event (progression, toxicity) dated *strictly before* it —
  so the event that ends a line stays in that line;
* post-oncological: opens at the first ``post_oncological`` event (hospice) and runs to the end.
  (If a hospice event shares its date with a line-ending event, that date — and so both — is post-oncological.)

>>> import datetime as dt
>>> from vista.toa.profile import load_profile
>>> from vista.toa.model import TimelineEvent
>>> ev = lambda k, day, kind: TimelineEvent(event_id=f"t{k}", date=dt.date(2020, 1, day), type=kind, subtype="other",
...                                         description="x", source_event_refs=(f"e{k}",))
>>> tl = [ev(0, 1, "background"), ev(1, 3, "imaging"), ev(2, 5, "systemic_therapy"), ev(3, 9, "progression"),
...       ev(4, 9, "systemic_therapy"), ev(5, 12, "systemic_therapy"), ev(6, 20, "hospice")]
>>> [(e.kind.value, e.line, e.start.day, e.end.day, e.event_ids) for e in synthesize_episodes(tl, load_profile())]
[('baseline', None, 1, 2, ('t0',)), ('diagnosis', None, 3, 4, ('t1',)), ('treatment_line', 1, 5, 11, ('t2', 't3', 't4')), ('treatment_line', 2, 12, 19, ('t5',)), ('post_oncological', None, 20, 20, ('t6',))]
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from vista.toa.model import Episode, EpisodeKind, TimelineEvent
from vista.toa.profile import EventProfile

_DAY = dt.timedelta(days=1)


@dataclass(frozen=True, slots=True)
class _Opening:
    kind: EpisodeKind
    start: dt.date
    anchor: str
    line: int | None = None


def _openings(events: Sequence[TimelineEvent], profile: EventProfile) -> list[_Opening]:
    flags = {t.name: t for t in profile.types}
    openings: list[_Opening] = []
    onset = next((e for e in events if not flags[e.type].background), None)
    if onset is None:
        return [_Opening(EpisodeKind.BASELINE, events[0].date, events[0].event_id)]
    if events[0].date < onset.date:
        openings.append(_Opening(EpisodeKind.BASELINE, events[0].date, events[0].event_id))
    line, line_start, ended_on = 0, None, None
    for e in events:
        if e.date < onset.date:
            continue
        kind = flags[e.type]
        if kind.post_oncological:
            while openings and openings[-1].start >= e.date and openings[-1].kind is not EpisodeKind.BASELINE:
                openings.pop()  # a line opened the same day as hospice: that day is post-oncological
            openings.append(_Opening(EpisodeKind.POST_ONCOLOGICAL, e.date, e.event_id))
            break
        if kind.starts_line and (line_start is None or (ended_on is not None and ended_on < e.date)):
            line, line_start, ended_on = line + 1, e.date, None
            openings.append(_Opening(EpisodeKind.TREATMENT_LINE, e.date, e.event_id, line))
        elif kind.ends_line and line_start is not None and ended_on is None:
            ended_on = e.date
    first_oncological = next((o for o in openings if o.kind is not EpisodeKind.BASELINE), None)
    if first_oncological is None or first_oncological.start > onset.date:
        at = len(openings) if first_oncological is None else openings.index(first_oncological)
        openings.insert(at, _Opening(EpisodeKind.DIAGNOSIS, onset.date, onset.event_id))
    return openings


def synthesize_episodes(events: Sequence[TimelineEvent], profile: EventProfile) -> list[Episode]:
    """Consecutive, non-overlapping episodes covering every event of ``events`` (any order) exactly once."""
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
