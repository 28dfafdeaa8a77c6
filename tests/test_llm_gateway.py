"""LLMGateway with the scripted backend: validation and re-asks, retries and Retry-After, pacing, cost."""

from __future__ import annotations

import asyncio
import logging

import pytest

from llm_models import Risk, WorkerAnswer
from vista.shared.testing.clocks import FakeClock
from vista.shared.testing.scripted import Delayed, ScriptedBackend
from vista.shared.llm import ErrorKind, LLMCallFailed, LLMConfig, LLMGateway, Message, SyncLLMGateway, system, user
from vista.shared.llm.backend import ChatReply
from vista.shared.llm.errors import BackendError
from vista.shared.llm.prices import PriceTable
from vista.shared.llm.errors import SchemaError
from vista.shared.llm.prices import ModelPrice

GOOD = '{"level": "High", "reason": "nodule grew"}'
MESSAGES = [system("You assess cancer risk."), user("CT: 9 mm nodule, grew since last year.")]


def make(script, clock=None, **overrides) -> tuple[LLMGateway, ScriptedBackend]:
    backend = script if isinstance(script, ScriptedBackend) else ScriptedBackend(script)
    settings = {"model": "gpt-4.1-mini", "backoff_base_s": 1.0, "backoff_max_s": 8.0} | overrides
    gateway = LLMGateway(LLMConfig(**settings), backend=backend, clock=clock or FakeClock(), job_id="job-1")
    return gateway, backend


def run(coro):
    return asyncio.run(coro)


# ----------------------------------------------------------------------------- answers and validation
def test_valid_answer_is_parsed_and_recorded():
    gateway, backend = make([GOOD])
    result = run(gateway.complete(MESSAGES, Risk, agent="worker", patient_id=42))
    assert result.ok and result.output == Risk(level="High", reason="nodule grew")
    assert result.unwrap() is result.output
    usage = result.usage
    assert (usage.agent, usage.patient_id, usage.job_id, usage.schema_name) == ("worker", "42", "job-1", "Risk")
    assert (usage.attempts, usage.retries, usage.reasks, usage.cache_hit) == (1, 0, 0, False)
    assert (usage.prompt_tokens, usage.completion_tokens) == (10, 5)
    assert usage.cost_usd == pytest.approx((10 * 0.40 + 5 * 1.60) / 1e6)
    assert gateway.ledger.records == (usage,)
    sent = backend.requests[0]
    assert sent.response_format["type"] == "json_schema"
    assert sent.response_format["json_schema"]["schema"]["additionalProperties"] is False
    assert sent.temperature == 0.0 and sent.max_tokens == 1024 and sent.messages == tuple(MESSAGES)


def test_dict_messages_are_accepted_and_bad_ones_refused():
    gateway, backend = make([GOOD])
    result = run(gateway.complete([{"role": "user", "content": "hi"}], Risk, agent="worker"))
    assert result.ok and backend.requests[0].messages == (Message("user", "hi"),)
    with pytest.raises(TypeError, match=r"messages\[0\]"):
        run(gateway.complete([{"role": "user"}], Risk, agent="worker"))
    with pytest.raises(ValueError, match="role"):
        run(gateway.complete([{"role": "robot", "content": "x"}], Risk, agent="worker"))
    with pytest.raises(TypeError):
        run(gateway.complete([], Risk, agent="worker"))


def test_invalid_answer_is_reasked_with_the_validation_error():
    bad = '{"level": "Severe", "reason": "x"}'
    gateway, backend = make([bad, GOOD])
    result = run(gateway.complete(MESSAGES, Risk, agent="worker", patient_id=1))
    assert result.ok and result.usage.reasks == 1 and result.usage.attempts == 2
    assert result.usage.prompt_tokens == 20  # both rounds are paid for
    second = backend.requests[1].messages
    assert second[: len(MESSAGES)] == tuple(MESSAGES)
    assert second[-2] == Message("assistant", bad)
    assert second[-1].role == "user" and "level" in second[-1].content and "'Low', 'Moderate' or 'High'" in second[-1].content


