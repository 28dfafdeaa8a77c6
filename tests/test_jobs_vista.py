"""The VISTA job's parts without Ray: the actor run in this process over MEDS and XML tasks, the stores' skips, the
error rows of bad input, stage selection, rows and the cohort index."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from graph_fixtures import synth_records, synth_root
from vista.shared.meds.task_key import TaskKey
from vista.shared.runs.parts import ROWS, part_files
from jobs.vista_actor import VistaActor, VistaSettings
from jobs.vista_tasks import XML_FILE
from vista.graph.xml_files import XmlDirectoryError, list_xml_patients
from vista.graph import build_graph, encounter_xml
from vista.graph.store import read_stored_graph
from vista.graph.index import TASK_INDEX_SCHEMA
from vista.graph.task_graphs import task_folder
from vista.shared.llm import LLMConfig
from vista.pipeline import PipelineConfig, VistaRow
from vista.pipeline.rows import TASK_ID
from vista.shared.testing.synthetic_server import SyntheticLLMServer
from vista.shared.meds.tasks import keys_table
from vista.toa import TimelineStore

SUBJECTS = 3


def rows_of(out: Path) -> dict[str, VistaRow]:
    """The newest row of each task in the actors' part files, by task name."""
    frame = pl.concat([pl.read_parquet(f) for f in part_files(out)]).sort("finished_at")
    latest = frame.unique(subset=[TASK_ID, "prediction_time"], keep="last")
    return {row["task"]: VistaRow.model_validate({k: v for k, v in row.items() if k != TASK_ID})
            for row in latest.to_dicts()}


def run_actor(settings: VistaSettings, batch: pa.Table) -> list[dict]:
    """The actor's status rows for one block, run as Ray Data runs it: an async generator on an event loop."""
    async def stream() -> list[dict]:
        actor = VistaActor(settings)
        return [row async for table in actor(batch) for row in table.to_pylist()]

    return asyncio.run(stream())


@pytest.fixture(scope="module")
def server():
    with SyntheticLLMServer() as server:
        yield server


def meds_settings(out: Path, server: SyntheticLLMServer, **extra) -> VistaSettings:
    llm = LLMConfig(backend="openai", base_url=server.base_url, model="synthetic", cache_dir=out / "llm_cache")
    return VistaSettings(out=out, dataset=synth_root(), pipeline=PipelineConfig(stages=("graph", "toa", "display")),
                         llm=llm, patients_per_actor=2, run_id="test", **extra)


def test_meds_tasks_get_graph_timeline_display_whose_refs_resolve_and_a_rerun_asks_nothing(server, tmp_path):
    records, _ = synth_records()
    subjects = sorted(records)[:SUBJECTS]
    batch = keys_table([TaskKey(s) for s in subjects])
    before = server.stats.requests
    statuses = run_actor(meds_settings(tmp_path, server), batch)
    asked = server.stats.requests - before
    assert [s["status"] for s in statuses] == ["ok"] * SUBJECTS and asked > 0
    rows = rows_of(tmp_path)
    for sid in subjects:
        row = rows[str(sid)]
        assert row.stages == "graph,toa,display" and row.graph_rebuilt and row.toa_rebuilt and row.display_rebuilt
        graph = read_stored_graph(tmp_path, row.graph_file, graphml=True)  # the persisted graph, not the one in memory
        assert (graph.n_nodes, graph.n_edges, graph.info.content_hash) == (row.n_nodes, row.n_edges, row.content_hash)
        index = pq.read_table(tmp_path / row.index_file)  # the batch's part: this task's rows among others
        assert index.schema.equals(TASK_INDEX_SCHEMA)
        index = index.filter(pc.equal(index.column("task"), row.task))
        assert index.num_rows == row.n_nodes and index.num_rows - index.column("row").null_count == row.n_events
        timeline = TimelineStore(task_folder(tmp_path, TaskKey(sid))).load(sid)
        assert len(timeline.events) == row.n_timeline_events
        for event in timeline.events:
            assert event.source_event_refs and all(graph.has_event(ref) for ref in event.source_event_refs)
        display = json.loads((tmp_path / row.display_file).read_text())
        assert len(display["values"]) == row.n_display_values and row.failed_display_values == 0
        assert row.uncited_display_values == display["uncited_values"] == sum(
            v["origin"] == "uncited" for v in display["values"])
        assert row.llm_calls == row.toa_calls + row.display_calls > 0 and row.prompt_tokens > 0
        assert row.graph_s > 0 and row.toa_s > 0 and row.display_s > 0 and row.wall_s >= row.graph_s

    # a run cut short before its rows were written: nothing is rebuilt, nothing asked again
    shutil.rmtree(tmp_path / ROWS)
    before = server.stats.requests
    statuses = run_actor(meds_settings(tmp_path, server), batch)
    assert server.stats.requests == before and [s["status"] for s in statuses] == ["ok"] * SUBJECTS
    again = rows_of(tmp_path)
    assert not any(r.graph_rebuilt or r.toa_rebuilt or r.display_rebuilt for r in again.values())
    assert all(r.prompt_tokens == 0 for r in again.values())
    assert {k: r.n_timeline_events for k, r in again.items()} == {k: r.n_timeline_events for k, r in rows.items()}


