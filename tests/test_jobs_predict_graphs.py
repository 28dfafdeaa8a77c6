"""One pass, two systems: ``jobs.predict --graphs STORE`` persists each patient's MEDS Graph from the record its actor
read for the agents, into the graph store `vista` opens. The actor runs here without Ray (as Ray Data runs it: an
async generator on an event loop) on the synthetic OpenAI-compatible endpoint; the Ray run is the last test."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graph_fixtures import synth_root
from jobs.manifest import check_manifest
from jobs.predict import fingerprint, prediction_outputs
from jobs.predict_actor import PredictActor, PredictSettings
from vista.shared.runs.parts import consolidate_parts
from vista.shared.meds.tasks import task_keys
from vista.shared.runs.errors import JobSettingsMismatch
from trajonco.pipeline import PipelineConfig
from trajonco.prediction_files import DETAILS_FILE, read_predictions
from vista.graph import GraphStore
from vista.graph.record_graphs import GRAPH_SCHEMA, register_record_graphs
from vista.graph.store import INDEX_DIR, MANIFEST_DIR, bucket_of
from vista.shared.llm import LLMConfig
from vista.cli import main as vista_main
from vista.shared.testing.synthetic_server import SyntheticLLMServer

ROOT = Path(__file__).parents[1]
PATIENTS = 4


@pytest.fixture(scope="module")
def server():
    with SyntheticLLMServer() as server:
        yield server


@pytest.fixture(scope="module")
def labels(tmp_path_factory) -> Path:
    """Label rows of the first patients of the synthetic dataset, each a day after its last event; the first patient
    twice (a second prediction time a year earlier: two tasks, one graph)."""
    rows = pl.scan_parquet(str(synth_root() / "data" / "**" / "*.parquet")).select("subject_id", "time")
    ends = (rows.group_by("subject_id").agg(pl.col("time").max()).drop_nulls().sort("subject_id").collect()
            .head(PATIENTS).with_columns((pl.col("time") + pl.duration(days=1)).cast(pl.Datetime("us"))))
    earlier = ends.head(1).with_columns(pl.col("time") - timedelta(days=365))
    table = pl.concat([ends, earlier]).select(pl.col("subject_id"), pl.col("time").alias("prediction_time"),
                                              (pl.col("subject_id") % 2 == 0).alias("boolean_value"))
    path = tmp_path_factory.mktemp("labels") / "labels.parquet"
    pq.write_table(table.to_arrow(), path)
    return path


def settings(out: Path, store: Path | None, server: SyntheticLLMServer, run_id: str = "r1") -> PredictSettings:
    llm = LLMConfig(backend="openai", base_url=server.base_url, model="synthetic", cache_dir=out / "llm_cache")
    return PredictSettings(dataset=synth_root(), out=out, pipeline=PipelineConfig(context_tokens=32768), llm=llm,
                           patients_per_actor=2, run_id=run_id, graphs=store)


def predict(labels: Path, out: Path, store: Path | None, server: SyntheticLLMServer, run_id: str = "r1") -> pl.DataFrame:
    """The predict actor over the label rows (one block), the job's consolidation, then (with a store) its last step;
    the run's rows as `read_predictions` gives them."""
    tasks = pq.read_table(labels)

    async def stream() -> list[dict]:
        actor = PredictActor(settings(out, store, server, run_id))
        return [row async for table in actor(tasks) for row in table.to_pylist()]

    assert len(asyncio.run(stream())) == tasks.num_rows
    report = consolidate_parts(out, prediction_outputs(out, labelled=True, graphs=store is not None), task_keys(tasks))
    assert report.complete
    if store is not None:
        register_record_graphs(store, out / DETAILS_FILE)
    return pl.from_arrow(read_predictions(out)).sort("subject_id", "prediction_time")


def vista(capsys, *argv: str) -> tuple[int, str]:
    """A `vista` command in this process: its exit status and what it printed."""
    capsys.readouterr()
    status = vista_main(list(argv))
    printed = capsys.readouterr()
    return status, printed.out + printed.err


def index_parts(store: Path) -> list[Path]:
    return sorted((store / INDEX_DIR).glob("part-*.parquet"))


