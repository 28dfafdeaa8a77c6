"""Small parts of the gateway: token bucket, cool-down, Retry-After parsing, price table, usage ledger, messages."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime, timezone

import pytest

from vista.shared.testing.clocks import FakeClock
from vista.shared.llm import CallRecord, Message
from vista.shared.llm.prices import PriceTable
from vista.shared.llm.usage import UsageLedger
from vista.shared.llm.errors import LLMConfigError
from vista.shared.llm._pacing import Cooldown, TokenBucket
from vista.shared.llm.retry import RetryPolicy, parse_retry_after, retry_after_from_headers
from vista.shared.llm.usage import _POLARS_SCHEMA


def test_token_bucket_rate_and_burst():
    clock = FakeClock()
    bucket = TokenBucket(4.0, burst=2, clock=clock)

    async def take(n):
        stamps = []
        for _ in range(n):
            await bucket.acquire()
            stamps.append(clock.now)
        return stamps

    stamps = asyncio.run(take(6))
    assert stamps[1] == stamps[0]
    assert [round(b - a, 6) for a, b in zip(stamps[1:], stamps[2:])] == [0.25] * 4
    with pytest.raises(ValueError):
        TokenBucket(0)


def test_cooldown_never_shortens_and_waits_out():
    clock = FakeClock()
    cool = Cooldown(clock=clock)
    cool.extend(10)
    cool.extend(3)
    assert cool.remaining() == 10
    assert asyncio.run(cool.wait()) == 10 and cool.remaining() == 0


def test_retry_after_forms():
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after("Wed, 01 Jan 2025 12:00:30 GMT", now=now) == 30.0
    assert parse_retry_after("Wed, 01 Jan 2025 11:00:00 GMT", now=now) == 0.0  # in the past
    assert parse_retry_after("-5") == 0.0
    assert parse_retry_after("whenever") is None and parse_retry_after(None) is None
    assert retry_after_from_headers({"Retry-After-Ms": "250", "Retry-After": "9"}) == 0.25
    assert retry_after_from_headers({"content-type": "json"}) is None


def test_backoff_ceiling_doubles_to_the_cap():
    import random

    policy = RetryPolicy(max_retries=9, budget_s=100.0, base_s=0.25, cap_s=3.0)
    assert [policy.ceiling(i) for i in range(6)] == [0.25, 0.5, 1.0, 2.0, 3.0, 3.0]
    rng = random.Random(1)
    draws = [policy.backoff(3, rng) for _ in range(200)]
    assert 0 <= min(draws) and max(draws) <= 2.0 and max(draws) - min(draws) > 1.0  # spread, not fixed


def test_price_table_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "prices.toml"
    bad.write_text('[models."x"]\ninput = -1\noutput = 2\n')
    with pytest.raises(LLMConfigError, match=r"prices.toml: models.x.input"):
        PriceTable.load(bad)
    bad.write_text("[models\n")
    with pytest.raises(LLMConfigError, match="not valid TOML"):
        PriceTable.load(bad)
    with pytest.raises(LLMConfigError, match="cannot read"):
        PriceTable.load(tmp_path / "missing.toml")
    good = tmp_path / "mine.toml"
    good.write_text('[models."local"]\ninput = 0\noutput = 0\n')
    assert PriceTable.load(good).cost("local", prompt_tokens=5, completion_tokens=5) == 0.0


def test_packaged_price_table_covers_the_paper_models():
    table = PriceTable.load()
    for model in ("gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "gpt-4o", "gpt-4o-mini", "gpt-5", "gpt-5-mini", "gpt-5-nano"):
        assert table.get(model) is not None, model
    assert table.cost("smollm2-135m-instruct-q4_1", prompt_tokens=10**6, completion_tokens=10**6) == 0.0


def test_ledger_frame_matches_call_record_and_empty_ledgers_work(tmp_path):
    assert list(_POLARS_SCHEMA) == [f.name for f in dataclasses.fields(CallRecord)]
    empty = UsageLedger()
    assert empty.summarise("agent") == [] and empty.total().calls == 0
    empty.to_parquet(tmp_path / "e.parquet")
    assert len(UsageLedger.from_parquet(tmp_path / "e.parquet")) == 0


def test_message_checks_its_fields():
    assert Message("user", "x").to_wire() == {"role": "user", "content": "x"}
    with pytest.raises(ValueError):
        Message("tool", "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Message("user", None)  # type: ignore[arg-type]


def test_records_results_and_errors_pickle_for_ray():
    import pickle

    from vista.shared.llm import ErrorKind, LLMCallFailed, LLMResult
    from vista.shared.llm.errors import BackendError, LLMCallError
    from vista.shared.llm.usage import utc_now
    from llm_models import Risk

    record = CallRecord(call_id="c", agent="worker", model="m", started_at=utc_now(), ok=False, error_kind="timeout")
    error = LLMCallError(ErrorKind.TIMEOUT, "slow", attempts=3)
    result = LLMResult(None, error, record)
    assert pickle.loads(pickle.dumps(result)) == result
    assert pickle.loads(pickle.dumps(LLMResult(Risk(level="Low", reason="r"), None, record))).output.level == "Low"
    again = pickle.loads(pickle.dumps(BackendError(ErrorKind.RATE_LIMITED, "429", status=429, retry_after_s=2.0)))
    assert (again.kind, again.status, again.retry_after_s) == (ErrorKind.RATE_LIMITED, 429, 2.0)
    failed = pickle.loads(pickle.dumps(LLMCallFailed(error, agent="worker", patient_id="7")))
    assert failed.error == error and "patient 7" in str(failed)
