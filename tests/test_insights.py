"""Population insights over a prediction run (trajonco.insights) on synthetic, realistic prediction rows.

The rows are made the way ``jobs.predict`` makes them: a `PatientResult` per patient (per-chunk risk, final events,
score) turned into a `PredictionRow` by ``row_from_result`` and written with ``rows_to_table``.
"""

from __future__ import annotations

import argparse
import json
from datetime import date, datetime, timedelta

import numpy as np
import pyarrow.parquet as pq
import pytest

from vista.shared.meds.task_key import TaskKey
from trajonco.agents.results import ChunkRisk, ChunkStats, EvidenceEvent, Latency, PatientResult, Variant
from trajonco.agents.schemas import RiskLevel
from trajonco.insights import (InsightsInputError, InsightsResult, InsightsSettings, compute_insights,
                               insights_section, read_run, write_insights)
from trajonco.insights.cli import add_parser
from trajonco.insights.transitions import FAILED, NO_RECORD
from trajonco.prediction_files import write_prediction_files
from trajonco.prediction_rows import RowContext, row_from_failure, row_from_result, rows_to_table
from vista.shared.errors import CommandLineError
from vista.shared.llm.task_usage import TaskUsage

T0 = datetime(2022, 6, 1)
CONTEXT = RowContext(cancer="lung", variant="one_stage", model="test-llm", run_id="run-1")
CASE_THEMES = {  # theme word -> phrasings (each group has three themes; events of a theme share its word)
    "hemoptysis": ("hemoptysis with chronic cough", "episode of hemoptysis", "hemoptysis reported again"),
    "nodule": ("pulmonary nodule on imaging", "nodule enlarging on chest scan", "spiculated nodule noted"),
    "smoking": ("heavy smoking history", "smoking forty pack years", "continues smoking daily"),
}
CONTROL_THEMES = {
    "vaccination": ("influenza vaccination given", "vaccination update completed", "pneumococcal vaccination"),
    "sprain": ("ankle sprain splinted", "wrist sprain after fall", "sprain healed well"),
    "rhinitis": ("seasonal allergic rhinitis", "rhinitis eased by antihistamine", "rhinitis flare in spring"),
}
LEVELS = (RiskLevel.LOW, RiskLevel.MODERATE, RiskLevel.HIGH)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def patient_result(subject_id: int, levels: list[RiskLevel | None], events: list[str], score: int | None
                   ) -> PatientResult:
    """A one-stage assessment as the chain returns it (per-chunk risk, final events with dates, final score)."""
    trajectory = tuple(ChunkRisk(chunk_index=i, start_time=T0 - timedelta(days=400 - 30 * i),
                                 end_time=T0 - timedelta(days=380 - 30 * i), risk_level=level, new_events=1,
                                 stored_events=1) for i, level in enumerate(levels))
    evidence = tuple(EvidenceEvent(timestamp=date(2021, 1 + i % 12, 5), description=text)
                     for i, text in enumerate(events))
    return PatientResult(
        subject_id=subject_id, cancer="lung", variant=Variant.ONE_STAGE, model="test-llm", prediction_time=T0,
        horizon_days=365, status="ok" if score is not None else "failed", risk_score=score,
        probability=None if score is None else score / 10, risk_trajectory=trajectory, summary="summary",
        reasoning="reasoning", events=evidence,
        chunks=ChunkStats(timeline_events=40, timeline_tokens=3000, chunk_tokens=1000, n_chunks=max(1, len(levels))),
        latency=Latency(workers=1.0, manager=0.5, total=1.5))


def row(subject_id: int, label: bool | None, levels, events, score):
    result = patient_result(subject_id, list(levels), list(events), score)
    return row_from_result(TaskKey(subject_id, T0), label, result, TaskUsage(), CONTEXT, wall_s=1.0)


