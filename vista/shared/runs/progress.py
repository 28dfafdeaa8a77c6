"""What the driver sees of a running job: one small status row per finished task, a progress line and an ETA.

Actors return a `STATUS_SCHEMA` row for every task they finish (never the outputs themselves, which they write to
disk); the driver consumes that stream from Ray Data, counts, and prints a progress line every few seconds to its
stdout — which is also what ``ray job logs`` shows for a submitted job. When the job has an LLM budget, the line also
counts the calls, tokens and (estimated) cost as they happen, read from the budget every few seconds (`LiveFigures`),
so a long first patient does not show "0 tokens" for minutes. On a terminal the line is a rich progress bar.

>>> tracker = ProgressTracker("predict", to_run=4, skipped_before=2, clock=iter([0.0, 60.0, 60.0]).__next__)
>>> tracker.update(status_table([StatusRow(1, None, "ok", None, 3, 0, 1200, 300, 0.01, 0, 2.0),
...                              StatusRow(2, None, "error", "data", 0, 0, 0, 0, 0.0, 0, 0.1)]))
>>> print(tracker.line())
[predict] 2/4 (ok 1, error 1) · skipped 2 · 1,500 tokens · $0.0100 · 2.0 patients/min · ETA 1m00s
"""

from __future__ import annotations

import heapq
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TextIO

import pyarrow as pa

from vista.shared.meds.task_key import TaskKey

STATUS_SCHEMA = pa.schema([
    pa.field("subject_id", pa.int64()),
    pa.field("prediction_time", pa.timestamp("us")),
    pa.field("status", pa.string()),  # ok | partial | failed | error | skipped (already had an output)
    pa.field("error_kind", pa.string()),
    pa.field("llm_calls", pa.int64()),
    pa.field("cache_hits", pa.int64()),
    pa.field("prompt_tokens", pa.int64()),
    pa.field("completion_tokens", pa.int64()),
    pa.field("cost_usd", pa.float64()),
    pa.field("unpriced_calls", pa.int64()),
    pa.field("wall_s", pa.float64()),
    pa.field("started_at", pa.float64()),  # epoch seconds when the actor started the task (None: not recorded)
])
"""The row an actor returns for each task it finishes (or skips because its output already exists)."""

STATUS_ORDER = ("ok", "partial", "failed", "error")
USAGE_FIGURES = ("llm_calls", "cache_hits", "prompt_tokens", "completion_tokens", "cost_usd", "unpriced_calls")
"""The status columns of a task's LLM usage, which the tracker adds up."""


def cost_text(cost_usd: float, unpriced_calls: int) -> str:
    """``$0.0100``, with the calls the price table could not price (``$0.0100 (+3 unpriced calls)``)."""
    return f"${cost_usd:.4f}" + (f" (+{unpriced_calls:,} unpriced calls)" if unpriced_calls else "")


@dataclass(frozen=True, slots=True)
class LiveFigures:
    """The job's LLM traffic so far, as the job's budget counts it (every request, finished patient or not).

    >>> LiveFigures(calls=120, in_flight=16, tokens=250_000, cost_usd=0.41).text()
    '120 calls (16 in flight) · 250,000 tokens · ~$0.4100'
    >>> LiveFigures(calls=900, in_flight=40, tokens=9_000, cost_usd=None, in_flight_limit=48, rate_limited=31,
    ...             cooldown_s=2.0).text()
    '900 calls (40 in flight of 48) · 31 × 429, 2.0 s paused · 9,000 tokens · cost unpriced'
    """

    calls: int
    in_flight: int
    tokens: int
    cost_usd: float | None  # the ledger priced by the price table (as the summary prices it); None: no price
    in_flight_limit: int | None = None  # the budget's adaptive window now (None: no in-flight limit)
    rate_limited: int = 0  # 429 answers so far
    cooldown_s: float = 0.0  # seconds the whole job was paused so far

    def text(self) -> str:
        cost = f"~${self.cost_usd:.4f}" if self.cost_usd is not None else "cost unpriced"
        window = f" of {self.in_flight_limit}" if self.in_flight_limit is not None else ""
        parts = [f"{self.calls:,} calls ({self.in_flight} in flight{window})"]
        if self.rate_limited or self.cooldown_s:
            parts.append(f"{self.rate_limited:,} × 429, {self.cooldown_s:.1f} s paused")
        return " · ".join(parts + [f"{self.tokens:,} tokens", cost])


