"""Test helpers for the LLM gateway tests: a fake clock and small response models."""

from __future__ import annotations

import asyncio
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
