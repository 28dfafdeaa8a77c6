"""The gateway with the real embedded model: in process, and over HTTP behind a fault-injecting proxy."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from vista.shared.llm import ErrorKind, LLMConfig, LLMGateway, system, user
from vista.shared.llm.gateway import build_backend
from vista.shared.llm.embedded import EmbeddedModel, EmbeddedSettings, default_model_path, default_threads
from vista.shared.llm.errors import RETRYABLE_KINDS
from vista.shared.testing.fault_proxy import FAULTS, FaultPlan, FaultProxy

pytestmark = pytest.mark.llm


class Finding(BaseModel):
    finding: str = Field(max_length=40)
    when: str = Field(max_length=10)


class WorkerNote(BaseModel):
    risk: Literal["Low", "Moderate", "High"]
    findings: list[Finding] = Field(max_length=2)


class TinyRisk(BaseModel):
    risk: Literal["Low", "Moderate", "High"]
    reason: str = Field(max_length=16)


CHUNK = "2021-03-02 chronic cough. 2021-06-11 weight loss 4 kg. 2021-09-30 chest CT: 8 mm nodule, right upper lobe."


def test_structured_call_on_the_embedded_model_in_process():
    async def go():
        async with LLMGateway(LLMConfig(max_tokens=120)) as gateway:
            messages = [system("You extract lung-cancer-relevant findings from a patient record."), user(CHUNK)]
            first = await gateway.complete(messages, WorkerNote, agent="worker", patient_id=1)
            again = await gateway.complete(messages, WorkerNote, agent="worker", patient_id=1)
            too_long = await gateway.complete([user("cough " * 9000)], TinyRisk, agent="worker", patient_id=2)
            return gateway, first, again, too_long

    gateway, first, again, too_long = asyncio.run(go())
    assert first.ok, first.error
    assert isinstance(first.output, WorkerNote) and first.output.risk in {"Low", "Moderate", "High"}
    usage = first.usage
    assert usage.attempts == 1 and not usage.tokens_estimated and usage.cost_usd == 0.0
    assert usage.prompt_tokens > 30 and 0 < usage.completion_tokens < 120  # the compact grammar stops by itself
    assert again.usage.cached_prompt_tokens > 0  # llama.cpp's prompt cache served the repeat
    assert too_long.error.kind is ErrorKind.CONTEXT_OVERFLOW and too_long.usage.attempts == 1
    assert gateway.context_tokens == 8192


def test_every_gateway_in_a_process_shares_one_loaded_model(tmp_path):
    """The real-model test files each open their own gateway; the GGUF model (about 5 s to load on a busy 2-core
    machine) is loaded once per process, whatever else their configs change."""
    configs = [LLMConfig(max_tokens=120), LLMConfig(cache_dir=tmp_path, timeout_s=300), LLMConfig(max_reasks=0, max_retries=0)]
    models = {id(build_backend(config).model) for config in configs}
    shared = EmbeddedModel.shared(EmbeddedSettings(default_model_path(), 8192, default_threads()))
    assert models == {id(shared)}


@pytest.mark.slow
def test_ten_patients_over_http_through_injected_faults():
    """Every call ends with a validated answer or an error record; every request the proxy saw is accounted for."""
    model = EmbeddedModel.shared(EmbeddedSettings(default_model_path(), 8192, default_threads()))
    # the timeout leaves a loaded 2-core machine room (answers then take up to ~10 s); a "slow" fault outlasts it
    plan = FaultPlan(rate_limit=0.08, server_error=0.08, garbage_body=0.06, garbage_content=0.06, slow=0.05,
                     retry_after_s=1.0, slow_s=45.0)
    patients = range(10)

    async def go():
        async with FaultProxy(model.base_url, plan, seed=38, upstream_api_key=model.api_key) as proxy:
            config = LLMConfig(
                backend="openai", base_url=proxy.base_url, model="smollm2-135m-instruct-q4_1", max_tokens=48,
                timeout_s=20.0, max_concurrency=2, max_retries=6, backoff_base_s=0.2, backoff_max_s=1.0, max_reasks=2,
            )
            async with LLMGateway(config, job_id="fault-drill") as gateway:

                async def patient(pid: int):
                    worker = await gateway.complete(
                        [system("Rate lung cancer risk."), user(f"Patient {pid}: {CHUNK}")], TinyRisk, agent="worker", patient_id=pid
                    )
                    manager = await gateway.complete(
                        [system("Give the final risk."), user(f"Patient {pid} summary: cough, weight loss, nodule.")],
                        TinyRisk, agent="manager", patient_id=pid,
                    )
                    return [worker, manager]

                results = [r for pair in await asyncio.gather(*(patient(p) for p in patients)) for r in pair]
                return results, gateway.ledger, proxy

    results, ledger, proxy = asyncio.run(go())
    assert len(results) == 20 and len(ledger) == 20  # nothing lost
    assert all((r.output is None) != (r.error is None) for r in results)
    assert {(r.usage.agent, r.usage.patient_id) for r in results} == {(a, str(p)) for p in patients for a in ("worker", "manager")}
    total = ledger.total()
    assert total.attempts == proxy.requests  # every request the endpoint saw is in the usage
    assert all(proxy.counts[f] > 0 for f in FAULTS if getattr(plan, f)), proxy.counts  # every fault planned was exercised
    transport_faults = sum(proxy.counts[f] for f in ("rate_limit", "server_error", "garbage_body", "slow"))
    transport_failures = sum(1 for r in results if r.error is not None and r.error.kind in RETRYABLE_KINDS)
    assert total.retries + transport_failures >= transport_faults > 0  # each transport fault was retried (or recorded)
    invalid_failures = sum(1 for r in results if r.error is not None and r.error.kind in {ErrorKind.INVALID_OUTPUT, ErrorKind.TRUNCATED})
    assert total.reasks + invalid_failures >= proxy.counts["garbage_content"]  # each garbage answer was re-asked
    assert total.ok_calls >= 16, [str(r.error) for r in results if r.error]
