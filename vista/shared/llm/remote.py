"""LLM calls that cross a process boundary, and the gateway a job's task sees.

* `RemoteCall` / `RemoteAnswer`: one gateway call to run elsewhere and what it gave (`answer_remote` is the answering
  side). Response models travel by reference (`ModelRef`), never pickled: a class importable by name is named; a
  class built at run time (pydantic's ``create_model``) is named by the factory that rebuilds it, registered by its
  maker with `ship_as`.
* `JobGateway`: an `LLMCaller` over an actor's gateway that adds each call's `CallRecord` to the usage of the task
  that made it (`vista.shared.llm.task_usage`: patients running concurrently in one actor never mix their bills) and sends
  the calls of the agent a `RemoteCompleter` serves (a pool of actors, say) there instead of this actor's model.
  A job stopped by its shared budget crosses the hop as ``RemoteAnswer.stopped`` and is raised again on the caller's
  side as `LLMEndpointFailure`, never turned into one more failed call.

>>> from vista.shared.llm.config import LLMConfig
>>> ref = model_ref(LLMConfig)
>>> ref, resolve_model(ref) is LLMConfig
(ModelRef(module='vista.shared.llm.config', name='LLMConfig', args=()), True)
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from pydantic import BaseModel

from vista.shared.llm.answers import parse_answer
from vista.shared.llm.caller import GatewayWrapper, LLMCaller
from vista.shared.llm.errors import ErrorKind, LLMCallError, LLMEndpointFailure
from vista.shared.llm.messages import Message, as_messages
from vista.shared.llm._priority import call_done, chain_calls, request_priority
from vista.shared.llm.task_usage import record_usage
from vista.shared.llm.usage import CallRecord, new_call_id

if TYPE_CHECKING:
    from vista.shared.llm.gateway import LLMGateway, LLMResult

M = TypeVar("M", bound=BaseModel)


# ------------------------------------------------------------------------------------------- response models
@dataclass(frozen=True, slots=True)
class ModelRef:
    """How to find a response model in another process: ``module.name``, called with ``args`` when there are any."""

    module: str
    name: str
    args: tuple[str, ...] = ()


_SHIPPED: dict[type[BaseModel], ModelRef] = {}


def ship_as(model: type[BaseModel], ref: ModelRef) -> None:
    """Say how another process rebuilds ``model`` (a class made at run time): ``ref`` names a factory and its args."""
    _SHIPPED[model] = ref


def model_ref(model: type[BaseModel]) -> ModelRef:
    """A `ModelRef` for ``model`` (TypeError when it can be found again neither by name nor by `ship_as`)."""
    module = importlib.import_module(model.__module__)
    if getattr(module, model.__qualname__, None) is model:
        return ModelRef(model.__module__, model.__qualname__)
    if model in _SHIPPED:
        return _SHIPPED[model]
    raise TypeError(f"response model {model.__qualname__} cannot be shipped to another process: it is neither importable "
                    "by name nor registered with vista.shared.llm.remote.ship_as")


def resolve_model(ref: ModelRef) -> type[BaseModel]:
    """The class a `ModelRef` names."""
    found = getattr(importlib.import_module(ref.module), ref.name)
    if ref.args:
        found = found(*ref.args)
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise TypeError(f"{ref} does not name a pydantic model")
    return found


# ------------------------------------------------------------------------------------------- remote calls
@dataclass(frozen=True, slots=True)
class RemoteCall:
    """One gateway call to run in another process."""

    messages: tuple[Message, ...]
    model: ModelRef
    agent: str
    patient_id: str | None
    max_tokens: int | None = None
    use_cache: bool = True
    calls_left: int = 0  # the asking chain's calls left (`vista.shared.llm._priority`): the answering side's budgets rank by it


@dataclass(frozen=True, slots=True)
class RemoteAnswer:
    """What a remote gateway call gave: the answer's JSON text (validated there) or the error, and its usage."""

    content: str | None
    error: LLMCallError | None
    record: CallRecord
    stopped: str | None = None  # the job's budget stopped the job: `to_result` raises LLMEndpointFailure(stopped)

    @classmethod
    def from_result(cls, result: LLMResult) -> RemoteAnswer:
        content = result.output.model_dump_json() if result.output is not None else None
        return cls(content, result.error, result.usage)

    @classmethod
    def failure(cls, call: RemoteCall, kind: ErrorKind, message: str, *, model: str, backend: str) -> RemoteAnswer:
        """The answer of a call the hop itself lost (no answer in time, the answering process gone): a recorded error."""
        record = CallRecord(call_id=new_call_id(), agent=call.agent, model=model, patient_id=call.patient_id,
                            backend=backend, ok=False, error_kind=kind.value, error_message=message)
        return cls(None, LLMCallError(kind, message), record)

    def to_result(self, model: type[M]) -> LLMResult[M]:
        """The `LLMResult` this answer stands for (re-validated here; a mismatch becomes an invalid-output error);
        raises `LLMEndpointFailure` when the remote side found the job stopped."""
        from vista.shared.llm.gateway import LLMResult

        if self.stopped is not None:
            raise LLMEndpointFailure(self.stopped)
        if self.error is not None or self.content is None:
            error = self.error or LLMCallError(ErrorKind.INVALID_OUTPUT, "remote call returned neither answer nor error")
            return LLMResult(None, error, self.record, self.content)
        value, problem = parse_answer(self.content, model)
        if value is None:
            return LLMResult(None, LLMCallError(ErrorKind.INVALID_OUTPUT, f"remote answer does not validate here: {problem}"),
                             self.record, self.content)
        return LLMResult(value, None, self.record, self.content)


