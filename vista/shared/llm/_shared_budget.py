"""One `RequestBudget` shared by many gateways in other processes: the service that holds it, the client each
gateway asks (`RemoteBudget`, a `vista.shared.llm._budget.Limiter`), and the `BudgetTransport` between them.

A job runs the service in a named Ray actor (`jobs.llm_budget` is only that wiring: the actor, the handle, the
transport over it); the client and the service know nothing of Ray, so tests drive them on one event loop.

>>> limits = budget_limits(LLMConfig(timeout_s=60), in_flight=8)
>>> limits.max_in_flight, limits.lease_s  # a grant outlives the longest request the gateway may make
(8, 125.0)
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol

from vista.shared.llm._breaker import AttemptReport, BreakerPolicy, CircuitBreaker
from vista.shared.llm._budget import BudgetLimits, BudgetStats, Grant, Refusal, RequestBudget
from vista.shared.llm.config import LLMConfig
from vista.shared.llm.gateway import TIMEOUT_GRACE_S

log = logging.getLogger(__name__)

LEASE_GRACE_S = 60.0
"""A grant's lease: the request's timeout, the gateway's grace, and this margin."""

Reports = list[tuple[int, AttemptReport]]
"""Grant ids and how their requests ended (releases, or renewals of kept grants)."""


def budget_limits(llm: LLMConfig, *, in_flight: int | None, requests_per_s: float | None = None,
                  tokens_per_min: int | None = None) -> BudgetLimits:
    """A shared budget's limits; a grant's lease outlives the longest request the gateway may make."""
    return BudgetLimits(max_in_flight=in_flight, requests_per_s=requests_per_s, tokens_per_min=tokens_per_min,
                        lease_s=llm.timeout_s + TIMEOUT_GRACE_S + LEASE_GRACE_S)


@dataclass(frozen=True, slots=True)
class BudgetReply:
    """The budget's answer to a batch: the grants (or refusals) and whether callers may reuse the grants they hold."""

    outcomes: list[Grant | Refusal]
    reuse: bool


class BudgetService:
    """The shared side: a `RequestBudget` (and its breaker) answering clients' batches (async: thousands of callers
    wait in it at once, on one event loop)."""

    def __init__(self, limits: BudgetLimits, policy: BreakerPolicy | None, endpoint: str, model: str):
        breaker = CircuitBreaker(policy, endpoint=endpoint, model=model) if policy is not None else None
        # grant ids start at a random offset: releases meant for an earlier incarnation of a restarted service
        # can never free a grant of this one
        self.budget = RequestBudget(limits, breaker=breaker, first_id=secrets.randbits(40) << 20)

    async def acquire_batch(self, requests: list[tuple[int, float | None]], releases: Reports,
                            renewals: Reports = (), priority: float = 0.0) -> BudgetReply:
        """Apply a caller's renewals and releases, then grant a prefix of its waiting requests (at least one;
        ``priority``: that of the first, against other callers' batches)."""
        self._apply(releases, renewals)
        outcomes = await self.budget.acquire_many(requests, priority=priority)
        return BudgetReply(outcomes, self.budget.reuse_allowed())

    async def release_batch(self, releases: Reports, renewals: Reports = ()) -> bool:
        """Apply a caller's renewals and releases; whether it may keep reusing its grants."""
        self._apply(releases, renewals)
        return self.budget.reuse_allowed()

    def _apply(self, releases: Reports, renewals: Reports) -> None:
        for grant_id, report in renewals:  # (a grant's renewals always come before its release)
            self.budget.renew(grant_id, report)
        for grant_id, report in releases:
            self.budget.release(grant_id, report)

    async def stop(self, message: str) -> None:
        self.budget.stop(message)

    async def stats(self) -> BudgetStats:
        return self.budget.stats()


class BudgetGone(Exception):
    """The shared budget no longer exists (its job ended)."""


class BudgetTransport(Protocol):
    """How a `RemoteBudget` reaches its `BudgetService` (a Ray actor handle in a job)."""

    def acquire_batch(self, requests: list[tuple[int, float | None]], releases: Reports,
                      renewals: Reports, priority: float) -> Awaitable[BudgetReply]:
        """`BudgetService.acquire_batch` there; raises `BudgetGone` when the service is gone."""
        ...

    def release_batch(self, releases: Reports, renewals: Reports) -> asyncio.Future[bool]:
        """`BudgetService.release_batch` there, sent now (its answer read when it comes)."""
        ...


