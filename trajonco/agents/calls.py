"""One agent call through the LLM gateway, as a typed `AgentCall`, and the per-patient tally of those calls.

Every agent goes through `call_agent`, so the agents never see the gateway's own result type: a call either
carries the validated pydantic answer or an error message (never both, never neither), plus its usage.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel

from trajonco.agents.results import AgentError, AgentUsage
from vista.shared.llm import LLMResult, Message
from vista.shared.llm.caller import LLMCaller
from vista.shared.llm import system as system_message
from vista.shared.llm import user as user_message

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class CallUsage:
    """Usage of one call as the gateway recorded it (`vista.shared.llm.CallRecord`)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hit: bool = False
    attempts: int = 0
    model_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class AgentCall(Generic[T]):
    """The outcome of one agent call: the validated answer or an error, the call's usage and wall-clock span."""

    agent: str
    chunk_index: int | None
    output: T | None
    error: AgentError | None
    usage: CallUsage
    started: float
    finished: float

    def __post_init__(self) -> None:
        if (self.output is None) == (self.error is None):
            raise ValueError(f"{self.agent} call: exactly one of output and error must be set")

    @property
    def ok(self) -> bool:
        return self.output is not None


def messages_for(system_prompt: str, user_prompt: str) -> list[Message]:
    """The chat messages of one agent call."""
    return [system_message(system_prompt), user_message(user_prompt)]


async def call_agent(
    gateway: LLMCaller,
    *,
    agent: str,
    system: str,
    user: str,
    response_model: type[T],
    patient_id: int,
    chunk_index: int | None = None,
) -> AgentCall[T]:
    """Ask ``gateway`` for a ``response_model`` answer; a failed call comes back as an `AgentCall` with an error."""
    started = time.perf_counter()
    result: LLMResult[T] = await gateway.complete(
        messages_for(system, user), response_model, agent=agent, patient_id=patient_id
    )
    finished = time.perf_counter()
    record = result.usage
    usage = CallUsage(record.prompt_tokens, record.completion_tokens, record.cache_hit, record.attempts, record.latency_s)
    error = None
    if result.error is not None:
        error = AgentError(agent=agent, chunk_index=chunk_index, kind=result.error.kind.value, message=str(result.error))
    return AgentCall(agent, chunk_index, result.output, error, usage, started, finished)


class UsageTally:
    """Sums the calls of one patient per agent role (the `PatientResult.usage` field)."""

    def __init__(self) -> None:
        self.calls: list[AgentCall] = []

    def add(self, call: AgentCall) -> AgentCall:
        self.calls.append(call)
        return call

    def extend(self, calls: Iterable[AgentCall]) -> None:
        self.calls.extend(calls)

    def per_agent(self) -> dict[str, AgentUsage]:
        totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for call in self.calls:
            t = totals[call.agent]
            t["calls"] += 1
            t["cache_hits"] += call.usage.cache_hit
            t["failed"] += not call.ok
            t["prompt_tokens"] += call.usage.prompt_tokens
            t["completion_tokens"] += call.usage.completion_tokens
            t["attempts"] += call.usage.attempts
            t["model_seconds"] += call.usage.model_seconds
        return {
            agent: AgentUsage(**{k: (round(v, 6) if k == "model_seconds" else int(v)) for k, v in t.items()})
            for agent, t in totals.items()
        }

    def errors(self) -> list[AgentError]:
        return [c.error for c in self.calls if c.error is not None]
