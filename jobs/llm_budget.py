"""One LLM budget for the whole job: a named async Ray actor that every patient actor and preprocessor asks before
each request, so the job's limits hold across actors and nodes.

The actor holds a `vista.llm.budget.RequestBudget` (the same logic each gateway uses for its own limits) with a
`vista.llm.breaker.CircuitBreaker`:

* **in flight** (``--in-flight``), **requests/s** (``--requests-per-second``) and **tokens/min**
  (``--tokens-per-minute``, estimated prompt + max_tokens reserved up front, corrected with the server's usage);
* **429s as back-pressure** (`vista.llm.window`): the request that got a 429 sleeps its Retry-After, and the job's
  in-flight window shrinks once per burst and grows back as answers come; every actor pauses only when a burst
  says the limit is far exceeded (half the window refused at once, or a Retry-After of 30 s or more), once, until
  the burst's latest Retry-After;
* **fail fast**: connection refused, a refused key, an unknown model, answers that never validate, or an exhausted
  quota (``insufficient_quota``) stop the budget; every actor's next request raises `LLMEndpointFailure` and the
  driver exits non-zero with the breaker's one line (`JobBudget.guard`).

Cost: requests and releases travel to the budget in batches (`RemoteBudget`), so an actor's round trips grow with
time, not with its request rate. A grant carries a lease, so a request whose actor died is reclaimed after
``lease_s`` and never shrinks the budget.

Wiring: the driver starts the budget (`JobBudget.start`) after connecting to Ray and hands `JobBudget.ref` (a small
`BudgetRef`) to the actors; an actor builds its gateway with `jobs.job_gateway.job_llm_gateway(llm, job_id, ref)`.
The budget is job-scoped: it is killed when the driver ends (`JobBudget.shutdown`), and it dies with the driver.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pydantic import BaseModel, Field

from vista.llm import LLMConfig
from vista.llm.breaker import AttemptReport, BreakerPolicy, CircuitBreaker
from vista.llm.budget import BudgetLimits, BudgetStats, Grant, Refusal, RequestBudget
from vista.llm.endpoint_check import endpoint_of
from vista.llm.errors import LLMEndpointFailure
from vista.llm.prices import PriceTable

from vista.runs.progress import LiveFigures

log = logging.getLogger(__name__)

BUDGET_NAMESPACE = "trajonco-llm-budget"
LEASE_GRACE_S = 60.0
"""A grant's lease: the request's timeout, the gateway's grace, and this margin."""

JOB_HINTS = {
    "hint_url": "check --base-url",
    "hint_model": "check --model",
    "hint_key": "check --api-key-env (the variable holding the API key)",
    "hint_answers": "check --llm schema_mode=... (does the endpoint enforce JSON schemas?) and --model",
}
"""The breaker's advice in the jobs' own option names."""


@dataclass(frozen=True, slots=True)
class BudgetRef:
    """How an actor finds the job's budget (small and picklable: it travels in the actors' settings)."""

    name: str
    namespace: str = BUDGET_NAMESPACE
    wants_tokens: bool = False  # a tokens/min limit is set: callers estimate each request's tokens


class LLMBudgetActor:
    """The Ray actor (async: thousands of callers wait in it at once, on one event loop)."""

    def __init__(self, limits: BudgetLimits, policy: BreakerPolicy | None, endpoint: str, model: str):
        breaker = CircuitBreaker(policy, endpoint=endpoint, model=model) if policy is not None else None
        # grant ids start at a random offset: releases meant for an earlier incarnation of a restarted actor
        # can never free a grant of this one
        self.budget = RequestBudget(limits, breaker=breaker, first_id=secrets.randbits(40) << 20)

    async def acquire_batch(self, requests: list[tuple[int, float | None]], releases: list[tuple[int, AttemptReport]],
                            renewals: list[tuple[int, AttemptReport]] = ()) -> BudgetReply:
        """Apply a caller's renewals and releases, then grant a prefix of its waiting requests (at least one)."""
        self._apply(releases, renewals)
        outcomes = await self.budget.acquire_many(requests)
        return BudgetReply(outcomes, self.budget.reuse_allowed())

    async def release_batch(self, releases: list[tuple[int, AttemptReport]],
                            renewals: list[tuple[int, AttemptReport]] = ()) -> bool:
        """Apply a caller's renewals and releases; whether it may keep reusing its grants."""
        self._apply(releases, renewals)
        return self.budget.reuse_allowed()

    def _apply(self, releases: list[tuple[int, AttemptReport]], renewals: list[tuple[int, AttemptReport]]) -> None:
        for grant_id, report in renewals:  # (a grant's renewals always come before its release)
            self.budget.renew(grant_id, report)
        for grant_id, report in releases:
            self.budget.release(grant_id, report)

    async def stop(self, message: str) -> None:
        self.budget.stop(message)

    async def stats(self) -> BudgetStats:
        return self.budget.stats()


@dataclass(frozen=True, slots=True)
class BudgetReply:
    """The budget's answer to a batch: the grants (or refusals) and whether callers may reuse the grants they hold."""

    outcomes: list[Grant | Refusal]
    reuse: bool


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
    future: asyncio.Future