@dataclass(slots=True)
class _Kept:
    """A grant kept after its request ended well, for the actor's next request (`RemoteBudget`)."""

    grant: Grant
    report: AttemptReport  # how the request that held it ended (sent with the renewal or the release)
    since: float  # loop time it was kept


@dataclass(slots=True)
class _Waiter:
    tokens: int
    max_wait_s: float | None
    priority: float
    future: asyncio.Future


class RemoteBudget:
    """The shared budget as seen from one process: the `vista.shared.llm._budget.Limiter` its gateway asks before each request.

    Batched, because one round trip per request caps a job at what one actor can answer: measured on 2 cores with
    4 client processes, one call per acquire and per release tops out at ~670 requests/s (96% of the ideal 512/s
    at 256 in flight with 0.5 s answers, so a bigger budget would hit the ceiling); batched, 34,000 requests/s
    and 98% of the ideal. Requests waiting here go to the budget together (one call, answered with as many grants
    as the limits allow, at least one); releases leave every ``flush_s`` in one message or ride along with the next
    batch. Create it on the event loop that will use it.

    Grants are kept, too: a request that ended with a valid answer keeps its grant for up to ``keep_s``, and the
    actor's next request takes it without asking (measured at 64 in flight, 0.5 s answers, 200 patients: 0.05 s let
    a fifth of the grants expire between a patient's calls on a busy actor, each expiry and each new ask one more
    round trip) — the budget learns of it with the next message (a renewal: the
    answer counted, the slot taken by the new request), at the latest after ``report_s`` — short, because the
    answer to that message is how an actor that only reuses learns of a job-wide pause or a shrunk window. A patient's next call, or
    the next patient's, usually starts within milliseconds, so in a steady job an actor talks to the budget a few
    times a second instead of once per request. The budget says with every answer whether keeping is allowed: not
    while anyone waits for a slot (kept grants would starve them), during a pause, with the window over-full or
    the job stopped, nor under a requests/s or tokens/min limit (every request asks then); a 429, a timeout or an
    invalid answer always gives its grant back at once.
    """

    def __init__(self, transport: BudgetTransport, *, name: str, wants_tokens: bool = False, flush_s: float = 0.005,
                 max_batch: int = 256, keep_s: float = 0.25, report_s: float = 0.1):
        self.name = name  # (for the refusal once the budget is gone)
        self._transport = transport
        self._wants_tokens = wants_tokens
        self._flush_s = flush_s
        self._max_batch = max_batch
        self._keep_s = keep_s
        self._report_s = report_s
        self._waiting: list[_Waiter] = []
        self._released: Reports = []
        self._renewed: Reports = []
        self._kept: list[_Kept] = []
        self._reuse = False  # what the budget said last (nothing kept before it has answered once)
        self._pump: asyncio.Task | None = None
        self._flush: asyncio.TimerHandle | None = None
        self._report: asyncio.TimerHandle | None = None
        self._expiry: asyncio.TimerHandle | None = None
        self.asked = self.reused = 0  # requests that asked the budget / that reused a kept grant

    @property
    def wants_tokens(self) -> bool:
        return self._wants_tokens

    def pause_remaining(self) -> float:
        """0: a job-wide pause is waited out in the budget itself (the request that got a 429 sleeps its own
        Retry-After in the gateway's retry loop, without holding back this actor's other requests)."""
        return 0.0

    async def acquire(self, tokens: int = 0, *, max_wait_s: float | None = None,
                      priority: float = 0.0) -> Grant | Refusal:
        if self._kept and self._reuse and tokens == 0:
            kept = self._kept.pop()
            self._renewed.append((kept.grant.grant_id, kept.report))
            self.reused += 1
            if self._report is None:
                self._report = asyncio.get_running_loop().call_later(self._report_s, self._send_releases)
            return kept.grant
        self.asked += 1
        waiter = _Waiter(tokens, max_wait_s, priority, asyncio.get_running_loop().create_future())
        self._waiting.append(waiter)
        if self._pump is None or self._pump.done():
            self._pump = asyncio.ensure_future(self._run_pump())
        return await waiter.future  # cancelled: the pump gives back a grant that arrives for it

    def release(self, grant: Grant, report: AttemptReport) -> None:
        loop = asyncio.get_running_loop()
        if self._reuse and report.answer_valid and grant.tokens == 0:
            self._kept.append(_Kept(grant, report, loop.time()))
            if self._expiry is None:
                self._expiry = loop.call_later(self._keep_s, self._give_back_kept)
            return
        self._released.append((grant.grant_id, report))
        if self._flush is None:
            self._flush = loop.call_later(self._flush_s, self._send_releases)

    async def aclose(self) -> None:
        """Send the releases still waiting for their flush, kept grants included (the gateway's `aclose` calls this)."""
        await self.flush()

    async def flush(self) -> None:
        """Give back every kept grant and send every pending renewal and release now, and wait until the budget has
        them: an actor with nothing left to run calls this (`jobs.actor_base`), so the job's figures (requests,
        answers, tokens) are whole before its last status row reaches the driver."""
        for timer in (self._flush, self._report, self._expiry):
            if timer is not None:
                timer.cancel()
        self._flush = self._report = self._expiry = None
        self._released += [(k.grant.grant_id, k.report) for k in self._kept]
        self._kept = []
        sent = self._send_releases()
        if sent is not None:
            try:
                await sent
            except Exception:  # noqa: BLE001 - the budget is gone (the job ends): nothing left to count
                log.debug("the shared LLM budget did not take the last releases", exc_info=True)

    def _give_back_kept(self, everything: bool = False) -> None:
        """Release the grants kept longer than ``keep_s`` (all of them when the budget no longer allows keeping)."""
        self._expiry = None
        now = asyncio.get_running_loop().time()
        old = [k for k in self._kept if everything or not self._reuse or now - k.since >= self._keep_s - 1e-3]
        if old:
            self._kept = [k for k in self._kept if k not in old]
            self._released += [(k.grant.grant_id, k.report) for k in old]
            self._send_releases()
        if self._kept:
            self._expiry = asyncio.get_running_loop().call_later(self._keep_s, self._give_back_kept)

    def _allow_reuse(self, reuse: bool) -> None:
        self._reuse = reuse
        if not reuse and self._kept:
            self._give_back_kept(everything=True)

    def _send_releases(self) -> asyncio.Future | None:
        """Send the pending renewals and releases in one message (None when there are none); its answer, whether
        grants may still be kept, is read when it comes."""
        for name in ("_flush", "_report"):
            timer = getattr(self, name)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)
        if not (self._released or self._renewed):
            return None
        releases, self._released = self._released, []
        renewals, self._renewed = self._renewed, []
        try:
            answer = self._transport.release_batch(releases, renewals)
        except Exception:  # noqa: BLE001 - the budget is gone (the job ends): nothing is kept from now on
            self._reuse = False
            return None
        answer.add_done_callback(self._on_release_answer)
        return answer

    def _on_release_answer(self, answer: asyncio.Future) -> None:
        if answer.cancelled() or answer.exception() is not None:
            self._allow_reuse(False)
        else:
            self._allow_reuse(bool(answer.result()))

    async def _run_pump(self) -> None:
        """Send waiting requests in batches until none is left (one batch in flight at a time)."""
        while True:
            self._waiting = [w for w in self._waiting if not w.future.done()]  # drop cancelled waiters
            if not self._waiting:
                return
            # highest priority first (the budget grants a prefix), arrival order among equals (the sort is stable)
            batch = sorted(self._waiting, key=lambda w: -w.priority)[: self._max_batch]
            releases, self._released = self._released, []
            renewals, self._renewed = self._renewed, []
            try:
                reply = await self._transport.acquire_batch([(w.tokens, w.max_wait_s) for w in batch], releases, renewals,
                                                            batch[0].priority)
                outcomes = reply.outcomes
                self._allow_reuse(reply.reuse)
            except BudgetGone:  # the driver ended the job (it kills the budget on its way out)
                outcomes = [Refusal(True, f"the job's LLM budget ({self.name}) is gone: the job was stopped")] * len(batch)
            except Exception as exc:  # noqa: BLE001 - hand the failure to every waiter of the batch, not to the pump
                for waiter in batch:
                    if not waiter.future.done():
                        waiter.future.set_exception(exc)
                continue
            for waiter, outcome in zip(batch, outcomes):
                self._waiting.remove(waiter)
                if not waiter.future.done():
                    waiter.future.set_result(outcome)
                elif isinstance(outcome, Grant):  # its caller was cancelled meanwhile: give the grant back unused
                    self.release(outcome, AttemptReport(tokens_used=0, message="cancelled before sending"))