def synthetic_rows(n_cases: int, n_controls: int, seed: int = 7, *, eventless: int = 0):
    """Cases mostly report case-like events and escalate; controls mostly routine events and stay low."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_cases + n_controls):
        case = i < n_cases
        own, other = (CASE_THEMES, CONTROL_THEMES) if case else (CONTROL_THEMES, CASE_THEMES)
        themes = [t for t in own if rng.random() < 0.7] or [next(iter(own))]
        if rng.random() < 0.25:
            themes.append(list(other)[int(rng.integers(len(other)))])
        phrasings = {**own, **other}
        events = [phrasings[t][int(rng.integers(3))] for t in themes]
        if i in range(eventless):
            events = []
        n_chunks = int(rng.integers(1, 6))
        start = int(rng.integers(0, 2))
        levels = [LEVELS[min(2, start + (j * 2 // n_chunks if case else 0))] for j in range(n_chunks)]
        score = int(rng.integers(6, 10)) if case else int(rng.integers(1, 5))
        rows.append(row(1000 + i, case, levels, events, score))
    return rows


def write_run(tmp_path, rows, name="run"):
    folder = tmp_path / name
    folder.mkdir()
    write_prediction_files(rows_to_table(rows), folder)
    return folder


FAST = InsightsSettings(map_method="pca", seed=3)


# ------------------------------------------------------------------------------------------------------ reading


def test_read_run_keeps_scored_labelled_rows_and_counts_the_rest(tmp_path):
    rows = synthetic_rows(3, 3)
    rows.append(row(1, None, [RiskLevel.LOW], ["cough"], 3))  # no label
    rows.append(row(2, True, [None], [], None))  # failed: no score
    rows.append(row_from_failure(TaskKey(3, T0), False, TimeoutError("slow"), TaskUsage(), CONTEXT, wall_s=9.0))
    run = read_run(write_run(tmp_path, rows))
    assert (run.n_cases, run.n_controls) == (3, 3)
    assert run.excluded == {"no_label": 1, "unscored": 2}
    assert run.run_label == "lung · one_stage · test-llm"
    first = run.patients[0]
    assert first.case and first.events and all(isinstance(level, RiskLevel) for level in first.trajectory)


def test_malformed_events_column_names_file_patient_and_field(tmp_path):
    broken = row(42, True, [RiskLevel.HIGH], ["cough"], 8).model_copy(update={"events": '[{"timestamp": "x"}'})
    folder = write_run(tmp_path, [broken])
    with pytest.raises(InsightsInputError) as info:
        read_run(folder)
    message = str(info.value)
    assert "subject 42" in message and "'events'" in message and "prediction_details.parquet" in message
    assert "not JSON" in message
    wrong = row(43, True, [RiskLevel.HIGH], ["cough"], 8).model_copy(
        update={"risk_trajectory": '[{"chunk_index": 0, "start_time": null, "end_time": null, "risk_level": "Huge"}]'})
    with pytest.raises(InsightsInputError, match=r"subject 43: field 'risk_trajectory': .*1 invalid value"):
        read_run(write_run(tmp_path, [wrong], name="wrong"))


def test_a_file_without_the_agents_columns_is_refused(tmp_path):
    import pyarrow as pa

    path = tmp_path / "baseline.parquet"
    pq.write_table(pa.table({"subject_id": [1], "predicted_boolean_probability": [0.3]}), path)
    with pytest.raises(InsightsInputError, match="boolean_value"):
        read_run(path)
    with pytest.raises(InsightsInputError, match="no prediction file"):
        read_run(tmp_path / "missing")


# ------------------------------------------------------------------------------------------------------ analyses
def test_topics_separate_case_and_control_events(tmp_path):
    run = read_run(write_run(tmp_path, synthetic_rows(20, 20)))
    topics = compute_insights(run, FAST).result.topics
    assert topics.status == "ok" and 2 <= topics.n_topics <= FAST.n_topics
    assert topics.n_events == sum(len(p.events) for p in run.patients)
    assert sum(t.n_events for t in topics.topics) == topics.n_events_assigned
    assert [t.index for t in topics.topics] == list(range(1, topics.n_topics + 1))
    for theme in (*CASE_THEMES, *CONTROL_THEMES):  # every theme is found, and is more common in its own group
        found = [t for t in topics.topics if theme in t.top_terms[:3]]
        assert len(found) == 1, (theme, [t.top_terms for t in topics.topics])
        more_cases = found[0].prevalence_cases > found[0].prevalence_controls
        assert more_cases == (theme in CASE_THEMES)


def test_embeddings_map_and_heatmap(tmp_path):
    run = read_run(write_run(tmp_path, synthetic_rows(12, 10, eventless=2)))
    insights = compute_insights(run, FAST)
    e, s = insights.result.embedding, insights.result.similarity
    assert e.n_patients == 20 and (e.n_without_events.cases, e.n_without_events.controls) == (2, 0)
    assert e.map_status == "ok" and e.map_method == "pca" and e.notice is None and len(e.points) == 20
    assert e.dimensions > 10
    matrix = insights.similarity
    assert matrix.matrix.shape == (20, 20) and np.allclose(np.diag(matrix.matrix), 1.0)
    assert np.allclose(matrix.matrix, matrix.matrix.T)
    assert s.status == "ok" and (s.n.cases, s.n.controls) == (10, 10) and len(s.order) == 20
    case_ids = {p.subject_id for p in run.patients if p.case}
    assert set(s.order[:10]) <= case_ids and not set(s.order[10:]) & case_ids  # cases first
    assert s.median_case_case > s.median_case_control and s.median_control_control > s.median_case_control
    assert {p.cluster for p in e.points} <= set(range(1, s.n_clusters + 1))


def test_similarity_medians_need_three_patients_per_group(tmp_path):
    s = compute_insights(read_run(write_run(tmp_path, synthetic_rows(2, 6))), FAST).result.similarity
    assert s.status == "ok" and (s.n.cases, s.n.controls) == (2, 6)
    assert s.median_case_case is None and s.median_case_control is None and s.median_control_control is not None


def test_results_are_deterministic(tmp_path):
    run = read_run(write_run(tmp_path, synthetic_rows(15, 15)))
    assert compute_insights(run, FAST).result == compute_insights(run, FAST).result


def test_transition_counts_are_exact(tmp_path):
    rows = [
        row(1, True, [RiskLevel.LOW, RiskLevel.MODERATE, RiskLevel.HIGH], ["cough"], 9),
        row(2, True, [RiskLevel.MODERATE, RiskLevel.HIGH], ["nodule"], 8),
        row(3, False, [RiskLevel.LOW, RiskLevel.LOW], ["vaccination"], 2),
        row(4, False, [RiskLevel.LOW, None, RiskLevel.MODERATE], ["allergy"], 5),
    ]
    t = compute_insights(read_run(write_run(tmp_path, rows)), FAST.model_copy(update={"flow_window": 2})
                         ).result.transitions
    counts = {(x.step, x.source, x.target): (x.cases, x.controls) for x in t.transitions}
    assert counts == {
        ("chunk", "Low", "Low"): (0, 1), ("chunk", "Low", "Moderate"): (1, 0), ("chunk", "Low", FAILED): (0, 1),
        ("chunk", "Moderate", "High"): (2, 0), ("chunk", FAILED, "Moderate"): (0, 1),
        ("final", "High", "High"): (2, 0), ("final", "Low", "Low"): (0, 1), ("final", "Moderate", "Moderate"): (0, 1),
    }
    assert t.columns == ["chunk -1", "last chunk", "final score"]
    flows = {(x.column, x.source, x.target): (x.cases, x.controls) for x in t.flows}
    assert flows == {(0, "Moderate", "High"): (2, 0), (0, "Low", "Low"): (0, 1), (0, FAILED, "Moderate"): (0, 1),
                     (1, "High", "High"): (2, 0), (1, "Low", "Low"): (0, 1), (1, "Moderate", "Moderate"): (0, 1)}
    for column in (0, 1):  # every patient passes through every column once
        assert sum(x.cases + x.controls for x in t.flows if x.column == column) == 4
    assert (t.patterns.escalated.cases, t.patterns.escalated.controls) == (2, 1)
    assert (t.patterns.stable.cases, t.patterns.stable.controls) == (0, 1)
    assert (t.chunks.cases, t.chunks.controls) == (5, 5)
    assert t.final_score_mean == {"cases": 8.5, "controls": 3.5}


def test_shorter_trajectories_start_from_no_record(tmp_path):
    rows = [row(1, True, [RiskLevel.HIGH], ["cough"], 9), row(2, False, [RiskLevel.LOW] * 3, ["flu"], 1)]
    t = compute_insights(read_run(write_run(tmp_path, rows)), FAST).result.transitions
    assert t.columns == ["chunk -2", "chunk -1", "last chunk", "final score"]
    flows = {(x.column, x.source, x.target): (x.cases, x.controls) for x in t.flows}
    assert flows[(0, NO_RECORD, NO_RECORD)] == (1, 0) and flows[(1, NO_RECORD, "High")] == (1, 0)


def test_every_flow_column_holds_every_patient_once(tmp_path):
    from trajonco.insights.figures import _node_counts

    t = compute_insights(read_run(write_run(tmp_path, synthetic_rows(9, 7, seed=4))), FAST).result.transitions
    for case, n in ((True, 9), (False, 7)):
        assert [sum(column.values()) for column in _node_counts(t, case)] == [n] * len(t.columns)


def test_runs_without_chunks_keep_the_final_bands(tmp_path):
    rows = [row(1, True, [], ["cough"], 8), row(2, False, [], ["flu"], 2), row(3, False, [], ["flu"], 5)]
    insights = compute_insights(read_run(write_run(tmp_path, rows)), FAST)
    t = insights.result.transitions
    assert t.columns == ["final score"] and t.flows == []
    assert {(x.source, x.target): (x.cases, x.controls) for x in t.transitions} == {
        (NO_RECORD, "High"): (1, 0), (NO_RECORD, "Low"): (0, 1), (NO_RECORD, "Moderate"): (0, 1)}
    from trajonco.insights.figures import _node_counts

    assert _node_counts(t, False) == [{NO_RECORD: 0, FAILED: 0, "Low": 1, "Moderate": 1, "High": 0}]
    assert write_insights(insights, tmp_path / "out")[1][0].read_bytes().startswith(PNG_MAGIC)


def test_a_four_patient_run_says_too_few_instead_of_drawing(tmp_path):
    run = read_run(write_run(tmp_path, synthetic_rows(2, 2)))
    insights = compute_insights(run)  # defaults (UMAP asked): never reached with 4 patients
    r = insights.result
    assert r.topics.status == "too_few" and "too few extracted events" in r.topics.reason
    assert r.embedding.map_status == "too_few" and "too few patients" in r.embedding.map_reason
    assert r.similarity.status == "too_few" and insights.similarity is None
    assert sum(x.cases + x.controls for x in r.transitions.transitions if x.step == "final") == 4
    section = insights_section([insights])
    assert [f.id.rsplit("-", 1)[-1] for f in section.figures] == ["transitions"]
    text = " ".join(section.paragraphs)
    assert "too few extracted events" in text and "too few patients" in text and "2 cases / 2 controls" in text


# ------------------------------------------------------------------------------------------------------ outputs
def test_figures_and_json_are_written(tmp_path):
    insights = compute_insights(read_run(write_run(tmp_path, synthetic_rows(12, 12))), FAST)
    json_path, pngs = write_insights(insights, tmp_path / "out")
    assert sorted(p.name for p in pngs) == ["fig-insights-map.png", "fig-insights-similarity.png",
                                            "fig-insights-topics.png", "fig-insights-transitions.png"]
    for png in pngs:
        data = png.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000
    assert InsightsResult.model_validate_json(json_path.read_text()) == insights.result


@pytest.mark.slow
def test_report_section_builds_with_the_report_classes(tmp_path):
    from benchmarks.report.html import render_html
    from trajonco.report_document import Section

    insights = compute_insights(read_run(write_run(tmp_path, synthetic_rows(12, 12))), FAST)
    section = insights_section([insights])
    assert isinstance(section, Section) and section.id == "insights"
    assert len(section.figures) == 4 and all(f.png.startswith(PNG_MAGIC) for f in section.figures)
    assert {t.id.rsplit("-", 1)[-1] for t in section.tables} == {"topics", "transitions"}
    assert all("n = 12 cases / 12 controls" in f.caption for f in section.figures if "similarity" not in f.id)
    page = render_html("r", [section])
    assert all(f'id="{f.id}"' in page for f in section.figures)
    empty = insights_section([], reason_if_none="no run")
    assert empty.paragraphs == ["no run"] and not empty.figures


def test_missing_umap_falls_back_to_pca_with_a_notice(tmp_path, monkeypatch):
    from trajonco.insights import projection

    monkeypatch.setattr(projection, "umap_available", lambda: False)
    run = read_run(write_run(tmp_path, synthetic_rows(8, 8)))
    e = compute_insights(run, InsightsSettings(map_method="umap")).result.embedding
    assert e.map_method == "pca" and e.notice == projection.UMAP_MISSING


def test_cli_writes_the_insights_and_refuses_a_bad_run(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    folder = write_run(tmp_path, synthetic_rows(3, 3))
    args = parser.parse_args(["insights", str(folder), "--out", str(tmp_path / "out"), "--map", "pca"])
    assert args.handler(args) == 0
    assert "3 cases / 3 controls" in capsys.readouterr().out
    saved = json.loads((tmp_path / "out" / "insights.json").read_text())
    assert saved["topics"]["status"] == "too_few"
    bad = parser.parse_args(["insights", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o2")])
    with pytest.raises(CommandLineError, match="no prediction file"):
        bad.handler(bad)


@pytest.mark.slow
def test_umap_map_is_seeded(tmp_path):
    pytest.importorskip("umap")
    run = read_run(write_run(tmp_path, synthetic_rows(12, 12)))
    settings = InsightsSettings(map_method="umap", seed=5)
    first, second = (compute_insights(run, settings).result.embedding for _ in range(2))
    assert first.map_method == "umap" and first.notice is None and len(first.points) == 24
    assert first.points == second.points
    # the compiled layout step is kept on disk (load_umap): the next process loads it instead of compiling again
    from numba.core.dispatcher import Dispatcher

    import umap.layouts

    steps = [v for v in vars(umap.layouts).values() if isinstance(v, Dispatcher) and v.signatures]
    assert steps and all(step.stats.cache_path for step in steps)


def test_a_run_whose_events_share_one_word_says_too_little_signal_instead_of_a_traceback(tmp_path, capsys):
    """MIMIC-style runs: every patient's events reduce to one TF-IDF term; UMAP's PCA init then raised ValueError
    (n_components=2 > 1 feature) out of `trajonco insights` and the report's insights section."""
    rows = [row(1000 + i, i < 6, [LEVELS[0]], ["cough"], 5) for i in range(12)]
    folder = write_run(tmp_path, rows)
    for method in ("umap", "pca"):
        r = compute_insights(read_run(folder), InsightsSettings(map_method=method)).result
        assert r.embedding.map_status == "too_few" and "too little signal" in r.embedding.map_reason
        assert r.embedding.points == []
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["insights", str(folder), "--out", str(tmp_path / "out")])
    assert args.handler(args) == 0
    assert "too little signal" in capsys.readouterr().out
