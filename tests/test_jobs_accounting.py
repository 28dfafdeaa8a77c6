"""The run summary's LLM accounting without Ray: the budget's ledger (the `RequestBudget` the job's budget actor
holds, fed by a real gateway) against the rows an output kept, and where the cache hits came from.

The defect: after a node was lost, the summary summed the rows (1.57 M tokens) while the budget had counted 2.42 M —
the lost patients ran again from the response cache, so their new rows show 0 tokens for answers that were paid.
And "577 cache hits" were reported in a fresh output folder whose answers came from a cache shared with others.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, Field

from vista.shared.llm.remote import JobGateway
from vista.shared.runs.accounting import cache_origin, summary_figures
from vista.shared.runs.progress import ProgressTracker
from vista.shared.runs.parts import PartWriter, run_llm_rows
from vista.shared.runs.summary import RunSummary
from vista.shared.meds.task_key import TaskKey
from trajonco.prediction_rows import PART_SCHEMA, RowContext, part_record, row_from_failure
from vista.shared.llm import LLMConfig, open_gateway
from vista.shared.llm.backend import ChatReply, ChatRequest
from vista.shared.llm._budget import BudgetLimits, RequestBudget
from vista.shared.testing.scripted import ScriptedBackend
from vista.shared.llm.task_usage import usage_scope

T0 = datetime(2020, 1, 1)
RUN = "r1"
CONTEXT = RowContext(cancer="lung", variant="one_stage", model="m", run_id=RUN)


class Answer(BaseModel):
    risk: int = Field(ge=1, le=10)


class CountingEndpoint:
    """The "server": answers every request with its own token counts and adds up what it answered."""

    def __init__(self, prompt_tokens: int = 120, completion_tokens: int = 30, cached_prompt_tokens: int | None = None):
        self.prompt_tokens, self.completion_tokens, self.cached = prompt_tokens, completion_tokens, cached_prompt_tokens
        self.answered_prompt = self.answered_completion = 0

    def __call__(self, request: ChatRequest) -> ChatReply:
        self.answered_prompt += self.prompt_tokens
        self.answered_completion += self.completion_tokens
        return ChatReply(content='{"risk": 4}', finish_reason="stop", prompt_tokens=self.prompt_tokens,
                         completion_tokens=self.completion_tokens, cached_prompt_tokens=self.cached)


def _config(cache_dir: Path | None) -> LLMConfig:
    return LLMConfig(backend="openai", base_url="http://127.0.0.1:9/v1", model="gpt-4.1-mini", cache_dir=cache_dir)


async def _patient(gateway: JobGateway, subject: int):
    """One task: two calls (a worker and a manager), its usage counted as the actors count it."""
    with usage_scope() as usage:
        for agent in ("worker", "manager"):
            result = await gateway.complete([{"role": "user", "content": f"patient {subject}: {agent}"}], Answer,
                                            agent=agent, patient_id=subject)
            assert result.ok
    return usage


def _keep_row(out: Path, subject: int, usage) -> None:
    """Write the task's row to a part file (status aside, only its usage columns matter here)."""
    writer = PartWriter(out, run_id=RUN, schema=PART_SCHEMA)
    row = row_from_failure(TaskKey(subject, T0), None, TimeoutError("x"), usage, CONTEXT, wall_s=0.0)
    writer.add(part_record(row.model_copy(update={"finished_at": datetime.now(timezone.utc)}), None, usage))
    writer.flush()


def _summary(out: Path, ledger: RequestBudget | None, llm: LLMConfig) -> RunSummary:
    tracker = ProgressTracker("predict", to_run=3)
    base = RunSummary.from_tracker(tracker, run_id=RUN, started_at=datetime.now(timezone.utc), selected=3, skipped=0,
                                   retried=0, complete=True, outputs={}, totals={})
    stats = ledger.stats() if ledger is not None else None
    return base.model_copy(update=summary_figures(stats, run_llm_rows(out, RUN).kept, llm=llm, out=out))


def _run(out: Path, cache_dir: Path | None, *, lose: set[int] = frozenset(), endpoint: CountingEndpoint | None = None):
    """Three patients through one gateway whose limiter is the job's ledger; the rows of ``lose`` die with their
    actor and the tasks run again (their answers now come from the cache)."""
    endpoint = endpoint or CountingEndpoint()
    ledger = RequestBudget(BudgetLimits())
    llm = _config(cache_dir)

    async def go():
        async with open_gateway(llm, backend=ScriptedBackend(endpoint), shared_budget=ledger) as inner:
            gateway = JobGateway(inner)  # what an actor's pipeline calls: usage counted per task
            for subject in (1, 2, 3):
                usage = await _patient(gateway, subject)
                if subject not in lose:
                    _keep_row(out, subject, usage)
            for subject in sorted(lose):  # the repair pass
                _keep_row(out, subject, await _patient(gateway, subject))

    asyncio.run(go())
    return _summary(out, ledger, llm), endpoint