def test_failed_extraction_calls_make_a_failed_row_and_a_retry_asks_again(server, tmp_path):
    records, _ = synth_records()
    sid = sorted(records)[0]
    batch = keys_table([TaskKey(sid)])
    with SyntheticLLMServer(fail_markers=["["]) as failing:  # every serialized chunk line carries "[e<k>]"
        statuses = run_actor(meds_settings(tmp_path, failing), batch)
    assert statuses[0]["status"] == "failed" and statuses[0]["error_kind"] == "llm_call_failed"
    row = rows_of(tmp_path)[str(sid)]
    assert (row.error_stage, row.stages, row.display_file, row.retry_class) == ("toa", "graph", None, "transient")
    assert row.failed_chunks == row.n_chunks > 0 and "chunk extraction call(s) failed" in row.error
    statuses = run_actor(meds_settings(tmp_path, server), batch)
    row = rows_of(tmp_path)[str(sid)]
    assert statuses[0]["status"] == "ok" and row.toa_rebuilt and row.failed_chunks == 0 and row.stages.endswith("display")


# ------------------------------------------------------------------------------------------------ XML input
MALFORMED = '<patient id="9001"><event id="e0" code="GENDER//F"/>\n<encounter id="e1" type="AMB"'
EMPTY = '<patient id="9002" sex="F">\n<event id="e0" code="GENDER//F"/>\n</patient>\n'
FAR_FUTURE = ('<patient id="9003" sex="M">\n<event id="e0" code="GENDER//M"/>\n'
              '<encounter id="e1" type="AMB" start="2020-01-05T09:00:00">\n'
              '<event id="e2" code="LOINC//718-7" time="2020-01-05T09:30:00" value="11.2" unit="g/dL"/>\n'
              '</encounter>\n<event id="e3" code="ICD10CM//C34.11" time="2300-01-01T00:00:00"/>\n</patient>\n')


def xml_cohort(root: Path, n_good: int = 3) -> dict[str, int]:
    """Good patients (both XML variants) plus a malformed file, a patient with no events and one dated 2300."""
    from vista.shared.timeline import render_timeline

    records, catalog = synth_records()
    good = {}
    for k, sid in enumerate(sorted(records)[:n_good]):
        record = records[sid]
        if k % 2:
            text = render_timeline(record, catalog).to_xml()
        else:
            text = encounter_xml(build_graph(record, catalog))
        (root / "good").mkdir(parents=True, exist_ok=True)
        (root / "good" / f"{sid}.xml").write_text(text)
        good[f"good/{sid}.xml"] = sid
    (root / "bad").mkdir(exist_ok=True)
    (root / "bad" / "malformed.xml").write_text(MALFORMED)
    (root / "bad" / "empty.xml").write_text(EMPTY)
    (root / "bad" / "future.xml").write_text(FAR_FUTURE)
    return good


