"""One concept of an LLM call: every gateway the pipelines are handed is a `vista.shared.llm.caller.LLMCaller` (the same
`complete` parameters as the Protocol's), and TrajOnco's pipeline runs on each of them with the same answer."""

from __future__ import annotations

import asyncio
import inspect
from datetime import datetime

import pytest

from test_agents_patients import CATALOG, lung_patient
from trajonco.agents.schemas import COMPACT_LIMITS, output_models
from trajonco.pipeline import PipelineConfig, run_patient
from vista.shared.llm import LLMConfig, LLMGateway, SyncLLMGateway
from vista.shared.llm.caller import AnswerTokens, GatewayWrapper, LLMCaller
from vista.shared.llm.remote import JobGateway
from vista.shared.testing.scripted import ScriptedBackend
from vista.shared.testing.synthetic_server import synthetic_content

T0 = datetime(2020, 1, 1)
CONFIG = PipelineConfig(variant="two_stage", chunk_tokens=400, context_tokens=8192)


def synthetic() -> ScriptedBackend:
    return ScriptedBackend(lambda request: synthetic_content(request.payload()), context_window=8192)


def gateway(backend: ScriptedBackend | None = None) -> LLMGateway:
    return LLMGateway(LLMConfig(backend="openai", base_url="http://unused", model="synthetic"), backend=backend or synthetic())


class Pool:
    """A remote completer in this process (the preprocessor pool's part), answering on its own gateway."""

    agent = "preprocessor"

    def __init__(self):
        self.gateway, self.calls = gateway(), 0

    async def complete(self, call):
        from vista.shared.llm.remote import answer_remote

        self.calls += 1
        return await answer_remote(self.gateway, call)


WRAPS = {
    "LLMGateway": lambda inner: inner,
    "AnswerTokens": lambda inner: AnswerTokens(inner, {output_models(COMPACT_LIMITS).worker: 900}),
    "JobGateway": lambda inner: JobGateway(inner),
    "JobGateway routed": lambda inner: JobGateway(inner, remote=Pool()),
    "JobGateway over AnswerTokens": lambda inner: JobGateway(AnswerTokens(inner, {})),
}


def _parameters(function) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("cls", [LLMGateway, GatewayWrapper, AnswerTokens, JobGateway, SyncLLMGateway])
def test_every_gateway_takes_the_protocols_call(cls):
    assert _parameters(cls.complete) == _parameters(LLMCaller.complete)
    methods = ("complete", "discover_context_tokens", "schema_for")
    assert all(_parameters(getattr(cls, m)) == _parameters(getattr(LLMCaller, m)) for m in methods)
    assert inspect.iscoroutinefunction(cls.complete) is (cls is not SyncLLMGateway)  # the sync face blocks instead


@pytest.mark.parametrize("name", sorted(WRAPS))
def test_the_pipeline_runs_on_each_caller_with_the_same_answer(name):
    record = lung_patient(n_visits=12)

    async def go(wrap):
        caller = wrap(gateway())
        assert isinstance(caller, LLMCaller)
        result = await run_patient(record, CATALOG, caller, CONFIG, prediction_time=T0)
        return result.model_dump(exclude={"latency", "usage"})

    assert asyncio.run(go(WRAPS[name])) == asyncio.run(go(WRAPS["LLMGateway"]))


def test_answer_tokens_asks_each_response_model_for_its_own_max_tokens():
    backend = synthetic()
    worker = output_models(COMPACT_LIMITS).worker

    async def go():
        caller = AnswerTokens(gateway(backend), {worker: 777})
        await run_patient(lung_patient(n_visits=6), CATALOG, caller, CONFIG, prediction_time=T0)

    asyncio.run(go())
    asked = {request.max_tokens for request in backend.requests}
    assert 777 in asked and len(asked) > 1  # the worker's calls asked for theirs, the others for the settings'


def test_the_sync_face_runs_the_async_pipeline_on_its_own_loop():
    record = lung_patient(n_visits=6)
    with SyncLLMGateway(LLMConfig(backend="openai", base_url="http://unused", model="synthetic"),
                        backend=synthetic()) as sync:
        result = sync.run(lambda caller: run_patient(record, CATALOG, caller, CONFIG, prediction_time=T0))
    expected = asyncio.run(run_patient(record, CATALOG, gateway(), CONFIG, prediction_time=T0))
    assert result.model_dump(exclude={"latency", "usage"}) == expected.model_dump(exclude={"latency", "usage"})
