"""`LLMCaller`: what a pipeline calls a model through, whoever answers — one concept of "an LLM call".

`vista.shared.llm.LLMGateway` is the implementation; the others wrap one and change a single thing (`GatewayWrapper`
forwards the rest): `AnswerTokens` asks each response model for its own ``max_tokens`` (TrajOnco's answer fit),
and `vista.shared.llm.remote.JobGateway` counts usage per task and sends one agent's calls to another process.
`vista.shared.llm.SyncLLMGateway` is the blocking face of the same call (same parameters, no ``await``).

>>> from vista.shared.llm import LLMConfig, LLMGateway
>>> from vista.shared.testing.scripted import ScriptedBackend
>>> import asyncio
>>> async def wrapped():
...     async with LLMGateway(LLMConfig(model="m"), backend=ScriptedBackend([])) as gateway:
...         sized = AnswerTokens(gateway, {})
...         return isinstance(gateway, LLMCaller), isinstance(sized, LLMCaller), sized.config.model
>>> asyncio.run(wrapped())
(True, True, 'm')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from vista.shared.llm.messages import Message

if TYPE_CHECKING:
    from vista.shared.llm.config import LLMConfig
    from vista.shared.llm.gateway import LLMResult
    from vista.shared.llm.schema import JSONSchema

M = TypeVar("M", bound=BaseModel)


@runtime_checkable
class LLMCaller(Protocol):
    """What the pipelines (TrajOnco's agents, VISTA's stages) use of a gateway."""

    @property
    def config(self) -> LLMConfig:
        """The LLM settings (the model's name, the answer's ``max_tokens``, ...)."""
        ...

    @property
    def endpoint(self) -> str:
        """Who answers (part of the stores' hashes, as of the response-cache key)."""
        ...

    @property
    def context_tokens(self) -> int | None:
        """The model's context window, when known without asking."""
        ...

    async def discover_context_tokens(self) -> int | None: ...

    def schema_for(self, response_model: type[BaseModel]) -> JSONSchema: ...

    async def complete(self, messages: Sequence[Message | Mapping[str, str]], response_model: type[M], *, agent: str,
                       patient_id: str | int | None = None, max_tokens: int | None = None,
                       use_cache: bool = True) -> LLMResult[M]:
        """One validated answer, or its error record (`vista.shared.llm.LLMGateway.complete`)."""
        ...


class GatewayWrapper:
    """An `LLMCaller` over another one: everything forwarded to ``inner``; subclasses change `complete`."""

    def __init__(self, inner: LLMCaller):
        self.inner = inner

    @property
    def config(self) -> LLMConfig:
        return self.inner.config

    @property
    def endpoint(self) -> str:
        return self.inner.endpoint

    @property
    def context_tokens(self) -> int | None:
        return self.inner.context_tokens

    async def discover_context_tokens(self) -> int | None:
        return await self.inner.discover_context_tokens()

    def schema_for(self, response_model: type[BaseModel]) -> JSONSchema:
        return self.inner.schema_for(response_model)

    async def complete(self, messages: Sequence[Message | Mapping[str, str]], response_model: type[M], *, agent: str,
                       patient_id: str | int | None = None, max_tokens: int | None = None,
                       use_cache: bool = True) -> LLMResult[M]:
        return await self.inner.complete(messages, response_model, agent=agent, patient_id=patient_id,
                                         max_tokens=max_tokens, use_cache=use_cache)

    async def flush_limits(self) -> None:
        """The inner gateway's (`LLMGateway.flush_limits`), when it has one."""
        flush = getattr(self.inner, "flush_limits", None)
        if flush is not None:
            await flush()

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


class AnswerTokens(GatewayWrapper):
    """Calls that ask for the ``max_tokens`` of their response model (``tokens``) unless the caller names one."""

    def __init__(self, inner: LLMCaller, tokens: Mapping[type[BaseModel], int]):
        super().__init__(inner)
        self.tokens = dict(tokens)

    async def complete(self, messages: Sequence[Message | Mapping[str, str]], response_model: type[M], *, agent: str,
                       patient_id: str | int | None = None, max_tokens: int | None = None,
                       use_cache: bool = True) -> LLMResult[M]:
        return await self.inner.complete(messages, response_model, agent=agent, patient_id=patient_id,
                                         max_tokens=max_tokens or self.tokens.get(response_model), use_cache=use_cache)
