"""The VISTA job (``python -m jobs.build_graphs``) end to end on the session's Ray head: a small synthetic MEDS cohort
through graph + TOA + display against the synthetic endpoint (rerun: no new request), and an XML directory with a
malformed file, a patient without events and an event dated 2300 (three error rows, the others fine, exit status 3).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from graph_fixtures import synth_root
from vista.shared.runs.parts import ROWS
from test_jobs_vista import xml_cohort
from vista.graph import GraphStore
from vista.graph.store import read_stored_graph
from vista.shared.testing.synthetic_server import SyntheticLLMServer
from vista.pipeline.rows import RUN_DEPENDENT_COLUMNS
from vista.toa import PatientTimeline

pytestmark = [pytest.mark.ray, pytest.mark.slow]
N = 6


def run_job(argv: list[str]):
    from jobs import build_graphs

    return build_graphs.run(build_graphs.build_parser().parse_args(argv))


def content(path: Path) -> pl.DataFrame:
    return pl.read_parquet(path).drop(list(RUN_DEPENDENT_COLUMNS)).sort("task")


def test_cohort_through_graph_toa_display_then_a_rerun_asks_nothing(ray_session, tmp_path):
    out = tmp_path / "vista"
    with SyntheticLLMServer() as server:
        argv = ["--dataset", str(synth_root()), "--out", str(out), "--limit", str(N), "--backend", "openai",
                "--base-url", server.base_url, "--model", "synthetic", "--actors", "2", "--patients-per-actor", "2",
                "--progress-every", "1"]
        first = run_job(argv)
        asked = server.stats.requests
        assert first.complete and first.by_status == {"ok": N} and asked > 0
        assert first.llm_calls == asked and first.prompt_tokens > 0

        rows = pl.read_parquet(out / "patients.parquet")
        assert rows.height == N and rows["stages"].to_list() == ["graph,toa,display"] * N
        assert (rows["n_timeline_events"] > 0).any() and (rows["toa_calls"] > 0).all() and (rows["display_calls"] > 0).all()
        for row in rows.iter_rows(named=True):
            graph = read_stored_graph(out, row["graph_file"], graphml=True)
            timeline = PatientTimeline.model_validate_json((out / row["toa_file"]).read_bytes())
            assert graph.n_nodes == row["n_nodes"] and len(timeline.events) == row["n_timeline_events"]
            for event in timeline.events:  # provenance into the persisted graph
                assert all(graph.has_event(ref) for ref in event.source_event_refs)
        index = GraphStore(out).scan_index().collect()  # the output directory is a graph store
        assert index.height == rows["n_nodes"].sum() and index["task"].n_unique() == N

        again = run_job(argv)  # the same command: every task has its row
        assert (again.skipped, again.ran, again.complete) == (N, 0, True) and server.stats.requests == asked

        reference = content(out / "patients.parquet")
        shutil.rmtree(out / ROWS)  # as if killed before any row was written: the stores answer
        resumed = run_job(argv)
        assert resumed.ran == N and resumed.llm_calls == 0 and server.stats.requests == asked
        assert content(out / "patients.parquet").equals(reference)
        flags = pl.read_parquet(out / "patients.parquet").select("graph_rebuilt", "toa_rebuilt", "display_rebuilt")
        assert flags.rows() == [(False, False, False)] * N


def test_xml_directory_with_bad_files_gives_three_error_rows_and_goes_on(ray_session, tmp_path, capsys):
    from jobs.build_graphs import main

    xml_dir = tmp_path / "xml"
    good = xml_cohort(xml_dir, n_good=4)
    out = tmp_path / "out"
    code = main(["--xml-dir", str(xml_dir), "--out", str(out), "--batch-size", "2", "--progress-every", "0"])
    printed = capsys.readouterr().out
    assert code == 3 and "3 of 7 selected tasks ended in error" in printed
    rows = pl.read_parquet(out / "patients.parquet")
    assert rows.height == 7 and sorted(rows["status"].to_list()) == ["error"] * 3 + ["ok"] * 4
    errors = rows.filter(pl.col("status") == "error").sort("source")
    assert [Path(s).name for s in errors["source"]] == ["empty.xml", "future.xml", "malformed.xml"]
    assert errors["error_kind"].to_list() == ["input"] * 3
    assert [e.split(": field ")[-1].split(":")[0] for e in errors["error"][:2]] == ["'time'", "'time'"]
    assert "not well-formed XML" in errors["error"][2]
    ok = rows.filter(pl.col("status") == "ok")
    assert sorted(ok["subject_id"].to_list()) == sorted(good.values())
    assert GraphStore(out).scan_index().collect()["subject_id"].unique().sort().to_list() == sorted(good.values())
    # a rerun skips all seven (errors included) and still reports them
    assert main(["--xml-dir", str(xml_dir), "--out", str(out), "--progress-every", "0"]) == 3
    rerun = capsys.readouterr().out
    assert "all 7 selected tasks already have an output" in rerun and "kept by --retry transient (3 permanent)" in rerun
    assert errors["retry_class"].to_list() == ["permanent"] * 3
    # --retry all runs the three again (bad input stays bad); the good ones are not touched
    assert main(["--xml-dir", str(xml_dir), "--out", str(out), "--progress-every", "0", "--retry", "all"]) == 3
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["retried"], summary["ran"], summary["by_status"]) == (3, 3, {"error": 3})