def test_what_still_fails_becomes_an_error_record():
    gateway, backend = make(["not json", '{"level": "Low"}', '{"reason": "x"}'])
    result = run(gateway.complete(MESSAGES, Risk, agent="manager", patient_id=3))
    assert not result.ok and result.output is None
    assert result.error.kind is ErrorKind.INVALID_OUTPUT and result.error.attempts == 3
    assert "level" in result.error.message  # the last problem, named by field
    assert result.usage.ok is False and result.usage.error_kind == "invalid_output" and result.usage.reasks == 2
    assert len(backend.requests) == 3  # 1 + max_reasks
    with pytest.raises(LLMCallFailed, match="agent 'manager', patient 3: invalid_output"):
        result.unwrap()


def test_truncated_answer_is_reported_as_such():
    cut = ChatReply(content='{"level": "High", "reason": "nod', finish_reason="length", prompt_tokens=9, completion_tokens=8)
    gateway, backend = make([cut, cut], max_reasks=1)
    result = run(gateway.complete(MESSAGES, Risk, agent="worker"))
    assert result.error.kind is ErrorKind.TRUNCATED
    assert "cut off" in backend.requests[1].messages[-1].content


def test_refusal_is_not_reasked():
    gateway, backend = make([ChatReply(content=None, refusal="I can't help with that.")])
    result = run(gateway.complete(MESSAGES, Risk, agent="worker"))
    assert result.error.kind is ErrorKind.REFUSED and len(backend.requests) == 1


def test_fenced_json_and_prose_wrapped_json_validate():
    gateway, _ = make(["```json\n" + GOOD + "\n```", "Here you go: " + GOOD + " Hope it helps."])
    assert run(gateway.complete(MESSAGES, Risk, agent="w")).ok
    assert run(gateway.complete(MESSAGES, Risk, agent="w")).ok


def test_schema_in_prompt_when_the_endpoint_cannot_enforce_it():
    gateway, backend = make([GOOD], schema_mode="none")
    run(gateway.complete(MESSAGES, Risk, agent="w"))
    sent = backend.requests[0]
    assert sent.response_format is None
    assert sent.messages[0].role == "system" and '"additionalProperties":false' in sent.messages[0].content
    gateway, backend = make([GOOD], schema_mode="json_object")
    run(gateway.complete([user("hi")], Risk, agent="w"))
    assert backend.requests[0].response_format["type"] == "json_object"
    assert backend.requests[0].messages == (Message("user", "hi"),)


def test_unbounded_response_model_is_a_caller_error():
    from pydantic import BaseModel

    class Loose(BaseModel):
        text: str

    gateway, backend = make([GOOD])
    with pytest.raises(SchemaError, match="text"):
        run(gateway.complete(MESSAGES, Loose, agent="w"))
    assert backend.requests == []


# ----------------------------------------------------------------------------- retries
@pytest.mark.parametrize(
    "failure",
    [
        BackendError(ErrorKind.RATE_LIMITED, "429", status=429),
        BackendError(ErrorKind.SERVER_ERROR, "503", status=503),
        BackendError(ErrorKind.TIMEOUT, "slow"),
        BackendError(ErrorKind.CONNECTION_ERROR, "refused"),
        BackendError(ErrorKind.BAD_RESPONSE, "garbage"),
    ],
    ids=lambda e: e.kind.value,
)
def test_transient_failures_are_retried_with_full_jitter_backoff(failure):
    clock = FakeClock()
    gateway, backend = make([failure, failure, failure, GOOD], clock=clock)
    result = run(gateway.complete(MESSAGES, Risk, agent="worker"))
    assert result.ok and result.usage.attempts == 4 and result.usage.retries == 3
    assert len(clock.sleeps) == 3
    for i, slept in enumerate(clock.sleeps):  # full jitter: anywhere in [0, min(cap, base * 2^i)]
        assert 0.0 <= slept <= min(8.0, 1.0 * 2**i)
    assert result.usage.latency_s == pytest.approx(sum(clock.sleeps))