class RemoteBudget:
    """The job's budget as seen from an actor: the `vista.llm.budget.Limiter` its gateway asks before each request.

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

    def __init__(self, ref: BudgetRef, handle=None, *, flush_s: float = 0.005, max_batch: int = 256,
                 keep_s: float = 0.25, report_s: float = 0.1):
        import ray

        self.ref = ref
        self._handle = handle if handle is not None else ray.get_actor(ref.name, namespace=ref.namespace)
        self._flush_s = flush_s
        self._max_batch = max_batch
        self._keep_s = keep_s
        self._report_s = report_s
        self._waiting: list[_Waiter] = []
        self._released: list[tuple[int, AttemptReport]] = []
        self._renewed: list[tuple[int, AttemptReport]] = []
        self._kept: list[_Kept] = []
        self._reuse = False  # what the budget said last (nothing kept before it has answered once)
        self._pump: asyncio.Task | None = None
        self._flush: asyncio.TimerHandle | None = None
        self._report: asyncio.TimerHandle | None = None
        self._expiry: asyncio.TimerHandle | None = None
        self.asked = self.reused = 0  # requests that asked the budget / that reused a kept grant

    @property
    def wants_tokens(self) -> bool:
        return self.ref.wants_tokens

    def pause_remaining(self) -> float:
        """0: a job-wide pause is waited out in the budget itself (the request that got a 429 sleeps its own
        Retry-After in the gateway's retry loop, without holding back this actor's other requests)."""
        return 0.0

    async def acquire(self, tokens: int = 0, *, max_wait_s: float | None = None) -> Grant | Refusal:
        if self._kept and self._reuse and tokens == 0:
            kept = self._kept.pop()
            self._renewed.append((kept.grant.grant_id, kept.report))
            self.reused += 1
            if self._report is None:
                self._report = asyncio.get_running_loop().call_later(self._report_s, self._send_releases)
            return kept.grant
        self.asked += 1
        waiter = _Waiter(tokens, max_wait_s, asyncio.get_running_loop().create_future())
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
                log.debug("the job's LLM budget did not take the last releases", exc_info=True)

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
            answer = asyncio.wrap_future(self._handle.release_batch.remote(releases, renewals).future())
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
        from ray.exceptions import RayActorError

        while True:
            self._waiting = [w for w in self._waiting if not w.future.done()]  # drop cancelled waiters
            if not self._waiting:
                return
            batch = self._waiting[: self._max_batch]
            releases, self._released = self._released, []
            renewals, self._renewed = self._renewed, []
            try:
                ref = self._handle.acquire_batch.remote([(w.tokens, w.max_wait_s) for w in batch], releases, renewals)
                reply: BudgetReply = await asyncio.wrap_future(ref.future())
                outcomes = reply.outcomes
                self._allow_reuse(reply.reuse)
            except RayActorError:  # the driver ended the job (it kills the budget on its way out)
                outcomes = [Refusal(True, f"the job's LLM budget ({self.ref.name}) is gone: the job was stopped")] * len(batch)
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


def budget_limits(llm: LLMConfig, *, in_flight: int | None, requests_per_s: float | None = None,
                  tokens_per_min: int | None = None) -> BudgetLimits:
    """The job's limits; a grant's lease outlives the longest request the gateway may make."""
    from vista.llm.gateway import _TIMEOUT_GRACE_S

    return BudgetLimits(max_in_flight=in_flight, requests_per_s=requests_per_s, tokens_per_min=tokens_per_min,
                        lease_s=llm.timeout_s + _TIMEOUT_GRACE_S + LEASE_GRACE_S)


class JobBudget:
    """The driver's handle on the job's budget actor."""

    def __init__(self, handle, ref: BudgetRef, limits: BudgetLimits):
        self.handle = handle
        self.ref = ref
        self.limits = limits
        self.final: LLMBudgetFigures | None = None  # the figures at shutdown
        self.final_stats: BudgetStats | None = None  # the ledger at shutdown (every answer's tokens)
        self._last: BudgetStats | None = None

    @classmethod
    def start(cls, *, run_id: str, llm: LLMConfig, limits: BudgetLimits,
              policy: BreakerPolicy | None = BreakerPolicy(**JOB_HINTS)) -> JobBudget:
        """Start the budget actor of job ``run_id`` (no CPU; on the driver's node, whose loss ends the job anyway)."""
        import ray

        name = f"llm-budget-{run_id}"
        options: dict[str, object] = dict(
            name=name, namespace=BUDGET_NAMESPACE, num_cpus=0, max_concurrency=100_000, max_restarts=-1,
            max_task_retries=-1,
        )
        node = _driver_node()
        if node is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            # Hard affinity: the budget shares the driver's fate. A soft one does not hold a 0-CPU actor there
            # (measured on a 3-node cluster: placed on a random node), so losing a worker node could take the
            # budget with it: every actor's requests wait for its restart, which starts with empty figures and
            # no record of the requests still in flight (tests/test_jobs_multinode.py).
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
        handle = ray.remote(LLMBudgetActor).options(**options).remote(limits, policy, endpoint_of(llm), llm.model)
        ray.get(handle.stats.remote(), timeout=120)  # started and answering
        return cls(handle, BudgetRef(name, BUDGET_NAMESPACE, wants_tokens=limits.tokens_per_min is not None), limits)

    def stats(self, timeout_s: float = 30.0) -> BudgetStats | None:
        """The budget's figures now (the last ones seen if the actor cannot answer)."""
        import ray
        from ray.exceptions import GetTimeoutError, RayError

        try:
            self._last = ray.get(self.handle.stats.remote(), timeout=timeout_s)
        except (GetTimeoutError, RayError) as exc:
            log.warning("the job's LLM budget did not report its figures (%s)", type(exc).__name__)
        return self._last

    def live(self, prices: PriceTable, model: str, timeout_s: float = 5.0) -> LiveFigures | None:
        """The job's calls, tokens and estimated cost so far, for the progress line (None, quietly, when the budget
        does not answer in time: the line keeps its last figures)."""
        import ray
        from ray.exceptions import GetTimeoutError, RayError

        try:
            stats: BudgetStats = ray.get(self.handle.stats.remote(), timeout=timeout_s)
        except (GetTimeoutError, RayError):
            return None
        cost = prices.cost(model, prompt_tokens=stats.prompt_tokens_used, completion_tokens=stats.completion_tokens_used,
                           cached_prompt_tokens=stats.cached_prompt_tokens_used)
        return LiveFigures(calls=stats.requests, in_flight=stats.in_flight, tokens=stats.tokens_used, cost_usd=cost,
                           in_flight_limit=stats.in_flight_limit, rate_limited=stats.rate_limited,
                           cooldown_s=stats.cooldown_s)

    def figures(self) -> LLMBudgetFigures | None:
        """The job's LLM figures for the summary (None if the budget never answered)."""
        stats = self.stats()
        return LLMBudgetFigures.of(self.limits, stats) if stats is not None else None

    def check(self) -> None:
        """Raise `LLMEndpointFailure` with the breaker's line if the budget stopped the job."""
        stats = self.stats()
        if stats is not None and stats.stopped is not None:
            raise LLMEndpointFailure(stats.stopped)

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Around the job's pipeline: an error raised because the budget stopped the job (an actor's
        `LLMEndpointFailure`, wrapped by Ray Data) becomes the breaker's one-line `LLMEndpointFailure`."""
        try:
            yield
        except Exception as exc:
            stats = self.stats(timeout_s=10.0)
            if stats is not None and stats.stopped is not None:
                raise LLMEndpointFailure(stats.stopped) from None
            if (found := _endpoint_failure_in(exc)) is not None:
                raise found from None
            raise
        self.check()

    def shutdown(self) -> None:
        """Keep the final figures (`final`), then end the actor."""
        import ray

        self.final_stats = self.stats()
        self.final = LLMBudgetFigures.of(self.limits, self.final_stats) if self.final_stats is not None else None
        try:
            ray.kill(self.handle, no_restart=True)
        except Exception:  # noqa: BLE001 - the actor may be gone already (its node died, Ray shut down)
            log.debug("could not kill the LLM budget actor", exc_info=True)


