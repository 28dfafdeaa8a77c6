"""A cohort job's last step, `GraphStore.register_rows`: the graphs the actors wrote (graph files + one index part per
batch) registered in the output directory's graph store manifest, nothing rewritten, and a clear error naming a
missing index part."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graph_fixtures import synth_records
from vista.graph.errors import GraphFileError
from vista.graph.store import GraphStore, write_index_part
from vista.graph.task_graphs import meds_source, persist_task_graph, xml_source
from vista.shared.meds.task_key import TaskKey
from vista.pipeline import VISTA_SCHEMA, PipelineConfig, TaskPipeline

TASKS = 6


def _job_like(out: Path, subjects: list[int], *, batch: int = 4) -> Path:
    """What a job's actors leave (`vista.pipeline.TaskPipeline`): graphs, one index part per batch, and a
    patients.parquet of their rows, plus an error row without a graph."""
    records, catalog = synth_records()
    pipeline = TaskPipeline(out, PipelineConfig(), run_id="r")
    rows = []
    for start in range(0, len(subjects), batch):
        runs = [pipeline.graph(TaskKey(s), lambda s=s: meds_source(records[s], catalog, None))
                for s in subjects[start:start + batch]]
        pipeline.write_index(runs)
        rows += [run.finish() for run in runs]
    missing = out / "missing.xml"
    rows.append(pipeline.graph(TaskKey(999), lambda: xml_source(missing), xml_file=missing).finish())
    assert rows[-1].status == "error" and rows[-1].graph_file is None
    path = out / "patients.parquet"
    pq.write_table(pa.Table.from_pylist([row.model_dump() for row in rows], schema=VISTA_SCHEMA), path)
    return path


def _files(out: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(out)): (p.stat().st_mtime_ns, p.stat().st_size) for p in out.rglob("*") if p.is_file()}


def test_registered_graphs_open_and_query_as_a_store_and_a_rerun_writes_nothing(tmp_path):
    records, _ = synth_records()
    subjects = sorted(records)[:TASKS]
    patients = _job_like(tmp_path, subjects)
    report = GraphStore(tmp_path).register_rows(patients)
    assert (report.graphs, report.changed) == (TASKS, TASKS)
    store = GraphStore(tmp_path)
    assert store.subject_ids() == subjects
    index = store.scan_index().collect()
    assert index.height == report.nodes == store.manifest()["nodes"].sum()
    assert sorted(index["subject_id"].unique().to_list()) == subjects
    assert store.load(subjects[0]).n_nodes == store.manifest().filter(pl.col("subject_id") == subjects[0])["nodes"].item()
    before = _files(tmp_path)
    again = GraphStore(tmp_path).register_rows(patients)
    assert again.changed == 0 and _files(tmp_path) == before  # nothing rewritten, no manifest part appended


def test_a_missing_index_part_is_named(tmp_path):
    records, _ = synth_records()
    patients = _job_like(tmp_path, sorted(records)[:TASKS])
    part = pq.read_table(patients, columns=["index_file"]).column("index_file")[0].as_py()
    (tmp_path / part).unlink()
    with pytest.raises(GraphFileError, match=rf"{tmp_path / part}: graph index part named by patients.parquet is missing"):
        GraphStore(tmp_path).register_rows(patients)


def test_label_tasks_are_registered_as_tasks_not_as_patients(tmp_path):
    """A label-driven job's graphs are records cut at prediction times: listed by task, loadable by name, in the
    index with ``all_tasks``, but not patients of the store (``vista ask`` opens whole records)."""
    records, catalog = synth_records()
    sid = sorted(records)[0]
    record = records[sid]
    cut = record.events[len(record.events) // 2].time
    keys = [TaskKey(sid), TaskKey(sid, cut)]
    outcomes = [persist_task_graph(meds_source(record, catalog, k.prediction_time), tmp_path, k, need_graph=False)
                for k in keys]
    part = write_index_part(tmp_path, (o.index for o in outcomes))
    store = GraphStore(tmp_path)
    store.register([o.entry(k.name, k.prediction_time, part) for k, o in zip(keys, outcomes)])
    store = GraphStore(tmp_path)
    assert store.subject_ids() == [sid] and store.tasks() == sorted(k.name for k in keys)
    assert store.load_task(keys[1].name).n_nodes == outcomes[1].facts.n_nodes < store.load(sid).n_nodes
    assert store.scan_index().select(pl.len()).collect().item() == outcomes[0].facts.n_nodes
    everything = store.scan_index(all_tasks=True).collect()
    assert everything.height == sum(o.facts.n_nodes for o in outcomes)
    assert everything.filter(pl.col("prediction_time").is_not_null())["task"].unique().to_list() == [keys[1].name]