def test_retry_after_is_honoured():
    clock = FakeClock()
    gateway, _ = make([BackendError(ErrorKind.RATE_LIMITED, "429", status=429, retry_after_s=7.0), GOOD], clock=clock)
    result = run(gateway.complete(MESSAGES, Risk, agent="worker"))
    assert result.ok and sum(clock.sleeps) >= 7.0


def test_retry_after_cools_down_every_call_to_the_endpoint():
    clock = FakeClock()
    sent_at: list[tuple[str, float]] = []

    def script(request):
        who = request.messages[-1].content
        sent_at.append((who, clock.now))
        if who == "a" and sum(1 for w, _ in sent_at if w == "a") == 1:
            return BackendError(ErrorKind.RATE_LIMITED, "429", status=429, retry_after_s=30.0)
        return GOOD

    gateway, _ = make(ScriptedBackend(script), clock=clock, max_concurrency=1)

    async def both():
        return await asyncio.gather(
            gateway.complete([user("a")], Risk, agent="w"), gateway.complete([user("b")], Risk, agent="w")
        )

    first, second = run(both())
    assert first.ok and second.ok
    start = sent_at[0][1]
    # b was queued behind a's 429 and had to wait the shared cool-down too
    assert [w for w, _ in sent_at] == ["a", "b", "a"]
    assert sent_at[1][1] >= start + 30.0 and sent_at[2][1] >= start + 30.0


def test_non_retryable_errors_fail_at_once():
    gateway, backend = make([BackendError(ErrorKind.HTTP_ERROR, "bad request", status=400), GOOD])
    result = run(gateway.complete(MESSAGES, Risk, agent="worker", patient_id=9))
    assert result.error.kind is ErrorKind.HTTP_ERROR and result.error.status == 400 and result.error.attempts == 1
    assert len(backend.requests) == 1
    overflow = BackendError(ErrorKind.CONTEXT_OVERFLOW, "prompt too long", status=400)
    gateway, _ = make([overflow])
    assert run(gateway.complete(MESSAGES, Risk, agent="w")).error.kind is ErrorKind.CONTEXT_OVERFLOW


def test_retries_are_bounded_by_count():
    limit = BackendError(ErrorKind.RATE_LIMITED, "429", status=429)
    gateway, backend = make([limit] * 10, max_retries=3)
    result = run(gateway.complete(MESSAGES, Risk, agent="worker"))
    assert result.error.kind is ErrorKind.RATE_LIMITED and result.error.attempts == 4
    assert result.usage.retries == 3 and len(backend.requests) == 4


def test_retries_are_bounded_by_total_time():
    clock = FakeClock()
    limit = BackendError(ErrorKind.RATE_LIMITED, "429", status=429, retry_after_s=50.0)
    gateway, backend = make([limit] * 10, clock=clock, retry_budget_s=120.0, max_retries=10)
    result = run(gateway.complete(MESSAGES, Risk, agent="worker"))
    assert result.error.kind is ErrorKind.RATE_LIMITED and "retry budget of 120 s exhausted" in result.error.message
    assert len(backend.requests) == 3 and sum(clock.sleeps) <= 120.0


def test_a_hanging_backend_times_out(monkeypatch):
    monkeypatch.setattr("vista.shared.llm.gateway.TIMEOUT_GRACE_S", 0.0)

    class Hangs(ScriptedBackend):
        async def complete(self, request):
            self.requests.append(request)
            await asyncio.sleep(10)

    gateway, backend = make(Hangs([]), clock=FakeClock(), timeout_s=0.05, max_retries=1)
    result = run(gateway.complete(MESSAGES, Risk, agent="w"))
    assert result.error.kind is ErrorKind.TIMEOUT and len(backend.requests) == 2


def test_scripted_slow_answer_times_out_then_recovers():
    gateway, _ = make([Delayed(5.0, GOOD), Delayed(0.01, GOOD)], timeout_s=0.05)
    result = run(gateway.complete(MESSAGES, Risk, agent="w"))
    assert result.ok and result.usage.retries == 1


