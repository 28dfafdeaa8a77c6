"""VISTA's per-patient pipeline (`vista.pipeline`) on its own, without a job: graph → TOA → display → row through
a plain `LLMGateway`; the store it writes is the one the `vista` commands open; jobs/ holds none of it."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graph_fixtures import synth_records
from vista.cli import main
from vista.graph import GraphStore
from vista.graph.task_graphs import meds_source
from vista.shared.llm import LLMConfig, open_gateway
from vista.shared.testing.synthetic_server import SyntheticLLMServer
from vista.shared.meds.task_key import TaskKey
from vista.pipeline import STAGES, VISTA_SCHEMA, PipelineConfig, TaskPipeline, VistaRow

JOBS = Path(__file__).resolve().parents[1] / "jobs"
def test_jobs_hold_no_vista_stage_name_and_build_no_vista_row():
    """jobs/ is wiring: the stages, their order and the row are `vista.pipeline`'s."""
    found = []
    for path in sorted(JOBS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in STAGES:
                found.append(f"{path.name}:{node.lineno}: {node.value!r}")
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "VistaRow":
                found.append(f"{path.name}:{node.lineno}: VistaRow(...)")
    assert found == []


@pytest.fixture(scope="module")
def server():
    with SyntheticLLMServer() as running:
        yield running


def _run(out: Path, server: SyntheticLLMServer, keys: list[TaskKey]) -> list[VistaRow]:
    """Each task through every stage, as a job's actor does it (one index part for the block), on one gateway."""
    records, catalog = synth_records()
    pipeline = TaskPipeline(out, PipelineConfig(stages=STAGES), run_id="t")
    runs = [pipeline.graph(k, lambda k=k: meds_source(records[k.subject_id], catalog, k.prediction_time)) for k in keys]
    pipeline.write_index(runs)

    async def llm_stages() -> None:
        config = LLMConfig(backend="openai", base_url=server.base_url, model="synthetic", cache_dir=None)
        async with open_gateway(config) as gateway:
            await gateway.discover_context_tokens()
            for run in runs:
                await pipeline.run_llm_stages(run, gateway)

    asyncio.run(llm_stages())
    return [run.finish() for run in runs]


def test_a_whole_record_and_a_label_task_through_every_stage_into_the_store_vista_commands_open(
        server, tmp_path, capsys):
    records, _ = synth_records()
    sid = sorted(records)[0]
    cut = records[sid].events[len(records[sid].events) // 2].time
    whole, label = _run(tmp_path, server, [TaskKey(sid), TaskKey(sid, cut)])
    for row in (whole, label):
        assert (row.status, row.stages, row.retry_class) == ("ok", "graph,toa,display", None)
        assert row.n_timeline_events > 0 and row.n_display_values > 0 and row.failed_display_values == 0
    assert (whole.toa_file, whole.display_file) == (f"toa/{sid}.json", f"display/{sid}.json")
    assert label.toa_file.startswith(f"tasks/{sid % 100:02d}/{label.task}/toa/")
    patients = tmp_path / "patients.parquet"
    pq.write_table(pa.Table.from_pylist([whole.model_dump(), label.model_dump()], schema=VISTA_SCHEMA), patients)
    assert GraphStore(tmp_path).register_rows(patients).changed == 2

    asked = server.stats.requests
    llm = ["--llm", "backend=openai", "--llm", f"base_url={server.base_url}", "--llm", "model=synthetic",
           "--llm", "cache_dir="]
    assert main(["display", "--store", str(tmp_path), "--subject", str(sid), *llm]) == 0
    assert "loaded from the store (unchanged inputs; no model call)" in capsys.readouterr().out
    assert server.stats.requests == asked  # the command found the pipeline's timeline and display current


def test_a_timeout_is_an_error_row_at_the_stage_that_was_running(tmp_path):
    records, catalog = synth_records()
    sid = sorted(records)[0]
    pipeline = TaskPipeline(tmp_path, PipelineConfig(stages=STAGES), run_id="t")
    run = pipeline.graph(TaskKey(sid), lambda: meds_source(records[sid], catalog, None))
    run.timed_out(TimeoutError("task 7: LLM stages: not finished within 1 s"))
    row = run.finish()
    assert (row.status, row.error_stage, row.error_kind, row.retry_class) == ("error", "toa", "timeout", "transient")
    assert row.stages == "graph" and row.graph_file is not None and "not finished within 1 s" in row.error
