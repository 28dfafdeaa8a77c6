"""One patient's page as data: the tumor-board variables with their citations, the TOA timeline and lab trends as
drawings, the summary note, the latest source events, and a source panel for every citation on the page.

Every citation panel is computed here, from the patient's current graph, so a page (served or exported) opens each
claim's source events without another request. The page is pinned to the graph's version (`graph_version`): the
panels say which, and a request for sources made against another version is refused (`source_panel`) as
`vista source` refuses stale refs. A stored timeline or display built from another version of the graph is not
shown: the page says it is stale and how to rebuild it, and shows what the graph alone holds.

Nothing here calls a model or logs patient text.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from vista.display.model import DisplayError, VariableSpec, VariableValue, load_variables
from vista.display.store import DisplayStore
from vista.graph import NodeType, PatientGraph
from vista.query.sources import open_sources, version_tag
from vista.query.model import SourceEvent
from vista.serve.charts import TimelineChart, TrendChart, episode_label, timeline_chart, trend_charts
from vista.toa import PatientTimeline, TimelineFileError, TimelineStore
from vista.toa.errors import StaleProvenanceError
from vista.toa.refs import graph_version

TOP_ITEMS = 3
"""List values show this many items, the rest behind "more"."""
NOTE_CHARS = 20_000
"""Characters of a cited note shown in its source panel (the rest is marked as cut)."""
RECENT_EVENTS = 150
LIST_SPLIT = re.compile(r"\s*;\s*|\n+")
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9.%+-]{2,}")


@dataclass(frozen=True, slots=True)
class TextPart:
    """A run of note text; ``marked`` when it is the span the claim cites."""

    text: str
    marked: bool


@dataclass(frozen=True, slots=True)
class OpenedSource:
    """A source event opened for a panel: the event (with provenance), its text cut in parts, and the section title
    of the marked span (None when nothing is marked)."""

    event: SourceEvent
    parts: tuple[TextPart, ...]
    span_title: str | None
    cut: bool


@dataclass(frozen=True, slots=True)
class SourcePanel:
    """What clicking a value or an event shows: the claim, its timeline events, and its source events."""

    cite_id: str
    claim: str
    timeline: tuple[str, ...]
    sources: tuple[OpenedSource, ...]
    version: str


@dataclass(frozen=True, slots=True)
class VariableRow:
    """A tumor-board variable as shown: its label, value (``Not found`` when uncited), items of a list value (the
    first `TOP_ITEMS` shown, the rest behind "more"), origin, and the citation panel it opens."""

    key: str
    label: str
    value: str
    items: tuple[str, ...]
    origin: str
    note: str | None
    cite: str | None
    refs: str


@dataclass(frozen=True, slots=True)
class EventRow:
    event_id: str
    time: str
    kind: str
    code: str
    description: str
    value: str
    excerpt: str | None


@dataclass
class PatientPage:
    """Everything the patient template shows."""

    subject_id: int
    version: str
    source: str
    nodes: int
    demographics: str
    notices: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    tumor_board: list[VariableRow] = field(default_factory=list)
    patient_info: list[VariableRow] = field(default_factory=list)
    summary: str | None = None
    summary_cite: str | None = None
    timeline: TimelineChart | None = None
    episodes: list[str] = field(default_factory=list)
    trends: list[TrendChart] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)
    total_events: int = 0
    panels: list[SourcePanel] = field(default_factory=list)
    display_model: str | None = None


def short_version(version: str) -> str:
    """The 12-character graph version a page and its source links carry (as `vista ask` prints it)."""
    return version_tag(version)[1:]


def claim_words(claim: str) -> set[str]:
    """Lower-case words (3+ characters) of a claim, to find the span of a note it rests on.

    >>> sorted(claim_words("Adenocarcinoma, PD-L1 80%"))
    ['80%', 'adenocarcinoma', 'pd-l1']
    """
    return {w.lower() for w in WORD.findall(claim)}


def marked_parts(graph: PatientGraph, event: SourceEvent, text: str, claim: str) -> tuple[tuple[TextPart, ...], str | None]:
    """A note's text cut in parts, the section sharing the most words with ``claim`` marked as the cited span (no
    mark when no section shares one); other texts are one unmarked part."""
    words = claim_words(claim)
    if event.kind != "note" or not words:
        return (TextPart(text, False),), None
    best, best_score = None, 0
    for section in graph.sections(event.event_id):
        score = len(words & claim_words(section.text))
        if score > best_score:
            best, best_score = section, score
    if best is None:
        return (TextPart(text, False),), None
    start, end = best.span
    start, end = min(start, len(text)), min(end, len(text))
    parts = tuple(p for p in (TextPart(text[:start], False), TextPart(text[start:end], True),
                              TextPart(text[end:], False)) if p.text)
    return parts, best.title or "opening lines"


def source_panel(graph: PatientGraph, cite_id: str, claim: str, refs: Sequence[str], *,
                 timeline: Sequence[str] = (), pinned: str | None = None) -> SourcePanel:
    """The panel of a claim citing ``refs`` (graph event ids): each event opened with its provenance, notes with
    the cited span marked. ``pinned``: the graph version the refs were made against (a 12+ character prefix);
    another version is refused (`StaleProvenanceError`), as `vista source` refuses it."""
    items = [*refs, *([f"@{pinned}"] if pinned else [])]
    opened = open_sources(graph, items, excerpt_chars=NOTE_CHARS)
    full = {e.event_id: graph.event(e.event_id).text for e in opened}
    sources = []
    for event in opened:
        text = full[event.event_id] or ""
        shown = text[:NOTE_CHARS]
        parts, title = marked_parts(graph, event, shown, claim) if shown else ((), None)
        sources.append(OpenedSource(event, parts, title, len(text) > NOTE_CHARS))
    return SourcePanel(cite_id, claim, tuple(timeline), tuple(sources), short_version(graph_version(graph)))


def _items(value: str) -> tuple[str, ...]:
    """The items of a list value (``;`` or line separated); one item for a plain value.

    >>> _items("EGFR negative; PD-L1 80%; ALK negative"), _items("Stage IVB")
    (('EGFR negative', 'PD-L1 80%', 'ALK negative'), ('Stage IVB',))
    """
    parts = tuple(p for p in LIST_SPLIT.split(value.strip()) if p)
    return parts or (value,)


class _Citations:
    """Numbers the page's citation panels and builds each once."""

    def __init__(self, graph: PatientGraph, timeline: PatientTimeline | None):
        self.graph = graph
        self.events = {e.event_id: e for e in timeline.events} if timeline is not None else {}
        self.panels: list[SourcePanel] = []

    def add(self, claim: str, timeline_refs: Iterable[str], source_refs: Iterable[str]) -> str | None:
        tl = [r for r in timeline_refs if r in self.events]
        refs = list(dict.fromkeys([*source_refs, *(r for t in tl for r in self.events[t].source_event_refs)]))
        refs = [r for r in refs if self.graph.has_event(r)]
        if not refs:
            return None
        cite_id = f"cite-{len(self.panels)}"
        lines = tuple(f"{t}: {self.events[t].date.isoformat()} {self.events[t].type} — {self.events[t].description}"
                      for t in tl)
        self.panels.append(source_panel(self.graph, cite_id, claim, refs, timeline=lines))
        return cite_id