@dataclass(frozen=True, slots=True)
class StatusRow:
    """One finished task as the driver counts it."""

    subject_id: int
    prediction_time: datetime | None
    status: str
    error_kind: str | None
    llm_calls: int
    cache_hits: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    unpriced_calls: int
    wall_s: float
    started_at: float | None = None

    @classmethod
    def of(cls, key: TaskKey, row: object, started_at: datetime | None = None) -> StatusRow:
        """The status of a finished task from its row (any row with the status, usage and ``wall_s`` columns: a
        `trajonco.prediction_rows.PredictionRow`, a `vista.pipeline.rows.VistaRow`)."""
        figures = (getattr(row, name) for name in _ROW_FIGURES)
        return cls(key.subject_id, key.prediction_time, *figures, started_at.timestamp() if started_at else None)


_ROW_FIGURES = ("status", "error_kind", "llm_calls", "cache_hits", "prompt_tokens", "completion_tokens", "cost_usd",
                "unpriced_calls", "wall_s")
"""The fields of `StatusRow` a job's row supplies, in order."""


def status_table(rows: list[StatusRow]) -> pa.Table:
    return pa.Table.from_pylist([{f: getattr(r, f) for f in STATUS_SCHEMA.names} for r in rows], schema=STATUS_SCHEMA)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


@dataclass(slots=True)
class CallsBySize:
    """The LLM calls a task needs, as a line in its estimated size, fitted by least squares to the finished tasks: a
    chain has a fixed part (the manager's call) and a part per chunk, so calls per unit of size alone overrates the
    long tasks by what the short ones' fixed part weighs (1.5 times, seen at a 1,000-patient job's tail). A fit that
    says nothing sensible yet (one size only, a negative slope or fixed part) falls back to calls per unit of size.

    >>> fit = CallsBySize()
    >>> for size, calls in ((10, 3), (20, 5), (40, 9)):
    ...     fit.add(size, calls)
    >>> fit.calls(100), fit.calls_for(tasks=2, size=120)  # 1 + 0.2 x size
    (21.0, 26.0)
    """

    n: int = 0
    sx: float = 0.0
    sy: float = 0.0
    sxx: float = 0.0
    sxy: float = 0.0

    def add(self, size: float, calls: float) -> None:
        self.n += 1
        self.sx, self.sy = self.sx + size, self.sy + calls
        self.sxx, self.sxy = self.sxx + size * size, self.sxy + size * calls

    def line(self) -> tuple[float, float]:
        """The fixed part and the calls per unit of size."""
        if self.sx <= 0:
            return 0.0, 0.0
        spread = self.n * self.sxx - self.sx * self.sx
        if spread > 1e-9 * self.n * self.sxx:
            slope = (self.n * self.sxy - self.sx * self.sy) / spread
            fixed = (self.sy - slope * self.sx) / self.n
            if slope >= 0 and fixed >= 0:
                return fixed, slope
        return 0.0, self.sy / self.sx

    def calls(self, size: float) -> float:
        fixed, slope = self.line()
        return fixed + slope * size

    def calls_for(self, *, tasks: int, size: float) -> float:
        """The calls of ``tasks`` tasks whose sizes add up to ``size``."""
        fixed, slope = self.line()
        return fixed * tasks + slope * size