def test_one_pass_predicts_and_stores_the_graphs_vista_opens(labels, server, tmp_path, capsys, monkeypatch):
    store = tmp_path / "store"
    rows = predict(labels, tmp_path / "out", store, server)
    subjects = sorted(set(rows["subject_id"].to_list()))
    assert rows.height == PATIENTS + 1 and rows["status"].to_list() == ["ok"] * rows.height
    assert rows["risk_score"].null_count() == 0  # the predictions are those of a run without --graphs
    assert set(GRAPH_SCHEMA.names) <= set(rows.columns) and rows["graph_status"].to_list() == ["ok"] * rows.height
    assert rows["graph_rebuilt"].all() and (rows["graph_nodes"] > 0).all()
    first = rows.filter(pl.col("subject_id") == subjects[0])
    assert first.height == 2 and first["graph_file"].n_unique() == 1  # two tasks of one patient: one graph

    graphs = GraphStore(store)  # the store every `vista` command opens: whole-record graphs by subject
    assert graphs.subject_ids() == subjects
    assert len(index_parts(store)) == 1  # one node-index part for the block
    nodes = graphs.scan_index().collect()
    assert sorted(nodes["subject_id"].unique().to_list()) == subjects
    assert nodes.group_by("subject_id").len().sort("subject_id")["len"].to_list() == (
        rows.unique("subject_id").sort("subject_id")["graph_nodes"].to_list())

    # the evidence's MEDS rows are graph nodes: each cited event id opens with `vista source`
    cited = [(row["subject_id"], source["event_id"]) for row in rows.iter_rows(named=True)
             for event in json.loads(row["events"]) for source in event["sources"]]
    assert cited, "the synthetic answers cite events"
    known = set(zip(nodes["subject_id"].to_list(), nodes["node_id"].to_list()))
    assert all(pair in known for pair in cited)
    subject, event_id = cited[0]
    status, shown = vista(capsys, "source", "--store", str(store), "--subject", str(subject), event_id)
    assert status == 0 and event_id in shown, shown
    status, shown = vista(capsys, "similar", "--store", str(store), "--subject", str(subjects[1]), "--k", "2")
    assert status == 0, shown

    # VISTA's LLM stages on the stored graph, then `vista display` and `vista ask` read what they stored
    monkeypatch.setenv("VISTA_LLM_BACKEND", "openai")
    llm = ["--llm", f"base_url={server.base_url}", "--llm", "model=synthetic"]
    for command in (["timeline"], ["display"], ["ask", "When was the diagnosis?"]):
        status, shown = vista(capsys, command[0], "--store", str(store), "--subject", str(subject), *command[1:], *llm)
        assert status == 0, shown


def test_a_rerun_into_the_same_store_rebuilds_and_reindexes_nothing(labels, server, tmp_path):
    store = tmp_path / "store"
    predict(labels, tmp_path / "first", store, server)
    parts, manifests = index_parts(store), sorted((store / MANIFEST_DIR).iterdir())
    files = {p: p.stat().st_mtime_ns for p in (store / "graphs").rglob("*") if p.is_file()}
    rows = predict(labels, tmp_path / "second", store, server, run_id="r2")  # another job, the same store
    assert rows["graph_status"].to_list() == ["ok"] * rows.height and not rows["graph_rebuilt"].any()
    assert index_parts(store) == parts and sorted((store / MANIFEST_DIR).iterdir()) == manifests
    assert {p: p.stat().st_mtime_ns for p in files} == files
    assert set(rows["graph_index_file"].to_list()) == {str(parts[0].relative_to(store))}


def test_a_graph_that_fails_keeps_its_prediction_and_says_why(labels, server, tmp_path):
    store = tmp_path / "store"
    subjects = sorted(set(pq.read_table(labels).column("subject_id").to_pylist()))
    blocked = subjects[-1]
    (store / "graphs").mkdir(parents=True)
    (store / "graphs" / bucket_of(blocked)).write_text("not a folder")  # its graph cannot be written
    rows = predict(labels, tmp_path / "out", store, server)
    bad = rows.filter(pl.col("subject_id") == blocked).row(0, named=True)
    assert bad["status"] == "ok" and bad["risk_score"] is not None  # the prediction is kept
    assert bad["graph_status"] == "error" and bad["graph_file"] is None
    assert bad["graph_error"].startswith(("NotADirectoryError", "FileExistsError")) and bucket_of(blocked) in bad["graph_error"]
    others = rows.filter(pl.col("subject_id") != blocked)
    assert others["graph_status"].to_list() == ["ok"] * others.height
    assert GraphStore(store).subject_ids() == [s for s in subjects if s != blocked]