@contextmanager
def job_budget(llm: LLMConfig, *, run_id: str, in_flight: int | None, requests_per_s: float | None = None,
               tokens_per_min: int | None = None) -> Iterator[JobBudget | None]:
    """The job's budget for the duration of the block (for the embedded model a counting-only one: each actor runs
    its own model, so nothing is limited, but calls and tokens are counted as they happen). Inside the block, the job stopped by the budget raises `LLMEndpointFailure` (one line); on
    exit the actor ends and its figures stay in ``budget.final``::

        with job_budget(llm, run_id=run_id, in_flight=plan.in_flight, ...) as budget:
            settings = settings.model_copy(update={"llm_budget": budget.ref if budget else None})
            ...run the pipeline...
        summary.llm_budget = budget.final if budget else None
    """
    if llm.backend == "embedded":  # each actor runs its own model: nothing to limit, but the job's calls, tokens and
        # time are still counted in one place (the live progress line, the summary); no breaker — as before
        budget = JobBudget.start(run_id=run_id, llm=llm, limits=budget_limits(llm, in_flight=None), policy=None)
    else:
        budget = JobBudget.start(run_id=run_id, llm=llm, limits=budget_limits(
            llm, in_flight=in_flight, requests_per_s=requests_per_s, tokens_per_min=tokens_per_min))
    try:
        with budget.guard():
            yield budget
    finally:
        budget.shutdown()


def _endpoint_failure_in(exc: BaseException) -> LLMEndpointFailure | None:
    """An `LLMEndpointFailure` somewhere in ``exc``'s causes (Ray wraps an actor's exception in its own)."""
    seen: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in seen:
        if isinstance(cause, LLMEndpointFailure):
            return LLMEndpointFailure(cause.message)
        seen.append(cause)
        cause = cause.__cause__ or cause.__context__ or getattr(cause, "cause", None)
    return None


def _driver_node() -> str | None:
    import ray

    try:
        return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - e.g. a Ray client driver, which is on no node
        return None