class ProgressTracker:
    """Counts finished tasks, tokens and cost from status rows; formats the progress line (thread-safe)."""

    def __init__(self, job: str, *, to_run: int, skipped_before: int = 0, clock: Callable[[], float] = time.monotonic):
        self.job = job
        self.to_run = to_run
        self.skipped_before = skipped_before
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()
        self.by_status: Counter[str] = Counter()
        self.by_reason: Counter[str] = Counter()
        self.skipped_in_run = 0
        self.usage: Counter[str] = Counter()  # the `USAGE_FIGURES` of the tasks run
        self.started_wall = time.time()  # epoch seconds, to compare with the actors' task start times
        self.first_row_s: float | None = None  # seconds from the start to the first status row
        self.first_task_start_s: float | None = None  # seconds from the start to the first task an actor started
        self._last_progress = self._started
        self._work: dict[TaskKey, int] = {}  # each task's estimated size (`expect_work`), for the ETA
        self._work_left = 0  # the estimated size of the tasks not finished yet
        self._fit = CallsBySize()  # the calls the finished tasks needed, by their size, ...
        self._calls_done = 0  # ... and in all, ...
        self._chain_s = 0.0  # ... and the seconds they ran
        self._in_flight_area = self._in_flight_span = 0.0  # requests in flight x seconds, over the live figures' polls
        self._polled_at: float | None = None
        self._largest: list[tuple[int, int, TaskKey]] = []  # (-size, n, key) of the tasks expected: the largest on top
        self.live_source: Callable[[], LiveFigures | None] | None = None  # polled by the printer
        self._live: LiveFigures | None = None

    def expect_work(self, sizes: Mapping[TaskKey, int]) -> None:
        """Each task's estimated size (e.g. its MEDS rows, which the job's longest-first order is made from): the ETA
        then counts LLM calls left rather than patients left. A longest-first job finishes its few long patients
        last and its many short ones in between, so patients per minute said 27 minutes left 35 s into a 2-minute
        job; calls per minute, with the calls still to come estimated from what the finished tasks needed per unit
        of size, say what is left."""
        with self._lock:
            self._work = {key: max(int(size), 0) for key, size in sizes.items()}
            self._work_left = sum(self._work.values())
            # (n: two keys are never compared)
            self._largest = [(-size, n, key) for n, (key, size) in enumerate(self._work.items())]
            heapq.heapify(self._largest)

    def poll_live(self) -> None:
        """Read the live LLM figures from ``live_source`` (never raises: a failed read keeps the last figures)."""
        if self.live_source is None:
            return
        try:
            figures = self.live_source()
        except Exception:  # noqa: BLE001 - the progress line must never break the job
            return
        if figures is not None:
            now = self._clock()
            with self._lock:
                if self._live is not None and self._polled_at is not None:  # requests in flight, time-weighted
                    self._in_flight_area += self._live.in_flight * (now - self._polled_at)
                    self._in_flight_span += now - self._polled_at
                self._live, self._polled_at = figures, now

    def update(self, table: pa.Table) -> None:
        """Count a batch of status rows."""
        names = [n for n in STATUS_SCHEMA.names if n in table.column_names]
        data = table.select(names).to_pydict()
        now = self._clock()
        starts = [t for t in data.get("started_at", []) if t is not None]
        with self._lock:
            if table.num_rows:
                self._last_progress = now
                if self.first_row_s is None:
                    self.first_row_s = now - self._started
            if starts:
                first = max(0.0, min(starts) - self.started_wall)
                self.first_task_start_s = first if self.first_task_start_s is None else min(self.first_task_start_s, first)
            for i, status in enumerate(data["status"]):
                size = self._work.pop(TaskKey(data["subject_id"][i], data["prediction_time"][i]), None)
                if size is not None:
                    self._work_left -= size
                if status == "skipped":
                    self.skipped_in_run += 1
                    continue
                if size is not None:  # (the calls the endpoint answered: the live figures count those)
                    paid = (data["llm_calls"][i] or 0) - (data["cache_hits"][i] or 0)
                    self._fit.add(size, paid)
                    self._calls_done += paid
                    self._chain_s += data["wall_s"][i] or 0.0
                self.by_status[status] += 1
                if status in ("failed", "error"):
                    self.by_reason[data["error_kind"][i] or "unknown"] += 1
                for name in USAGE_FIGURES:
                    self.usage[name] += data[name][i] or 0

    @property
    def finished(self) -> int:
        """Tasks of this run's plan that have an output now (computed, or found done when an actor retried)."""
        return sum(self.by_status.values()) + self.skipped_in_run

    def idle_s(self) -> float:
        """Seconds since the last status row arrived (or since the start)."""
        with self._lock:
            return self._clock() - self._last_progress

    @property
    def elapsed_s(self) -> float:
        return self._clock() - self._started

    def rate_per_minute(self) -> float:
        elapsed = self.elapsed_s
        return 60.0 * self.finished / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        with self._lock:
            finished = self.finished
            statuses = ", ".join(f"{s} {self.by_status[s]}" for s in STATUS_ORDER if self.by_status[s])
            tokens = self.usage["prompt_tokens"] + self.usage["completion_tokens"]
            cost = cost_text(self.usage["cost_usd"], self.usage["unpriced_calls"])
            skipped = self.skipped_before + self.skipped_in_run
            live = self._live
            calls_left = self._calls_left(live)
            chain_left = self._chain_left_s()
        rate = self.rate_per_minute()
        remaining = max(self.to_run - finished, 0)
        if not remaining:
            eta = "0m00s"
        elif calls_left is not None and live is not None:  # the calls left at the job's call rate since its first
            busy = self.elapsed_s - (self.first_task_start_s or 0.0)  # task started, or the largest chain, if longer
            eta = _duration(max(calls_left * busy / live.calls, chain_left - busy)) if busy > 0 else "?"
        else:
            eta = _duration(60.0 * remaining / rate) if rate > 0 else "?"
        parts = [f"[{self.job}] {finished}/{self.to_run}" + (f" ({statuses})" if statuses else "")]
        if skipped:
            parts.append(f"skipped {skipped}")
        parts += [live.text()] if live is not None else [f"{tokens:,} tokens", cost]
        parts += [f"{rate:.1f} patients/min", f"ETA {eta}"]
        return " · ".join(parts)

    def _chain_left_s(self) -> float:
        """Seconds the largest task not finished yet takes as a whole (its calls by `CallsBySize`, one call's
        latency by `_seconds_per_call`): a patient's calls are sequential, so the job's tail is that chain, which
        started among the first (longest first)."""
        while self._largest and self._largest[0][2] not in self._work:  # (finished: dropped lazily)
            heapq.heappop(self._largest)
        if not self._largest or not self._calls_done:
            return 0.0
        return self._fit.calls(-self._largest[0][0]) * self._seconds_per_call()

    def _seconds_per_call(self) -> float:
        """One call's latency: the mean requests in flight over the job's call rate (Little's law), once the live
        figures were read twice; else the finished tasks' seconds per call (which also counts their waits for the
        budget, that the longest chain, served first, does not have)."""
        live, busy = self._live, self.elapsed_s - (self.first_task_start_s or 0.0)
        if live is not None and live.calls and self._in_flight_span > 0 and busy > 0:
            return self._in_flight_area / self._in_flight_span * busy / live.calls
        return self._chain_s / self._calls_done

    def _calls_left(self, live: LiveFigures | None) -> float | None:
        """The LLM calls still to come (None: not estimable yet): what the tasks left need by their sizes (`CallsBySize`
        fitted to the finished ones), less the calls they already made (every call so far, less the finished tasks')."""
        if live is None or not live.calls or not self._calls_done:
            return None
        expected = self._fit.calls_for(tasks=len(self._work), size=self._work_left)
        return max(expected - (live.calls - self._calls_done), 0.0)


