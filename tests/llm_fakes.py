"""Test helpers for the LLM gateway tests: a fake clock and small response models."""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Annotated, Literal

from pydantic import BaseModel, Field


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
    """The running loop's time (virtual under `VirtualTimeLoop`) as a `vista.llm.pacing.Clock`; after the loop
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


class Risk(BaseModel):
    """A bounded answer like the agents' (an enum and a short text)."""

    level: Literal["Low", "Moderate", "High"]
    reason: str = Field(max_length=80)


class Event(BaseModel):
    date: str = Field(max_length=10)
    what: str = Field(max_length=60)


class WorkerAnswer(BaseModel):
    """A nested bounded answer (list of sub-objects, an optional field)."""

    summary: str = Field(max_length=200)
    events: list[Event] = Field(default_factory=list, max_length=3)
    risk: Literal["Low", "Moderate", "High"]
    score: int | None = Field(None, ge=1, le=10)
    tags: list[Annotated[str, Field(max_length=20)]] = Field(default_factory=list, max_length=4)
