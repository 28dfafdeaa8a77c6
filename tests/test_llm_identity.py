"""Every record says who answered: the backend kind, the endpoint's host:port (never its URL or key) and the model as
the server named it — in the gateway's call records, the prediction and VISTA rows, the cache key, the summary and
the report's caveat (which keys on the recorded backend, not on a model name)."""

from __future__ import annotations

import asyncio
import socket
from datetime import datetime

import pytest
from pydantic import BaseModel, Field

from trajonco.prediction_rows import PREDICTION_SCHEMA, RowContext, row_from_failure
from vista.shared.llm import LLMConfig, LLMGateway
from vista.shared.llm.config import EMBEDDED_MODEL_NAME
from vista.shared.testing.synthetic_server import SyntheticLLMServer
from vista.shared.llm.task_usage import TaskUsage, usage_scope, record_usage
from vista.shared.meds.task_key import TaskKey


class Answer(BaseModel):
    word: str = Field(max_length=20)


async def ask(config: LLMConfig, text: str = "hello"):
    async with LLMGateway(config) as gateway:
        result = await gateway.complete([{"role": "user", "content": text}], Answer, agent="t")
        return result, gateway


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_call_records_the_backend_the_host_and_the_model_the_server_named(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-to-be-recorded")
    with SyntheticLLMServer(model="M", served_model="M-2026-01-15") as server:
        result, _ = asyncio.run(ask(LLMConfig.from_cli([f"base_url={server.base_url}", "model=M"], env={})))
    record = result.usage
    port = server.base_url.split(":")[2].split("/")[0]
    assert result.ok and (record.backend, record.endpoint_host) == ("openai", f"127.0.0.1:{port}")
    assert (record.model, record.served_model) == ("M", "M-2026-01-15")
    assert "/v1" not in record.endpoint_host and "sk-" not in repr(record)


def test_an_answer_of_one_model_is_never_served_for_another_at_the_same_address(tmp_path):
    """A llama.cpp-style server answers any name with the file it loaded; after a restart with another model at the
    same URL, the cached answer of the first is not served (its /v1/models listing names the model)."""
    port = free_port()
    config = LLMConfig(backend="openai", base_url=f"http://127.0.0.1:{port}/v1", model="local", cache_dir=tmp_path)
    with SyntheticLLMServer(model="local", served_model="model-A.gguf", port=port) as first:
        a, _ = asyncio.run(ask(config))
        again, _ = asyncio.run(ask(config))
        assert first.stats.requests == 1 and again.usage.cache_hit and again.usage.served_model == "model-A.gguf"
    with SyntheticLLMServer(model="local", served_model="model-B.gguf", port=port) as second:
        b, _ = asyncio.run(ask(config))
        assert second.stats.requests == 1 and not b.usage.cache_hit
    assert (a.usage.served_model, b.usage.served_model) == ("model-A.gguf", "model-B.gguf")


def test_rows_carry_who_answered_and_fall_back_to_the_configured_backend():
    from trajonco.prediction_rows import row_from_result  # noqa: F401  (the same helper fills both kinds of row)
    from vista.shared.llm.usage import CallRecord

    context = RowContext(cancer="lung", variant="one_stage", model="M", backend="openai",
                         endpoint_host="10.0.0.5:8000", run_id="r")
    with usage_scope() as usage:
        record_usage(CallRecord(call_id="c", agent="worker", model="M", backend="openai", endpoint_host="10.0.0.5:8000",
                                served_model="M-served"))
    row = row_from_failure(TaskKey(1, datetime(2020, 1, 1)), None, TimeoutError("x"), usage, context, wall_s=0.0)
    assert (row.backend, row.endpoint_host, row.served_model) == ("openai", "10.0.0.5:8000", "M-served")
    none = row_from_failure(TaskKey(2, datetime(2020, 1, 1)), None, TimeoutError("x"), TaskUsage(), context, wall_s=0.0)
    assert (none.backend, none.endpoint_host, none.served_model) == ("openai", "10.0.0.5:8000", None)
    assert {"backend", "endpoint_host", "served_model"} <= set(PREDICTION_SCHEMA.names)


def test_the_summary_names_who_answered_from_the_runs_rows(tmp_path):
    from vista.shared.runs.parts import PartWriter, run_llm_rows
    from vista.shared.runs.summary import AnsweringLLM
    from trajonco.prediction_rows import PART_SCHEMA, part_record

    context = RowContext(cancer="lung", variant="one_stage", model="M", backend="embedded",
                         endpoint_host="in-process", run_id="r1")
    usage = TaskUsage(backends=("embedded",), endpoints=("in-process",), served_models=("SmolLM2-135M-Instruct.Q4_1",))
    writer = PartWriter(tmp_path, run_id="r1", schema=PART_SCHEMA)
    writer.add(part_record(row_from_failure(TaskKey(1, datetime(2020, 1, 1)), None, TimeoutError("x"), usage, context,
                                            wall_s=0.0), None))
    writer.flush()
    seen = run_llm_rows(tmp_path, "r1").answered_by
    assert seen == {"backend": ["embedded"], "endpoint_host": ["in-process"],
                    "served_model": ["SmolLM2-135M-Instruct.Q4_1"]}
    assert run_llm_rows(tmp_path, "another-run").answered_by["served_model"] == []
    llm = AnsweringLLM(backend="embedded", endpoint_host="in-process", model="M", backends=seen["backend"],
                       served_models=seen["served_model"])
    assert llm.describe() == "embedded in-process: M (served as SmolLM2-135M-Instruct.Q4_1)"


def test_vista_rows_carry_who_answered():
    from vista.pipeline.rows import VISTA_SCHEMA, VistaRow

    row = VistaRow(task="1", subject_id=1, status="ok", stages="graph,toa", run_id="r",
                   finished_at=datetime(2024, 1, 1))
    row = row.with_usage({"toa": TaskUsage(calls=2, backends=("openai",), endpoints=("h:1",), served_models=("X",))})
    assert (row.backend, row.endpoint_host, row.served_model, row.llm_calls) == ("openai", "h:1", "X", 2)
    assert {"backend", "endpoint_host", "served_model"} <= set(VISTA_SCHEMA.names)


# ------------------------------------------------------------------------------------------------ the report
def agent_file(path, *, model: str, backend: str | None, served: str | None):
    import polars as pl

    n = 24
    frame = pl.DataFrame({"subject_id": list(range(1, n + 1)), "prediction_time": [datetime(2020, 1, 1)] * n,
                          "boolean_value": [i < n // 2 for i in range(n)],
                          "predicted_boolean_probability": [0.1 + 0.03 * i for i in range(n)],
                          "model": [model] * n, "variant": ["one_stage"] * n})
    if backend is not None:
        frame = frame.with_columns(pl.lit(backend).alias("backend"), pl.lit(served).alias("served_model"))
    frame.write_parquet(path)
    return path


@pytest.mark.parametrize("model, backend, served, embedded", [
    ("M", "embedded", "SmolLM2-135M-Instruct.Q4_1", True),  # any name, run on the embedded model: said so
    (EMBEDDED_MODEL_NAME, "openai", "smollm2 on a server", False),  # the embedded model's name at an endpoint
    (EMBEDDED_MODEL_NAME, None, None, True),  # a file from before the column: the name is all there is
])
def test_the_embedded_model_caveat_keys_on_the_recorded_backend(tmp_path, model, backend, served, embedded):
    from benchmarks.report.predictions import load_predictions
    from benchmarks.report.results import ModelResult
    from benchmarks.report.sections import ran_embedded
    from benchmarks.report.settings import PredictionSource

    loaded = load_predictions(PredictionSource(path=agent_file(tmp_path / "p.parquet", model=model, backend=backend,
                                                               served=served), cohort="lung"))
    assert (loaded.llm_backend, loaded.served_model) == (backend, served)
    result = ModelResult.model_construct(model=loaded.name, llm_model=loaded.llm_model, llm_backend=loaded.llm_backend,
                                         served_model=loaded.served_model)
    assert ran_embedded(result) is embedded


def test_the_report_names_the_served_embedded_model(tmp_path):
    from report_fixtures import build_report_data

    from benchmarks.report.sections import notices

    data = build_report_data(tmp_path / "a", llm="M")
    assert not any("embedded" in n for n in notices(data))
    results = [r.model_copy(update={"llm_backend": "embedded", "served_model": "SmolLM2-135M-Instruct.Q4_1"})
               if r.kind == "prediction_file" else r for r in data.results.results]
    data.results = data.results.model_copy(update={"results": results})
    found = [n for n in notices(data) if "embedded test model" in n]
    assert found and "SmolLM2-135M-Instruct.Q4_1" in found[0]


# ------------------------------------------------------------------------------------------------ the embedded model
@pytest.mark.llm
def test_a_call_on_the_embedded_model_is_labelled_with_the_embedded_model(tmp_path):
    result, gateway = asyncio.run(ask(LLMConfig(max_tokens=16, n_ctx=1024, cache_dir=tmp_path)))
    record = result.usage
    assert (record.backend, record.endpoint_host) == ("embedded", "in-process")
    assert record.served_model == "SmolLM2-135M-Instruct.Q4_1" and record.model == EMBEDDED_MODEL_NAME
    cached, _ = asyncio.run(ask(LLMConfig(max_tokens=16, n_ctx=1024, cache_dir=tmp_path)))
    assert cached.usage.cache_hit and cached.usage.served_model == "SmolLM2-135M-Instruct.Q4_1"
