"""The gateway the pipeline sees inside a job's actor: the actor's `LLMGateway`, plus per-task usage and routing.

* **Usage per task.** Each call's `CallRecord` is added to the `vista.llm.task_usage.TaskUsage` of the task that
  made it (`record_usage`), so patients running concurrently in one actor never mix their bills. The actor's own
  ledger keeps no records (`NullLedger`): a long-lived actor serving 10,000 patients must not grow with them.
* **Routing.** In the two-stage variant, calls of one agent role (the preprocessors) are sent to a separate actor
  pool (`jobs.preprocess_pool`) instead of this actor's model, so one patient's chunks are filtered in parallel
  across the cluster; the answer comes back as the same `LLMResult`, with its usage record.

* **One budget per job.** `job_llm_gateway` builds an actor's gateway around the job's shared LLM budget
  (`jobs.llm_budget`), so every request of every actor counts against the job's limits. When the budget stops the
  job (circuit breaker, exhausted quota) the gateway raises `LLMEndpointFailure`; it crosses the remote hop as
  ``RemoteAnswer.stopped`` and is raised again on the caller's side, never turned into one more failed call.

Response models cross process boundaries by reference (`ModelRef`), never pickled: the agents' compact models are
made at run time by pydantic's ``create_model`` and are rebuilt from their limits on the other side.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel

from vista.llm import CallRecord, LLMCallError, LLMConfig, LLMGateway, LLMResult, Message, UsageLedger
from vista.llm.errors import ErrorKind, LLMEndpointFailure
from vista.llm.gateway import parse_answer
from vista.llm.task_usage import NullLedger, record_usage

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from jobs.llm_budget import BudgetRef
    from jobs.preprocess_pool import PreprocessorPool


def job_llm_gateway(llm: LLMConfig, *, job_id: str | None, budget: BudgetRef | None = None) -> LLMGateway:
    """The `LLMGateway` of one job actor (create it on the loop that will use it): no ledger kept (usage is counted
    per task), and every request asks the job's shared budget first when ``budget`` is given. The driver says once
    that a model has no price (`warn_if_unpriced`); its actors don't repeat it."""
    limiter = None
    if budget is not None:
        from jobs.llm_budget import RemoteBudget

        limiter = RemoteBudget(budget)
    return LLMGateway(llm, job_id=job_id, ledger=NullLedger(), limiter=limiter, warn_unpriced=False)


def warn_if_unpriced(llm: LLMConfig) -> None:
    """On the driver: one warning when the job's model has no price in the price table (its cost is then counted
    as unpriced calls, never as $0)."""
    from vista.llm.prices import PriceTable

    if PriceTable.load(llm.prices_path).get(llm.model) is None:
        log.warning("model %r has no price in the price table: its calls are counted as unpriced (no cost)", llm.model)


# ------------------------------------------------------------------------------------------- response models
@dataclass(frozen=True, slots=True)
class ModelRef:
    """How to find a response model class in another process: an importable class, or an agent role + limits."""

    module: str
    name: str
    limits: str | None = None  # set for the agents' models built from `trajonco.agents.schemas.OutputLimits`


_ROLES = ("worker", "manager", "preprocessor", "any_manager")


def model_ref(model: type[BaseModel]) -> ModelRef:
    """A `ModelRef` for ``model`` (raises TypeError when it cannot be found again by name)."""
    module = importlib.import_module(model.__module__)
    if getattr(module, model.__qualname__, None) is model:
        return ModelRef(model.__module__, model.__qualname__)
    from trajonco.agents.schemas import limits_of, output_models

    limits = limits_of(model)
    if limits is not None:
        models = output_models(limits)
        for role in _ROLES:
            if getattr(models, role) is model:
                return ModelRef("trajonco.agents.schemas", role, limits.name)
    raise TypeError(f"response model {model.__qualname__} cannot be shipped to another process: it is neither importable "
                    "by name nor one of the agents' output models")


