"""The timeline as a model reads it: compact lines ``[t<k>] date type/subtype: description`` grouped by episode.

A view holds at most ``max_events`` events and fits a `ChunkSize` (characters, or tiktoken tokens when the
caller sizes it from the model's context window, as `fitted_view_size` does — the same arithmetic the TOA uses
for its chunks). When the whole timeline does not fit, events are kept in this order:

1. the facts a tumor board needs first (``ESSENTIAL_TYPES``: diagnosis, histology, staging, biomarkers), each type's
   first and latest event before any type's middle ones;
2. the anchors of the oncological episodes (the first oncological event, each line's start, hospice);
3. background facts (``CONTEXT_TYPES``: smoking, comorbidities, allergies — the patient-information fields);
4. every other event, newest first.

The header says how many events were left out. Only shown ids may be cited.

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
>>> fitted_view_size(8192, answer_tokens=1024, prompt_tokens=900)
ChunkSize(limit=6268, unit='tokens')
>>> fitted_view_size(None, answer_tokens=1024, prompt_tokens=900) is None
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vista.toa.chunks import ChunkSize
from vista.toa.errors import ChunkingError
from vista.toa.model import Episode, EpisodeKind, PatientTimeline, TimelineEvent
from vista.shared.tokens import count_tokens_batch

UNASSIGNED = "Events outside every episode"
ESSENTIAL_TYPES = ("diagnosis", "histology", "staging", "biomarkers")
"""Event types a tumor board reads first: kept before anything else when the view must be cut."""
CONTEXT_TYPES = ("background",)
"""Event types holding the patient's background (comorbidities, allergies, smoking): kept after episode anchors."""
WHOLE_TIMELINE_CONTEXT = 64_000
"""At or above this many tokens of context a model reads the whole timeline (no budget), as the TOA keeps the
paper's 120k-character chunks for such models."""
MIN_VIEW_TOKENS = 200
_HEADER_ROOM = 80  # characters (or tokens) kept for the intro line's "N events are not shown" note


@dataclass(frozen=True, slots=True)
class TimelineView:
    """The rendered text, the ids it shows (the only ones a call may cite) and how many events were left out."""

    text: str
    shown_ids: frozenset[str]
    omitted: int


def event_line(event: TimelineEvent, *, with_refs: bool = False) -> str:
    """One timeline event on one line, as every prompt and printout shows it (whitespace in the description folded):
    ``[t3] 2020-03-10 histology/adenocarcinoma: Adenocarcinoma on biopsy``, plus ``(sources e11, e12)`` — the graph
    ids behind the event — with ``with_refs``."""
    description = " ".join(event.description.split())
    line = f"[{event.event_id}] {event.date.isoformat()} {event.type}/{event.subtype}: {description}"
    if with_refs:
        line += f" (sources {', '.join(event.source_event_refs)})"
    return line


def episode_header(episode: Episode) -> str:
    """``Episode ep2: treatment line 1, 2020-04-01 to 2020-09-30`` (the heading of an episode's events)."""
    kind = "post-oncological" if episode.kind.value == "post_oncological" else episode.kind.value.replace("_", " ")
    kind += f" {episode.line}" if episode.line is not None else ""
    return f"Episode {episode.episode_id}: {kind}, {episode.start.isoformat()} to {episode.end.isoformat()}"


def fitted_view_size(context_tokens: int | None, *, answer_tokens: int, prompt_tokens: int) -> ChunkSize | None:
    """The token budget of a view that fits a ``context_tokens`` window next to the prompt and the answer; None
    (no cut) when the window is unknown or large enough for any timeline (`WHOLE_TIMELINE_CONTEXT`).

    Raises `ChunkingError` when the window leaves no room for a timeline at all."""
    if context_tokens is None or context_tokens >= WHOLE_TIMELINE_CONTEXT:
        return None
    room = context_tokens - answer_tokens - prompt_tokens
    if room < MIN_VIEW_TOKENS:
        raise ChunkingError(f"a {context_tokens}-token context leaves {room} tokens for the timeline after a "
                            f"{prompt_tokens}-token prompt and a {answer_tokens}-token answer; lower max_tokens or "
                            "use a model with a longer context")
    return ChunkSize(limit=room, unit="tokens")