async def answer_remote(gateway: LLMGateway, call: RemoteCall) -> RemoteAnswer:
    """Run a `RemoteCall` on this side's gateway (the answering side of the hop), ranked as the asking chain."""
    try:
        with chain_calls(call.calls_left):
            result = await gateway.complete(call.messages, resolve_model(call.model), agent=call.agent,
                                            patient_id=call.patient_id, max_tokens=call.max_tokens,
                                            use_cache=call.use_cache)
    except LLMEndpointFailure as exc:
        record = CallRecord(call_id="stopped", agent=call.agent, model=gateway.config.model, patient_id=call.patient_id,
                            backend=gateway.backend_kind, endpoint_host=gateway.endpoint_host, ok=False,
                            error_kind="job_stopped", error_message=exc.message)
        return RemoteAnswer(None, None, record, stopped=exc.message)
    return RemoteAnswer.from_result(result)


class RemoteCompleter(Protocol):
    """Something that runs the calls of one agent elsewhere (a pool of actors)."""

    @property
    def agent(self) -> str:
        """The agent whose calls it answers."""
        ...

    async def complete(self, call: RemoteCall) -> RemoteAnswer: ...


class JobGateway(GatewayWrapper):
    """The gateway a job's task sees: usage counted per task, the ``remote`` completer's agent answered there."""

    def __init__(self, gateway: LLMCaller, *, remote: RemoteCompleter | None = None):
        super().__init__(gateway)
        self.remote = remote

    @property
    def gateway(self) -> LLMCaller:
        return self.inner

    async def complete(self, messages: Sequence[Message | Mapping[str, str]], response_model: type[M], *, agent: str,
                       patient_id: str | int | None = None, max_tokens: int | None = None,
                       use_cache: bool = True) -> LLMResult[M]:
        """`LLMGateway.complete`, run here or in the remote completer; the usage goes to the task."""
        messages = tuple(as_messages(messages))
        remote = self.remote is not None and agent == self.remote.agent
        if remote:
            call = RemoteCall(messages, model_ref(response_model), agent, None if patient_id is None else str(patient_id),
                              max_tokens, use_cache, calls_left=int(request_priority()))
            try:
                result = (await self.remote.complete(call)).to_result(response_model)
            finally:
                call_done()  # the chain's count lives here: the remote gateway counts off only its own copy
        else:
            result = await self.inner.complete(messages, response_model, agent=agent, patient_id=patient_id,
                                               max_tokens=max_tokens, use_cache=use_cache)
        record_usage(result.usage, remote=remote)
        return result