def _variable_row(value: VariableValue, spec: VariableSpec | None, cites: _Citations) -> VariableRow:
    label = spec.label if spec is not None else value.key
    shown = value.shown
    note = None
    if value.origin == "failed":
        note = f"failed: {value.error}" if value.error else "failed"
    elif value.uncited:
        note = "the model's answer cited no event it was shown"
    cite = None if value.uncited else cites.add(f"{label}: {shown}", value.timeline_refs, value.source_refs)
    refs = ", ".join([*value.timeline_refs, *value.source_refs])
    return VariableRow(value.key, label, shown, _items(shown), "uncited" if value.uncited else value.origin, note,
                       cite, refs)


def _demographics(graph: PatientGraph) -> str:
    d = graph.info.demographics
    parts = [p for p in (d.sex, f"born {d.birth.isoformat()}" if d.birth else None, d.race, d.ethnicity,
                         f"died {d.death.isoformat()}" if d.death else None) if p]
    return ", ".join(parts) or "no demographics recorded"


def _events(graph: PatientGraph, limit: int) -> tuple[list[EventRow], int]:
    """The latest ``limit`` source events (newest first), from the node table without building every event."""
    types = graph.nodes.column("type").to_numpy()
    wanted = {NodeType.EVENT.code, NodeType.NOTE.code, NodeType.ENCOUNTER.code}
    rows = np.flatnonzero(np.isin(types, list(wanted)) & graph.nodes.column("row").is_valid().to_numpy(
        zero_copy_only=False))
    ids = graph.nodes.column("id")
    out = []
    for i in rows[::-1][:limit]:
        event = graph.event(ids[int(i)].as_py())
        value = f"{event.value:g} {event.unit or ''}".strip() if event.value is not None else ""
        excerpt = event.text[:400] if event.text else None
        out.append(EventRow(event.event_id, f"{event.time:%Y-%m-%d %H:%M}" if event.time else "static",
                            event.type.value, event.code, event.description or "", value, excerpt))
    return out, len(rows)


