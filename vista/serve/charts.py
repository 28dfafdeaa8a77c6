"""The patient page's two drawings as plain geometry (the template turns it into inline SVG): the TOA timeline drawn
by episode with one marker shape and colour per event type, and lab/vital trends straight from the graph's numeric
events (no model call). Inline SVG, not a plotting library: it needs no JavaScript, no CDN and no 4 MB bundle, it
renders the same served or exported, and every marker can carry the citation it opens.

>>> x = Scale(dt.date(2020, 1, 1), dt.date(2020, 1, 11), 100.0, 300.0)
>>> x(dt.date(2020, 1, 6))
200.0
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vista.graph import NodeType, PatientGraph
from vista.toa import EpisodeKind, PatientTimeline

WIDTH = 960
LEFT = 130
RIGHT = 20
LANE = 24
TOP = 34
SHAPES = ("circle", "square", "diamond", "triangle")
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f", "#393b79", "#637939", "#843c39")
EPISODE_FILL = {EpisodeKind.BASELINE: "#eef2f7", EpisodeKind.DIAGNOSIS: "#fdf1dc",
                EpisodeKind.TREATMENT_LINE: "#e3f1e3", EpisodeKind.POST_ONCOLOGICAL: "#efe6f5"}


class Scale:
    """Dates to x pixels, linear between ``lo`` and ``hi`` (a one-day range is widened so nothing divides by 0)."""

    def __init__(self, lo: dt.date, hi: dt.date, x0: float, x1: float):
        self.lo, self.x0, self.x1 = lo, x0, x1
        self.days = max((hi - lo).days, 1)

    def __call__(self, day: dt.date) -> float:
        return round(self.x0 + (day - self.lo).days / self.days * (self.x1 - self.x0), 1)


@dataclass(frozen=True, slots=True)
class Band:
    """An episode drawn as a background band with its label."""

    x: float
    width: float
    fill: str
    label: str
    title: str
    label_x: float
    anchor: str


@dataclass(frozen=True, slots=True)
class Marker:
    """A timeline event: where, which shape and colour (by type), its tooltip and the citation it opens."""

    x: float
    y: float
    shape: str
    color: str
    title: str
    cite: str
    event_id: str


@dataclass(frozen=True, slots=True)
class Lane:
    y: float
    label: str
    shape: str
    color: str


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True, slots=True)
class TimelineChart:
    width: int
    height: int
    bands: tuple[Band, ...]
    lanes: tuple[Lane, ...]
    markers: tuple[Marker, ...]
    ticks: tuple[Tick, ...]


def _ticks(lo: dt.date, hi: dt.date, scale: Scale, *, most: int = 8) -> tuple[Tick, ...]:
    """Month or year ticks, at most ``most``."""
    months = (hi.year - lo.year) * 12 + hi.month - lo.month + 1
    step = max(1, -(-months // most))
    if step >= 12:
        step = 12 * -(-step // 12)
    out = []
    year, month = lo.year, lo.month
    while (year, month) <= (hi.year, hi.month):
        day = dt.date(year, month, 1)
        if day >= lo:
            out.append(Tick(scale(day), day.strftime("%Y" if step >= 12 else "%b %Y")))
        month += step
        year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    return tuple(out[:most + 1])


def episode_label(kind: EpisodeKind, line: int | None) -> str:
    """The label of an episode band.

    >>> episode_label(EpisodeKind.TREATMENT_LINE, 2), episode_label(EpisodeKind.POST_ONCOLOGICAL, None)
    ('line 2', 'post-treatment')
    """
    if kind is EpisodeKind.TREATMENT_LINE:
        return f"line {line}"
    return {EpisodeKind.BASELINE: "baseline", EpisodeKind.DIAGNOSIS: "diagnosis",
            EpisodeKind.POST_ONCOLOGICAL: "post-treatment"}[kind]


def timeline_chart(timeline: PatientTimeline, cites: dict[str, str]) -> TimelineChart | None:
    """The timeline drawn by episode (bands) with one lane per event type (markers); ``cites`` maps a timeline event
    id to the citation panel its marker opens. None when the timeline has no event."""
    events = timeline.events
    if not events:
        return None
    days = [e.date for e in events] + [d for ep in timeline.episodes for d in (ep.start, ep.end)]
    lo, hi = min(days), max(days)
    pad = dt.timedelta(days=max(3, (hi - lo).days // 40))
    lo, hi = lo - pad, hi + pad
    scale = Scale(lo, hi, LEFT, WIDTH - RIGHT)
    types = list(dict.fromkeys(e.type for e in sorted(events, key=lambda e: e.date)))
    lanes = {t: Lane(TOP + 12 + k * LANE, t.replace("_", " "), SHAPES[k % len(SHAPES)], PALETTE[k % len(PALETTE)])
             for k, t in enumerate(types)}
    height = TOP + 12 + len(types) * LANE + 10
    bands = []
    for episode in timeline.episodes:
        x0, x1 = scale(episode.start), scale(episode.end + dt.timedelta(days=1))
        label = episode_label(episode.kind, episode.line)
        near_end = x0 + 8 * len(label) > WIDTH - RIGHT  # a label that would run off the right edge ends there
        bands.append(Band(x0, max(x1 - x0, 2.0), EPISODE_FILL[episode.kind], label,
                          f"{label}: {episode.start.isoformat()} to {episode.end.isoformat()} "
                          f"({len(episode.event_ids)} events)", WIDTH - 2 if near_end else x0 + 3,
                          "end" if near_end else "start"))
    markers = tuple(Marker(scale(e.date), lanes[e.type].y, lanes[e.type].shape, lanes[e.type].color,
                           f"{e.date.isoformat()} {e.type}/{e.subtype}: {e.description}", cites.get(e.event_id, ""),
                           e.event_id) for e in events)
    return TimelineChart(WIDTH, height, tuple(bands), tuple(lanes.values()), markers, _ticks(lo, hi, scale))


@dataclass(frozen=True, slots=True)
class Point:
    x: float
    y: float
    title: str
    event_id: str


@dataclass(frozen=True, slots=True)
class TrendChart:
    """One lab or vital over time: a polyline, its points (each opens its source row), the value range and dates."""

    code: str
    label: str
    unit: str
    count: int
    path: str
    points: tuple[Point, ...]
    lo: float
    hi: float
    first: str
    last: str


TREND_W, TREND_H, TREND_PAD = 300, 90, 8
MAX_POINTS = 150
"""Points drawn per trend (clickable markers); beyond it only the line is drawn through every value."""


def trend_charts(graph: PatientGraph, *, most: int = 6) -> list[TrendChart]:
    """The ``most`` numeric codes with the most timed values (at least two), each as a small chart — read straight
    from the graph's node table (numpy/arrow, no event objects), no model call."""
    nodes = graph.nodes
    numeric = pc.and_(pc.equal(nodes.column("type"), NodeType.EVENT.code),
                      pc.and_(pc.is_valid(nodes.column("value")), pc.is_valid(nodes.column("time"))))
    table = nodes.filter(numeric).select(["id", "time", "code", "value", "unit"])
    if table.num_rows == 0:
        return []
    codes = table.column("code").to_pylist()
    chosen = [c for c, n in Counter(codes).most_common() if n >= 2][:most]
    out = []
    for code in chosen:
        rows = table.filter(pc.equal(table.column("code"), code))
        times = rows.column("time").cast(pa.int64()).to_numpy()
        values = rows.column("value").to_numpy()
        ids = rows.column("id").to_pylist()
        unit = next((u for u in rows.column("unit").to_pylist() if u), "")
        order = np.argsort(times, kind="stable")
        times, values = times[order], values[order]
        t0, t1 = float(times[0]), float(times[-1])
        v0, v1 = float(values.min()), float(values.max())
        xs = TREND_PAD + (times - t0) / max(t1 - t0, 1.0) * (TREND_W - 2 * TREND_PAD)
        ys = TREND_H - TREND_PAD - (values - v0) / (v1 - v0 if v1 > v0 else 1.0) * (TREND_H - 2 * TREND_PAD)
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys))
        stamps = rows.column("time").take(pa.array(order)).to_pylist()
        step = max(1, len(order) // MAX_POINTS)
        points = tuple(Point(round(float(xs[k]), 1), round(float(ys[k]), 1),
                             f"{stamps[k]:%Y-%m-%d}: {values[k]:g} {unit}".strip(), ids[int(order[k])])
                       for k in range(0, len(order), step))
        description = _describe(graph, code)
        out.append(TrendChart(code, description, unit, len(order), path, points, v0, v1,
                              f"{stamps[0]:%Y-%m-%d}", f"{stamps[-1]:%Y-%m-%d}"))
    return out


def _describe(graph: PatientGraph, code: str) -> str:
    try:
        return graph.code(code).description or code
    except KeyError:
        return code

