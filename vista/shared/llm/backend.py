"""The `Backend` protocol the gateway talks to, with the request/reply types every backend shares.

A backend sends ONE request and either returns a `ChatReply` or raises `BackendError`; retries,
re-asks, caching, pacing and accounting live in the gateway, so every backend gets them alike.
`parse_completion` turns an OpenAI chat-completion body (HTTP or in-process) into a `ChatReply`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vista.shared.llm.errors import BackendError, ErrorKind
from vista.shared.llm.messages import Message


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat-completion request, already in its final form (messages, limits, response format)."""

    messages: tuple[Message, ...]
    model: str
    max_tokens: int
    timeout_s: float
    temperature: float | None = 0.0
    seed: int | None = None
    max_tokens_field: str = "max_tokens"
    reasoning_effort: str | None = None
    response_format: Mapping[str, object] | None = None
    max_response_bytes: int | None = None  # cap of the response body (HTTP backends; None: the backend's default)

    def payload(self) -> dict[str, object]:
        """The OpenAI chat-completions JSON body of this request."""
        body: dict[str, object] = {
            "model": self.model,
            "messages": [m.to_wire() for m in self.messages],
            self.max_tokens_field: self.max_tokens,
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.seed is not None:
            body["seed"] = self.seed
        if self.reasoning_effort is not None:
            body["reasoning_effort"] = self.reasoning_effort
        if self.response_format is not None:
            body["response_format"] = dict(self.response_format)
        return body


@dataclass(frozen=True, slots=True)
class ChatReply:
    """What came back from one request; token counts are None when the server did not report them."""

    content: str | None
    finish_reason: str | None = None
    refusal: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    model: str | None = None  # the model the server says answered (the body's ``model``), when it says


@runtime_checkable
class Backend(Protocol):
    """Sends one chat request to a model."""

    name: str
    context_window: int | None  # the model's context length when known without asking the endpoint
    # Optional ``identity``: which server or model file answers (base URL; GGUF hash + n_ctx). The gateway puts it
    # in the response-cache key (falling back to ``name``), so two endpoints never share answers.

    async def complete(self, request: ChatRequest) -> ChatReply:
        """Answer ``request`` or raise `BackendError` (never another exception type for a failed request)."""
        ...

    async def discover_context_window(self) -> int | None:
        """Ask the endpoint for the model's context length (None when it cannot tell)."""
        ...

    async def aclose(self) -> None: ...


# --------------------------------------------------------------------------- wire format
class _WireModel(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _WireMessage(_WireModel):
    content: str | None = None
    refusal: str | None = None


class _WireChoice(_WireModel):
    message: _WireMessage
    finish_reason: str | None = None


class _WirePromptDetails(_WireModel):
    cached_tokens: int | None = None


class _WireUsage(_WireModel):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _WirePromptDetails | None = None


class _WireCompletion(_WireModel):
    choices: list[_WireChoice] = Field(min_length=1)
    usage: _WireUsage | None = None
    model: object = None  # any JSON value: recorded as text, never a reason to refuse the answer


def parse_completion(body: object, *, source: str) -> ChatReply:
    """A `ChatReply` from a decoded chat-completion body; `BackendError(BAD_RESPONSE)` if it is not one."""
    if isinstance(body, dict) and "error" in body and "choices" not in body:
        raise error_from_body(body["error"], source=source)
    try:
        wire = _WireCompletion.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_input=False)[:3])
        raise BackendError(ErrorKind.BAD_RESPONSE, f"{source}: not a chat completion ({problems})") from None
    choice = wire.choices[0]
    usage = wire.usage
    details = usage.prompt_tokens_details if usage else None
    return ChatReply(
        content=choice.message.content,
        finish_reason=choice.finish_reason,
        refusal=choice.message.refusal,
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        cached_prompt_tokens=details.cached_tokens if details else None,
        model=str(wire.model)[:200] if wire.model not in (None, "") else None,
    )


def error_from_body(error: object, *, source: str, status: int | None = None) -> BackendError:
    """Classify an OpenAI/llama.cpp/vLLM error object (``{"code", "type", "message"}``) as a `BackendError`."""
    info = error if isinstance(error, dict) else {"message": str(error)}
    message = str(info.get("message") or info)[:500]
    code = info.get("code")
    status = status if status is not None else (code if isinstance(code, int) else None)
    text = f"{info.get('type', '')} {code or ''} {message}".lower()
    if "context" in text and ("exceed" in text or "length" in text or "too long" in text or "maximum" in text):
        kind = ErrorKind.CONTEXT_OVERFLOW
    elif "insufficient_quota" in text:  # OpenAI: HTTP 429 that no amount of waiting fixes
        kind = ErrorKind.QUOTA_EXCEEDED
    elif "model_not_found" in text or (status == 404 and "model" in text):  # OpenAI, vLLM, Ollama spell it so
        kind = ErrorKind.UNKNOWN_MODEL
    else:
        kind = kind_for_status(status)
    return BackendError(kind, f"{source}: {message}", status=status)


def kind_for_status(status: int | None) -> ErrorKind:
    """The error kind of an HTTP status (429 → rate_limited, 401/403 → auth_error, 408/5xx → timeout/server_error,
    other → http_error)."""
    if status == 429:
        return ErrorKind.RATE_LIMITED
    if status in (401, 403):
        return ErrorKind.AUTH_ERROR
    if status == 408:
        return ErrorKind.TIMEOUT
    if status is not None and status >= 500:
        return ErrorKind.SERVER_ERROR
    return ErrorKind.HTTP_ERROR