# ----------------------------------------------------------------------------- pacing
def test_concurrency_limit_is_respected():
    backend = ScriptedBackend(lambda request: Delayed(0.02, GOOD))
    gateway = LLMGateway(LLMConfig(max_concurrency=3), backend=backend)

    async def many():
        return await asyncio.gather(*(gateway.complete([user(f"p{i}")], Risk, agent="w", patient_id=i) for i in range(12)))

    results = run(many())
    assert all(r.ok for r in results) and backend.max_in_flight == 3


def test_qps_limit_spaces_requests():
    clock = FakeClock()
    times: list[float] = []

    def script(request):
        times.append(clock.now)
        return GOOD

    gateway, _ = make(ScriptedBackend(script), clock=clock, qps=2.0)

    async def many():
        for i in range(6):
            await gateway.complete([user(f"p{i}")], Risk, agent="w")

    run(many())
    # a burst of 2, then one every 0.5 s
    assert times[1] - times[0] == pytest.approx(0.0)
    assert [round(b - a, 6) for a, b in zip(times[1:], times[2:])] == [0.5, 0.5, 0.5, 0.5]


# ----------------------------------------------------------------------------- usage and cost
def test_missing_server_usage_is_counted_locally():
    counted: list[str] = []

    def counter(text: str) -> int:
        counted.append(text)
        return len(text.split())

    backend = ScriptedBackend([GOOD], report_usage=False)
    gateway = LLMGateway(LLMConfig(model="gpt-4.1"), backend=backend, token_counter=counter)
    result = run(gateway.complete(MESSAGES, Risk, agent="w"))
    assert result.usage.tokens_estimated is True
    assert result.usage.prompt_tokens == sum(len(m.content.split()) for m in MESSAGES)
    assert result.usage.completion_tokens == len(GOOD.split())
    assert result.usage.cost_usd == pytest.approx((result.usage.prompt_tokens * 2.0 + result.usage.completion_tokens * 8.0) / 1e6)


def test_default_local_token_counter_is_vista_tokens():
    tokens = pytest.importorskip("vista.shared.tokens")
    backend = ScriptedBackend([GOOD], report_usage=False)
    gateway = LLMGateway(LLMConfig(), backend=backend)
    result = run(gateway.complete([user("The quick brown fox")], Risk, agent="w"))
    assert result.usage.prompt_tokens == tokens.count_tokens("The quick brown fox")
    assert result.usage.completion_tokens == tokens.count_tokens(GOOD)


def test_usage_and_cost_aggregate_per_agent_patient_and_job(tmp_path):
    prices = PriceTable({"m": ModelPrice(input=1.0, output=10.0, cached_input=0.5)})
    replies = {
        "worker": ChatReply(content=GOOD, prompt_tokens=1000, completion_tokens=100, cached_prompt_tokens=400),
        "manager": ChatReply(content=GOOD, prompt_tokens=3000, completion_tokens=300),
    }
    backend = ScriptedBackend(lambda request: replies[request.messages[0].content])
    gateway = LLMGateway(LLMConfig(model="m"), backend=backend, prices=prices, job_id="j")

    async def job():
        for patient in (1, 2):
            for agent in ("worker", "worker", "manager"):
                await gateway.complete([system(agent), user(str(patient))], Risk, agent=agent, patient_id=patient)

    run(job())
    worker_cost = (600 * 1.0 + 400 * 0.5 + 100 * 10.0) / 1e6
    manager_cost = (3000 * 1.0 + 300 * 10.0) / 1e6
    by_agent = {s.group: s for s in gateway.ledger.summarise("agent")}
    assert by_agent["worker"].calls == 4 and by_agent["worker"].prompt_tokens == 4000
    assert by_agent["worker"].cost_usd == pytest.approx(4 * worker_cost)
    assert by_agent["manager"].cost_usd == pytest.approx(2 * manager_cost)
    by_patient = {s.group: s for s in gateway.ledger.summarise("patient_id")}
    assert set(by_patient) == {"1", "2"} and by_patient["1"].cost_usd == pytest.approx(2 * worker_cost + manager_cost)
    total = gateway.ledger.total()
    assert total.calls == 6 and total.ok_calls == 6 and total.cost_usd == pytest.approx(4 * worker_cost + 2 * manager_cost)
    assert [s.group for s in gateway.ledger.summarise("job_id")] == ["j"]
    # round trips
    gateway.ledger.to_parquet(tmp_path / "usage.parquet")
    gateway.ledger.to_json(tmp_path / "usage.json")
    from vista.shared.llm.usage import UsageLedger

    assert UsageLedger.from_parquet(tmp_path / "usage.parquet").records == gateway.ledger.records
    assert UsageLedger.from_json(tmp_path / "usage.json").records == gateway.ledger.records
    merged = UsageLedger.merge([gateway.ledger, UsageLedger.from_json(tmp_path / "usage.json")])
    assert merged.total().calls == 12


