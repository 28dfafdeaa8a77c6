"""Per-call usage records and their aggregation per agent, patient, job or model.

Every gateway call — answered, cached or failed — leaves one `CallRecord` in a `UsageLedger`
(tokens, latency, attempts, retries, re-asks, cache hit, cost, error). Ledgers from many
processes merge by concatenation and round-trip through parquet or JSON.

>>> ledger = UsageLedger()
>>> ledger.add(CallRecord(call_id="c1", agent="worker", patient_id="7", model="gpt-4.1-mini", prompt_tokens=1000,
...                       completion_tokens=200, cost_usd=0.00072, latency_s=1.5))
>>> ledger.add(CallRecord(call_id="c2", agent="manager", patient_id="7", model="gpt-4.1-mini", cache_hit=True, cost_usd=0.0))
>>> [(s.group, s.calls, s.prompt_tokens, s.cache_hits) for s in ledger.summarise("agent")]
[('manager', 1, 0, 1), ('worker', 1, 1000, 0)]
>>> ledger.total().cost_usd
0.00072
"""

from __future__ import annotations

import json
import os
import random
import threading
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

import polars as pl

from vista.shared.atomic import atomic_path, atomic_write_text

GroupBy = Literal["agent", "patient_id", "job_id", "model", "schema_name", "error_kind"]


@dataclass(frozen=True, slots=True)
class CallRecord:
    """Usage of one gateway call (all attempts and re-asks together)."""

    call_id: str
    agent: str
    model: str
    patient_id: str | None = None
    job_id: str | None = None
    backend: str = ""  # which kind of backend answered: embedded, openai, scripted, ...
    endpoint_host: str = ""  # where: host:port of the endpoint, or in-process (never a full URL or a key)
    served_model: str | None = None  # the model as the server named it (None: no answer said, e.g. a failed call)
    schema_name: str = ""
    started_at: datetime | None = None  # wall-clock UTC
    latency_s: float = 0.0  # from the call's start to its end, waits included
    attempts: int = 0  # requests sent to the endpoint (0 on a cache hit)
    retries: int = 0  # transport retries (429, 5xx, timeouts, connection, unreadable body)
    reasks: int = 0  # extra requests after an answer failed validation
    cache_hit: bool = False
    prompt_tokens: int = 0  # summed over attempts that got an answer; 0 on a cache hit
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # prompt tokens the provider served from its own prompt cache
    tokens_estimated: bool = False  # some counts came from a local tokenizer because the server sent no usage
    cost_usd: float | None = 0.0  # None when the model has no price in the table
    ok: bool = True
    error_kind: str | None = None
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class UsageSummary:
    """Totals over a group of calls."""

    group: str
    calls: int
    ok_calls: int
    failed_calls: int
    cache_hits: int
    attempts: int
    retries: int
    reasks: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    unpriced_calls: int  # calls whose model had no price (their cost is missing from cost_usd)
    latency_s_total: float
    latency_s_mean: float
    latency_s_max: float


_POLARS_SCHEMA = {
    "call_id": pl.String,
    "agent": pl.String,
    "model": pl.String,
    "patient_id": pl.String,
    "job_id": pl.String,
    "backend": pl.String,
    "endpoint_host": pl.String,
    "served_model": pl.String,
    "schema_name": pl.String,
    "started_at": pl.Datetime("us", "UTC"),
    "latency_s": pl.Float64,
    "attempts": pl.Int64,
    "retries": pl.Int64,
    "reasks": pl.Int64,
    "cache_hit": pl.Boolean,
    "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
    "cached_prompt_tokens": pl.Int64,
    "tokens_estimated": pl.Boolean,
    "cost_usd": pl.Float64,
    "ok": pl.Boolean,
    "error_kind": pl.String,
    "error_message": pl.String,
}
assert list(_POLARS_SCHEMA) == [f.name for f in fields(CallRecord)], "keep the frame schema in step with CallRecord"