def test_xml_files_become_graphs_and_bad_files_error_rows_naming_file_patient_and_field(tmp_path):
    xml_dir = tmp_path / "xml"
    good = xml_cohort(xml_dir)
    tasks, _ = list_xml_patients(xml_dir)
    assert len(tasks) == len(good) + 3
    batch = keys_table([t.key for t in tasks]).append_column(XML_FILE, pa.array([t.relative for t in tasks]))
    out = tmp_path / "out"
    statuses = run_actor(VistaSettings(out=out, xml_dir=xml_dir, run_id="x"), batch)
    assert sorted(s["status"] for s in statuses) == ["error"] * 3 + ["ok"] * len(good)
    rows = {Path(r.source).relative_to(xml_dir).as_posix(): r for r in rows_of(out).values()}
    for file, sid in good.items():
        row = rows[file]
        assert (row.status, row.subject_id, row.stages) == ("ok", sid, "graph")
        assert read_stored_graph(out, row.graph_file, graphml=True).n_nodes == row.n_nodes and row.n_events > 0
    malformed, empty, future = rows["bad/malformed.xml"], rows["bad/empty.xml"], rows["bad/future.xml"]
    assert (malformed.error_stage, malformed.error_kind, malformed.retry_class) == ("load", "input", "permanent")
    assert str(xml_dir / "bad" / "malformed.xml") in malformed.error and "not well-formed XML" in malformed.error
    assert (empty.error_stage, empty.error_kind, empty.subject_id) == ("graph", "input", 9002)
    assert "empty.xml: patient 9002" in empty.error and "field 'time'" in empty.error and "no events" in empty.error
    assert (future.error_stage, future.subject_id) == ("graph", 9003)
    assert "future.xml: patient 9003: event e3: field 'time'" in future.error and "2300-01-01" in future.error
    assert malformed.graph_file is None and empty.graph_file is None and future.graph_file is None


def test_listing_xml_tasks_refuses_a_missing_or_empty_directory(tmp_path):
    with pytest.raises(XmlDirectoryError, match="not a directory"):
        list_xml_patients(tmp_path / "none")
    with pytest.raises(XmlDirectoryError, match=r"no \*\.xml patient files"):
        list_xml_patients(tmp_path)


def test_stage_options_and_llm_defaults(tmp_path):
    from jobs.build_graphs import build_parser, build_settings
    from vista.shared.runs.errors import JobInputError

    base = ["--dataset", str(synth_root()), "--out", str(tmp_path / "o")]
    graph_only = build_settings(build_parser().parse_args(base), "r")
    assert graph_only.pipeline.stages == ("graph",) and graph_only.llm is None
    with_model = build_settings(build_parser().parse_args(base + ["--backend", "openai", "--base-url",
                                                                  "http://127.0.0.1:9/v1", "--model", "m"]), "r")
    assert with_model.pipeline.stages == ("graph", "toa", "display") and with_model.llm.cache_dir == (tmp_path / "o" / "llm_cache")
    explicit = build_settings(build_parser().parse_args(base + ["--stages", "graph,toa", "--chunk-chars", "4000",
                                                                "--no-safety-net"]), "r")
    assert explicit.pipeline.stages == ("graph", "toa") and explicit.llm.backend == "embedded"
    toa = explicit.pipeline.toa
    assert (toa.budget.limit, toa.budget.unit, toa.safety_net) == (4000, "chars", False)
    in_tokens = build_settings(build_parser().parse_args(base + ["--stages", "graph,toa", "--chunk-tokens", "1500"]), "r")
    assert (in_tokens.pipeline.toa.budget.limit, in_tokens.pipeline.toa.budget.unit) == (1500, "tokens")
    old = build_settings(build_parser().parse_args(base + ["--stages", "graph,toa", "--chunk-limit", "4000"]), "r")
    assert (old.pipeline.toa.budget.limit, old.pipeline.toa.budget.unit) == (4000, "chars")  # the deprecated spelling still works
    with pytest.raises(JobInputError, match="--stages: unknown stage"):
        build_settings(build_parser().parse_args(base + ["--stages", "graph,tao"]), "r")
    with pytest.raises(JobInputError, match="--labels goes with --dataset"):
        build_settings(build_parser().parse_args(["--xml-dir", str(tmp_path), "--out", str(tmp_path / "o"),
                                                  "--labels", "l.parquet"]), "r")


def test_bad_options_exit_with_one_clear_line(tmp_path, capsys):
    from jobs.build_graphs import main

    code = main(["--xml-dir", str(tmp_path / "missing"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "not a directory" in err