def test_unpriced_model_has_unknown_cost_not_zero(caplog):
    gateway, _ = make([GOOD, GOOD], model="my-local-model")
    with caplog.at_level(logging.WARNING, logger="vista.shared.llm.gateway"):
        run(gateway.complete(MESSAGES, Risk, agent="w"))
        run(gateway.complete(MESSAGES, Risk, agent="w"))
    assert [r.cost_usd for r in gateway.ledger] == [None, None]
    assert gateway.ledger.total().unpriced_calls == 2
    assert sum("no price" in r.message for r in caplog.records) == 1  # warned once


def test_failed_calls_and_retries_are_visible_in_usage():
    fail = BackendError(ErrorKind.SERVER_ERROR, "500", status=500)
    gateway, _ = make([fail, GOOD, BackendError(ErrorKind.HTTP_ERROR, "400", status=400)])
    run(gateway.complete(MESSAGES, Risk, agent="worker", patient_id=1))
    run(gateway.complete(MESSAGES, Risk, agent="worker", patient_id=2))
    total = gateway.ledger.total()
    assert (total.calls, total.ok_calls, total.failed_calls, total.retries, total.attempts) == (2, 1, 1, 1, 3)
    assert {s.group: s.calls for s in gateway.ledger.summarise("error_kind")} == {"-": 1, "http_error": 1}


# ----------------------------------------------------------------------------- context and sync front
def test_context_window_sources():
    gateway, _ = make([], model="gpt-4.1-mini")
    assert gateway.context_tokens == 8192  # the scripted backend knows its window
    gateway, _ = make(ScriptedBackend([], context_window=None), model="gpt-4.1-mini")
    assert gateway.context_tokens == 1047576  # from the price table
    gateway, _ = make(ScriptedBackend([], context_window=None), model="gpt-4.1-mini", context_tokens=32000)
    assert gateway.context_tokens == 32000  # the config wins
    gateway, _ = make(ScriptedBackend([], context_window=None), model="unknown-model")
    assert gateway.context_tokens is None


def test_sync_gateway_from_plain_code():
    backend = ScriptedBackend([GOOD, WorkerAnswer(summary="s", risk="Low").model_dump_json()])
    with SyncLLMGateway(LLMConfig(), backend=backend) as gateway:
        assert gateway.complete(MESSAGES, Risk, agent="w", patient_id=1).output.level == "High"
        answer = gateway.complete(MESSAGES, WorkerAnswer, agent="w", patient_id=1).unwrap()
        assert answer.summary == "s" and answer.events == []
        assert len(gateway.ledger) == 2 and gateway.context_tokens == 8192


def test_a_pause_longer_than_the_budget_fails_fast():
    clock = FakeClock()
    limit = BackendError(ErrorKind.RATE_LIMITED, "429", status=429, retry_after_s=3600.0)
    gateway, backend = make([limit, GOOD, GOOD], clock=clock, retry_budget_s=60.0)
    first = run(gateway.complete(MESSAGES, Risk, agent="w"))
    assert first.error.kind is ErrorKind.RATE_LIMITED and "exhausted" in first.error.message
    second = run(gateway.complete(MESSAGES, Risk, agent="w"))  # the endpoint still asks for an hour's pause
    assert second.error.kind is ErrorKind.RATE_LIMITED and "asked to pause 3600 s" in second.error.message
    assert second.usage.attempts == 0 and len(backend.requests) == 1 and sum(clock.sleeps) == 0
