"""An endpoint answering an endless (or a 100 MB) body costs one error per affected call and a bounded amount of
memory: the body is capped while it is read (``max_response_bytes``, derived from max_tokens), never read whole.

The client runs in a subprocess so its peak RSS (``ru_maxrss``) is its own; an address-space limit keeps a
regression from taking the machine with it (the uncapped client reached 9.2 GB)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vista.shared.llm.config import LLMConfig
from vista.shared.testing.synthetic_server import SyntheticLLMServer

TESTS = Path(__file__).resolve().parent
MEMORY_CEILING_MB = 1024
ADDRESS_SPACE_GUARD = 6 << 30  # the child is stopped (MemoryError) long before it can hurt the machine

CLIENT = textwrap.dedent('''
    import asyncio, json, sys
    from datetime import datetime
    sys.path.insert(0, sys.argv[2])
    from test_agents_patients import CATALOG, lung_patient
    from vista.shared.llm.remote import JobGateway
    from trajonco.pipeline import PipelineConfig, run_patient
    from trajonco.prediction_rows import RowContext, row_from_result
    from vista.shared.llm import LLMConfig, LLMGateway
    from vista.shared.llm.task_usage import usage_scope
    from vista.shared.meds.task_key import TaskKey

    async def main(base_url):
        config = LLMConfig(backend="openai", base_url=base_url, model="synthetic", timeout_s=15, max_retries=3)
        context = RowContext(cancer="lung", variant="one_stage", model="synthetic", backend="openai",
                             endpoint_host="x", run_id="r")
        rows, records = [], []
        async with LLMGateway(config) as gateway:
            for subject in (1, 2, 3):
                record = lung_patient(subject, n_visits=4)
                with usage_scope() as usage:
                    result = await run_patient(record, CATALOG, JobGateway(gateway), PipelineConfig(context_tokens=8192),
                                               prediction_time=datetime(2020, 1, 1))
                row = row_from_result(TaskKey(subject, datetime(2020, 1, 1)), None, result, usage, context, wall_s=0.0)
                rows.append(row.model_dump(mode="json", include={"subject_id", "status", "call_error_kinds",
                                                                 "retry_class", "llm_calls", "failed_calls"}))
            records = [{"ok": r.ok, "error_kind": r.error_kind, "attempts": r.attempts, "retries": r.retries}
                       for r in gateway.ledger]
        return rows, records

    rows, records = asyncio.run(main(sys.argv[1]))
    # the peak RSS of this process's own memory (VmHWM): getrusage's ru_maxrss survives exec, so a child forked
    # from a large pytest process would report the parent's size
    peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(json.dumps({"rows": rows, "records": records, "max_rss_mb": peak_kb / 1024}))
''')


def run_client(base_url: str) -> dict:
    import resource

    def guard() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_GUARD, ADDRESS_SPACE_GUARD))

    done = subprocess.run([sys.executable, "-c", CLIENT, base_url, str(TESTS)], capture_output=True, text=True,
                          timeout=240, preexec_fn=guard)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("server_options", [{"endless_body": True}, {"body_bytes": 100 << 20}],
                         ids=["endless", "100MB"])
def test_a_runaway_body_is_one_error_per_call_and_memory_stays_bounded(server_options):
    with SyntheticLLMServer(**server_options) as server:
        found = run_client(server.base_url)
        sent = server.stats.requests
    records, rows = found["records"], found["rows"]
    assert records and all(r["error_kind"] == "response_too_large" and not r["ok"] for r in records)
    assert all(r["attempts"] == 1 and r["retries"] == 0 for r in records)  # not retried: it would happen again
    assert sent == len(records)  # one request per affected call
    assert [r["subject_id"] for r in rows] == [1, 2, 3]  # every patient has its row, the job goes on
    assert all(r["status"] == "failed" and r["call_error_kinds"] == "response_too_large" for r in rows)
    assert all(r["retry_class"] == "permanent" and r["failed_calls"] == r["llm_calls"] >= 1 for r in rows)
    assert found["max_rss_mb"] < MEMORY_CEILING_MB, found["max_rss_mb"]


def test_the_cap_is_derived_from_max_tokens_and_configurable():
    derived = LLMConfig()
    assert derived.response_byte_limit(100) < derived.response_byte_limit(10_000) < 8 << 20
    assert LLMConfig.from_cli(["max_response_bytes=4096"], env={}).response_byte_limit(10_000) == 4096


def test_an_answer_under_the_cap_is_read_as_usual():
    """A body of 200 kB (bigger than any agent answer, under the derived cap) is not refused."""
    import asyncio

    from pydantic import BaseModel, Field

    from vista.shared.llm import LLMGateway

    class Answer(BaseModel):
        text: str = Field(max_length=10)

    async def ask(url: str):
        async with LLMGateway(LLMConfig(backend="openai", base_url=url, model="synthetic", max_reasks=0)) as gateway:
            return await gateway.complete([{"role": "user", "content": "hi"}], Answer, agent="t")

    with SyntheticLLMServer(body_bytes=200_000) as server:
        result = asyncio.run(ask(server.base_url))
    assert result.error is not None and result.error.kind.value == "invalid_output"  # read whole, then validated
    assert len(result.content or "") > 190_000


def test_the_drivers_endpoint_check_stops_on_an_endless_listing_in_one_line():
    from vista.shared.llm.endpoint_check import check_endpoint
    from vista.shared.llm.errors import LLMEndpointFailure

    with SyntheticLLMServer(endless_body=True) as server:
        with pytest.raises(LLMEndpointFailure) as caught:
            check_endpoint(LLMConfig(backend="openai", base_url=server.base_url, model="synthetic"), timeout_s=15)
    assert "too large" in str(caught.value) and "\n" not in str(caught.value)
