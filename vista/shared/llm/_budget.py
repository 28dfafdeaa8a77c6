"""`RequestBudget`: one limiter for every request to an endpoint — requests in flight (an adaptive window within the
budget), requests/s, tokens/min and a shared cool-down — with the figures of what it allowed and an optional circuit
breaker.

The same logic serves two scopes. Each `LLMGateway` holds one for its own limits (``max_concurrency``, ``qps``);
a job holds one in a named Ray actor (`vista.shared.llm._shared_budget`, wired by `jobs.llm_budget`) that every actor and preprocessor of the job asks before
each request, so the limits, the window, the cool-down and the breaker hold for the whole job, across nodes.

429s are back-pressure, not a stop (`vista.shared.llm._window` has the whole policy): the request that got one sleeps its
Retry-After before retrying (the gateway does) and its slot stays taken meanwhile (so it is not refilled at once by
a request the provider would refuse too), and the in-flight window shrinks once per episode (AIMD: by 1.5 times the
share of recent requests refused on a 429 episode, at most ×0.75, and ×0.75 on a timeout episode; about +8 slots per
window's worth of answers, up to ``max_in_flight``). Everyone pauses only
when a burst says the limit is far exceeded (half the window refused in one episode, or a Retry-After of 30 s or
more); overlapping pauses merge into one that ends at the latest deadline. The quota stop and the breaker are
unchanged.

One request = `acquire` (wait for the turn; a `Grant`, or a `Refusal` when the job is stopped or the cool-down is
longer than the caller may wait), send, then `release` with an `AttemptReport` (tokens really used, answer valid
or not, failure kind, Retry-After). Waiters are served by priority, then first come, first served: the head of the
line waits until every limit allows it, the others wait behind it, and a waiter of higher priority takes the head's
place whenever it would otherwise wait (`vista.shared.llm._priority`: the longest remaining chain first).

Tokens per minute are reserved up front (estimated prompt tokens + max_tokens, capped at one minute's worth) and
corrected on release with the server's usage: unused tokens go back, extra tokens become a debt the next requests
wait out. A failed request that the server never processed (connection error, 429, 5xx) gives its tokens back; a
timeout keeps them (the server may have worked on it).

A grant has a lease (``lease_s``) when the budget lives in another process: a holder that dies without releasing
gets its slot reclaimed when the lease expires, so a lost actor never shrinks the job's budget for good.

>>> import asyncio
>>> async def demo():
...     budget = RequestBudget(BudgetLimits(max_in_flight=2))
...     first, second = await budget.acquire(), await budget.acquire()
...     third = asyncio.ensure_future(budget.acquire())   # waits: two in flight already
...     await asyncio.sleep(0)
...     waiting = not third.done()
...     budget.release(first, AttemptReport(answer_valid=True))
...     granted = await third
...     return waiting, isinstance(granted, Grant), budget.stats().in_flight_peak
>>> asyncio.run(demo())
(True, True, 2)
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from vista.shared.llm._breaker import AttemptReport, CircuitBreaker
from vista.shared.llm.errors import ErrorKind
from vista.shared.llm._pacing import Clock, Cooldown, SystemClock, TokenBucket
from vista.shared.llm._window import ConcurrencyWindow, WindowPolicy, WindowSample
from vista.shared.ranked_slots import RankedSlots

__all__ = ["AttemptReport", "BudgetLimits", "BudgetStats", "Grant", "Limiter", "Refusal", "RequestBudget",
           "WindowPolicy", "WindowSample"]

# Failures after which the server did not spend tokens on the request (their reservation is given back).
_UNPROCESSED = frozenset({ErrorKind.CONNECTION_ERROR, ErrorKind.RATE_LIMITED, ErrorKind.SERVER_ERROR,
                          ErrorKind.AUTH_ERROR, ErrorKind.UNKNOWN_MODEL, ErrorKind.QUOTA_EXCEEDED,
                          ErrorKind.HTTP_ERROR, ErrorKind.CONTEXT_OVERFLOW})


def _is_rate_limited(report: AttemptReport) -> bool:
    """A 429, or a 503 that asks for a pause (an overloaded server)."""
    return (report.error_kind is ErrorKind.RATE_LIMITED or report.status == 429
            or (report.status == 503 and bool(report.retry_after_s)))


@dataclass(frozen=True, slots=True)
class BudgetLimits:
    """The limits of one budget (None: no limit of that kind)."""

    max_in_flight: int | None = None  # requests sent and not yet answered
    requests_per_s: float | None = None  # requests started per second (bursts up to one second's worth)
    tokens_per_min: int | None = None  # prompt + completion tokens per minute (bursts up to one minute's worth)
    lease_s: float | None = None  # a grant not released after this long is reclaimed (its holder died)
    # how 429s and timeouts adapt the in-flight window and when they pause everyone (None: they are only counted —
    # for a budget under a shared one that does both, as an actor's own budget under the job's)
    window: WindowPolicy | None = field(default_factory=WindowPolicy)

    def __post_init__(self) -> None:
        for name in ("max_in_flight", "requests_per_s", "tokens_per_min", "lease_s"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"budget limit {name} must be > 0 (or None for no limit), not {value}")


@dataclass(frozen=True, slots=True)
class Grant:
    """Permission to send one request; give it back with `RequestBudget.release`."""

    grant_id: int
    tokens: int = 0  # tokens reserved against tokens/min


@dataclass(frozen=True, slots=True)
class Refusal:
    """No grant: the budget is stopped (``stopped``; ``message`` says why) or the cool-down outlasts the caller."""

    stopped: bool
    message: str
    pause_s: float = 0.0


class BudgetStats(BaseModel):
    """A budget's limits and what it allowed so far: the job's LLM figures when the budget is job-wide (the run
    summary's ``llm_budget``, whose names these are)."""

    model_config = ConfigDict(frozen=True)

    in_flight_limit: int | None = Field(description="requests in flight allowed (--in-flight for a job's budget)")
    requests_per_s_limit: float | None = Field(description="--requests-per-second (None: no limit)")
    tokens_per_min_limit: int | None = Field(description="--tokens-per-minute (None: no limit)")
    requests: int = Field(description="requests the budget let through (attempts, retries and re-asks included)")
    in_flight_mean: float = Field(description="achieved concurrency: time-weighted mean of requests in flight from "
                                  "the first grant to the last release (or now)")
    in_flight_peak: int = Field(description="most requests in flight at once")
    waited_s: float = Field(description="total seconds requests waited for their turn")
    rate_limited_429: int = Field(description="HTTP 429 answers")
    cooldowns: int = Field(description="job-wide pauses: bursts of 429s that refused half the window (or asked for "
                           "30 s or more), each one pause until the burst's latest Retry-After")
    cooldown_s: float = Field(description="seconds during which nobody was allowed to send (overlapping pauses "
                              "counted once)")
    in_flight_window_min: int | None = Field(None, description="the adaptive in-flight window's lowest value (429s "
                                             "and timeouts shrink it, answers grow it back up to the limit)")
    in_flight_window_mean: float | None = Field(None, description="the window's time-weighted mean")
    in_flight_window_final: int | None = Field(None, description="the window now (at the end, in a summary)")
    window_decreases: int = Field(0, description="429/timeout episodes that shrank the window (once per burst)")
    in_flight_series: tuple[WindowSample, ...] = Field((), description="(t, window, in flight) every few seconds "
                                                       "over the run (at most 120 points)")
    quota_stops: int = Field(description="1 when the budget stopped because the quota was exhausted")
    stopped: str | None = Field(description="why the circuit breaker stopped the budget (None: it did not)")
    invalid_answers: int = Field(description="answers that did not validate")
    failures: int = Field(description="requests without an answer (transport errors, HTTP errors, timeouts)")
    tokens_used: int = Field(description="prompt + completion tokens the answers reported")
    expired_leases: int = Field(description="grants reclaimed because their holder never gave them back")
    in_flight: int = Field(0, description="grants not yet released")
    answers: int = Field(0, description="requests that got an answer (valid or not)")
    tokens_reserved: int = Field(0, description="tokens reserved up front (tokens/min limit only)")
    completion_tokens_used: int = Field(0, description="of the tokens used, completion tokens (for a live cost)")
    cached_prompt_tokens_used: int = Field(0, description="prompt tokens the endpoint served from its own prompt "
                                           "cache (not response-cache hits)")

    @property
    def prompt_tokens_used(self) -> int:
        """Prompt tokens the answers reported (``tokens_used`` less the completion tokens)."""
        return max(self.tokens_used - self.completion_tokens_used, 0)


@runtime_checkable
class Limiter(Protocol):
    """What the gateway needs from a budget (a local `RequestBudget`, or a job-wide one in another process)."""

    @property
    def wants_tokens(self) -> bool:
        """True when `acquire` should be given a token estimate (a tokens/min limit is set)."""
        ...

    async def acquire(self, tokens: int = 0, *, max_wait_s: float | None = None,
                      priority: float = 0.0) -> Grant | Refusal: ...

    def release(self, grant: Grant, report: AttemptReport) -> None: ...

    def pause_remaining(self) -> float:
        """The cool-down this side knows of (seconds), to sleep before a retry."""
        ...


class _Line:
    """The budget's waiting line: one holder at a time (the head), the others served highest priority first, then
    in arrival order (a `RankedSlots` of one). The head hands the line over (`yield_to`) when a waiter of higher
    priority arrives.

    >>> async def demo():
    ...     line, order = _Line(), []
    ...     async def wait(name, priority):
    ...         await line.enter(priority)
    ...         order.append(name)
    ...         await asyncio.sleep(0)
    ...         line.leave()
    ...     await line.enter(0.0)  # held: the next three queue
    ...     waiting = [asyncio.ensure_future(wait(n, p)) for n, p in (("low", 1.0), ("high", 5.0), ("low2", 1.0))]
    ...     await asyncio.sleep(0)
    ...     line.leave()
    ...     await asyncio.gather(*waiting)
    ...     return order
    >>> asyncio.run(demo())
    ['high', 'low', 'low2']
    """

    def __init__(self) -> None:
        self._slot: RankedSlots[float] = RankedSlots(1)  # ranked by -priority
        self._holder: asyncio.Task | None = None
        self._holder_arrival = 0

    def locked(self) -> bool:
        """Someone holds the line, or has been handed it (waits for its turn under the limits)."""
        return self._slot.free == 0

    async def enter(self, priority: float, arrival: int | None = None) -> None:
        """Hold the line (waiting behind the holder and every waiter of higher priority, or of equal priority that
        came earlier; ``arrival``: when this caller first came, for one that queues again)."""
        arrival = self._slot.next_arrival() if arrival is None else arrival
        await self._slot.acquire(-priority, arrival)
        self._holder, self._holder_arrival = asyncio.current_task(), arrival

    def leave(self) -> None:
        """(The holder) hand the line to the next waiter, or free it; from anyone else, nothing (a waiter cancelled
        while it queued again in `yield_to` no longer holds the line it leaves on its way out)."""
        if self._holder is not asyncio.current_task():
            return
        self._holder = None
        self._slot.release()

    def outranked(self, priority: float) -> bool:
        """A live waiter has a higher priority than ``priority``."""
        first = self._slot.first_waiting()
        return first is not None and -first > priority

    async def yield_to(self, priority: float) -> None:
        """(The holder, of ``priority``) let a waiter of higher priority go first, and queue for the line again in
        its first place among equals."""
        if self.outranked(priority):
            arrival = self._holder_arrival
            self.leave()
            await self.enter(priority, arrival)


@dataclass(slots=True)
class _Lease:
    tokens: int
    expires: float | None
    granted_at: float
    in_flight_at_grant: int  # (with this one) whether the window was in use when it was sent


class RequestBudget:
    """See the module docstring. All methods run on one event loop (the gateway's, or the budget actor's)."""

    def __init__(self, limits: BudgetLimits | None = None, *, breaker: CircuitBreaker | None = None,
                 clock: Clock | None = None, poll_s: float = 1.0, first_id: int = 0):
        self.limits = limits or BudgetLimits()
        self.breaker = breaker
        self._clock = clock or SystemClock()  # (the breaker keeps its own clock: pass it the same one in tests)
        self._poll_s = poll_s
        self._line = _Line()
        self._changed = asyncio.Event()
        self._cooldown = Cooldown(clock=self._clock)
        self._window = ConcurrencyWindow(self.limits.max_in_flight, policy=self.limits.window)
        rps, tpm = self.limits.requests_per_s, self.limits.tokens_per_min
        self._rps = TokenBucket(rps, clock=self._clock) if rps else None
        self._tpm = TokenBucket(tpm / 60.0, burst=tpm, clock=self._clock) if tpm else None
        self._leases: dict[int, _Lease] = {}
        self._held: list[float] = []  # until when the slot of each request refused with a 429 stays taken
        self._next_id = first_id
        self.stopped: str | None = None
        # figures
        self._requests = self._peak = self._answers = self._invalid = self._failures = 0
        self._rate_limited = self._cooldowns = self._quota_stops = self._expired = 0
        self._tokens_reserved = self._tokens_used = self._completion_used = self._cached_used = 0
        self._waited = self._area = self._cooldown_total = 0.0
        self._first: float | None = None
        self._last_change = 0.0

    # ------------------------------------------------------------------------------------------- protocol
    @property
    def wants_tokens(self) -> bool:
        return self._tpm is not None

    def pause_remaining(self) -> float:
        return self._cooldown.remaining()

    async def acquire(self, tokens: int = 0, *, max_wait_s: float | None = None,
                      priority: float = 0.0) -> Grant | Refusal:
        """Wait for a turn under every limit (higher ``priority`` first); `Refusal` when stopped or when the cool-down
        exceeds ``max_wait_s``."""
        return (await self.acquire_many([(tokens, max_wait_s)], priority=priority))[0]

    async def acquire_many(self, requests: Sequence[tuple[int, float | None]], *,
                           priority: float = 0.0) -> list[Grant | Refusal]:
        """Outcomes for a prefix (at least one) of ``requests`` — ``(tokens, max_wait_s)`` each, ``priority`` that of
        the first: the first waits its turn like `acquire`; the following are granted while the limits allow it
        right away. One call thus serves a whole batch of a remote caller's requests (see `vista.shared.llm._shared_budget`)."""
        if not requests:
            raise ValueError("acquire_many needs at least one request")
        asked = self._clock.monotonic()
        await self._line.enter(priority)
        try:
            first = await self._wait_turn(*requests[0], asked, priority)
            outcomes: list[Grant | Refusal] = [first]
            if isinstance(first, Grant):
                for tokens, _ in requests[1:]:
                    if self._wait_for(tokens) > 0:
                        break
                    outcomes.append(self._grant(tokens, asked))
            return outcomes
        finally:
            self._line.leave()

    async def _wait_turn(self, tokens: int, max_wait_s: float | None, asked: float, priority: float) -> Grant | Refusal:
        """(Holding the line) wait until every limit allows one request of ``tokens``, then grant it; after each wait,
        a waiter of higher priority goes first."""
        while True:
            if self.stopped is not None:
                return Refusal(True, self.stopped)
            self._reclaim_expired()
            pause = self._cooldown.remaining()
            if pause > 1e-9:  # (rounding error is no pause: see TokenBucket.wait_time)
                left = None if max_wait_s is None else max_wait_s - (self._clock.monotonic() - asked)
                if left is not None and pause > left:
                    return Refusal(False, f"asked to pause {pause:.0f} s", pause)
                await self._clock.sleep(min(pause, self._poll_s))
            elif self._slots_full():
                await self._wait_for_change(min(self._held, default=None))
            elif (wait := self._wait_for(tokens)) > 0:
                await self._clock.sleep(min(wait, self._poll_s))
            else:
                return self._grant(tokens, asked)
            await self._line.yield_to(priority)

    def _slots_full(self) -> bool:
        limit = self._window.limit
        if limit is None:
            return False
        if self._held:
            now = self._clock.monotonic()
            self._held = [until for until in self._held if until > now]
        return len(self._leases) + len(self._held) >= limit

    def _wait_for(self, tokens: int) -> float:
        """Seconds until a request of ``tokens`` may start (inf while stopped, paused or without a free slot)."""
        if self.stopped is not None or self._cooldown.remaining() > 1e-9 or self._slots_full():
            return float("inf")
        return max(self._rps.wait_time(1) if self._rps else 0.0,
                   self._tpm.wait_time(tokens) if self._tpm and tokens > 0 else 0.0)

    def release(self, grant: Grant | int, report: AttemptReport) -> None:
        """Give a grant back with what its request gave: frees the slot, corrects tokens, adapts the window (and
        pauses everyone on a burst of 429s), feeds the breaker. An unknown or reclaimed grant only counts."""
        grant_id = grant if isinstance(grant, int) else grant.grant_id
        lease = self._leases.pop(grant_id, None)
        in_flight = len(self._leases) + (lease is not None)
        if lease is not None:
            self._touch(in_flight)
            if self._tpm is not None:
                self._correct_tokens(lease.tokens, report)
        self._observe(report, lease, in_flight)
        self._notify()

    def renew(self, grant: Grant | int, report: AttemptReport) -> bool:
        """The holder kept ``grant`` after a request that ended with ``report`` and sent its next request on it
        (`reuse_allowed` said it may): the report counts as a release would, the new request counts, and the slot
        stays taken by it, its lease restarted. False when the grant is no longer held (its release came first —
        a job's messages may arrive out of order — or it was reclaimed): then only the counting happens. Only for
        budgets without requests/s or tokens/min limits, whose every request must be asked for."""
        grant_id = grant if isinstance(grant, int) else grant.grant_id
        lease = self._leases.get(grant_id)
        self._observe(report, lease, len(self._leases))
        self._requests += 1  # the new request was sent, whatever became of its grant meanwhile
        if lease is None or self.stopped is not None:
            if lease is not None:  # stopped meanwhile: the request was sent all the same, its slot is given back
                self.release(grant_id, AttemptReport(message="renewed after the stop"))
            return False
        now = self._clock.monotonic()
        lease.granted_at, lease.in_flight_at_grant = now, len(self._leases)
        lease.expires = now + self.limits.lease_s if self.limits.lease_s is not None else None
        return True

    def reuse_allowed(self) -> bool:
        """Whether a holder may send its next request on a grant it keeps, without asking (`renew`): nobody waits
        for a slot, nobody pauses, the window is not over-full, nothing is stopped, and no rate limit counts
        requests one by one."""
        if self.stopped is not None or self._rps is not None or self._tpm is not None or self._line.locked():
            return False
        if self._cooldown.remaining() > 1e-9:
            return False
        limit = self._window.limit
        return limit is None or len(self._leases) + len(self._held) <= limit

    def _observe(self, report: AttemptReport, lease: _Lease | None, in_flight: int) -> None:
        """Count a finished request, adapt the window to it and feed the breaker (which may stop the budget)."""
        self._count(report)
        self._adapt(report, lease, in_flight)
        if self.breaker is not None and (message := self.breaker.observe(report)) is not None:
            if self.breaker.quota_exhausted:
                self._quota_stops += 1
            self.stop(message)

    def stop(self, message: str) -> None:
        """Refuse every grant from now on (pending and future `acquire` calls get a `Refusal` with ``message``)."""
        if self.stopped is None:
            self.stopped = message
        self._notify()

    def stats(self) -> BudgetStats:
        now = self._clock.monotonic()
        in_flight = len(self._leases)
        end = now if in_flight else self._last_change
        area = self._area + (in_flight * (now - self._last_change) if in_flight else 0.0)
        span = (end - self._first) if self._first is not None else 0.0
        window = self._window.figures(now)
        return BudgetStats(
            in_flight_limit=self.limits.max_in_flight, requests_per_s_limit=self.limits.requests_per_s,
            tokens_per_min_limit=self.limits.tokens_per_min,
            requests=self._requests, in_flight=in_flight, in_flight_peak=self._peak,
            in_flight_mean=round(area / span, 3) if span > 0 else float(self._peak),
            waited_s=round(self._waited, 3), answers=self._answers, invalid_answers=self._invalid,
            failures=self._failures, rate_limited_429=self._rate_limited, cooldowns=self._cooldowns,
            cooldown_s=round(self._cooldown_total - self._cooldown.remaining(), 3), quota_stops=self._quota_stops,
            expired_leases=self._expired, tokens_reserved=self._tokens_reserved, tokens_used=self._tokens_used,
            completion_tokens_used=self._completion_used, cached_prompt_tokens_used=self._cached_used,
            stopped=self.stopped, in_flight_window_final=window.limit, in_flight_window_min=window.limit_min,
            in_flight_window_mean=window.limit_mean, window_decreases=window.decreases,
            in_flight_series=window.samples,
        )

    # ------------------------------------------------------------------------------------------- internals
    def _grant(self, tokens: int, asked: float) -> Grant:
        now = self._clock.monotonic()
        if self._rps is not None:
            self._rps.take(1)
        reserved = int(self._tpm.take(tokens)) if self._tpm is not None and tokens > 0 else 0
        self._next_id += 1
        expires = now + self.limits.lease_s if self.limits.lease_s is not None else None
        self._touch(len(self._leases))
        self._leases[self._next_id] = _Lease(reserved, expires, now, len(self._leases) + 1)
        self._window.sample(now, len(self._leases))
        if self._first is None:
            self._first = now
        self._requests += 1
        self._peak = max(self._peak, len(self._leases))
        self._waited += now - asked
        self._tokens_reserved += reserved
        return Grant(self._next_id, reserved)

    def _touch(self, in_flight_before: int) -> None:
        """Add the in-flight area since the last change (``in_flight_before`` requests were in flight meanwhile)."""
        now = self._clock.monotonic()
        if self._first is not None:
            self._area += in_flight_before * (now - self._last_change)
        self._last_change = now

    def _correct_tokens(self, reserved: int, report: AttemptReport) -> None:
        assert self._tpm is not None
        if report.tokens_used is not None:
            self._tpm.refund(reserved - report.tokens_used)
        elif not report.answered and report.error_kind in _UNPROCESSED:
            self._tpm.refund(reserved)

    def _count(self, report: AttemptReport) -> None:
        if report.answered:
            self._answers += 1
            self._invalid += not report.answer_valid
        elif report.error_kind is not None:  # (a report with neither: the request was cancelled or never sent)
            self._failures += 1
        if report.tokens_used is not None:
            self._tokens_used += report.tokens_used
        self._completion_used += report.completion_tokens or 0
        self._cached_used += report.cached_prompt_tokens or 0
        if report.error_kind is ErrorKind.RATE_LIMITED or report.status == 429:
            self._rate_limited += 1

    def _adapt(self, report: AttemptReport, lease: _Lease | None, in_flight: int) -> None:
        """Feed the window with a released request's outcome; pause everyone when it says so."""
        now = self._clock.monotonic()
        if self.limits.window is not None:
            if report.answered:
                latency = now - lease.granted_at if lease is not None else None
                used = lease.in_flight_at_grant if lease is not None else in_flight
                self._window.on_answer(now=now, latency_s=latency, in_flight=used)
            elif report.error_kind is not ErrorKind.QUOTA_EXCEEDED and (
                    (limited := _is_rate_limited(report)) or report.error_kind is ErrorKind.TIMEOUT):
                if limited and report.retry_after_s and self._window.limit is not None:
                    # its request comes back after Retry-After: its slot stays taken until then, so a freed slot
                    # is not refilled at once by a request that would be refused too
                    self._held.append(now + min(report.retry_after_s, self.limits.window.long_pause_s))
                pause = self._window.on_congestion(now=now, sent_at=lease.granted_at if lease is not None else None,
                                                   retry_after_s=report.retry_after_s, rate_limited=limited,
                                                   in_flight=max(in_flight, lease.in_flight_at_grant if lease else 0))
                if pause is not None:
                    self._extend_cooldown(pause)
        self._window.sample(now, len(self._leases))

    def _extend_cooldown(self, seconds: float) -> None:
        """Pause everyone for ``seconds``: a pause that overlaps the current one extends it (one pause, counted
        once, ending at the later deadline)."""
        left = self._cooldown.remaining()
        self._cooldown.extend(seconds)
        added = self._cooldown.remaining() - left
        if added > 0:
            self._cooldown_total += added
            self._cooldowns += left <= 1e-9

    def _reclaim_expired(self) -> None:
        if self.limits.lease_s is None or not self._leases:
            return
        now = self._clock.monotonic()
        for grant_id in [g for g, lease in self._leases.items() if lease.expires is not None and lease.expires <= now]:
            self._touch(len(self._leases))
            del self._leases[grant_id]
            self._expired += 1

    def _notify(self) -> None:
        """Wake whoever waits for a slot (a release or a stop happened)."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_for_change(self, until: float | None = None) -> None:
        """Wait for a release or a stop — or until ``until`` on the budget's clock (a held slot frees), or
        ``poll_s`` with leases (to reclaim the expired ones)."""
        changed = self._changed
        if until is not None:
            waits = [asyncio.ensure_future(changed.wait()),
                     asyncio.ensure_future(self._clock.sleep(max(0.0, until - self._clock.monotonic())))]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()
            return
        if self.limits.lease_s is None:
            await changed.wait()
            return
        try:  # wake up now and then to reclaim expired leases
            await asyncio.wait_for(changed.wait(), self._poll_s)
        except TimeoutError:
            pass
