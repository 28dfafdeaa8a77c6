"""`vista similar` over a store built by ``jobs.build_graphs`` on the session's Ray head (and the same cohort built
by `GraphStore`): rankings are well formed, agree across the two routes, explain themselves with tokens both
patients really have, and weigh shared codes by specificity rather than by count."""

from __future__ import annotations

import argparse
import atexit
import json
import shutil
import tempfile
from functools import cache
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from vista.patient_search import PatientSearchError, Method, open_source, similar_patients, similarity_matrix
from vista.patient_search.features import Family, patient_tokens
from vista.patient_search.similarity import TokenMatrix

SYNTH = dict(n_subjects=30, seed=2, workers=1, case_fraction=0.9, cancer_weights={"lung": 4.0, "breast": 1.0})
"""A small lung-heavy cohort whose seed gives EGFR-positive patients who progress on first-line therapy."""


@cache
def cohort_dataset() -> Path:
    """The synthetic MEDS dataset (with ground_truth/), generated once per process, removed at exit."""
    from vista.shared.synth import SynthConfig, generate

    root = Path(tempfile.mkdtemp(prefix="cohort-tests-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    generate(SynthConfig(**SYNTH), root / "ds", progress=False)
    return root / "ds"


@cache
def job_store_root() -> Path:
    """The dataset's graphs built by ``jobs.build_graphs`` (graph stage) — needs a connected Ray driver."""
    from jobs import build_graphs

    out = cohort_dataset().parent / "job"
    summary = build_graphs.run(build_graphs.build_parser().parse_args(
        ["--dataset", str(cohort_dataset()), "--out", str(out)]))
    assert summary.complete and summary.by_status == {"ok": SYNTH["n_subjects"]}
    return out


@cache
def graph_store_root() -> Path:
    """The same cohort built in process by `GraphStore` (what ``vista graph`` writes)."""
    from datetime import datetime

    from vista.graph import GraphStore
    from vista.shared.meds.reader import MedsDataset

    out = cohort_dataset().parent / "store"
    GraphStore(out).build_dataset(MedsDataset(cohort_dataset(), now=datetime(2030, 1, 1)))
    return out


@pytest.fixture(scope="module")
def job_store(ray_session) -> Path:
    return job_store_root()


def oncology(dataset: Path) -> dict[int, dict]:
    return {rec["subject_id"]: rec for rec in map(json.loads, (dataset / "ground_truth" / "oncology.jsonl")
                                                  .read_text().splitlines())}


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("method", list(Method))
def test_rankings_over_the_job_store_are_well_formed_and_match_the_graph_store(job_store, method):
    job, store = open_source(job_store), open_source(graph_store_root())
    assert job.subject_ids() == store.subject_ids() and len(job.subject_ids()) == SYNTH["n_subjects"]
    subject = next(iter(oncology(cohort_dataset())))
    ranked = similar_patients(job, subject, k=8, method=method)
    ids = [n.subject_id for n in ranked]
    scores = [n.score for n in ranked]
    assert len(ids) == 8 == len(set(ids)) and subject not in ids
    assert scores == sorted(scores, reverse=True) and all(s >= 0 for s in scores) and scores[0] > 0
    again = similar_patients(store, subject, k=8, method=method)
    assert [(n.subject_id, round(n.score, 9)) for n in again] == [(n.subject_id, round(n.score, 9)) for n in ranked]


@pytest.mark.ray
@pytest.mark.slow
def test_the_explanation_names_tokens_both_patients_have(job_store):
    source = open_source(job_store)
    tokens = patient_tokens(source, (Family.CODES, Family.TRANSITIONS))
    held = {sid: set(group["token"]) for (sid,), group in tokens.group_by("subject_id")}
    for subject in list(oncology(cohort_dataset()))[:5]:
        for neighbour in similar_patients(source, subject, k=3):
            assert neighbour.shared, neighbour
            assert all(t in held[subject] and t in held[neighbour.subject_id] for t in neighbour.shared)


@pytest.mark.ray
@pytest.mark.slow
def test_scores_are_symmetric_and_the_baseline_is_jaccard_of_code_sets(job_store):
    source = open_source(job_store)
    index = source.index.filter(pl.col("type").is_in(["event", "encounter", "note"]) & pl.col("code").is_not_null())
    codes = {sid: set(g["code"]) for (sid,), g in index.group_by("subject_id")}
    matrix = similarity_matrix(source, Method.JACCARD)
    scores = matrix.scores()
    a, b = int(matrix.subject_ids[1]), int(matrix.subject_ids[4])
    everyone = [c for sid in codes for c in codes[sid]]
    shared_ok = {c for c in set(everyone) if everyone.count(c) >= 2}  # codes of one patient only are dropped
    expected = len(codes[a] & codes[b] & shared_ok) / len((codes[a] | codes[b]) & shared_ok)
    assert scores[1, 4] == pytest.approx(expected)
    timeline = similarity_matrix(source, Method.TIMELINE).scores()
    assert np.allclose(timeline, timeline.T) and np.allclose(scores, scores.T)


def _frame(rows: list[tuple[int, str, int]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"subject_id": pl.Int64, "token": pl.String, "count": pl.UInt32}, orient="row")


def test_specific_codes_outweigh_common_ones_and_counts_do_not_matter():
    common = [(s, f"LAB//{j}", 50) for s in (1, 2, 3, 4, 5) for j in range(20)]  # every patient: weighs nothing
    rows = [*common, (1, "DX//C34", 1), (2, "DX//C34", 1), (1, "DX//E11", 1), (3, "DX//E11", 30),
            (1, "RX//cis", 1), (2, "RX//cis", 1), (4, "DX//C50", 1), (5, "DX//C50", 1)]
    matrix = TokenMatrix.from_tokens(_frame(rows), weighting="idf")
    ranked = matrix.neighbours(1, 4)
    assert [n.subject_id for n in ranked][:2] == [2, 3]  # two specific codes shared beat one repeated 30 times
    assert set(ranked[0].shared) == {"DX//C34", "RX//cis"} and ranked[1].shared == ("DX//E11",)
    jaccard = TokenMatrix.from_tokens(_frame(rows), weighting="jaccard").scores()
    assert jaccard[0, 1] == pytest.approx(22 / 23) and jaccard[0, 2] == pytest.approx(21 / 23)  # counts nothing


@pytest.mark.slow
def test_errors_name_the_store_and_the_subject(tmp_path):
    with pytest.raises(PatientSearchError, match=f"{tmp_path}: not a graph store"):
        open_source(tmp_path)
    with pytest.raises(PatientSearchError, match="no such store directory"):
        open_source(tmp_path / "missing")
    source = open_source(graph_store_root())
    with pytest.raises(PatientSearchError, match=rf"{graph_store_root()}: no graph for subject 999"):
        similar_patients(source, 999)
    with pytest.raises(PatientSearchError, match="k must be at least 1"):
        similar_patients(source, 0, k=0)


@pytest.mark.slow
def test_the_similar_command_prints_a_ranking_and_reports_mistakes_in_one_line(capsys):
    from vista.patient_search.cli import add_similar_parser
    from vista.shared.cli_kit import run_command, user_errors

    parser = argparse.ArgumentParser(prog="vista")
    add_similar_parser(parser.add_subparsers(dest="command", required=True))
    store = str(graph_store_root())
    assert run_command(parser.parse_args(["similar", "--store", store, "--subject", "1", "--k", "3", "--json"]),
                       user_errors()) == 0
    printed = json.loads(capsys.readouterr().out)
    expected = similar_patients(open_source(store), 1, k=3)
    assert [n["subject_id"] for n in printed["neighbours"]] == [n.subject_id for n in expected]
    argv = ["similar", "--store", store, "--subject", "1", "--k", "3"]
    assert run_command(parser.parse_args(argv), user_errors()) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0] == "patients most similar to subject 1 (method timeline)" and len(table) == 2 + 1 + 3
    assert run_command(parser.parse_args(["similar", "--store", store, "--subject", "999"]), user_errors()) == 2
    assert capsys.readouterr().err.strip() == f"error: {store}: no graph for subject 999"


def test_the_command_line_spells_the_methods_without_importing_them():
    import subprocess
    import sys

    from vista.patient_search import cli, similarity

    assert cli.METHODS == tuple(m.value for m in Method) and cli.DEFAULT_METHOD == similarity.DEFAULT_METHOD.value
    code = ("import argparse, sys; from vista.patient_search.cli import add_similar_parser, add_query_parser; "
            "p = argparse.ArgumentParser(); s = p.add_subparsers(); add_similar_parser(s); add_query_parser(s); "
            "print(sorted(m for m in ('numpy', 'polars', 'scipy', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _timeline(subject_id: int, graph_hash: str | None, line: int, refs: tuple[str, ...]):
    import datetime as dt

    from vista.toa.model import Episode, EpisodeKind, ExtractionStats, PatientTimeline, TimelineEvent

    day = dt.date(2021, 3, 1)
    return PatientTimeline(
        subject_id=subject_id, profile="thoracic", content_hash="h", rejected=(), graph_hash=graph_hash,
        stats=ExtractionStats(chunks=1, failed_chunks=0, proposed_events=1, kept_events=1, rejected_events=0,
                              dropped_refs=0, merged_groups=0),
        events=(TimelineEvent(event_id="t1", date=day, type="treatment", subtype="chemotherapy", description="chemo",
                              source_event_refs=refs),),
        episodes=(Episode(episode_id="p1", kind=EpisodeKind.TREATMENT_LINE, line=line, start=day, end=day,
                          event_ids=("t1",)),))


@pytest.mark.slow
def test_episode_tokens_come_from_current_timelines_only_and_bring_line_mates_closer(tmp_path, caplog):
    from vista.graph import GraphStore
    from vista.toa.store import TimelineStore

    root = tmp_path / "store"
    shutil.copytree(graph_store_root(), root)
    store, source = GraphStore(root), open_source(root)
    drug = "RXNORM//40048"  # carboplatin
    given = source.index.filter(pl.col("code") == drug).group_by("subject_id").agg(pl.col("node_id").first()).sort(
        "subject_id")
    (a, ref_a), (b, ref_b), (c, ref_c) = given.rows()[:3]
    before = similar_patients(source, a, k=29, method=Method.TIMELINE)
    timelines = TimelineStore(root)
    timelines.save(_timeline(a, store.content_hash_of(a), 1, (ref_a,)))
    timelines.save(_timeline(b, store.content_hash_of(b), 1, (ref_b,)))
    timelines.save(_timeline(c, "another-version", 1, (ref_c,)))  # stale: left out, and said so
    with caplog.at_level("WARNING", logger="vista.patient_search.features"):
        tokens = patient_tokens(open_source(root), (Family.EPISODES,))
    assert sorted(tokens.rows()) == sorted((s, f"episodes:line1:{t}", 1) for s in (a, b) for t in ("treatment", drug))
    assert "1 stored timeline(s) were built from another version of the graph" in caplog.text and f"{c}" in caplog.text
    after = similar_patients(open_source(root), a, k=29, method=Method.EPISODES)
    score = {n.subject_id: n.score for n in before}, {n.subject_id: n.score for n in after}
    assert score[1][b] > score[0][b]
    assert f"episodes:line1:{drug}" in next(n for n in after if n.subject_id == b).shared