def patient_page(root: str | os.PathLike, graph: PatientGraph, *, variables: Sequence[VariableSpec] | None = None,
                 recent: int = RECENT_EVENTS) -> PatientPage:
    """The page of the patient whose current graph is ``graph``, in the store at ``root``."""
    subject_id = graph.subject_id
    version = graph_version(graph)
    page = PatientPage(subject_id, short_version(version), graph.info.source, graph.n_nodes, _demographics(graph))
    timeline = _stored(TimelineStore(root), graph, page, "timeline")
    display = _stored(DisplayStore(root), graph, page, "display")
    cites = _Citations(graph, timeline)
    if display is not None:
        specs = {s.key: s for s in (variables if variables is not None else _variables())}
        for value in display.values:
            spec = specs.get(value.key)
            row = _variable_row(value, spec, cites)
            (page.patient_info if spec is not None and spec.section == "patient" else page.tumor_board).append(row)
        page.summary = display.summary_note or None
        if display.summary_note:
            page.summary_cite = cites.add(f"Summary: {display.summary_note}", display.summary_refs, ())
        if (gaps := display.incomplete_reason()) is not None:
            page.notices.append(f"Incomplete display: {gaps}")
        page.display_model = display.model
    if timeline is not None:
        marker_cites = {e.event_id: cites.add(f"{e.event_id} {e.date.isoformat()} {e.type}: {e.description}",
                                              (e.event_id,), ()) or "" for e in timeline.events}
        page.timeline = timeline_chart(timeline, marker_cites)
        page.episodes = [f"{episode_label(ep.kind, ep.line)}: {ep.start.isoformat()} to {ep.end.isoformat()} "
                         f"({len(ep.event_ids)} events)" for ep in timeline.episodes]
        if (gaps := timeline.incomplete_reason()) is not None:
            page.notices.append(f"Incomplete timeline: {gaps}")
    page.trends = trend_charts(graph)
    page.events, page.total_events = _events(graph, recent)
    page.panels = cites.panels
    return page


def _variables() -> tuple[VariableSpec, ...]:
    try:
        return load_variables()
    except DisplayError:
        return ()


def _stored(store: TimelineStore | DisplayStore, graph: PatientGraph, page: PatientPage, noun: str):
    """The stored timeline or display of the page's patient, checked against its graph; None (and a line on the
    page saying why and how to build it) when missing, unreadable or built from another version of the graph."""
    sid = graph.subject_id
    hint = f"`vista {noun} --store {store.root} --subject {sid}`"
    if not store.path_of(sid).is_file():
        page.missing.append(f"No {noun} built yet: {hint} builds it.")
        return None
    try:
        return store.load(sid, graph)
    except StaleProvenanceError as exc:
        page.notices.append(f"Stale {noun}, not shown: {exc}")
    except (TimelineFileError, DisplayError) as exc:
        page.notices.append(f"Unreadable {noun}, not shown: {exc}")
    return None

