"""`ScriptedBackend`: a test double answering from a script, for unit tests of the gateway and of agents.

Each request takes the next step of the script (or the result of a callable). A step is an
answer text, a pydantic object (sent as its JSON), a `ChatReply`, a `BackendError` to raise,
or a `Delayed` step. Every request is kept in ``requests`` so tests can inspect prompts.

>>> import asyncio
>>> from vista.shared.llm.messages import user
>>> backend = ScriptedBackend(['{"ok": true}', BackendError(ErrorKind.SERVER_ERROR, "boom", status=500)])
>>> req = ChatRequest(messages=(user("hi"),), model="m", max_tokens=10, timeout_s=1.0)
>>> asyncio.run(backend.complete(req)).content
'{"ok": true}'
>>> asyncio.run(backend.complete(req))
Traceback (most recent call last):
...
vista.shared.llm.errors.BackendError: boom
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pydantic import BaseModel

from vista.shared.llm.backend import ChatReply, ChatRequest
from vista.shared.llm.errors import BackendError, ErrorKind


@dataclass(frozen=True, slots=True)
class Delayed:
    """Wait ``seconds`` (real time) and then play ``step``; longer than the request's timeout means a timeout."""

    seconds: float
    step: object


Step = str | BaseModel | ChatReply | BackendError | Delayed


class ScriptedBackend:
    """Answers requests from a list of steps (consumed in order) or from ``script(request) -> step``."""

    def __init__(
        self,
        script: Iterable[Step] | Callable[[ChatRequest], Step],
        *,
        report_usage: bool = True,
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
        context_window: int | None = 8192,
        name: str = "scripted",
    ):
        self._script = script if callable(script) else list(script)
        self.report_usage = report_usage
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.context_window = context_window
        self.name = name
        self.identity = name
        self.kind = "scripted"
        self.host = "in-process"
        self.requests: list[ChatRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0

    def _next_step(self, request: ChatRequest) -> Step:
        if callable(self._script):
            return self._script(request)
        if not self._script:
            raise AssertionError(f"ScriptedBackend: script exhausted at request {len(self.requests)}")
        return self._script.pop(0)

    async def complete(self, request: ChatRequest) -> ChatReply:
        self.requests.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._play(self._next_step(request), request)
        finally:
            self.in_flight -= 1

    async def _play(self, step: object, request: ChatRequest) -> ChatReply:
        if isinstance(step, Delayed):
            if step.seconds > request.timeout_s:
                await asyncio.sleep(request.timeout_s)
                raise BackendError(ErrorKind.TIMEOUT, f"{self.name}: no answer within {request.timeout_s:g} s")
            await asyncio.sleep(step.seconds)
            return await self._play(step.step, request)
        if isinstance(step, BackendError):
            raise step
        if isinstance(step, ChatReply):
            return step
        if isinstance(step, BaseModel):
            step = step.model_dump_json()
        if isinstance(step, str):
            usage = (self.prompt_tokens, self.completion_tokens) if self.report_usage else (None, None)
            return ChatReply(content=step, finish_reason="stop", prompt_tokens=usage[0], completion_tokens=usage[1],
                             model=request.model)
        raise TypeError(f"ScriptedBackend: unsupported step {step!r}")

    async def discover_context_window(self) -> int | None:
        return self.context_window

    async def aclose(self) -> None:
        return None
