"""Error types of the LLM gateway: what went wrong with a call, as a record and as exceptions.

`LLMCallError` is the per-call error *record* kept in results and usage ledgers (never silently
`None`); `BackendError` is what a backend raises for one failed attempt (the gateway decides
whether to retry); `LLMCallFailed` is raised by `LLMResult.unwrap()`; `LLMConfigError` names the
setting that is wrong; `LLMEndpointFailure` stops a whole job (a shared budget's circuit breaker
tripped, or the quota is exhausted) instead of failing one call after another.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from vista.shared.errors import UserError


class ErrorKind(StrEnum):
    """Why a call (or one attempt of it) failed."""

    INVALID_OUTPUT = "invalid_output"  # the answer never validated against the response model
    TRUNCATED = "truncated"  # the answer hit max_tokens and did not validate
    REFUSED = "refused"  # the model refused (OpenAI `refusal`) or a content filter stopped it
    RATE_LIMITED = "rate_limited"  # HTTP 429 until the retry budget ran out
    SERVER_ERROR = "server_error"  # HTTP 5xx until the retry budget ran out
    TIMEOUT = "timeout"  # no answer within timeout_s until the retry budget ran out
    CONNECTION_ERROR = "connection_error"  # the endpoint could not be reached
    BAD_RESPONSE = "bad_response"  # the endpoint answered with a body that is not a chat completion
    CONTEXT_OVERFLOW = "context_overflow"  # the prompt does not fit the model's context window
    AUTH_ERROR = "auth_error"  # HTTP 401/403: the endpoint refused the API key
    UNKNOWN_MODEL = "unknown_model"  # HTTP 404 / model_not_found: the endpoint does not serve this model
    QUOTA_EXCEEDED = "quota_exceeded"  # OpenAI's 429 insufficient_quota: no credit left (waiting will not help)
    HTTP_ERROR = "http_error"  # any other rejection (4xx, malformed request)
    RESPONSE_TOO_LARGE = "response_too_large"  # the body went past max_response_bytes (an endless or runaway answer)


RETRYABLE_KINDS: frozenset[ErrorKind] = frozenset(
    {ErrorKind.RATE_LIMITED, ErrorKind.SERVER_ERROR, ErrorKind.TIMEOUT, ErrorKind.CONNECTION_ERROR, ErrorKind.BAD_RESPONSE}
)
"""Failures of one attempt that the gateway retries (with backoff, within the call's retry budget)."""

ENDPOINT_KINDS: frozenset[ErrorKind] = frozenset(
    {ErrorKind.CONNECTION_ERROR, ErrorKind.AUTH_ERROR, ErrorKind.UNKNOWN_MODEL, ErrorKind.QUOTA_EXCEEDED}
)
"""Failures that say nothing about the request and everything about the endpoint: a call that ended with one of
these is worth running again once the endpoint (URL, key, model name, credit) is fixed."""


@dataclass(frozen=True, slots=True)
class LLMCallError:
    """Why one gateway call ended without a validated answer (kept in the result and the usage ledger)."""

    kind: ErrorKind
    message: str
    status: int | None = None  # HTTP status of the last failed attempt, when there was one
    attempts: int = 0  # requests sent to the endpoint for this call

    def __str__(self) -> str:
        status = f" (HTTP {self.status})" if self.status is not None else ""
        return f"{self.kind.value}{status} after {self.attempts} attempt(s): {self.message}"


class BackendError(Exception):
    """One attempt failed at the transport level; ``retry_after_s`` is the server's requested cool-down."""

    def __init__(self, kind: ErrorKind, message: str, *, status: int | None = None, retry_after_s: float | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after_s = retry_after_s

    def __reduce__(self):  # picklable (e.g. across Ray workers) despite the keyword-only fields
        return (_rebuild_backend_error, (self.kind, self.message, self.status, self.retry_after_s))

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE_KINDS

    def __repr__(self) -> str:
        return f"BackendError({self.kind.value!r}, {self.message!r}, status={self.status}, retry_after_s={self.retry_after_s})"


class ResponseTooLarge(BackendError):
    """The endpoint's response body went past the request's cap (``max_response_bytes``, derived from max_tokens).

    Not retried: a server that answers a request with more than its max_tokens can hold does it again (each attempt
    would read the cap again); the call ends with one error of kind ``response_too_large``, and the job goes on."""

    def __init__(self, message: str):
        super().__init__(ErrorKind.RESPONSE_TOO_LARGE, message)

    def __reduce__(self):
        return (ResponseTooLarge, (self.message,))


class LLMCallFailed(RuntimeError):
    """Raised by `LLMResult.unwrap()` when the call ended with an error record."""

    def __init__(self, error: LLMCallError, *, agent: str, patient_id: str | None):
        who = f"agent {agent!r}" + (f", patient {patient_id}" if patient_id is not None else "")
        super().__init__(f"LLM call failed for {who}: {error}")
        self.error = error
        self.agent = agent
        self.patient_id = patient_id

    def __reduce__(self):
        return (_rebuild_call_failed, (self.error, self.agent, self.patient_id))


def _rebuild_backend_error(kind: ErrorKind, message: str, status: int | None, retry_after_s: float | None) -> BackendError:
    return BackendError(kind, message, status=status, retry_after_s=retry_after_s)


def _rebuild_call_failed(error: LLMCallError, agent: str, patient_id: str | None) -> LLMCallFailed:
    return LLMCallFailed(error, agent=agent, patient_id=patient_id)


class LLMEndpointFailure(RuntimeError):
    """The endpoint is failing systematically (or its quota is gone): stop the job with this one-line message.

    Raised by `LLMGateway.complete` only when the gateway shares a budget with a circuit breaker (a job), so a
    job's actors stop instead of recording one failed call per patient; never for one call's own failure.
    """

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __reduce__(self):
        return (LLMEndpointFailure, (self.message,))

    @classmethod
    def found_in(cls, exc: BaseException) -> LLMEndpointFailure | None:
        """An `LLMEndpointFailure` somewhere in ``exc``'s causes (a job's framework wraps an actor's exception in its
        own, keeping it as ``cause``), as a fresh one-line error.

        >>> wrapped = RuntimeError("task failed"); wrapped.cause = LLMEndpointFailure("quota exhausted")
        >>> LLMEndpointFailure.found_in(wrapped).message, LLMEndpointFailure.found_in(ValueError("x"))
        ('quota exhausted', None)
        """
        seen: list[BaseException] = []
        cause: BaseException | None = exc
        while cause is not None and cause not in seen:
            if isinstance(cause, cls):
                return cls(cause.message)
            seen.append(cause)
            cause = cause.__cause__ or cause.__context__ or getattr(cause, "cause", None)
        return None


class LLMConfigError(ValueError, UserError):
    """A gateway setting is missing or invalid; the message names the setting (and its source)."""


class SchemaError(ValueError):
    """A response model cannot be turned into a bounded JSON schema; the message names the model and field."""
