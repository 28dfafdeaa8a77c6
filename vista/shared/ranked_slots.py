"""At most N holders at once, the waiters served lowest rank first (ties in arrival order) rather than first come.

The one waiting-line primitive of the project: the job-wide LLM budget's line (one holder, highest priority first,
`vista.shared.llm._budget`) and a job actor's patient slots (N holders, earliest block first, `jobs.actor_base`) are
both this. A waiter cancelled after its grant but before it ran passes the slot on, so no slot is ever lost.

>>> import asyncio
>>> async def demo():
...     slots, order = RankedSlots(1), []
...     await slots.acquire(0)  # held: the next three queue
...     async def task(name, rank):
...         await slots.acquire(rank)
...         order.append(name)
...         slots.release()
...     waiting = [asyncio.ensure_future(task(n, r)) for n, r in (("b", 2), ("a", 1), ("b2", 2))]
...     await asyncio.sleep(0)
...     slots.release()
...     await asyncio.gather(*waiting)
...     return order
>>> asyncio.run(demo())
['a', 'b', 'b2']
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from typing import Generic, TypeVar

Rank = TypeVar("Rank")


class RankedSlots(Generic[Rank]):
    """``size`` slots granted lowest ``rank`` first; subclasses may hold a grant back (`may_grant`)."""

    def __init__(self, size: int):
        self.free = size
        self._waiting: list[tuple[Rank, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()

    def next_arrival(self) -> int:
        """A place in the arrival order, for a caller that will queue again in its first place (see `acquire`)."""
        return next(self._arrivals)

    async def acquire(self, rank: Rank, arrival: int | None = None) -> None:
        """Wait for a slot behind every waiter of a lower rank, or of the same rank that came earlier (``arrival``:
        the caller's first place, when it queues again). Returns at once, without yielding, when a slot is free."""
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (rank, self.next_arrival() if arrival is None else arrival, granted))
        self._grant()
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():  # granted, then cancelled before it ran: pass it on
                self.release()
            raise

    def release(self) -> None:
        """Give a slot back (to the next waiter, if any)."""
        self.free += 1
        self._grant()

    def first_waiting(self) -> Rank | None:
        """The rank of the first live waiter (None when nobody waits)."""
        while self._waiting and self._waiting[0][2].done():  # cancelled waiters
            heapq.heappop(self._waiting)
        return self._waiting[0][0] if self._waiting else None

    def may_grant(self, rank: Rank) -> bool:
        """Whether the first waiter, of ``rank``, may have a free slot now (always, here)."""
        return True

    def _grant(self) -> None:
        while self.free:
            rank = self.first_waiting()
            if rank is None or not self.may_grant(rank):
                return
            _, _, granted = heapq.heappop(self._waiting)
            self.free -= 1
            granted.set_result(None)
