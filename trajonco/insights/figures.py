"""The insights' figures (matplotlib, Agg), each returned as PNG bytes.

One palette everywhere: cases are always `CASE_COLOR`, controls `CONTROL_COLOR`, and each risk state has its own
colour (`STATE_COLORS`). Every figure states its n (cases / controls). Figures draw the result models (and the
heatmap its matrix): they never recompute a number.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Patch, Rectangle  # noqa: E402

from trajonco.insights.results import (METHOD_NAMES, EmbeddingResult, GroupCounts, TopicsResult,  # noqa: E402
                                       TransitionsResult)
from trajonco.insights.similarity import SimilarityMatrix  # noqa: E402
from trajonco.insights.transitions import FAILED, NO_RECORD, STATES  # noqa: E402

DPI = 110
CASE_COLOR = "#c0392b"
CONTROL_COLOR = "#2e86c1"
GROUP_COLORS = {True: CASE_COLOR, False: CONTROL_COLOR}
STATE_COLORS = {NO_RECORD: "#d9d9d9", FAILED: "#7f7f7f", "Low": "#fdd49e", "Moderate": "#fc8d59", "High": "#b30000"}


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def topics_figure(topics: TopicsResult, n: GroupCounts) -> bytes:
    """Share of cases and of controls with at least one event on each topic (topics named by their top terms)."""
    shown = topics.topics
    fig, ax = plt.subplots(figsize=(8.5, 0.55 * len(shown) + 1.6), layout="constrained")
    y = np.arange(len(shown))
    cases = [t.prevalence_cases or 0.0 for t in shown]
    controls = [t.prevalence_controls or 0.0 for t in shown]
    ax.barh(y - 0.2, cases, height=0.38, color=CASE_COLOR, label=f"cases (n = {n.cases})")
    ax.barh(y + 0.2, controls, height=0.38, color=CONTROL_COLOR, label=f"controls (n = {n.controls})")
    ax.set_yticks(y, [f"T{t.index}: {t.name} ({t.n_events} ev.)" for t in shown], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of patients with ≥1 event on the topic")
    ax.set_title(f"Topics of the agents' extracted events (NMF, {topics.n_events} events) — {n.text()}", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def map_figure(embedding: EmbeddingResult, n: GroupCounts) -> bytes:
    """The patients' 2-D map, coloured by case/control."""
    fig, ax = plt.subplots(figsize=(6.4, 5.4), layout="constrained")
    for case in (False, True):
        points = [p for p in embedding.points if p.case == case]
        ax.scatter([p.x for p in points], [p.y for p in points], s=22, alpha=0.8, color=GROUP_COLORS[case],
                   edgecolors="white", linewidths=0.4, label=f"{'cases' if case else 'controls'} (n = {len(points)})")
    method = (embedding.map_method or "").upper()
    ax.set(xlabel=f"{method} 1", ylabel=f"{method} 2", xticks=[], yticks=[])
    left_out = embedding.n_without_events
    vectors = METHOD_NAMES.get(embedding.method, embedding.method)
    ax.set_title(f"Patients' extracted events ({vectors}) mapped with {method} — {n.text()}"
                 + (f"\n(no usable event text, not shown: {left_out.cases} cases / {left_out.controls} controls)"
                    if left_out.cases or left_out.controls else ""), fontsize=9)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], fontsize=8)  # cases first, as everywhere
    return _png(fig)


def heatmap_figure(found: SimilarityMatrix, n: GroupCounts) -> bytes:
    """Cosine similarity of the patients' embeddings, cases first then controls, each grouped by cluster."""
    order = found.order
    matrix = found.matrix[np.ix_(order, order)]
    labels = found.cases[order]
    fig, (strip, ax) = plt.subplots(1, 2, figsize=(7.2, 6.2), width_ratios=[0.04, 1], layout="constrained")
    strip.imshow(np.array([[matplotlib.colors.to_rgb(GROUP_COLORS[bool(c)])] for c in labels]), aspect="auto",
                 interpolation="nearest")
    strip.set_axis_off()
    image = ax.imshow(matrix, vmin=0.0, vmax=1.0, cmap="viridis", interpolation="nearest")
    split = int(labels.sum()) - 0.5
    if 0 < labels.sum() < len(labels):
        ax.axhline(split, color="white", lw=1.2)
        ax.axvline(split, color="white", lw=1.2)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(f"Patient similarity (cosine) — {n.text()}\ncases then controls, grouped by cluster", fontsize=9)
    fig.colorbar(image, ax=ax, shrink=0.8, label="cosine similarity")
    fig.legend(handles=[Patch(color=CASE_COLOR, label="case"), Patch(color=CONTROL_COLOR, label="control")],
               loc="outside lower center", ncols=2, fontsize=8)
    return _png(fig)


