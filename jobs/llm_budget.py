"""The job's one LLM budget as a Ray actor: wiring only. The logic (the LLM package's private flow control, reached
through its one door for jobs, `vista.shared.llm.job_flow`: the `BudgetService` around a request budget and its
circuit breaker, the batching `RemoteBudget` client with kept grants) knows nothing of Ray; this module runs the
service in a named async actor (`LLMBudgetActor`), reaches it from the actors (`RayBudgetTransport`,
`job_llm_gateway`) and holds the driver's handle (`JobBudget`): the limits ``--in-flight``,
``--requests-per-second`` and ``--tokens-per-minute`` hold for the whole job, across nodes, and a tripped breaker ends the job in one line (`JobBudget.guard`).

Wiring: the driver starts the budget (`JobBudget.start`) after connecting to Ray and hands `JobBudget.ref` (a small
`BudgetRef`) to the actors; an actor builds its gateway with `job_llm_gateway(llm, job_id, ref)`. The budget is
job-scoped: it is killed when the driver ends (`JobBudget.shutdown`), and it dies with the driver.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from vista.shared.llm import LLMConfig, LLMGateway, open_gateway
from vista.shared.llm.endpoint_check import endpoint_of
from vista.shared.llm.errors import LLMEndpointFailure
from vista.shared.llm.job_flow import (
    BreakerPolicy,
    BudgetGone,
    BudgetLimits,
    BudgetReply,
    BudgetService,
    BudgetStats,
    RemoteBudget,
    Reports,
    budget_limits,
)
from vista.shared.llm.prices import PriceTable
from vista.shared.runs.progress import LiveFigures

log = logging.getLogger(__name__)

BUDGET_NAMESPACE = "trajonco-llm-budget"

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


class LLMBudgetActor(BudgetService):
    """The Ray actor holding the job's `vista.shared.llm._shared_budget.BudgetService` (async: one event loop)."""


class RayBudgetTransport:
    """`vista.shared.llm._shared_budget.BudgetTransport` over the budget actor's handle (a lost actor is `BudgetGone`)."""

    def __init__(self, handle):
        self.handle = handle

    async def acquire_batch(self, requests: list[tuple[int, float | None]], releases: Reports,
                            renewals: Reports, priority: float) -> BudgetReply:
        from ray.exceptions import RayActorError

        try:
            return await asyncio.wrap_future(self.handle.acquire_batch.remote(requests, releases, renewals,
                                                                              priority).future())
        except RayActorError as exc:
            raise BudgetGone(str(exc)) from exc

    def release_batch(self, releases: Reports, renewals: Reports) -> asyncio.Future[bool]:
        return asyncio.wrap_future(self.handle.release_batch.remote(releases, renewals).future())


def job_llm_gateway(llm: LLMConfig, *, job_id: str | None, budget: BudgetRef | None = None) -> LLMGateway:
    """The `LLMGateway` of one job actor (create it on the loop that will use it): no ledger kept (usage is counted
    per task: `vista.shared.llm.remote.JobGateway`), and every request asks the job's shared budget first when ``budget``
    is given. The driver says once that a model has no price (`vista.shared.llm.endpoint_check.warn_if_unpriced`)."""
    limiter = None
    if budget is not None:
        import ray

        handle = ray.get_actor(budget.name, namespace=budget.namespace)
        limiter = RemoteBudget(RayBudgetTransport(handle), name=budget.name, wants_tokens=budget.wants_tokens)
    return open_gateway(llm, job_id=job_id, shared_budget=limiter, per_task_usage=True)


class JobBudget:
    """The driver's handle on the job's budget actor."""

    def __init__(self, handle, ref: BudgetRef, limits: BudgetLimits):
        self.handle = handle
        self.ref = ref
        self.limits = limits
        self.final: BudgetStats | None = None  # the figures at shutdown (every answer's tokens)
        self._last: BudgetStats | None = None

    @classmethod
    def start(cls, *, run_id: str, llm: LLMConfig, limits: BudgetLimits,
              policy: BreakerPolicy | None = BreakerPolicy(**JOB_HINTS)) -> JobBudget:
        """Start the budget actor of job ``run_id`` (no CPU; on the driver's node, whose loss ends the job anyway),
        without waiting for it: its name is registered at once (the job's actors find it while it starts), and
        its process starts while the patient actors do."""
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
                           in_flight_limit=stats.in_flight_window_final, rate_limited=stats.rate_limited_429,
                           cooldown_s=stats.cooldown_s)

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
            if (found := LLMEndpointFailure.found_in(exc)) is not None:
                raise found from None
            raise
        self.check()

    def shutdown(self) -> None:
        """Keep the final figures (`final`), then end the actor."""
        import ray

        self.final = self.stats()
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


def _driver_node() -> str | None:
    import ray

    try:
        return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - e.g. a Ray client driver, which is on no node
        return None
