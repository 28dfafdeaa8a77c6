"""A patient's timeline is rendered and chunked once, off the event loop that runs every patient's LLM calls."""

from __future__ import annotations

import threading

import pytest

import trajonco.chunking as chunking
import trajonco.preparation as preparation
import vista.shared.timeline.model as timeline_model
from test_agents_chain import Script, manager_answer, worker_answer
from test_agents_patients import CATALOG, lung_patient
from trajonco.fitting import GatewayFacts
from trajonco.any_cancer import run_any_cancer
from trajonco.pipeline import PipelineConfig, default_prediction_time, run_patient, run_sync
from vista.shared.llm import LLMConfig
from vista.shared.testing.scripted import ScriptedBackend


def scripted() -> ScriptedBackend:
    return ScriptedBackend(Script(worker=worker_answer, manager=manager_answer(6), single_agent=manager_answer(2)))


@pytest.fixture
def preparing_threads(monkeypatch) -> list[threading.Thread]:
    """The threads `prepare_patient` ran on."""
    seen: list[threading.Thread] = []
    real = preparation.prepare_patient

    def spy(*args, **kwargs):
        seen.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(preparation, "prepare_patient", spy)
    return seen


@pytest.mark.parametrize("pipeline", [run_patient, run_any_cancer], ids=["one cancer", "any cancer"])
def test_the_timeline_is_prepared_on_a_worker_thread_not_on_the_calls_loop(pipeline, preparing_threads):
    loop_threads: list[threading.Thread] = []
    backend = scripted()
    real_complete = backend.complete

    async def complete(*args, **kwargs):  # the gateway's calls run on the event loop's thread
        loop_threads.append(threading.current_thread())
        return await real_complete(*args, **kwargs)

    backend.complete = complete
    run_sync(pipeline, lung_patient(n_visits=12), CATALOG, PipelineConfig(chunk_tokens=600), llm=LLMConfig(max_reasks=0),
        backend=backend)
    assert preparing_threads and loop_threads
    assert set(preparing_threads).isdisjoint(loop_threads)


def test_each_block_is_tokenized_once_per_patient(monkeypatch):
    """The chunks' counts are the sums of their blocks' (additive by construction, checked on hostile text in
    test_timeline_properties): the hot path does not encode the chunks a second time to check the sum."""
    encoded: list[int] = []
    real = chunking.count_tokens_batch

    def counting(texts, *args, **kwargs):
        encoded.append(sum(map(len, texts)))
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(chunking, "count_tokens_batch", counting)
    monkeypatch.setattr(timeline_model, "count_tokens_batch", counting)
    record = lung_patient(n_visits=40)
    facts = GatewayFacts("m", context_tokens=8192, output_tokens=512)
    prepared = preparation.prepare_patient(record, CATALOG, PipelineConfig(chunk_tokens=600), facts,
                                           default_prediction_time(record))
    assert len(prepared.chunks) > 1
    assert sum(encoded) == sum(len(b.text) for b in prepared.timeline.blocks)