class ProgressPrinter:
    """Shows the tracker's progress until the block ends: on a terminal a rich live bar that rich redraws every
    second (`rich.live.Live`, auto-refresh); elsewhere (``ray job logs``, a file) the line every ``interval_s``
    seconds; and the line once more at the end. A small thread reads the live LLM figures every `LIVE_EVERY_S`
    (a read may wait for the budget, so it never runs inside rich's redraw) and prints the off-terminal line."""

    LIVE_EVERY_S = 2.0
    """How often the live LLM figures are read from the job's budget."""

    def __init__(self, tracker: ProgressTracker, *, interval_s: float = 10.0, stream: TextIO | None = None):
        self.tracker = tracker
        self.interval_s = interval_s
        self.stream = stream or sys.stdout
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="jobs-progress", daemon=True)
        self._live = None

    def _print(self) -> None:
        print(self.tracker.line(), file=self.stream, flush=True)

    def __rich__(self):
        """What the live bar shows at each redraw: a bar of finished tasks and the progress line."""
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        row = Table.grid(padding=(0, 1))
        row.add_row(ProgressBar(total=max(self.tracker.to_run, 1), completed=self.tracker.finished, width=24),
                    self.tracker.line())
        return row

    def _loop(self) -> None:
        last_print = time.monotonic()
        while not self._stop.wait(min(self.LIVE_EVERY_S, self.interval_s)):
            self.tracker.poll_live()
            if self._live is None and time.monotonic() - last_print >= self.interval_s:
                self._print()
                last_print = time.monotonic()

    def __enter__(self) -> ProgressPrinter:
        if self.interval_s <= 0:
            return self
        if self.stream.isatty():
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self, console=Console(file=self.stream), refresh_per_second=1, transient=True)
            self._live.start()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self._live is not None:
            self._live.stop()
        self.tracker.poll_live()
        self._print()
