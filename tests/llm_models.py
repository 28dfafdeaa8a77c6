"""Small bounded answer models for the LLM gateway tests (shaped like the agents' answers)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field


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
