"""Cohort queries over a store built by ``jobs.build_graphs`` on the session's Ray head: code, value, text and
time-order terms give exactly the patients a brute-force reading of the MEDS rows gives (and the generator's ground
truth for "EGFR-positive, then progression on first-line therapy"), with evidence that points at real nodes; query
mistakes are one clear line."""

from __future__ import annotations

import argparse
import json
import re
from datetime import timedelta

import polars as pl
import pytest

from test_patient_similarity import cohort_dataset, graph_store_root, job_store_root, oncology
from vista.patient_search import (
    PatientSearchError,
    CohortQuery,
    load_query,
    make_query,
    open_source,
    parse_code_term,
    parse_order,
    parse_text_term,
    run_query,
)

EGFR = r"egfr@NOTE//*=EGFR: (?!no )[^.]*detected"
LINE1 = r"pd1@NOTE//PROGRESS=progression of .* on line 1 therapy"


@pytest.fixture(scope="module")
def job_store(ray_session):
    return open_source(job_store_root())


@pytest.fixture(scope="module")
def rows() -> pl.DataFrame:
    """Every MEDS row of the dataset: the oracle, read without the graph or its index."""
    return pl.read_parquet(cohort_dataset() / "data" / "**" / "*.parquet")


def subjects_with(rows: pl.DataFrame, expr: pl.Expr) -> list[int]:
    return sorted(rows.filter(expr)["subject_id"].unique().to_list())


pytestmark = [pytest.mark.slow]


@pytest.mark.ray
def test_code_prefix_and_value_terms_match_the_meds_rows(job_store, rows):
    lung = run_query(job_store, make_query([parse_code_term("lung=ICD10CM//C34*")]))
    assert lung.subject_ids() == subjects_with(rows, pl.col("code").str.starts_with("ICD10CM//C34")) != []
    low = run_query(job_store, make_query([parse_code_term("hb=LOINC//718-7<11")]))
    expected = subjects_with(rows, (pl.col("code") == "LOINC//718-7") & (pl.col("numeric_value") < 11))
    assert low.subject_ids() == expected and 0 < len(expected) < len(job_store.subject_ids())
    terms = [parse_code_term("lung=ICD10CM//C34*"), parse_code_term("hb=LOINC//718-7<11")]
    both = run_query(job_store, make_query(terms))
    assert both.subject_ids() == sorted(set(lung.subject_ids()) & set(expected))


@pytest.mark.ray
@pytest.mark.parametrize("order", ["lung:hb", "lung:hb:30", "hb:lung:365"])
def test_time_order_within_a_window_matches_a_brute_force_reading(job_store, rows, order):
    terms = [parse_code_term("lung=ICD10CM//C34*"), parse_code_term("hb=LOINC//718-7<13")]
    result = run_query(job_store, make_query(terms, [parse_order(order)]))
    found = {"lung": rows.filter(pl.col("code").str.starts_with("ICD10CM//C34")),
             "hb": rows.filter((pl.col("code") == "LOINC//718-7") & (pl.col("numeric_value") < 13))}
    first, then, *days = order.split(":")
    pairs = found[first].select("subject_id", pl.col("time").alias("t1")).join(
        found[then].select("subject_id", pl.col("time").alias("t2")), on="subject_id",
    ).filter(pl.col("t1") < pl.col("t2"))
    if days:
        pairs = pairs.filter(pl.col("t2") - pl.col("t1") <= timedelta(days=int(days[0])))
    assert result.subject_ids() == sorted(pairs["subject_id"].unique().to_list())
    unordered = run_query(job_store, make_query(terms))
    assert set(result.subject_ids()) < set(unordered.subject_ids())  # the order removes someone
    for match in result.matches:
        evidence = {e.term: e for e in match.evidence}
        assert evidence[first].time < evidence[then].time
        if days:
            assert evidence[then].time - evidence[first].time <= timedelta(days=int(days[0]))


@pytest.mark.ray
def test_egfr_positive_then_progression_on_first_line_is_the_ground_truth(job_store):
    query = make_query([parse_code_term("lung=ICD10CM//C34*"), parse_text_term(EGFR), parse_text_term(LINE1)],
                       [parse_order("egfr:pd1")])
    result = run_query(job_store, query)
    truth = []
    for sid, rec in oncology(cohort_dataset()).items():
        positive = [b for b in rec["biomarkers"] if b["name"] == "EGFR" and not b["result"].startswith("no ")]
        progressed = [p for p in rec["progressions"] if p["line"] == 1]
        if rec["cancer"] == "lung" and positive and progressed and positive[0]["date"] < progressed[0]["date"]:
            truth.append(sid)
    assert result.subject_ids() == sorted(truth) and len(truth) >= 2
    assert result.text_checked == len(run_query(job_store, make_query(query.terms[:1])).matches)  # only candidates read
    for match in result.matches:  # the evidence is real nodes of the patient's graph, in order
        graph = job_store.graph(match.subject_id)
        lung, egfr, pd1 = match.evidence
        assert graph.event(lung.node_id).code.startswith("ICD10CM//C34")
        assert re.search(EGFR.split("=", 1)[1], graph.event(egfr.node_id).text, re.I)
        assert "on line 1 therapy" in graph.event(pd1.node_id).text and egfr.time < pd1.time
        assert egfr.code.startswith("NOTE//") and pd1.code == "NOTE//PROGRESS"


