"""`LLMGateway`: the one client every agent uses for typed, validated, retried, cached and costed LLM calls.

``await gateway.complete(messages, response_model=Model, agent="worker", patient_id=...)`` returns an
`LLMResult` holding either the validated pydantic object or an `LLMCallError` record, plus the
call's `CallRecord` (also appended to ``gateway.ledger``). In order, one call:

1. builds the bounded JSON schema of the response model and the ``response_format`` for ``schema_mode``;
2. looks the request up in the response cache (a hit costs nothing and is still recorded); the key holds the
   backend kind, the endpoint's identity (base URL, or the embedded model file's hash and context size) and the
   model the endpoint serves (asked once: `served_model`) besides the request;
3. sends it when its budgets allow — the gateway's own `RequestBudget` (``max_concurrency``, ``qps``, the
   Retry-After cool-down), then the ``limiter`` it shares with others, if any (a job-wide budget: in flight,
   requests/s, tokens/min, one cool-down, a circuit breaker) — and reports each attempt's outcome back;
   retries 429/5xx/timeouts/connection errors/unreadable bodies with full-jitter exponential backoff,
   within ``max_retries`` and ``retry_budget_s``;
4. validates the answer with pydantic; an invalid answer is re-asked (up to ``max_reasks`` times) with
   the validation error quoted; only a validated answer is cached;
5. records tokens (the server's ``usage``, else `vista.shared.tokens.count_tokens`), latency, attempts,
   retries, re-asks and cost from the price table, and who answered: the backend kind, the endpoint's host:port
   and the model as the server named it (`CallRecord` ``backend``, ``endpoint_host``, ``served_model``).

The response body of an HTTP endpoint is capped while it is read (``max_response_bytes``, derived from the
request's max_tokens by default): past it the call fails with ``response_too_large``, never retried.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Generic, TypeVar

from pydantic import BaseModel

from vista.shared.llm.answers import parse_answer, reask_turns
from vista.shared.llm.backend import Backend, ChatReply, ChatRequest
from vista.shared.llm._budget import AttemptReport, BudgetLimits, Grant, Limiter, Refusal, RequestBudget
from vista.shared.llm.cache import CachedAnswer, ResponseCache, cache_key, canonical_json
from vista.shared.llm.config import LLMConfig
from vista.shared.llm.errors import BackendError, ErrorKind, LLMCallError, LLMCallFailed, LLMEndpointFailure
from vista.shared.llm.messages import Message, as_messages, with_schema_prompt
from vista.shared.llm._pacing import Clock, SystemClock
from vista.shared.llm.prices import PriceTable
from vista.shared.llm._priority import call_done, request_priority
from vista.shared.llm.retry import RetryPolicy
from vista.shared.llm.task_usage import NullLedger
from vista.shared.llm.schema import JSONSchema, response_format, response_schema, schema_instructions, schema_name
from vista.shared.llm.usage import CallRecord, UsageLedger, new_call_id, utc_now

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

TIMEOUT_GRACE_S = 5.0
"""Extra time a backend gets beyond timeout_s before the gateway gives up on it (backends time out themselves)."""


@dataclass(frozen=True, slots=True)
class LLMResult(Generic[M]):
    """The outcome of one call: ``output`` (validated) or ``error`` (a record) — exactly one is set — and its ``usage``."""

    output: M | None
    error: LLMCallError | None
    usage: CallRecord
    content: str | None = None  # the last answer text received (validated or not)

    def __post_init__(self) -> None:
        if (self.output is None) == (self.error is None):
            raise ValueError("an LLMResult holds exactly one of output and error")

    @property
    def ok(self) -> bool:
        return self.error is None

    def unwrap(self) -> M:
        """The validated output, or raise `LLMCallFailed` carrying the error record."""
        if self.error is not None:
            raise LLMCallFailed(self.error, agent=self.usage.agent, patient_id=self.usage.patient_id)
        assert self.output is not None
        return self.output


@dataclass(frozen=True, slots=True)
class _CallInfo:
    """Who asked, for what, and when (fixed for the whole call)."""

    call_id: str
    agent: str
    patient_id: str | None
    schema_name: str
    started_at: datetime
    start: float  # clock.monotonic() at the start


@dataclass(slots=True)
class _CallStats:
    """What the call has used so far (all attempts and re-asks)."""

    attempts: int = 0
    retries: int = 0
    reasks: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    tokens_estimated: bool = False
    content: str | None = None  # the last answer text received
    served_model: str | None = None  # the model the last answer says it came from


def build_backend(config: LLMConfig) -> Backend:
    """The backend ``config`` describes: the in-process embedded model or an OpenAI-compatible endpoint."""
    if config.backend == "embedded":
        from vista.shared.llm.embedded import EmbeddedBackend

        return EmbeddedBackend.from_settings(model_path=config.model_path, n_ctx=config.n_ctx, threads=config.threads)
    from vista.shared.llm.openai_backend import OpenAIBackend

    return OpenAIBackend(base_url=config.base_url, api_key=config.api_key(), api_key_env=config.api_key_env, model=config.model)


def open_gateway(config: LLMConfig | None = None, *, job_id: str | None = None, backend: Backend | None = None,
                 shared_budget: Limiter | None = None, per_task_usage: bool = False) -> LLMGateway:
    """The gateway for ``config`` (default: the embedded model): the one way the packages, jobs and benchmarks get one.

    ``job_id`` is recorded on every call (the run, or what the calls are for: ``"pairwise-judge"``); ``backend``
    replaces the one ``config`` describes (a scripted backend in tests and benchmarks). The rest is for jobs:
    ``shared_budget`` is the job-wide budget asked before every request (`jobs.llm_budget`, through
    `vista.shared.llm.job_flow`); ``per_task_usage`` says the caller counts usage per task
    (`vista.shared.llm.remote.JobGateway`), so the gateway keeps no per-call ledger (its memory does not grow with
    the tasks it serves) and does not warn about an unpriced model (the job's driver says it once).
    Everything else — endpoint, cache directory, limits, retries — comes from ``config``. Create it on the event
    loop that will use it, and close it (``async with``).

    >>> from vista.shared.testing.scripted import ScriptedBackend
    >>> gateway = open_gateway(LLMConfig(model="m"), job_id="lung-2024", backend=ScriptedBackend([]))
    >>> gateway.job_id, gateway.backend_kind, type(gateway.ledger).__name__
    ('lung-2024', 'scripted', 'UsageLedger')
    >>> type(open_gateway(LLMConfig(model="m"), backend=ScriptedBackend([]), per_task_usage=True).ledger).__name__
    'NullLedger'
    """
    return LLMGateway(config, backend=backend, job_id=job_id, limiter=shared_budget,
                      ledger=NullLedger() if per_task_usage else None, warn_unpriced=not per_task_usage)


def _default_token_counter(text: str, model: str | None = None) -> int:
    """Tokens of ``text`` in ``model``'s encoding (o200k for GPT-4o/4.1-class models, else cl100k)."""
    from vista.shared.tokens import DEFAULT_ENCODING, count_tokens, model_encoding  # lazily: only needed without reported usage

    return count_tokens(text, model_encoding(model) if model else DEFAULT_ENCODING)


class LLMGateway:
    """Typed structured-output calls to one model endpoint, with retries, re-asks, cache, pacing and usage accounting.

    Create it inside the event loop that will use it (or use `SyncLLMGateway` from synchronous code).
    ``limiter``: a budget shared with other gateways (e.g. `vista.shared.llm._shared_budget.RemoteBudget`, one per job), asked
    before every request after the gateway's own limits; when it refuses because the job is stopped, `complete`
    raises `LLMEndpointFailure`.
    """

    def __init__(
        self,
        config: LLMConfig | None = None,
        *,
        backend: Backend | None = None,
        job_id: str | None = None,
        ledger: UsageLedger | None = None,
        prices: PriceTable | None = None,
        clock: Clock | None = None,
        token_counter: Callable[[str], int] | None = None,
        limiter: Limiter | None = None,
        warn_unpriced: bool = True,
    ):
        self.config = config or LLMConfig()
        self._warn_unpriced = warn_unpriced  # a job's driver warns once instead of every actor
        self.backend = backend if backend is not None else build_backend(self.config)
        self.job_id = job_id
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.prices = prices if prices is not None else PriceTable.load(self.config.prices_path)
        self._clock = clock or SystemClock()
        self._count = token_counter or functools.partial(_default_token_counter, model=self.config.model)
        self._rng = random.Random(self.config.seed)
        # under a shared budget (a job's) that one adapts the window and pauses on bursts; this one only caps
        self._budget = RequestBudget(BudgetLimits(max_in_flight=self.config.max_concurrency, requests_per_s=self.config.qps,
                                                  **({} if limiter is None else {"window": None})),
                                     clock=self._clock)
        self._limiters: tuple[Limiter, ...] = (self._budget,) if limiter is None else (self._budget, limiter)
        self._cache = ResponseCache(self.config.cache_dir) if self.config.cache_dir else None
        self._policy = RetryPolicy(
            max_retries=self.config.max_retries,
            budget_s=self.config.retry_budget_s,
            base_s=self.config.backoff_base_s,
            cap_s=self.config.backoff_max_s,
        )
        self._schemas: dict[type[BaseModel], JSONSchema] = {}
        self._schema_keys: dict[type[BaseModel], str] = {}  # each schema's canonical JSON, as cache keys use it
        self._unpriced_warned: set[str] = set()
        self._context_tokens: int | None = None
        self._served_model: str | None = None
        self._served_known = False
        self._served_lock = asyncio.Lock()  # concurrent first calls ask the endpoint once

    # ------------------------------------------------------------------ who answers
    @property
    def backend_kind(self) -> str:
        """Which kind of backend answers: embedded, openai, scripted, ... (recorded with every call)."""
        return getattr(self.backend, "kind", None) or self.backend.name.partition(":")[0]

    @property
    def endpoint_host(self) -> str:
        """Where it answers from, safe to record: the endpoint's host:port, or in-process."""
        return getattr(self.backend, "host", None) or "in-process"

    async def served_model(self) -> str | None:
        """The model the endpoint serves under the configured name (its ``/v1/models`` listing; the embedded GGUF's
        name), asked once per gateway; None when the endpoint cannot tell."""
        if not self._served_known:
            async with self._served_lock:
                if not self._served_known:
                    ask = getattr(self.backend, "served_model", None)
                    self._served_model = await ask() if ask is not None else None
                    self._served_known = True
        return self._served_model

    # ------------------------------------------------------------------ public
    @functools.cached_property
    def endpoint(self) -> str:
        """Who answers: the backend's identity (base URL; GGUF hash + context size), part of every cache key."""
        return getattr(self.backend, "identity", None) or self.backend.name

    def schema_for(self, response_model: type[BaseModel]) -> JSONSchema:
        """The bounded JSON schema sent for ``response_model`` (memoised; raises `SchemaError` if unbounded)."""
        if response_model not in self._schemas:
            self._schemas[response_model] = response_schema(
                response_model, require_bounds=self.config.require_bounded_schema
            )
        return self._schemas[response_model]

    @property
    def context_tokens(self) -> int | None:
        """The model's context window for prompt budgeting: the config's, else what the backend reported
        (see `discover_context_tokens`) or knows, else the price table's; None when nobody can tell."""
        priced = self.prices.get(self.config.model)
        return (
            self.config.context_tokens
            or self._context_tokens
            or self.backend.context_window
            or (priced.context_window if priced else None)
        )

    async def discover_context_tokens(self) -> int | None:
        """Ask the endpoint for its context window (e.g. ``/v1/models`` of vLLM or llama.cpp), then `context_tokens`."""
        if self._context_tokens is None:
            self._context_tokens = await self.backend.discover_context_window()
        return self.context_tokens

    async def complete(
        self,
        messages: Sequence[Message | Mapping[str, str]],
        response_model: type[M],
        *,
        agent: str,
        patient_id: str | int | None = None,
        max_tokens: int | None = None,
        use_cache: bool = True,
    ) -> LLMResult[M]:
        """Ask for a ``response_model`` answer to ``messages``; never raises for endpoint or output failures.

        ``messages`` are `Message`s or ``{"role", "content"}`` mappings. Raises only for caller mistakes:
        malformed messages (`ValueError`/`TypeError`) or an unbounded response model (`SchemaError`) — and
        `LLMEndpointFailure` when a shared ``limiter`` stopped the job (its circuit breaker tripped, the quota is
        exhausted): that is the job's failure, not this call's. Budgets serve the call by its chain's priority
        (`vista.shared.llm._priority`), which counts one call off when it returns.
        """
        try:
            return await self._complete(messages, response_model, agent=agent, patient_id=patient_id,
                                        max_tokens=max_tokens, use_cache=use_cache)
        finally:
            call_done()

    async def _complete(self, messages: Sequence[Message | Mapping[str, str]], response_model: type[M], *, agent: str,
                        patient_id: str | int | None, max_tokens: int | None, use_cache: bool) -> LLMResult[M]:
        messages = as_messages(messages)
        schema = self.schema_for(response_model)
        call = _CallInfo(
            call_id=new_call_id(),
            agent=agent,
            patient_id=None if patient_id is None else str(patient_id),
            schema_name=schema_name(response_model),
            started_at=utc_now(),
            start=self._clock.monotonic(),
        )
        request = self._request(messages, schema, call.schema_name, max_tokens)
        key = (self._key(request, response_model, await self.served_model()) if (self._cache is not None and use_cache)
               else None)

        if key is not None and (hit := self._cache_lookup(key, response_model, call.patient_id)) is not None:
            output, entry = hit
            usage = self._record(call, _CallStats(served_model=entry.served_model), cache_hit=True, error=None)
            return LLMResult(output, None, usage, entry.content)

        stats = _CallStats()
        error: LLMCallError | None = None
        output: M | None = None
        try:
            output, error = await self._ask_until_valid(request, response_model, stats, call.start)
        except BackendError as exc:
            error = LLMCallError(exc.kind, exc.message, status=exc.status, attempts=stats.attempts)
        if output is not None and key is not None:
            self._cache_store(key, stats, call.schema_name, call.patient_id)
        usage = self._record(call, stats, cache_hit=False, error=error)
        if error is not None:
            log.warning(
                "LLM call %s (agent=%s patient=%s) failed: %s after %d attempt(s)",
                call.call_id, agent, call.patient_id, error.kind.value, error.attempts,
            )
        return LLMResult(output, error, usage, stats.content)

    async def flush_limits(self) -> None:
        """Hand every limiter's pending reports over now (a shared budget batches them, and keeps grants for the
        next request): called when the caller has nothing left to send for a while, so the shared figures are
        whole."""
        for limiter in self._limiters:
            flush = getattr(limiter, "flush", None)
            if flush is not None:
                await flush()

    async def aclose(self) -> None:
        for limiter in self._limiters:
            close = getattr(limiter, "aclose", None)  # a remote budget sends its last releases
            if close is not None:
                await close()
        await self.backend.aclose()
        if self._cache is not None:
            self._cache.close()  # the patient files it keeps open for appending

    async def __aenter__(self) -> LLMGateway:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _record(self, call: _CallInfo, stats: _CallStats, *, cache_hit: bool, error: LLMCallError | None) -> CallRecord:
        """The call's `CallRecord`, appended to the ledger."""
        record = CallRecord(
            call_id=call.call_id,
            agent=call.agent,
            model=self.config.model,
            patient_id=call.patient_id,
            job_id=self.job_id,
            backend=self.backend_kind,
            endpoint_host=self.endpoint_host,
            served_model=stats.served_model,
            schema_name=call.schema_name,
            started_at=call.started_at,
            latency_s=self._clock.monotonic() - call.start,
            attempts=stats.attempts,
            retries=stats.retries,
            reasks=stats.reasks,
            cache_hit=cache_hit,
            prompt_tokens=stats.prompt_tokens,
            completion_tokens=stats.completion_tokens,
            cached_prompt_tokens=stats.cached_prompt_tokens,
            tokens_estimated=stats.tokens_estimated,
            cost_usd=0.0 if cache_hit else self._cost(stats),
            ok=error is None,
            error_kind=error.kind.value if error else None,
            error_message=error.message if error else None,
        )
        self.ledger.add(record)
        return record

    # ----------------------------------------------------------------- request
    def _request(self, messages: Sequence[Message], schema: JSONSchema, name: str, max_tokens: int | None) -> ChatRequest:
        cfg = self.config
        if cfg.schema_mode == "none" or cfg.schema_in_prompt:
            messages = with_schema_prompt(messages, schema_instructions(schema))
        return ChatRequest(
            messages=tuple(messages),
            model=cfg.model,
            max_tokens=max_tokens or cfg.max_tokens,
            timeout_s=cfg.timeout_s,
            temperature=cfg.temperature,
            seed=cfg.seed,
            max_tokens_field=cfg.max_tokens_field,
            reasoning_effort=cfg.reasoning_effort,
            response_format=response_format(schema, cfg.schema_mode, name),
            max_response_bytes=cfg.response_byte_limit(max_tokens or cfg.max_tokens),
        )

    def _key(self, request: ChatRequest, response_model: type[BaseModel], served_model: str | None) -> str:
        parameters = {
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "seed": request.seed,
            "reasoning_effort": request.reasoning_effort,
        }
        return cache_key(
            backend=self.backend_kind,
            endpoint=self.endpoint,
            served_model=served_model,
            model=request.model,
            messages=request.messages,
            schema=None,
            schema_json=self._schema_key(response_model),
            schema_mode=self.config.schema_mode,
            parameters=parameters,
        )

    def _schema_key(self, response_model: type[BaseModel]) -> str:
        """The schema's canonical JSON for cache keys (encoded once per response model, not once per call)."""
        if response_model not in self._schema_keys:
            self._schema_keys[response_model] = canonical_json(self.schema_for(response_model))
        return self._schema_keys[response_model]

    # ---------------------------------------------------------------- validate
    async def _ask_until_valid(
        self, request: ChatRequest, response_model: type[M], stats: _CallStats, start: float
    ) -> tuple[M | None, LLMCallError | None]:
        problem = ""
        truncated = False
        for round_index in range(self.config.max_reasks + 1):
            if round_index:
                stats.reasks += 1
            reply, value, problem = await self._send(request, response_model, stats, start)
            stats.content = reply.content
            stats.served_model = reply.model or self._served_model
            if reply.refusal and not reply.content:
                return None, LLMCallError(ErrorKind.REFUSED, reply.refusal[:500], attempts=stats.attempts)
            if reply.finish_reason == "content_filter":
                return None, LLMCallError(ErrorKind.REFUSED, "stopped by the endpoint's content filter", attempts=stats.attempts)
            if value is not None:
                return value, None
            truncated = reply.finish_reason == "length"
            request = replace(request, messages=request.messages + reask_turns(reply.content, problem, truncated))
        kind = ErrorKind.TRUNCATED if truncated else ErrorKind.INVALID_OUTPUT
        return None, LLMCallError(kind, problem, attempts=stats.attempts)

    # -------------------------------------------------------------------- send
    async def _send(
        self, request: ChatRequest, response_model: type[M], stats: _CallStats, start: float
    ) -> tuple[ChatReply, M | None, str]:
        """One answer from the backend and its validation, retrying transport failures; raises the last
        `BackendError` when out of budget (or `LLMEndpointFailure` when a shared limiter stopped the job)."""
        retries_here = 0
        tokens = self._estimate(request) if any(limiter.wants_tokens for limiter in self._limiters) else 0
        while True:
            grants = await self._acquire(tokens, start)
            stats.attempts += 1
            report: AttemptReport | None = None
            try:
                try:
                    reply = await asyncio.wait_for(self.backend.complete(request), request.timeout_s + TIMEOUT_GRACE_S)
                except TimeoutError:
                    failure = BackendError(ErrorKind.TIMEOUT, f"{self.backend.name}: no answer within {request.timeout_s:g} s")
                except BackendError as exc:
                    failure = exc
                else:
                    used, completion = self._account(request, reply, stats)
                    value, problem = parse_answer(reply.content, response_model)
                    report = AttemptReport(answer_valid=value is not None, tokens_used=used, completion_tokens=completion,
                                           cached_prompt_tokens=reply.cached_prompt_tokens,
                                           message=problem[:300] if value is None else "")
                    return reply, value, problem
                report = AttemptReport(error_kind=failure.kind, status=failure.status,
                                       retry_after_s=failure.retry_after_s, message=failure.message[:300])
            finally:  # also when cancelled: a slot is never lost
                self._release(grants, report or AttemptReport(message="cancelled"))
            if failure.kind is ErrorKind.QUOTA_EXCEEDED and len(self._limiters) > 1:
                raise LLMEndpointFailure(f"LLM endpoint {self.endpoint}: quota exhausted (insufficient_quota: "
                                         f"{failure.message}) — add credit or raise the quota, then rerun")
            if not failure.retryable or retries_here >= self._policy.max_retries:
                raise failure
            pause = max(limiter.pause_remaining() for limiter in self._limiters)
            delay = max(self._policy.backoff(retries_here, self._rng), pause, failure.retry_after_s or 0.0)
            if self._clock.monotonic() - start + delay > self._policy.budget_s:
                failure.message += f" (retry budget of {self._policy.budget_s:g} s exhausted)"
                raise failure
            retries_here += 1
            stats.retries += 1
            log.debug("retry %d of %s after %s in %.2f s", retries_here, self.backend.name, failure.kind.value, delay)
            await self._clock.sleep(delay)

    async def _acquire(self, tokens: int, start: float) -> list[tuple[Limiter, Grant]]:
        """A grant from every limiter (own first, then the shared one), within what is left of the retry budget."""
        grants: list[tuple[Limiter, Grant]] = []
        priority = request_priority()
        try:
            for limiter in self._limiters:
                left = self._policy.budget_s - (self._clock.monotonic() - start)
                outcome = await limiter.acquire(tokens, max_wait_s=left, priority=priority)
                if isinstance(outcome, Refusal):
                    if outcome.stopped:
                        raise LLMEndpointFailure(outcome.message)
                    raise BackendError(
                        ErrorKind.RATE_LIMITED,
                        f"{self.backend.name}: {outcome.message}, beyond the retry budget of {self._policy.budget_s:g} s",
                    )
                grants.append((limiter, outcome))
        except BaseException:
            self._release(grants, AttemptReport(tokens_used=0, message="not sent"))
            raise
        return grants

    @staticmethod
    def _release(grants: list[tuple[Limiter, Grant]], report: AttemptReport) -> None:
        for limiter, grant in reversed(grants):
            limiter.release(grant, report)

    def _estimate(self, request: ChatRequest) -> int:
        """Tokens a request may cost at most, reserved against a tokens/min limit: its prompt + max_tokens."""
        return sum(self._count(m.content) for m in request.messages) + request.max_tokens

    # ------------------------------------------------------------------- usage
    def _account(self, request: ChatRequest, reply: ChatReply, stats: _CallStats) -> tuple[int, int]:
        """Add one answer's tokens to the call's; returns them (prompt + completion) and the completion part."""
        if reply.prompt_tokens is not None:
            prompt = reply.prompt_tokens
        else:
            prompt = sum(self._count(m.content) for m in request.messages)
            stats.tokens_estimated = True
        if reply.completion_tokens is not None:
            completion = reply.completion_tokens
        else:
            completion = self._count(reply.content or "")
            stats.tokens_estimated = True
        stats.prompt_tokens += prompt
        stats.completion_tokens += completion
        stats.cached_prompt_tokens += reply.cached_prompt_tokens or 0
        return prompt + completion, completion

    def _cost(self, stats: _CallStats) -> float | None:
        cost = self.prices.cost(
            self.config.model,
            prompt_tokens=stats.prompt_tokens,
            completion_tokens=stats.completion_tokens,
            cached_prompt_tokens=stats.cached_prompt_tokens,
        )
        if cost is None and self._warn_unpriced and self.config.model not in self._unpriced_warned:
            self._unpriced_warned.add(self.config.model)
            log.warning("model %r has no price in the price table: its calls are recorded with cost None", self.config.model)
        return cost

    # ------------------------------------------------------------------- cache
    def _cache_lookup(self, key: str, response_model: type[M], patient: str | None) -> tuple[M, CachedAnswer] | None:
        assert self._cache is not None
        entry = self._cache.get(key, patient)
        if entry is None:
            return None
        value, problem = parse_answer(entry.content, response_model)
        if value is None:
            log.warning("LLM cache entry %s in %s no longer validates (%s); asking again", key, self._cache.path(key, patient),
                        problem[:200])
            return None
        return value, entry

    def _cache_store(self, key: str, stats: _CallStats, name: str, patient: str | None) -> None:
        assert self._cache is not None and stats.content is not None  # only called after a validated answer
        entry = CachedAnswer(stats.content, self.config.model, name, stats.prompt_tokens, stats.completion_tokens,
                             served_model=stats.served_model)
        try:
            self._cache.put(key, entry, patient)
        except OSError as exc:
            log.warning("could not write LLM cache entry %s in %s: %s", key, self._cache.path(key, patient), exc)
