"""The report section of the population insights: a `trajonco.report_document.Section` (the report renders it)."""

from __future__ import annotations

from collections.abc import Sequence

from trajonco.insights.analysis import Insights
from trajonco.insights.render import render_figures, slug
from trajonco.insights.results import METHOD_NAMES, InsightsResult
from trajonco.report_document import Section, Table

SECTION_ID = "insights"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _topic_table(r: InsightsResult, key: str) -> Table:
    return Table(f"table-insights-{key}-topics", f"Topics of the extracted events — {r.run} ({r.n.text()})",
                      ["topic", "top terms", "events", "cases with", "controls with"],
                      [[f"T{t.index}", ", ".join(t.top_terms), str(t.n_events),
                        f"{t.cases_with} ({_pct(t.prevalence_cases)})",
                        f"{t.controls_with} ({_pct(t.prevalence_controls)})"] for t in r.topics.topics],
                      note="Share of the run's cases (controls) with at least one event whose dominant NMF topic "
                           "is this one.")


def _transition_table(r: InsightsResult, key: str) -> Table:
    t = r.transitions
    rows = [[("chunk → chunk" if x.step == "chunk" else "last chunk → final"), x.source, x.target, str(x.cases),
             str(x.controls)] for x in t.transitions]
    p = t.patterns
    rows += [[f"first → last chunk: {name}", "", "", str(g.cases), str(g.controls)]
             for name, g in (("escalated", p.escalated), ("stable", p.stable), ("de-escalated", p.de_escalated))]
    return Table(f"table-insights-{key}-transitions", f"Risk transitions — {r.run} ({t.n.text()})",
                      ["step", "from", "to", "cases", "controls"], rows,
                      note=f"Every step of every trajectory; {t.final_bands}. Mean final score: cases "
                           f"{_num(t.final_score_mean['cases'])}, controls {_num(t.final_score_mean['controls'])}.")


def _paragraphs(r: InsightsResult) -> list[str]:
    excluded = ", ".join(f"{n} {why.replace('_', ' ')}" for why, n in sorted(r.excluded.items()))
    e, s = r.embedding, r.similarity
    lines = [f"{r.run} ({r.source}): {r.n.text()} scored and labelled"
             + (f"; left out: {excluded}" if excluded else "") + "."]
    lines.append(f"Topics: {r.topics.n_topics} NMF topics over {r.topics.n_events} extracted events."
                 if r.topics.status == "ok" else f"Topics: {r.topics.reason}.")
    left = e.n_without_events
    lines.append(f"Embeddings: {METHOD_NAMES.get(e.method, e.method)} of each patient's events ({e.n_patients} "
                 f"patients, {e.dimensions} dimensions; {left.cases} cases / {left.controls} controls left out: no "
                 "event with a word to embed). "
                 + (f"Map: {(e.map_method or '').upper()}." if e.map_status == "ok" else f"Map: {e.map_reason}.")
                 + (f" {e.notice}" if e.notice else ""))
    if s.status == "ok":
        lines.append(f"Similarity: median cosine case–case {_num(s.median_case_case)}, control–control "
                     f"{_num(s.median_control_control)}, case–control {_num(s.median_case_control)}"
                     + (" (– : fewer than 3 patients in a group)." if None in (
                         s.median_case_case, s.median_control_control, s.median_case_control) else "."))
    else:
        lines.append(f"Similarity: {s.reason}.")
    return lines


def insights_section(runs: Sequence[Insights], *, reason_if_none: str = "No agents' prediction run was given or "
                     "produced, so there are no population insights.") -> Section:
    """The "Population insights" section for one or more runs (paragraphs, tables, figures)."""
    part = Section(SECTION_ID, "Population insights: topics, patient map, similarity and risk transitions")
    if not runs:
        part.paragraphs.append(reason_if_none)
        return part
    part.paragraphs.append(
        "From the agents' own outputs: the final events they extracted (topic model; one TF-IDF vector per patient "
        "for the map and the similarity heatmap) and the workers' Low/Moderate/High risk per chunk followed by the "
        "manager's final score. Analyses that need more patients or events than a run has say so instead of drawing.")
    for index, insights in enumerate(runs):
        r = insights.result
        key = f"{index + 1}-{slug(r.run)}"
        part.paragraphs += _paragraphs(r)
        if r.topics.status == "ok":
            part.tables.append(_topic_table(r, key))
        part.tables.append(_transition_table(r, key))
        part.figures += render_figures(insights, prefix=f"fig-insights-{key}")
    return part