def test_summary_tokens_are_the_endpoints_even_when_rows_were_lost_and_rerun(tmp_path):
    out = tmp_path / "out"
    summary, endpoint = _run(out, out / "llm_cache", lose={2})
    acct = summary.llm_accounting
    # what the server answered: three patients' calls, once each (the rerun came from the cache)
    assert (endpoint.answered_prompt, endpoint.answered_completion) == (3 * 2 * 120, 3 * 2 * 30)
    assert (summary.prompt_tokens, summary.completion_tokens) == (endpoint.answered_prompt, endpoint.answered_completion)
    assert acct.source == "ledger"
    assert (acct.answered_by_endpoint_ledger.prompt_tokens, acct.answered_by_endpoint_ledger.completion_tokens) == (720, 180)
    assert (acct.in_rows_kept.prompt_tokens, acct.in_rows_kept.completion_tokens) == (480, 120)  # patient 2's row: 0
    assert (acct.paid_for_rows_lost_and_rerun.prompt_tokens, acct.paid_for_rows_lost_and_rerun.completion_tokens) == (240, 60)
    # priced like the gateway prices each call: the ledger's cost is the cost of every answer
    assert summary.cost_usd > acct.in_rows_kept.cost_usd > 0
    assert abs(summary.cost_usd - acct.in_rows_kept.cost_usd - acct.paid_for_rows_lost_and_rerun.cost_usd) < 1e-6
    assert summary.cache_hits == 2 and summary.shared_cache_hits == 0  # the rerun, from this output's own cache
    # the JSON names the figures
    data = json.loads(summary.model_dump_json())["llm_accounting"]
    assert set(data) >= {"answered_by_endpoint_ledger", "in_rows_kept", "paid_for_rows_lost_and_rerun"}
    printed = {row[0].strip() for row in _table_rows(summary)}
    assert {"tokens in / out (answered by the endpoint)", "tokens in rows kept", "paid for rows lost and rerun"} <= printed


def test_a_fresh_output_folder_reports_no_cache_hits_and_a_shared_cache_is_named_apart(tmp_path):
    fresh, _ = _run(tmp_path / "fresh", tmp_path / "fresh" / "llm_cache")
    assert fresh.cache_hits == 0 and fresh.shared_cache_hits == 0 and fresh.llm_calls == 6
    assert fresh.llm_accounting.paid_for_rows_lost_and_rerun.tokens == 0

    shared = tmp_path / "shared_cache"
    _run(tmp_path / "first", shared)  # another output filled the shared cache
    second, endpoint = _run(tmp_path / "second", shared)
    assert endpoint.answered_prompt == 0  # every answer came from the shared cache
    assert second.cache_hits == 0, "answers from a shared cache are not cache hits of this output"
    assert second.shared_cache_hits == 6 and second.shared_cache == str(shared)
    assert second.prompt_tokens == second.completion_tokens == 0


def test_the_endpoints_own_prompt_cache_is_not_a_cache_hit(tmp_path):
    out = tmp_path / "out"
    summary, _ = _run(out, out / "llm_cache", endpoint=CountingEndpoint(cached_prompt_tokens=100))
    assert summary.cache_hits == 0 and summary.shared_cache_hits == 0
    assert summary.llm_accounting.endpoint_prompt_cache_tokens == 6 * 100
    assert summary.prompt_tokens == 6 * 120  # cached prompt tokens are still answered (and billed at their rate)


def test_without_a_budget_the_rows_are_the_figures(tmp_path):
    out = tmp_path / "out"
    _run(out, None)
    summary = _summary(out, None, _config(None))
    assert summary.llm_accounting.source == "rows" and summary.prompt_tokens == 720
    assert summary.llm_accounting.paid_for_rows_lost_and_rerun is None and summary.cache_hits == 0


def test_cache_origin_compares_folders_not_prefixes(tmp_path):
    assert cache_origin(tmp_path / "out" / "llm_cache", tmp_path / "out") == "output"
    assert cache_origin(tmp_path / "out2" / "llm_cache", tmp_path / "out") == "shared"
    assert cache_origin("s3://b/out/llm_cache", "s3://b/out") == "output"
    assert cache_origin("s3://b/cache", "s3://b/out") == "shared" and cache_origin("s3://b/out/c", tmp_path) == "shared"


def _table_rows(summary: RunSummary) -> list[tuple[str, str]]:
    table = summary.table()
    names, values = (list(column.cells) for column in table.columns)
    return list(zip(names, values))


def test_who_answered_and_what_the_kept_rows_spent_come_from_one_scan(tmp_path, monkeypatch):
    """On main `answered_by` and `kept_usage` each scanned every part file at run end (three scans in all, for
    100,000 rows); one scan now serves both, with the same answers: who answered every row the run wrote, and the
    usage of the rows it kept (its newest row of each task; another run's rows left out)."""
    import vista.shared.runs.parts as row_parts
    from vista.shared.llm.task_usage import TaskUsage

    def keep(run: str, subject: int, tokens: int, backend: str, at: int) -> None:
        writer = PartWriter(tmp_path, run_id=run, schema=PART_SCHEMA)
        usage = TaskUsage(calls=1, prompt_tokens=tokens, backends=(backend,), endpoints=("h:1",), served_models=("M",))
        row = row_from_failure(TaskKey(subject, T0), None, TimeoutError("x"), usage,
                               CONTEXT.model_copy(update={"run_id": run}), wall_s=0.0)
        writer.add(part_record(row.model_copy(update={"finished_at": datetime(2024, 1, 1, 0, 0, at, tzinfo=timezone.utc)}),
                               None, usage))
        writer.flush()

    keep("r1", 1, 10, "a", 1)
    keep("r2", 1, 20, "b", 2)  # task 1 rerun by r2: its r1 row is superseded
    keep("r2", 2, 5, "c", 3)
    keep("r2", 2, 7, "b", 4)  # task 2 written twice by r2 (a repair pass): counted once, the newest
    keep("r1", 3, 100, "a", 5)
    scans = []
    real = row_parts.scan_parquet
    monkeypatch.setattr(row_parts, "scan_parquet", lambda files, *a, **k: scans.append(len(files)) or real(files, *a, **k))
    rows = run_llm_rows(tmp_path, "r2")
    assert rows.answered_by == {"backend": ["b", "c"], "endpoint_host": ["h:1"], "served_model": ["M"]}
    assert (rows.kept.prompt_tokens, rows.kept.calls) == (27, 2)
    assert scans == [5]
