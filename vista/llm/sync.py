"""`SyncLLMGateway`: the gateway for synchronous code (e.g. plain Ray actors), on a private event-loop thread: the
blocking face of `vista.llm.caller.LLMCaller` (`complete` takes the same arguments), and `run` for an async pipeline.

The async gateway and its HTTP client live on one background loop for the gateway's lifetime, so
blocking calls from any thread reuse one connection pool instead of starting a loop per call.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import TypeVar

from pydantic import BaseModel

from vista.llm.config import LLMConfig
from vista.llm.gateway import LLMGateway, LLMResult
from vista.llm.messages import Message
from vista.llm.schema import JSONSchema
from vista.llm.usage import UsageLedger

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class SyncLLMGateway:
    """Blocking front of an `LLMGateway` (same arguments); close it (or use ``with``) to stop its loop thread."""

    def __init__(self, config: LLMConfig | None = None, **gateway_kwargs: object):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vista-llm-gateway", daemon=True)
        self._thread.start()

        async def make() -> LLMGateway:
            return LLMGateway(config, **gateway_kwargs)  # type: ignore[arg-type]

        try:
            self.gateway = self._run(make())
        except BaseException:
            self._stop()
            raise

    def _run(self, coro: Coroutine[object, object, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    @property
    def ledger(self) -> UsageLedger:
        return self.gateway.ledger

    @property
    def config(self) -> LLMConfig:
        return self.gateway.config

    def complete(
        self,
        messages: Sequence[Message | Mapping[str, str]],
        response_model: type[M],
        *,
        agent: str,
        patient_id: str | int | None = None,
        max_tokens: int | None = None,
        use_cache: bool = True,
    ) -> LLMResult[M]:
        """`LLMGateway.complete`, blocking until the call has a result or an error record."""
        return self._run(
            self.gateway.complete(
                messages, response_model, agent=agent, patient_id=patient_id, max_tokens=max_tokens, use_cache=use_cache
            )
        )

    def run(self, work: Callable[[LLMGateway], Awaitable[T]]) -> T:
        """``work(gateway)`` awaited on the gateway's loop: an async pipeline (`vista.llm.caller.LLMCaller`'s user)
        run from synchronous code on this gateway."""

        async def go() -> T:
            return await work(self.gateway)

        return self._run(go())

    @property
    def endpoint(self) -> str:
        return self.gateway.endpoint

    def schema_for(self, response_model: type[BaseModel]) -> JSONSchema:
        return self.gateway.schema_for(response_model)

    @property
    def context_tokens(self) -> int | None:
        return self.gateway.context_tokens

    def discover_context_tokens(self) -> int | None:
        return self._run(self.gateway.discover_context_tokens())

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._run(self.gateway.aclose())
        finally:
            self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> SyncLLMGateway:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
