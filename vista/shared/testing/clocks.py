"""Clock doubles for tests of the pacing, retry and budget code: a fake clock and an event loop on virtual time.

>>> clock = FakeClock(start=10.0)
>>> run_virtual(clock.sleep(2.5)); clock.monotonic(), clock.sleeps
(12.5, [2.5])
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine


class FakeClock:
    """Simulated time: ``sleep`` advances the clock at once (after yielding to the loop) and records the delay."""

    def __init__(self, start: float = 1000.0):
        self.now = start
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += max(0.0, seconds)
        await asyncio.sleep(0)


class _SkippingSelector(selectors.DefaultSelector):
    """Never blocks: a wait for the next timer moves the loop's virtual clock to it instead."""

    loop: VirtualTimeLoop

    def select(self, timeout=None):
        if timeout is None:
            raise RuntimeError("virtual time: every task waits and no timer is due (a deadlock)")
        self.loop.virtual_now += timeout
        return super().select(0)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on simulated time: whenever every task waits, time jumps to the next timer. Many concurrent
    sleepers then run in the order real time would give them, in no real time and independent of machine speed.
    Use `run_virtual`, and `LoopClock` as the components' clock."""

    def __init__(self, start: float = 1000.0):
        selector = _SkippingSelector()
        selector.loop = self
        self.virtual_now = start
        super().__init__(selector)

    def time(self) -> float:
        return self.virtual_now


class LoopClock:
    """The running loop's time (virtual under `VirtualTimeLoop`) as a `vista.shared.llm._pacing.Clock`; after the loop
    ended (reading figures), the last time it showed."""

    last = 0.0

    def monotonic(self) -> float:
        try:
            self.last = asyncio.get_running_loop().time()
        except RuntimeError:
            pass
        return self.last

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


def run_virtual(coro: Coroutine):
    """Run ``coro`` on a `VirtualTimeLoop`."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(coro)
