"""The response cache: hits on repeats, misses exactly when an input changes, atomic across processes."""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing

import pytest

from llm_models import Risk, WorkerAnswer
from vista.llm import BackendError, ErrorKind, LLMConfig, LLMGateway, user
from vista.testing.scripted import ScriptedBackend
from vista.llm.cache import CachedAnswer, ResponseCache

GOOD = '{"level": "Low", "reason": "stable"}'


def gateway_for(tmp_path, backend, **overrides) -> LLMGateway:
    settings = {"cache_dir": tmp_path / "cache", "model": "gpt-4.1-mini"} | overrides
    return LLMGateway(LLMConfig(**settings), backend=backend)


def ask(gateway, text="chunk 1", model=Risk, **kw):
    return asyncio.run(gateway.complete([user(text)], model, agent="worker", patient_id=5, **kw))


def test_repeat_is_a_free_cache_hit_even_across_gateways(tmp_path):
    backend = ScriptedBackend(lambda request: GOOD)
    first = ask(gateway_for(tmp_path, backend))
    rerun = gateway_for(tmp_path, backend)  # a new process would build a new gateway
    again = ask(rerun)
    assert len(backend.requests) == 1
    assert again.output == first.output and again.content == GOOD
    hit = again.usage
    assert hit.cache_hit and hit.ok and hit.cost_usd == 0.0 and hit.attempts == 0 and hit.prompt_tokens == 0
    assert rerun.ledger.total().cache_hits == 1
    assert first.usage.cost_usd > 0


@pytest.mark.parametrize(
    "change",
    [
        {"text": "chunk 2"},  # the prompt
        {"config": {"model": "gpt-4.1"}},  # the model
        {"config": {"temperature": 0.7}},  # a sampling parameter
        {"config": {"max_tokens": 100}},
        {"config": {"schema_mode": "json_object"}},
        {"response_model": WorkerAnswer},  # the schema
    ],
    ids=["prompt", "model", "temperature", "max_tokens", "schema_mode", "schema"],
)
def test_any_input_change_misses(tmp_path, change):
    worker = WorkerAnswer(summary="s", risk="Low").model_dump_json()
    backend = ScriptedBackend(lambda request: worker if "summary" in json.dumps(request.response_format) else GOOD)
    ask(gateway_for(tmp_path, backend))
    assert len(backend.requests) == 1
    gateway = gateway_for(tmp_path, backend, **change.get("config", {}))
    ask(gateway, text=change.get("text", "chunk 1"), model=change.get("response_model", Risk))
    assert len(backend.requests) == 2 and gateway.ledger.total().cache_hits == 0
    ask(gateway_for(tmp_path, backend))  # the original call is still cached
    assert len(backend.requests) == 2


def test_only_validated_answers_are_cached(tmp_path):
    backend = ScriptedBackend(['{"level": "Maybe"}'] * 3 + [BackendError(ErrorKind.HTTP_ERROR, "400", status=400), GOOD])
    gateway = gateway_for(tmp_path, backend)
    assert ask(gateway).error.kind is ErrorKind.INVALID_OUTPUT
    assert ask(gateway).error.kind is ErrorKind.HTTP_ERROR
    assert len(ResponseCache(tmp_path / "cache")) == 0
    assert ask(gateway).ok and len(ResponseCache(tmp_path / "cache")) == 1


def test_use_cache_false_bypasses_it(tmp_path):
    backend = ScriptedBackend(lambda request: GOOD)
    gateway = gateway_for(tmp_path, backend)
    ask(gateway)
    ask(gateway, use_cache=False)
    assert len(backend.requests) == 2


def test_unreadable_entry_is_a_reported_miss(tmp_path, caplog):
    backend = ScriptedBackend(lambda request: GOOD)
    gateway = gateway_for(tmp_path, backend)
    ask(gateway)
    (entry,) = (tmp_path / "cache").glob("??/*.json")
    entry.write_text("{half an entr")
    with caplog.at_level(logging.WARNING, logger="vista.llm.cache"):
        assert ask(gateway).ok
    assert len(backend.requests) == 2 and "unreadable" in caplog.text
    assert json.loads(entry.read_text())["content"] == GOOD  # rewritten whole


def _writer(root: str, worker: int, n: int) -> None:
    cache = ResponseCache(root)
    for i in range(n):
        key = f"{i % 7:064x}"
        cache.put(key, CachedAnswer(json.dumps({"worker": worker, "i": i, "pad": "x" * 5000}), "m", "S", 1, 1))


def test_concurrent_processes_never_leave_partial_entries(tmp_path):
    root = str(tmp_path / "shared")
    ctx = multiprocessing.get_context("fork")  # the writers touch only os, json and tempfile: safe to fork
    procs = [ctx.Process(target=_writer, args=(root, w, 60)) for w in range(3)]
    for p in procs:
        p.start()
    cache = ResponseCache(root)
    seen = 0
    while any(p.is_alive() for p in procs):  # read while they write: every entry read is whole
        for path in list((tmp_path / "shared").glob("??/*.json")):
            entry = cache.get(path.stem)
            if entry is not None:
                assert json.loads(entry.content)["pad"] == "x" * 5000
                seen += 1
    for p in procs:
        p.join()
        assert p.exitcode == 0
    assert len(cache) == 7 and not list((tmp_path / "shared").glob("??/*.tmp"))