@pytest.mark.ray
def test_a_text_term_alone_matches_every_note_with_that_text(job_store, rows):
    result = run_query(job_store, make_query([parse_text_term(EGFR)]))
    pattern = EGFR.split("=", 1)[1]
    expected = subjects_with(rows, pl.col("code").str.starts_with("NOTE//")
                             & pl.col("text_value").str.contains(f"(?i){pattern.replace('(?!no )', '')}")
                             & ~pl.col("text_value").str.contains("(?i)EGFR: no "))
    assert result.subject_ids() == expected and result.text_checked == len(job_store.subject_ids())


@pytest.mark.parametrize(("make", "message"), [
    (lambda: parse_code_term("lung"), r"--code 'lung': expected NAME=CODE"),
    (lambda: parse_code_term("hb=LOINC//718-7<ten"), r"--code 'hb=LOINC//718-7<ten': 'ten' is not a number"),
    (lambda: parse_code_term("x=A*B"), r"code pattern 'A\*B'"),
    (lambda: parse_text_term("bad=(("), r"--text 'bad=\(\(': pattern '\(\(' is not a valid regular expression"),
    (lambda: parse_order("a"), r"--before 'a': expected FIRST:THEN\[:DAYS\]"),
    (lambda: parse_order("a:b:-3"), r"--before 'a:b:-3': Input should be greater than 0"),
    (lambda: make_query([parse_code_term("a=X//1")], [parse_order("a:z")]), r"query: order a:z names no term 'z'"),
    (lambda: make_query([parse_code_term("a=X//1"), parse_code_term("a=X//2")]), "term names must be unique: a"),
    (lambda: load_query('{"terms": [{"kind": "code", "name": "a", "codes": []}]}', "q.json"),
     r"q.json: terms.0.code.codes"),
])
def test_query_mistakes_are_one_clear_line(make, message):
    with pytest.raises(PatientSearchError, match=message):
        make()


def test_a_query_round_trips_through_json():
    query = make_query([parse_code_term("hb=LOINC//718-7<=9.5"), parse_text_term(LINE1)], [parse_order("hb:pd1:30")])
    assert load_query(query.model_dump_json()) == query and isinstance(query, CohortQuery)


def test_the_cohort_query_command_prints_the_matches_with_their_evidence(tmp_path, capsys):
    from vista.patient_search.cli import add_query_parser
    from vista.shared.cli_kit import run_command, user_errors

    parser = argparse.ArgumentParser(prog="vista")
    add_query_parser(parser.add_subparsers(dest="command", required=True))
    store = str(graph_store_root())
    argv = ["cohort-query", "--store", store, "--code", "lung=ICD10CM//C34*", "--text", EGFR, "--text", LINE1,
            "--before", "egfr:pd1"]
    assert run_command(parser.parse_args(argv), user_errors()) == 0
    lines = capsys.readouterr().out.splitlines()
    expected = run_query(open_source(store), make_query([parse_code_term("lung=ICD10CM//C34*"), parse_text_term(EGFR),
                                                         parse_text_term(LINE1)], [parse_order("egfr:pd1")]))
    assert lines[0].startswith(f"{len(expected.matches)} of 30 patient(s) match")
    assert lines[1].split() == ["subject", "lung", "egfr", "pd1"]
    assert [int(line.split()[0]) for line in lines[3:]] == expected.subject_ids()
    first = expected.matches[0].evidence[1]
    assert f"{first.node_id} {first.time.date().isoformat()}" in lines[3]

    query_file = tmp_path / "q.json"
    query_file.write_text(expected.query.model_dump_json())
    assert run_command(parser.parse_args(["cohort-query", "--store", store, "--query-file", str(query_file),
                                          "--json"]), user_errors()) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [m["subject_id"] for m in printed["matches"]] == expected.subject_ids()

    assert run_command(parser.parse_args(["cohort-query", "--store", store, "--code", "x=A//1", "--before", "x:y"]),
                       user_errors()) == 2
    assert capsys.readouterr().err.strip() == "error: query: order x:y names no term 'y' (terms: x)"
    assert run_command(parser.parse_args(["cohort-query", "--store", store]), user_errors()) == 2
    assert "at least one --code or --text" in capsys.readouterr().err
