"""The insights' figures of one run, with ids and captions, and writing them (plus ``insights.json``) to a folder.

Only the analyses that ran get a figure; the others are explained by their ``reason`` (see `section`). The
risk-flow figure always exists: its counts are honest at any n (the n is on it).
"""

from __future__ import annotations

import re
from pathlib import Path

from vista.shared.atomic import atomic_write_bytes, atomic_write_text
from trajonco.insights import figures
from trajonco.insights.analysis import Insights
from trajonco.insights.results import METHOD_NAMES
from trajonco.report_document import Figure


def slug(text: str) -> str:
    """A file- and anchor-safe name.

    >>> slug("lung · one_stage · smollm2-135m")
    'lung-one-stage-smollm2-135m'
    """
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "run"


def render_figures(insights: Insights, *, prefix: str = "fig-insights") -> list[Figure]:
    """The figures of the analyses that ran, in the order of the report section."""
    r = insights.result
    n = r.n.text()
    found: list[Figure] = []
    if r.topics.status == "ok":
        found.append(Figure(f"{prefix}-topics", f"Topics of the extracted events ({r.topics.n_topics} NMF "
                                   f"topics over {r.topics.n_events} events) and their prevalence among cases and "
                                   f"controls — {r.run}, {n}", figures.topics_figure(r.topics, r.n)))
    if r.embedding.map_status == "ok":
        e = r.embedding
        embedded = f"{sum(p.case for p in e.points)} cases / {sum(not p.case for p in e.points)} controls embedded"
        found.append(Figure(f"{prefix}-map", f"{(e.map_method or '').upper()} map of the patients' "
                                   f"{METHOD_NAMES.get(e.method, e.method)} embeddings — {r.run}, {n} ({embedded})"
                                   + (f" ({e.notice})" if e.notice else ""), figures.map_figure(e, r.n)))
    if insights.similarity is not None:
        s = r.similarity
        found.append(Figure(f"{prefix}-similarity", f"Cosine similarity between patients, cases then "
                                   f"controls, {s.n_clusters} clusters — {r.run}, {s.n.text()} with events",
                                   figures.heatmap_figure(insights.similarity, s.n)))
    found.append(Figure(f"{prefix}-transitions", f"Risk transitions across chunks to the final score "
                               f"({r.transitions.final_bands}) — {r.run}, {n}",
                               figures.flow_figure(r.transitions)))
    return found


def write_insights(insights: Insights, out: Path) -> tuple[Path, list[Path]]:
    """``insights.json`` and one PNG per figure under ``out`` (created); returns their paths."""
    json_path = atomic_write_text(out / "insights.json", insights.result.model_dump_json(indent=1))  # private
    pngs = []
    for figure in render_figures(insights):
        path = atomic_write_bytes(out / f"{figure.id}.png", figure.png)
        pngs.append(path)
    return json_path, pngs