def _node_counts(transitions: TransitionsResult, case: bool) -> list[dict[str, int]]:
    """Patients per state in each flow column for one label."""
    def count(link) -> int:
        return link.cases if case else link.controls

    columns: list[dict[str, int]] = [dict.fromkeys(STATES, 0) for _ in transitions.columns]
    for link in transitions.flows:  # column 0 counts what leaves it, every other column what enters it
        if link.column == 0:
            columns[0][link.source] += count(link)
        columns[link.column + 1][link.target] += count(link)
    if len(columns) == 1:  # no chunk at all (e.g. single-agent runs): only the final bands
        for step in transitions.transitions:
            if step.step == "final":
                columns[0][step.target] += step.cases if case else step.controls
    return columns


def _smooth(a: float, b: float, t: np.ndarray) -> np.ndarray:
    return a + (b - a) * (3 * t**2 - 2 * t**3)


def _flow_panel(ax, transitions: TransitionsResult, case: bool, total: int) -> None:
    width, gap = 0.12, 0.03
    nodes = _node_counts(transitions, case)
    spans: list[dict[str, tuple[float, float]]] = []
    for x, counts in enumerate(nodes):
        bottom, span = 0.0, {}
        for state in STATES:
            if counts[state]:
                height = counts[state] / total
                span[state] = (bottom, height)
                ax.add_patch(Rectangle((x - width / 2, bottom), width, height, color=STATE_COLORS[state], lw=0))
                if height > 0.06:
                    ax.text(x + width / 2 + 0.02, bottom + height / 2, f"{state} {counts[state]}", fontsize=6.5,
                            va="center")
                bottom += height + gap
        spans.append(span)
    t = np.linspace(0, 1, 40)
    out_offset = {(x, s): 0.0 for x in range(len(nodes)) for s in STATES}
    in_offset = dict(out_offset)
    rank = {s: i for i, s in enumerate(STATES)}
    links = sorted(transitions.flows, key=lambda f: (f.column, rank[f.source], rank[f.target]))
    for link in links:
        value = (link.cases if case else link.controls) / total
        if not value:
            continue
        x0, x1 = link.column, link.column + 1
        y0 = spans[x0][link.source][0] + out_offset[(x0, link.source)]
        y1 = spans[x1][link.target][0] + in_offset[(x1, link.target)]
        out_offset[(x0, link.source)] += value
        in_offset[(x1, link.target)] += value
        xs = x0 + width / 2 + t * (1 - width)
        ax.fill_between(xs, _smooth(y0, y1, t), _smooth(y0 + value, y1 + value, t), color=STATE_COLORS[link.source],
                        alpha=0.45, lw=0)
    ax.set_xlim(-0.4, len(nodes) - 0.3)
    ax.set_ylim(0, 1 + gap * (len(STATES) - 1))
    ax.set_xticks(range(len(nodes)), transitions.columns, fontsize=8)
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"{'Cases' if case else 'Controls'} (n = {total})", color=GROUP_COLORS[case], fontsize=10)


def flow_figure(transitions: TransitionsResult) -> bytes:
    """Sankey-like flows of risk states over the last chunks to the final score band, cases and controls apart."""
    groups = [(True, transitions.n.cases), (False, transitions.n.controls)]
    shown = [(case, total) for case, total in groups if total]
    fig, axes = plt.subplots(1, len(shown), figsize=(5.6 * len(shown), 4.4), layout="constrained", squeeze=False)
    for ax, (case, total) in zip(axes[0], shown):
        _flow_panel(ax, transitions, case, total)
    fig.suptitle(f"Worker risk per chunk (aligned on the last chunk) → final score band — {transitions.n.text()}",
                 fontsize=10)
    fig.legend(handles=[Patch(color=STATE_COLORS[s], label=s) for s in STATES], loc="outside lower center",
               ncols=len(STATES), fontsize=8)
    return _png(fig)
