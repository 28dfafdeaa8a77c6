"""`run_with_gateway`: run async TrajOnco work from synchronous code, with a gateway of its own.

Scripts and the CLI assess one patient at a time without an event loop of their own; `run_patient_sync` and
`run_any_cancer_sync` both do it the same way: open an `LLMGateway` for ``llm`` on a fresh loop, await the work with
it, close the gateway (its HTTP client and any embedded model) when the work ends or raises.

>>> from vista.llm import LLMConfig
>>> from vista.testing.scripted import ScriptedBackend
>>> async def model_name(gateway: LLMGateway) -> str:
...     return gateway.config.model
>>> run_with_gateway(model_name, llm=LLMConfig(model="m"), backend=ScriptedBackend([]))
'm'
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from vista.llm import Backend, LLMConfig, LLMGateway

T = TypeVar("T")


def run_with_gateway(work: Callable[[LLMGateway], Awaitable[T]], *, llm: LLMConfig | None = None,
                     backend: Backend | None = None) -> T:
    """``work(gateway)`` on its own event loop, with a gateway for ``llm`` (default: the embedded model) that is
    closed afterwards; ``backend`` replaces the one ``llm`` describes (a `vista.testing.scripted.ScriptedBackend` in tests)."""

    async def run() -> T:
        async with LLMGateway(llm, backend=backend) as gateway:
            return await work(gateway)

    return asyncio.run(run())
