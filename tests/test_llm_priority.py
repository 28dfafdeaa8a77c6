"""Longest remaining chain first: a budget with every slot taken serves the waiter of highest priority next (the
head of the line yields to it), the shared budget's client sends its batch in priority order, and through a
gateway a long chain's calls go before the calls of short chains running beside it."""

from __future__ import annotations

import asyncio

from llm_models import Risk
from vista.shared.llm import LLMConfig, LLMGateway, user
from vista.shared.llm._breaker import AttemptReport
from vista.shared.llm._budget import BudgetLimits, RequestBudget
from vista.shared.llm._priority import chain_calls, request_priority
from vista.shared.llm._shared_budget import BudgetService, RemoteBudget
from vista.shared.testing.scripted import Delayed, ScriptedBackend

OK = AttemptReport(answer_valid=True, tokens_used=10)
GOOD = '{"level": "Low", "reason": "stable"}'


def test_with_every_slot_taken_the_highest_priority_waiter_is_served_next_and_equals_in_order():
    async def go():
        budget = RequestBudget(BudgetLimits(max_in_flight=1))
        held = await budget.acquire()
        order: list[str] = []

        async def ask(name: str, priority: float) -> None:
            grant = await budget.acquire(priority=priority)
            order.append(name)
            await asyncio.sleep(0)
            budget.release(grant, OK)

        waiting = []
        for name, priority in (("short-a", 2.0), ("short-b", 2.0), ("long", 50.0), ("none", 0.0), ("mid", 9.0)):
            waiting.append(asyncio.ensure_future(ask(name, priority)))
            await asyncio.sleep(0)  # "short-a" holds the line (it is the head) before the others arrive
        budget.release(held, OK)
        await asyncio.gather(*waiting)
        return order

    # the head ("short-a") yields to every waiter above it; equals keep their arrival order
    assert asyncio.run(go()) == ["long", "mid", "short-a", "short-b", "none"]


def test_a_cancelled_waiter_neither_loses_nor_keeps_the_line():
    async def go():
        budget = RequestBudget(BudgetLimits(max_in_flight=1))
        held = await budget.acquire()
        head = asyncio.ensure_future(budget.acquire(priority=1.0))
        await asyncio.sleep(0)
        high = asyncio.ensure_future(budget.acquire(priority=5.0))
        await asyncio.sleep(0)
        budget.release(held, OK)  # the head wakes, yields to "high" and queues again ...
        await asyncio.sleep(0)
        head.cancel()  # ... and is cancelled while it waits for the line once more
        granted = await asyncio.wait_for(high, 5)
        budget.release(granted, OK)
        after = await asyncio.wait_for(budget.acquire(), 5)  # the line is free again
        return head.cancelled(), budget.stats().in_flight, after

    cancelled, in_flight, after = asyncio.run(go())
    assert cancelled and in_flight == 1 and after is not None


def test_the_remote_client_sends_its_waiters_by_priority_and_the_service_ranks_batches_by_their_head():
    class Transport:
        def __init__(self, service):
            self.service, self.sent = service, []

        async def acquire_batch(self, requests, releases, renewals, priority):
            self.sent.append((len(requests), priority))
            return await self.service.acquire_batch(requests, releases, renewals, priority)

        def release_batch(self, releases, renewals):
            return asyncio.ensure_future(self.service.release_batch(releases, renewals))

    async def go():
        service = BudgetService(BudgetLimits(max_in_flight=1), None, endpoint="e", model="m")
        transport = Transport(service)
        client = RemoteBudget(transport, name="b", keep_s=0.0)
        held = await service.budget.acquire()  # the only slot: every request below waits in one batch
        order: list[float] = []

        async def ask(priority: float) -> None:
            grant = await client.acquire(priority=priority)
            order.append(priority)
            client.release(grant, AttemptReport(answer_valid=False))  # given back at once (never kept)

        asks = [asyncio.ensure_future(ask(p)) for p in (1.0, 7.0, 3.0)]
        await asyncio.sleep(0.05)
        service.budget.release(held, OK)
        await asyncio.wait_for(asyncio.gather(*asks), 10)
        await client.flush()
        return order, transport.sent

    order, sent = asyncio.run(go())
    assert order == [7.0, 3.0, 1.0]
    assert sent[0] == (3, 7.0)  # the first batch: all three waiters, ranked by its head


def test_through_a_gateway_the_long_chain_goes_first_and_counts_its_calls_down():
    asked: list[float] = []

    async def go():
        backend = ScriptedBackend([Delayed(0.01, GOOD)] * 12)
        async with LLMGateway(LLMConfig(model="m", max_concurrency=1), backend=backend) as gateway:
            async def chain(name: str, calls: int) -> None:
                with chain_calls(calls):
                    for _ in range(calls):
                        if name == "long":
                            asked.append(request_priority())
                        result = await gateway.complete([user(name)], Risk, agent="worker", use_cache=False)
                        assert result.output is not None
            await asyncio.gather(chain("short-1", 2), chain("short-2", 2), chain("long", 8))
        return [request.messages[-1].content for request in backend.requests]

    served = asyncio.run(go())
    assert asked == [8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0]  # one call counted off after each `complete`
    # "short-1" came first and was sent at once; then the long chain outranks the short ones until it has as few
    # calls left as they do, and equals go in the order they first asked
    assert served == ["short-1", "long", "long", "long", "long", "long", "long", "short-2", "long", "short-1",
                      "short-2", "long"], served


def test_a_call_answered_in_another_process_carries_its_chains_rank_and_is_counted_off_here():
    """Two-stage preprocessor calls go to a pool of actors (`vista.shared.llm.remote.JobGateway`): the call carries the
    chain's calls left, the answering side's budgets rank it so, and the asking chain counts it off (its gateway
    never sees the call)."""
    from vista.shared.llm.remote import JobGateway, answer_remote

    class Pool:  # the answering side in this process: its own gateway, its own copy of the rank
        agent = "preprocessor"

        def __init__(self, gateway):
            self.gateway, self.ranks = gateway, []

        async def complete(self, call):
            self.ranks.append(call.calls_left)
            return await answer_remote(self.gateway, call)

    async def go():
        backend = ScriptedBackend([Delayed(0.0, GOOD)] * 4)
        async with LLMGateway(LLMConfig(model="m"), backend=backend) as gateway:
            pool = Pool(gateway)
            job = JobGateway(gateway, remote=pool)
            left = []
            with chain_calls(4):
                for agent in ("preprocessor", "preprocessor", "worker"):
                    await job.complete([user(agent)], Risk, agent=agent, use_cache=False)
                    left.append(request_priority())
            return pool.ranks, left

    ranks, left = asyncio.run(go())
    assert ranks == [4, 3]  # each remote call carries what its chain had left when it asked
    assert left == [3.0, 2.0, 1.0]  # remote and local calls alike counted off once