def resolve_model(ref: ModelRef) -> type[BaseModel]:
    """The class a `ModelRef` names."""
    if ref.limits is None:
        found = getattr(importlib.import_module(ref.module), ref.name)
    else:
        from trajonco.agents.schemas import output_models, resolve_limits

        found = getattr(output_models(resolve_limits(ref.limits)), ref.name)
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise TypeError(f"{ref} does not name a pydantic model")
    return found


# ------------------------------------------------------------------------------------------- remote calls
@dataclass(frozen=True, slots=True)
class RemoteCall:
    """One gateway call to run in another actor."""

    messages: tuple[Message, ...]
    model: ModelRef
    agent: str
    patient_id: str | None
    max_tokens: int | None = None
    use_cache: bool = True


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

    def to_result(self, model: type[BaseModel]) -> LLMResult:
        """The `LLMResult` this answer stands for (re-validated here; a mismatch becomes an invalid-output error);
        raises `LLMEndpointFailure` when the remote side found the job stopped."""
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
    """Run a `RemoteCall` on this side's gateway (the preprocessor actors' side of the hop)."""
    try:
        result = await gateway.complete(call.messages, resolve_model(call.model), agent=call.agent,
                                        patient_id=call.patient_id, max_tokens=call.max_tokens, use_cache=call.use_cache)
    except LLMEndpointFailure as exc:
        record = CallRecord(call_id="stopped", agent=call.agent, model=gateway.config.model, patient_id=call.patient_id,
                            backend=gateway.backend_kind, endpoint_host=gateway.endpoint_host, ok=False,
                            error_kind="job_stopped", error_message=exc.message)
        return RemoteAnswer(None, None, record, stopped=exc.message)
    return RemoteAnswer.from_result(result)


class RemoteCompleter(Protocol):
    """Something that runs a `RemoteCall` elsewhere (the preprocessor actor pool)."""

    async def complete(self, call: RemoteCall) -> RemoteAnswer: ...


class JobGateway:
    """`LLMGateway`'s interface over an actor's gateway, with per-task usage and optional routing of one role."""

    def __init__(self, gateway: LLMGateway, *, remote: RemoteCompleter | PreprocessorPool | None = None,
                 remote_agent: str = "preprocessor"):
        self.gateway = gateway
        self.remote = remote
        self.remote_agent = remote_agent

    @property
    def config(self):  # the pipeline reads the model name and answer budget from here
        return self.gateway.config

    @property
    def endpoint(self) -> str:  # who answers: part of the TOA and display hashes, as of the response-cache key
        return self.gateway.endpoint

    @property
    def ledger(self) -> UsageLedger:
        return self.gateway.ledger

    @property
    def context_tokens(self) -> int | None:
        return self.gateway.context_tokens

    async def discover_context_tokens(self) -> int | None:
        return await self.gateway.discover_context_tokens()

    def schema_for(self, response_model: type[BaseModel]):
        return self.gateway.schema_for(response_model)

    async def complete(
        self,
        messages: Sequence[Message],
        response_model: type[BaseModel],
        *,
        agent: str,
        patient_id: str | int | None = None,
        max_tokens: int | None = None,
        use_cache: bool = True,
    ) -> LLMResult:
        """`LLMGateway.complete`, run here or (for ``remote_agent`` calls) in the remote pool; usage goes to the task."""
        messages = tuple(_as_message(m) for m in messages)
        remote = self.remote is not None and agent == self.remote_agent
        if remote:
            call = RemoteCall(messages, model_ref(response_model), agent, None if patient_id is None else str(patient_id),
                              max_tokens, use_cache)
            result = (await self.remote.complete(call)).to_result(response_model)
        else:
            result = await self.gateway.complete(messages, response_model, agent=agent, patient_id=patient_id,
                                                 max_tokens=max_tokens, use_cache=use_cache)
        record_usage(result.usage, remote=remote)
        return result

    async def flush_limits(self) -> None:
        await self.gateway.flush_limits()

    async def aclose(self) -> None:
        await self.gateway.aclose()


def _as_message(message: Message | dict) -> Message:
    if isinstance(message, Message):
        return message
    if isinstance(message, dict):
        return Message(message["role"], message["content"])
    raise TypeError(f"messages must be vista.llm.Message (or role/content dicts), not {type(message).__name__}")