def _round_robin(groups: Sequence[list[TimelineEvent]]) -> list[TimelineEvent]:
    out, depth = [], max((len(g) for g in groups), default=0)
    for k in range(depth):
        out.extend(g[k] for g in groups if k < len(g))
    return out


def priority(timeline: PatientTimeline, essential_types: Sequence[str] = ESSENTIAL_TYPES,
             context_types: Sequence[str] = CONTEXT_TYPES) -> list[TimelineEvent]:
    """Every event once, in the order it is kept when the view must be cut (see the module docstring)."""
    ordered = sorted(timeline.events, key=lambda e: (e.date, e.event_id))
    by_type = {kind: [e for e in ordered if e.type == kind] for kind in essential_types}
    # each essential type's first and latest event come before the middle ones (diagnosis at t0 and a restaging later)
    ends = [[g[0], g[-1]] if len(g) > 1 else list(g) for g in by_type.values()]
    middles = [list(reversed(g[1:-1])) for g in by_type.values()]
    anchors = {ep.anchor_event_id for ep in timeline.episodes
               if ep.anchor_event_id and ep.kind is not EpisodeKind.BASELINE}
    tiers = [*_round_robin(ends), *_round_robin(middles), *(e for e in ordered if e.event_id in anchors),
             *(e for e in ordered if e.type in context_types), *reversed(ordered)]
    return list({e.event_id: e for e in tiers}.values())  # first place wins: dicts keep insertion order


def timeline_view(timeline: PatientTimeline, max_events: int | None = None, max_chars: int | None = None, *,
                  budget: ChunkSize | None = None, essential_types: Sequence[str] = ESSENTIAL_TYPES,
                  context_types: Sequence[str] = CONTEXT_TYPES) -> TimelineView:
    """The timeline rendered for a prompt within ``max_events`` events and ``budget`` (or ``max_chars`` characters;
    neither: the whole timeline). A token budget is checked on the rendered text, so the view never exceeds it."""
    if budget is None and max_chars is not None:
        budget = ChunkSize(limit=max_chars, unit="chars")
    lines = {e.event_id: event_line(e) for e in timeline.events}
    keep = priority(timeline, essential_types, context_types)
    if max_events is not None:
        keep = keep[:max_events]
    if budget is None:
        return _render(timeline, {e.event_id for e in keep}, lines)
    size = _sizer(budget)
    headers = [episode_header(ep) for ep in timeline.episodes]
    room = budget.limit - sum(size(headers + [UNASSIGNED])) - _HEADER_ROOM
    costs = dict(zip([e.event_id for e in keep], size([lines[e.event_id] for e in keep]), strict=True))
    shown: list[str] = []
    for event in keep:
        if costs[event.event_id] <= room:
            shown.append(event.event_id)
            room -= costs[event.event_id]
    view = _render(timeline, set(shown), lines)
    while shown and budget.size(view.text) > budget.limit:  # token counts of joined lines can differ slightly
        shown.pop()
        view = _render(timeline, set(shown), lines)
    return view


def _sizer(budget: ChunkSize) -> Callable[[list[str]], list[int]]:
    if budget.unit == "chars":
        return lambda texts: [len(t) + 1 for t in texts]
    return lambda texts: [int(n) + 1 for n in count_tokens_batch(texts)] if texts else []


def _render(timeline: PatientTimeline, shown: set[str], lines: dict[str, str]) -> TimelineView:
    omitted = len(timeline.events) - len(shown)
    intro = f"Timeline of {len(timeline.events)} events in {len(timeline.episodes)} episodes."
    if omitted:
        intro += (f" {omitted} events are not shown (diagnosis, histology, stage, biomarkers, each episode's first "
                  "event, background facts and the latest events are).")
    out = [intro]
    order = _order(timeline)
    placed: set[str] = set()
    for episode in timeline.episodes:
        members = [i for i in episode.event_ids if i in shown]
        placed.update(episode.event_ids)
        if members:
            out.append(episode_header(episode))
            out.extend(lines[i] for i in sorted(members, key=order))
    stray = [e.event_id for e in timeline.events if e.event_id not in placed and e.event_id in shown]
    if stray:
        out.append(UNASSIGNED)
        out.extend(lines[i] for i in sorted(stray, key=order))
    return TimelineView("\n".join(out), frozenset(shown), omitted)


def _order(timeline: PatientTimeline):
    position = {e.event_id: (e.date, k) for k, e in enumerate(timeline.events)}
    return position.__getitem__
