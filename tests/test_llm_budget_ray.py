"""The job's LLM budget across Ray actors: the in-flight limit holds for the whole job (counted at the server), and
a burst of 429s with Retry-After pauses every actor once (no request reaches the server during the cool-down)."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from jobs.llm_budget import JobBudget
from vista.shared.llm._shared_budget import budget_limits
from vista.shared.testing.synthetic_server import RateLimitBurst, SyntheticLLMServer
from vista.shared.llm import LLMConfig

pytestmark = pytest.mark.ray


class Caller:
    """A stand-in for a patient actor: one job gateway (the job's budget behind it) making ``n`` calls at once."""

    def __init__(self, base_url: str, budget, concurrency: int):
        self.base_url = base_url
        self.budget = budget
        self.concurrency = concurrency

    async def run(self, tag: str, n: int) -> list[str | None]:
        from jobs.llm_budget import job_llm_gateway
        from vista.shared.llm import user
        from vista.toa.ambiguity import SameEventVerdict

        llm = LLMConfig(backend="openai", base_url=self.base_url, model="synthetic", max_concurrency=self.concurrency,
                        max_retries=5, backoff_base_s=0.2, backoff_max_s=1.0, retry_budget_s=120.0)
        gateway = job_llm_gateway(llm, job_id="budget-test", budget=self.budget)
        try:
            results = await asyncio.gather(*(gateway.complete([user(f"{tag} call {i}")], SameEventVerdict, agent="w")
                                             for i in range(n)))
        finally:
            await gateway.aclose()
        return [None if r.ok else str(r.error) for r in results]


def start_callers(base_url: str, budget, n: int, concurrency: int) -> list:
    import ray
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # test-module classes are not importable on workers
    actor = ray.remote(Caller).options(num_cpus=0.1, max_concurrency=4)
    return [actor.remote(base_url, budget, concurrency) for _ in range(n)]


def run_callers(callers: list, calls_each: int) -> list[str | None]:
    import ray

    outcomes = ray.get([caller.run.remote(f"actor {i}", calls_each) for i, caller in enumerate(callers)], timeout=300)
    for caller in callers:
        ray.kill(caller)
    return [o for per_actor in outcomes for o in per_actor]


def llm_for(server: SyntheticLLMServer) -> LLMConfig:
    return LLMConfig(backend="openai", base_url=server.base_url, model="synthetic")


def test_the_job_budget_bounds_requests_in_flight_across_actors(ray_session):
    with SyntheticLLMServer(latency_s=0.2) as server:
        budget = JobBudget.start(run_id=f"inflight-{os.getpid()}", llm=llm_for(server),
                                 limits=budget_limits(llm_for(server), in_flight=3))
        try:
            outcomes = run_callers(start_callers(server.base_url, budget.ref, 3, concurrency=4), calls_each=8)
            figures = budget.stats()
        finally:
            budget.shutdown()
        with_budget = server.stats.max_in_flight
        server.stats.max_in_flight = 0
        unbounded = run_callers(start_callers(server.base_url, None, 3, concurrency=4), calls_each=8)
        without_budget = server.stats.max_in_flight
    assert outcomes == [None] * 24 and unbounded == [None] * 24
    assert with_budget == 3  # never more than the job's budget, and the budget was used
    assert without_budget > 3  # the same actors on their own limits (3 x 4) overload the endpoint
    assert figures.in_flight_peak == 3 and figures.requests == 24 and figures.in_flight_limit == 3
    assert 1.0 <= figures.in_flight_mean <= 3.0


CALLS_EACH = 80  # at 0.1 s a call and 4 at a time an actor runs ~2 s alone: it is still sending when the 429s come


def burst_run(shared: bool) -> tuple[list[str | None], list[tuple[float, int]], float | None, object]:
    """Three actors through a burst of three 429s (Retry-After 3 s): half the job's window of 6 refused at once."""
    burst = RateLimitBurst(after=8, count=3, retry_after_s=3.0)
    with SyntheticLLMServer(latency_s=0.1, rate_limit_burst=burst) as server:
        budget = JobBudget.start(run_id=f"cooldown-{shared}-{os.getpid()}", llm=llm_for(server),
                                 limits=budget_limits(llm_for(server), in_flight=6))
        try:
            callers = start_callers(server.base_url, budget.ref if shared else None, 3, concurrency=4)
            outcomes = run_callers(callers, calls_each=CALLS_EACH)
            figures = budget.stats()
        finally:
            budget.shutdown()
        return outcomes, sorted(server.stats.arrivals), server.stats.burst_started, figures


def sent_during_pause(arrivals: list[tuple[float, int]], started: float, pause_s: float = 3.0) -> list[float]:
    """Requests that reached the server while the job should have been cooling down (after a margin for the
    requests already granted when the 429 was answered)."""
    return [round(t - started, 3) for t, _ in arrivals if started + 0.5 <= t < started + pause_s]


def test_a_burst_of_429s_with_retry_after_pauses_every_actor_once(ray_session):
    outcomes, arrivals, started, figures = burst_run(shared=True)
    assert outcomes == [None] * 3 * CALLS_EACH  # every call got its answer after the pause
    assert started is not None and [s for _, s in arrivals].count(429) == 3
    assert sent_during_pause(arrivals, started) == []  # no actor sent anything while the job was cooling down
    assert any(t >= started + 3.0 for t, _ in arrivals)  # and then the job went on
    assert figures.rate_limited_429 == 3 and figures.cooldowns == 1 and figures.window_decreases == 1
    assert figures.cooldown_s == pytest.approx(3.0, abs=0.2)  # one pause, for the longest, not 3 x 3 s

    # the same actors with their own gateways' windows: at most the one actor refused twice pauses
    outcomes, arrivals, started, _ = burst_run(shared=False)
    assert outcomes == [None] * 3 * CALLS_EACH and len(sent_during_pause(arrivals, started)) > 0
