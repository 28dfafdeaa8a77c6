"""`SyncLLMGateway`: the gateway for synchronous code (e.g. plain Ray actors), on a private event-loop thread: the
blocking face of `vista.shared.llm.caller.LLMCaller` (`complete` takes the same arguments), and `run` for an async pipeline.

The async gateway and its HTTP client live on one background loop for the gateway's lifetime, so
blocking calls from any thread reuse one connection pool instead of starting a loop per call.
Its methods are the async ones made `blocking`, so their parameters are declared once, on `LLMGateway`:

>>> from pydantic import Field
>>> from vista.shared.testing.scripted import ScriptedBackend
>>> class Risk(BaseModel):
...     level: str = Field(max_length=8)
>>> with SyncLLMGateway(LLMConfig(model="m"), backend=ScriptedBackend(['{"level": "High"}'])) as gateway:
...     gateway.complete([{"role": "user", "content": "Risk?"}], Risk, agent="worker").unwrap().level
'High'
>>> list(inspect.signature(SyncLLMGateway.complete).parameters)
['self', 'messages', 'response_model', 'agent', 'patient_id', 'max_tokens', 'use_cache']
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from pydantic import BaseModel

from vista.shared.llm.config import LLMConfig
from vista.shared.llm.backend import Backend
from vista.shared.llm.gateway import LLMGateway, open_gateway
from vista.shared.llm.schema import JSONSchema
from vista.shared.llm.usage import UsageLedger

P = ParamSpec("P")
T = TypeVar("T")


def blocking(
    method: Callable[Concatenate[LLMGateway, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[SyncLLMGateway, P], T]:
    """An async `LLMGateway` method as a blocking `SyncLLMGateway` one, awaited on the gateway's loop thread.

    The parameters are declared once, on the async method: the type checker carries them over (``P``), and
    ``functools.wraps`` shows them to `help` and `inspect.signature`.
    """

    @functools.wraps(method)
    def call(self: SyncLLMGateway, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(method(self.gateway, *args, **kwargs))

    call.__qualname__ = f"SyncLLMGateway.{method.__name__}"
    call.__doc__ = f"`LLMGateway.{method.__name__}`, blocking until it returns.\n\n{inspect.cleandoc(method.__doc__ or '')}"
    return call


class SyncLLMGateway:
    """Blocking front of the `LLMGateway` that `open_gateway` gives for the same arguments; close it (or use
    ``with``) to stop its loop thread."""

    def __init__(self, config: LLMConfig | None = None, *, job_id: str | None = None, backend: Backend | None = None):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vista-llm-gateway", daemon=True)
        self._thread.start()

        async def make() -> LLMGateway:
            return open_gateway(config, job_id=job_id, backend=backend)

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

    complete = blocking(LLMGateway.complete)
    discover_context_tokens = blocking(LLMGateway.discover_context_tokens)

    def run(self, work: Callable[[LLMGateway], Awaitable[T]]) -> T:
        """``work(gateway)`` awaited on the gateway's loop: an async pipeline (`vista.shared.llm.caller.LLMCaller`'s user)
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