def test_an_unreadable_patient_is_an_error_row_with_its_graph_error(labels, server, tmp_path):
    table = pq.read_table(labels).slice(0, 1)
    missing = table.set_column(0, "subject_id", pa.array([10_000_000], pa.int64()))
    path = tmp_path / "labels.parquet"
    pq.write_table(pa.concat_tables([table, missing]), path)
    rows = predict(path, tmp_path / "out", tmp_path / "store", server)
    bad = rows.filter(pl.col("subject_id") == 10_000_000).row(0, named=True)
    assert (bad["status"], bad["error_kind"], bad["graph_status"]) == ("error", "data", "error")
    assert "10000000" in bad["graph_error"]
    assert GraphStore(tmp_path / "store").subject_ids() == table.column("subject_id").to_pylist()


def test_the_store_is_part_of_the_jobs_settings(server, tmp_path):
    without = fingerprint(settings(tmp_path, None, server), "labels.parquet")
    with_store = fingerprint(settings(tmp_path, tmp_path / "store", server), "labels.parquet")
    assert without["graphs"] is None and with_store["graphs"]["store"] == str(tmp_path / "store")
    out = tmp_path / "out"
    check_manifest(out, "predict", without)
    with pytest.raises(JobSettingsMismatch, match=r"graphs\.store: None -> "):
        check_manifest(out, "predict", with_store)  # the rows already there have no graphs


def test_graphs_option_mistakes_are_one_line(labels, tmp_path):
    file = tmp_path / "a-file"
    file.write_text("x")
    common = [sys.executable, "-m", "jobs.predict", "--labels", str(labels), "--dataset", str(synth_root()),
              "--out", str(tmp_path / "out")]
    for value, said in ((str(file), f"--graphs {file}: is a file"), ("s3://bucket/store", "object storage")):
        done = subprocess.run([*common, "--graphs", value], capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.ray
def test_the_predict_job_on_ray_stores_the_graphs(labels, server, ray_session, tmp_path):
    from jobs import predict as job

    store = tmp_path / "store"
    argv = ["--labels", str(labels), "--dataset", str(synth_root()), "--out", str(tmp_path / "out"), "--backend",
            "openai", "--base-url", server.base_url, "--model", "synthetic", "--context-tokens", "32768",
            "--actors", "1", "--patients-per-actor", "2", "--graphs", str(store)]
    summary = job.run(job.build_parser().parse_args(argv))
    assert summary.complete and summary.outputs["graph_store"] == str(store)
    rows = pl.from_arrow(read_predictions(tmp_path / "out"))
    assert rows["graph_status"].to_list() == ["ok"] * rows.height
    assert GraphStore(store).subject_ids() == sorted(set(rows["subject_id"].to_list()))
    manifests = sorted((store / MANIFEST_DIR).iterdir())
    again = job.run(job.build_parser().parse_args(argv))  # all done: consolidates and registers, changing nothing
    assert again.complete and again.ran == 0 and sorted((store / MANIFEST_DIR).iterdir()) == manifests


def test_the_store_is_locked_for_the_run(labels, tmp_path):
    from vista.shared.runs.errors import JobError
    from vista.shared.runs.lock import OutputLock
    from jobs.predict import PredictJob
    from jobs.predict_options import build_parser

    store = tmp_path / "store"
    args = build_parser().parse_args(["--labels", str(labels), "--dataset", str(synth_root()), "--out",
                                      str(tmp_path / "out"), "--graphs", str(store)])
    with OutputLock(store):  # e.g. `vista build` or another predict run writing to it
        with pytest.raises(JobError, match="another run is writing"):
            with PredictJob(args, "r1").store_lock():
                pass
    inside = build_parser().parse_args(["--labels", str(labels), "--dataset", str(synth_root()), "--out",
                                        str(store), "--graphs", str(store)])
    with PredictJob(inside, "r1").store_lock():  # the store is --out: the runner's own lock on it covers it
        with OutputLock(store):
            pass
