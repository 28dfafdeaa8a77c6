"""Pacing of requests to one endpoint: a clock, token buckets (requests/s, tokens/min) and a Retry-After cool-down.

Everything takes a `Clock`, so tests can run the timing logic on a fake clock without waiting. The pieces are
combined into one limiter by `vista.shared.llm._budget.RequestBudget`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic time and sleeping (the real one is `SystemClock`)."""

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Real time: `time.monotonic` and `asyncio.sleep`."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class TokenBucket:
    """At most ``rate`` acquisitions per second on average, with bursts of at most ``burst``.

    Waiters are served in arrival order (an asyncio lock), so no caller starves.
    """

    def __init__(self, rate: float, burst: float | None = None, *, clock: Clock | None = None):
        if rate <= 0:
            raise ValueError(f"token bucket rate must be > 0, got {rate}")
        self.rate = rate
        self.capacity = max(1.0, burst if burst is not None else rate)
        self._clock = clock or SystemClock()
        self._tokens = self.capacity
        self._stamp = self._clock.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock.monotonic()
        self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self) -> None:
        async with self._lock:
            self._refill()
            while self._tokens < 1.0:
                await self._clock.sleep((1.0 - self._tokens) / self.rate)
                self._refill()
            self._tokens -= 1.0

    # Non-blocking use, for callers that wait on several limits at once (`vista.shared.llm._budget.RequestBudget`).
    def wait_time(self, amount: float = 1.0) -> float:
        """Seconds until ``amount`` (capped at the capacity) can be taken; 0 when it can be taken now.

        >>> from types import SimpleNamespace
        >>> clock = SimpleNamespace(now=0.0, monotonic=lambda: clock.now)
        >>> bucket = TokenBucket(rate=2.0, burst=4, clock=clock)
        >>> bucket.take(4), bucket.wait_time(1)
        (4, 0.5)
        >>> bucket.refund(-2); bucket.wait_time(1)  # a debt (more used than reserved) delays the next taker
        1.5
        """
        self._refill()
        amount = min(amount, self.capacity)
        # (a deficit within rounding error counts as none: sleeping 1e-15 s would not move a clock reading 1e3 s)
        return 0.0 if self._tokens >= amount - 1e-9 else (amount - self._tokens) / self.rate

    def take(self, amount: float = 1.0) -> float:
        """Take ``amount`` (capped at the capacity) now, even into debt; returns what was taken."""
        self._refill()
        amount = min(amount, self.capacity)
        self._tokens -= amount
        return amount

    def refund(self, amount: float) -> None:
        """Give back ``amount`` (negative: take more, e.g. when a request used more tokens than it reserved)."""
        self._refill()
        self._tokens = min(self.capacity, self._tokens + amount)


class Cooldown:
    """A pause shared by every call to one endpoint (set from ``Retry-After``); calls wait it out before sending."""

    def __init__(self, *, clock: Clock | None = None):
        self._clock = clock or SystemClock()
        self._until = float("-inf")

    def extend(self, seconds: float) -> None:
        """Make sure nobody sends for the next ``seconds`` (never shortens an existing pause)."""
        self._until = max(self._until, self._clock.monotonic() + max(0.0, seconds))

    def remaining(self) -> float:
        return max(0.0, self._until - self._clock.monotonic())

    async def wait(self) -> float:
        """Sleep until the pause is over; returns the seconds waited."""
        waited = 0.0
        while (left := self.remaining()) > 0:
            await self._clock.sleep(left)
            waited += left
        return waited
