"""The timeline as a model reads it: compact lines ``[t<k>] date type/subtype: description`` grouped by episode.

A call sees at most ``max_events`` events and ``max_chars`` characters. When the timeline is longer, the anchors of
the oncological episodes (the events that open them: the first oncological event, each line's start, hospice) are
kept first, then the most recent events, and the header says how many older events were left out. Only shown ids
may be cited.

>>> import datetime as dt
>>> from vista.toa.model import Episode, EpisodeKind, ExtractionStats, PatientTimeline, TimelineEvent
>>> ev = lambda k, day, kind, text: TimelineEvent(event_id=f"t{k}", date=dt.date(2020, 1, day), type=kind,
...                                               subtype="other", description=text, source_event_refs=(f"e{k}",))
>>> events = (ev(0, 2, "diagnosis", "Lung adenocarcinoma"), ev(1, 9, "systemic_therapy", "Carboplatin started"))
>>> episodes = (Episode(episode_id="ep0", kind=EpisodeKind.DIAGNOSIS, start=dt.date(2020, 1, 2),
...                     end=dt.date(2020, 1, 8), anchor_event_id="t0", event_ids=("t0",)),
...             Episode(episode_id="ep1", kind=EpisodeKind.TREATMENT_LINE, line=1, start=dt.date(2020, 1, 9),
...                     end=dt.date(2020, 1, 9), anchor_event_id="t1", event_ids=("t1",)))
>>> stats = ExtractionStats(chunks=1, failed_chunks=0, proposed_events=2, kept_events=2, rejected_events=0,
...                         dropped_refs=0, merged_groups=0)
>>> tl = PatientTimeline(subject_id=1, profile="thoracic", content_hash="h", events=events, episodes=episodes,
...                      rejected=(), stats=stats)
>>> print(timeline_view(tl).text)
Timeline of 2 events in 2 episodes.
Episode ep0: diagnosis, 2020-01-02 to 2020-01-08
[t0] 2020-01-02 diagnosis/other: Lung adenocarcinoma
Episode ep1: treatment line 1, 2020-01-09 to 2020-01-09
[t1] 2020-01-09 systemic_therapy/other: Carboplatin started
>>> view = timeline_view(tl, max_events=1)
>>> view.shown_ids, view.omitted
(frozenset({'t0'}), 1)
"""

from __future__ import annotations

from dataclasses import dataclass

from vista.toa.model import Episode, EpisodeKind, PatientTimeline, TimelineEvent

UNASSIGNED = "Events outside every episode"


@dataclass(frozen=True, slots=True)
class TimelineView:
    """The rendered text, the ids it shows (the only ones a call may cite) and how many events were left out."""

    text: str
    shown_ids: frozenset[str]
    omitted: int


def event_line(event: TimelineEvent) -> str:
    """One timeline event on one line."""
    description = " ".join(event.description.split())
    return f"[{event.event_id}] {event.date.isoformat()} {event.type}/{event.subtype}: {description}"


def episode_header(episode: Episode) -> str:
    kind = episode.kind.value.replace("_", " ") + (f" {episode.line}" if episode.line is not None else "")
    return f"Episode {episode.episode_id}: {kind}, {episode.start.isoformat()} to {episode.end.isoformat()}"


def _priority(timeline: PatientTimeline) -> list[TimelineEvent]:
    """Events in the order they are kept when the view must be cut: anchors by date, then newest to oldest."""
    anchors = {ep.anchor_event_id for ep in timeline.episodes
               if ep.anchor_event_id and ep.kind is not EpisodeKind.BASELINE}
    ordered = sorted(timeline.events, key=lambda e: (e.date, e.event_id))
    first = [e for e in ordered if e.event_id in anchors]
    rest = [e for e in reversed(ordered) if e.event_id not in anchors]
    return first + rest


def timeline_view(timeline: PatientTimeline, max_events: int = 120, max_chars: int = 12_000) -> TimelineView:
    """The timeline rendered for a prompt within ``max_events`` events and (about) ``max_chars`` characters."""
    headers = {ep.episode_id: episode_header(ep) for ep in timeline.episodes}
    room = max_chars - sum(len(h) + 1 for h in headers.values()) - len(UNASSIGNED) - 80
    lines = {e.event_id: event_line(e) for e in timeline.events}
    shown: set[str] = set()
    for event in _priority(timeline):
        if len(shown) >= max_events:
            break
        cost = len(lines[event.event_id]) + 1
        if cost <= room:
            shown.add(event.event_id)
            room -= cost
    omitted = len(timeline.events) - len(shown)
    intro = f"Timeline of {len(timeline.events)} events in {len(timeline.episodes)} episodes."
    if omitted:
        intro += f" {omitted} older events are not shown (each episode's first event and the latest ones are)."
    out = [intro]
    order = _order(timeline)
    placed: set[str] = set()
    for episode in timeline.episodes:
        members = [i for i in episode.event_ids if i in shown]
        placed.update(episode.event_ids)
        if members:
            out.append(headers[episode.episode_id])
            out.extend(lines[i] for i in sorted(members, key=order))
    stray = [e.event_id for e in timeline.events if e.event_id not in placed and e.event_id in shown]
    if stray:
        out.append(UNASSIGNED)
        out.extend(lines[i] for i in sorted(stray, key=order))
    return TimelineView("\n".join(out), frozenset(shown), omitted)


def _order(timeline: PatientTimeline):
    position = {e.event_id: (e.date, k) for k, e in enumerate(timeline.events)}
    return position.__getitem__
