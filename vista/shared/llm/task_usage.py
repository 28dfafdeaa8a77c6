"""What one task's LLM calls cost, counted per task while many tasks share one gateway.

Each call's `CallRecord` (tokens, cost, cache hit, attempts) is added to the `TaskUsage` of the task that made it,
found through a context variable, so tasks (patients) running concurrently on one event loop never mix their bills:
asyncio copies the variable into every sub-task started inside a `usage_scope`. A long-lived worker that counts
usage this way keeps no per-call records (`NullLedger`), so its memory does not grow with the tasks it serves.

>>> with usage_scope() as usage:
...     record_usage(CallRecord(call_id="c1", agent="worker", model="m", prompt_tokens=900, completion_tokens=100,
...                             attempts=2, retries=1, cost_usd=0.002))
...     record_usage(CallRecord(call_id="c2", agent="manager", model="m", cache_hit=True, cost_usd=None), remote=True)
>>> usage.calls, usage.cache_hits, usage.prompt_tokens, usage.retries, usage.unpriced_calls, usage.remote_calls
(2, 1, 900, 1, 1, 1)
>>> usage.backends, usage.served_models  # who answered (the records here say nothing of it)
((), ())
>>> (usage + usage).calls
4
>>> usage_columns(usage)["llm_calls"], USAGE_COLUMNS == tuple(usage_columns(usage))
(2, True)
>>> UsageColumns(**usage_columns(usage)).cache_hits  # the rows' usage columns, declared once for every row model
1
>>> record_usage(CallRecord(call_id="c3", agent="worker", model="m"))  # outside a scope: counted nowhere
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields

from pydantic import BaseModel, Field

from vista.shared.llm.usage import CallRecord, UsageLedger


@dataclass(slots=True)
class TaskUsage:
    """What one task's LLM calls cost: calls, cache hits, failures, tokens and dollars."""

    calls: int = 0
    cache_hits: int = 0
    failed_calls: int = 0
    attempts: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    remote_calls: int = 0  # calls answered by another worker pool (e.g. a job's two-stage preprocessors)
    backends: tuple[str, ...] = ()  # the backend kinds that answered (embedded, openai, ...), sorted, distinct
    endpoints: tuple[str, ...] = ()  # their host:port (or in-process)
    served_models: tuple[str, ...] = ()  # the models as the servers named them in their answers

    def add(self, record: CallRecord, *, remote: bool = False) -> None:
        self.calls += 1
        self.cache_hits += record.cache_hit
        self.failed_calls += not record.ok
        self.attempts += record.attempts
        self.retries += record.retries
        self.prompt_tokens += record.prompt_tokens
        self.completion_tokens += record.completion_tokens
        self.remote_calls += remote
        if record.cost_usd is None:
            self.unpriced_calls += 1
        else:
            self.cost_usd += record.cost_usd
        self.backends = _union(self.backends, (record.backend,))
        self.endpoints = _union(self.endpoints, (record.endpoint_host,))
        self.served_models = _union(self.served_models, (record.served_model,))

    def __add__(self, other: TaskUsage) -> TaskUsage:
        """Field-wise sum (e.g. a task's total over its stages); who answered is the union."""
        return TaskUsage(**{f.name: (_union(getattr(self, f.name), getattr(other, f.name)) if f.name in IDENTITY_FIELDS
                                     else getattr(self, f.name) + getattr(other, f.name)) for f in fields(self)})


IDENTITY_FIELDS = ("backends", "endpoints", "served_models")
"""`TaskUsage` fields naming who answered (unions, not sums)."""


def _union(a: tuple[str, ...] | list[str], b: tuple[str | None, ...] | list[str]) -> tuple[str, ...]:
    return tuple(sorted({*a, *(x for x in b if x)}))


class UsageColumns(BaseModel):
    """The usage columns of the jobs' per-task rows (`trajonco.prediction_rows.PredictionRow`,
    `vista.pipeline.rows.VistaRow`): row models inherit them, `usage_columns` fills them from a `TaskUsage`."""

    llm_calls: int = 0
    cache_hits: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = Field(0, description="calls whose model has no price (their cost is not in cost_usd)")


USAGE_COLUMNS = tuple(UsageColumns.model_fields)
"""The usage columns of the jobs' per-task rows (``prediction_details.parquet``, ``patients.parquet``), in their order."""


def usage_in_place(names: Iterable[str], *, after: str) -> list[str]:
    """A row model's field names in their on-disk order: the `USAGE_COLUMNS` it inherits (pydantic lists a base
    model's fields first) moved to just after ``after``, where the row's files have always kept them.

    >>> usage_in_place([*USAGE_COLUMNS, "task", "n_nodes", "wall_s"], after="n_nodes")[1:4]
    ['n_nodes', 'llm_calls', 'cache_hits']
    """
    own = [name for name in names if name not in USAGE_COLUMNS]
    at = own.index(after) + 1
    return [*own[:at], *USAGE_COLUMNS, *own[at:]]


def usage_columns(usage: TaskUsage) -> dict[str, int | float]:
    """A task's `TaskUsage` as the rows' `USAGE_COLUMNS` (``calls`` is ``llm_calls`` there)."""
    return {
        "llm_calls": usage.calls, "cache_hits": usage.cache_hits, "failed_calls": usage.failed_calls,
        "prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
        "cost_usd": usage.cost_usd, "unpriced_calls": usage.unpriced_calls,
    }


IDENTITY_COLUMNS = ("backend", "endpoint_host", "served_model")
"""The rows' columns naming who answered a task's calls (comma-joined when several did; None when none answered)."""


def identity_columns(usage: TaskUsage) -> dict[str, str | None]:
    """Who answered a task's calls, as the rows' `IDENTITY_COLUMNS`.

    >>> identity_columns(TaskUsage(backends=("openai",), endpoints=("127.0.0.1:8000",), served_models=("M",)))
    {'backend': 'openai', 'endpoint_host': '127.0.0.1:8000', 'served_model': 'M'}
    """
    return {"backend": ",".join(usage.backends) or None, "endpoint_host": ",".join(usage.endpoints) or None,
            "served_model": ",".join(usage.served_models) or None}


_CURRENT_USAGE: contextvars.ContextVar[TaskUsage | None] = contextvars.ContextVar("vista_task_usage", default=None)


@contextmanager
def usage_scope() -> Iterator[TaskUsage]:
    """Attribute every call made inside the block (and its asyncio sub-tasks) to a fresh `TaskUsage`."""
    usage = TaskUsage()
    token = _CURRENT_USAGE.set(usage)
    try:
        yield usage
    finally:
        _CURRENT_USAGE.reset(token)


def record_usage(record: CallRecord, *, remote: bool = False) -> None:
    """Add ``record`` to the current task's usage (no-op outside a `usage_scope`)."""
    usage = _CURRENT_USAGE.get()
    if usage is not None:
        usage.add(record, remote=remote)


class NullLedger(UsageLedger):
    """A ledger that keeps nothing: usage is counted per task instead (bounded memory in long-lived workers)."""

    def add(self, record: CallRecord) -> None:
        return None