class UsageLedger:
    """An append-only, thread-safe list of `CallRecord`s with summaries and parquet/JSON I/O."""

    def __init__(self, records: Iterable[CallRecord] = ()):
        self._records: list[CallRecord] = list(records)
        self._lock = threading.Lock()

    def add(self, record: CallRecord) -> None:
        with self._lock:
            self._records.append(record)

    @property
    def records(self) -> tuple[CallRecord, ...]:
        with self._lock:
            return tuple(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[CallRecord]:
        return iter(self.records)

    @classmethod
    def merge(cls, ledgers: Iterable[UsageLedger | Iterable[CallRecord]]) -> UsageLedger:
        """One ledger holding the records of all ``ledgers`` (e.g. gathered from Ray actors)."""
        return cls(record for ledger in ledgers for record in ledger)

    # ------------------------------------------------------------------ frames
    def to_frame(self) -> pl.DataFrame:
        rows = [asdict(r) for r in self.records]
        return pl.DataFrame(rows, schema=_POLARS_SCHEMA, orient="row") if rows else pl.DataFrame(schema=_POLARS_SCHEMA)

    @classmethod
    def from_frame(cls, frame: pl.DataFrame) -> UsageLedger:
        missing = set(_POLARS_SCHEMA) - set(frame.columns)
        if missing:
            raise ValueError(f"usage frame lacks column(s) {sorted(missing)}")
        return cls(CallRecord(**row) for row in frame.select(list(_POLARS_SCHEMA)).iter_rows(named=True))

    def to_parquet(self, path: Path) -> None:
        with atomic_path(path) as tmp:
            self.to_frame().write_parquet(tmp)

    @classmethod
    def from_parquet(cls, path: Path) -> UsageLedger:
        return cls.from_frame(pl.read_parquet(path))

    def to_json(self, path: Path) -> None:
        """A JSON array of records (datetimes in ISO 8601)."""
        rows = [asdict(r) | {"started_at": r.started_at.isoformat() if r.started_at else None} for r in self.records]
        atomic_write_text(path, json.dumps(rows, indent=1, ensure_ascii=False))

    @classmethod
    def from_json(cls, path: Path) -> UsageLedger:
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(
            CallRecord(**(row | {"started_at": datetime.fromisoformat(row["started_at"]) if row.get("started_at") else None}))
            for row in rows
        )

    # --------------------------------------------------------------- summaries
    def summarise(self, by: GroupBy) -> list[UsageSummary]:
        """One `UsageSummary` per distinct value of ``by`` (None shown as ``"-"``), sorted by group."""
        frame = self.to_frame().with_columns(pl.col(by).fill_null("-").alias("_group"))
        if frame.is_empty():
            return []
        grouped = frame.group_by("_group").agg(_AGGREGATES).sort("_group")
        return [_summary(row) for row in grouped.iter_rows(named=True)]

    def total(self) -> UsageSummary:
        """All calls in one `UsageSummary` (group ``"all"``)."""
        frame = self.to_frame().with_columns(pl.lit("all").alias("_group"))
        if frame.is_empty():
            return UsageSummary("all", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0, 0.0, 0.0, 0.0)
        return _summary(frame.group_by("_group").agg(_AGGREGATES).row(0, named=True))


_AGGREGATES = [
    pl.len().alias("calls"),
    pl.col("ok").sum().alias("ok_calls"),
    (~pl.col("ok")).sum().alias("failed_calls"),
    pl.col("cache_hit").sum().alias("cache_hits"),
    pl.col("attempts").sum(),
    pl.col("retries").sum(),
    pl.col("reasks").sum(),
    pl.col("prompt_tokens").sum(),
    pl.col("completion_tokens").sum(),
    pl.col("cost_usd").fill_null(0.0).sum().alias("cost_usd"),
    pl.col("cost_usd").is_null().sum().alias("unpriced_calls"),
    pl.col("latency_s").sum().alias("latency_s_total"),
    pl.col("latency_s").mean().alias("latency_s_mean"),
    pl.col("latency_s").max().alias("latency_s_max"),
]


def _summary(row: dict) -> UsageSummary:
    return UsageSummary(
        group=str(row["_group"]),
        calls=int(row["calls"]),
        ok_calls=int(row["ok_calls"]),
        failed_calls=int(row["failed_calls"]),
        cache_hits=int(row["cache_hits"]),
        attempts=int(row["attempts"]),
        retries=int(row["retries"]),
        reasks=int(row["reasks"]),
        prompt_tokens=int(row["prompt_tokens"]),
        completion_tokens=int(row["completion_tokens"]),
        cost_usd=round(float(row["cost_usd"]), 10),
        unpriced_calls=int(row["unpriced_calls"]),
        latency_s_total=float(row["latency_s_total"]),
        latency_s_mean=float(row["latency_s_mean"]),
        latency_s_max=float(row["latency_s_max"]),
    )


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


_CALL_IDS = random.Random(os.urandom(16))
os.register_at_fork(after_in_child=lambda: _CALL_IDS.seed(os.urandom(16)))  # a forked process draws its own ids


def new_call_id() -> str:
    """A call's id: 64 random bits in hex, drawn from a generator seeded once per process from the OS (a uuid4 asks
    the OS for every id, one system call per LLM call).

    >>> len(new_call_id()), new_call_id() != new_call_id()
    (16, True)
    """
    return f"{_CALL_IDS.getrandbits(64):016x}"
