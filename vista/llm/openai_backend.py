"""`OpenAIBackend`: one request to any OpenAI-compatible HTTP endpoint through the `openai` package.

The client's own retries are disabled (the gateway counts and paces its retries), and bodies are
decoded here rather than by the client, so a proxy answering garbage becomes a typed
`BackendError(BAD_RESPONSE)` instead of a stray exception or a half-built object. Every body is read under a size
cap (`vista.llm.body_limit`; the request's ``max_response_bytes``), so an endless or huge body fails the call with
`ResponseTooLarge` after at most that many bytes. The reply carries the model the server says answered.
"""

from __future__ import annotations

import json
import logging

import openai

from vista.llm.backend import ChatReply, ChatRequest, error_from_body, kind_for_status, parse_completion
from vista.llm.body_limit import IDENTITY_ENCODING, BodyTooLarge, ResponseCap, body_limit, too_large_cause
from vista.llm.config import url_host
from vista.llm.errors import BackendError, ErrorKind, LLMConfigError, ResponseTooLarge
from vista.llm.retry import retry_after_from_headers

log = logging.getLogger(__name__)

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
# Local servers (vLLM, llama.cpp) accept any key; the openai client insists on a non-empty one.
_PLACEHOLDER_KEY = "EMPTY"
LISTING_LIMIT_BYTES = 8 << 20
"""Cap of a ``GET /models`` body (and of any body read without a request's own cap): a listing is a few KB."""


def capped_sync_client():
    """The `openai` client's synchronous HTTP client (its own defaults), its bodies capped by `ResponseCap`
    (`LISTING_LIMIT_BYTES` unless a `body_limit` block says otherwise)."""
    return openai.DefaultHttpxClient(event_hooks={"response": [ResponseCap(LISTING_LIMIT_BYTES).sync_hook]})


def capped_async_client():
    """The `openai` client's async HTTP client (its own defaults), its bodies capped by `ResponseCap`."""
    return openai.DefaultAsyncHttpxClient(event_hooks={"response": [ResponseCap(LISTING_LIMIT_BYTES).async_hook]})


class OpenAIBackend:
    """Chat completions over HTTP at ``base_url`` (None = api.openai.com)."""

    def __init__(self, *, base_url: str | None, api_key: str | None, api_key_env: str = "OPENAI_API_KEY", model: str = ""):
        if api_key is None and base_url is None:
            raise LLMConfigError(
                f"backend 'openai' at {OPENAI_DEFAULT_URL} needs an API key: set the environment variable {api_key_env}"
            )
        self.base_url = base_url or OPENAI_DEFAULT_URL
        self.kind = "openai"
        self.host = url_host(self.base_url)  # host:port, safe to record (no path, credentials or key)
        self.name = f"openai:{self.host}"
        self.identity = self.base_url.rstrip("/")  # which server answers (part of the response-cache key)
        self._model = model
        self._served: str | None = None
        self._listed = False
        self.context_window: int | None = None
        self._client = openai.AsyncOpenAI(base_url=self.base_url, api_key=api_key or _PLACEHOLDER_KEY, max_retries=0,
                                          http_client=capped_async_client(), default_headers=IDENTITY_ENCODING)

    async def complete(self, request: ChatRequest) -> ChatReply:
        source = f"{self.host} ({request.model})"
        try:
            with body_limit(request.max_response_bytes):
                raw = await self._client.chat.completions.with_raw_response.create(
                    **request.payload(), timeout=request.timeout_s
                )
                text = raw.text
        except BodyTooLarge as exc:
            raise ResponseTooLarge(f"{source}: {exc} (max_response_bytes; max_tokens {request.max_tokens})") from None
        except openai.APITimeoutError:
            raise BackendError(ErrorKind.TIMEOUT, f"{source}: no answer within {request.timeout_s:g} s") from None
        except openai.APIConnectionError as exc:
            if (big := too_large_cause(exc)) is not None:
                raise ResponseTooLarge(f"{source}: {big} (max_response_bytes; max_tokens {request.max_tokens})") from None
            raise BackendError(ErrorKind.CONNECTION_ERROR, f"{source}: {connection_problem(exc)}") from None
        except openai.APIStatusError as exc:
            err = error_from_body(exc.body if exc.body is not None else exc.message, source=source, status=exc.status_code)
            err.retry_after_s = retry_after_from_headers(exc.response.headers)
            raise err from None
        except openai.APIError as exc:  # any other client-side failure to read the answer
            if (big := too_large_cause(exc)) is not None:
                raise ResponseTooLarge(f"{source}: {big} (max_response_bytes; max_tokens {request.max_tokens})") from None
            raise BackendError(ErrorKind.BAD_RESPONSE, f"{source}: {type(exc).__name__}: {exc}") from None
        try:
            body = json.loads(text)
        except ValueError:
            raise BackendError(ErrorKind.BAD_RESPONSE, f"{source}: HTTP {raw.status_code} body is not JSON") from None
        if raw.status_code >= 400:  # pragma: no cover - the client raises APIStatusError first
            raise BackendError(kind_for_status(raw.status_code), f"{source}: HTTP {raw.status_code}", status=raw.status_code)
        return parse_completion(body, source=source)

    async def served_model(self) -> str | None:
        """The model this endpoint serves under the requested name, as its ``GET /models`` lists it: the requested
        name when listed, else the one model a single-model server (llama.cpp) answers any name with; None when it
        cannot tell (no listing, several models without the requested one). Asked once per backend."""
        if not self._listed:
            self._listed = True
            entries = await self._listing()
            ids = [str(e["id"]) for e in entries or [] if isinstance(e, dict) and "id" in e]
            self._served = self._model if self._model in ids else (ids[0] if len(ids) == 1 else None)
        return self._served

    async def _listing(self) -> list | None:
        """The ``data`` of ``GET /models`` (None when it cannot be read)."""
        try:
            raw = await self._client.models.with_raw_response.list(timeout=10.0)
            entries = json.loads(raw.text).get("data", [])
        except (openai.OpenAIError, ValueError, AttributeError, BodyTooLarge) as exc:
            log.debug("no model listing from %s/models: %s", self.host, type(exc).__name__)
            return None
        return entries if isinstance(entries, list) else None

    async def discover_context_window(self) -> int | None:
        """The context window the server reports in ``/models`` (llama.cpp ``meta.n_ctx``, vLLM ``max_model_len``)."""
        found = listed_context_window(await self._listing(), self._model)
        if found is not None:
            self.context_window = found
        return found

    async def aclose(self) -> None:
        await self._client.close()


def listed_context_window(entries: object, model: str) -> int | None:
    """The context window a ``/models`` listing reports for ``model`` (vLLM ``max_model_len``, llama.cpp
    ``meta.n_ctx``, OpenRouter-style ``context_length``); a single listed model stands for any name.

    >>> listed_context_window([{"id": "m", "max_model_len": 32768}], "m"), listed_context_window([], "m")
    (32768, None)
    """
    if not isinstance(entries, list):
        return None
    chosen = [e for e in entries if isinstance(e, dict) and e.get("id") == model] or (
        [e for e in entries if isinstance(e, dict)] if len(entries) == 1 else []
    )
    for entry in chosen:
        meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
        for value in (entry.get("max_model_len"), meta.get("n_ctx"), entry.get("context_length")):
            if isinstance(value, int) and value > 0:
                return value
    return None


def connection_problem(exc: BaseException) -> str:
    """What really failed under the client's "Connection error.": connection refused, name not resolved, ...

    >>> try:
    ...     raise OSError("outer") from ConnectionRefusedError(111, "Connect call failed")
    ... except OSError as exc:
    ...     connection_problem(exc)
    'connection refused'
    """
    import socket

    seen: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in seen:
        seen.append(cause)
        cause = cause.__cause__ or cause.__context__
    root = seen[-1]
    if isinstance(root, ConnectionRefusedError):
        return "connection refused"
    if isinstance(root, socket.gaierror):
        return f"host name not resolved ({root.strerror or root})"
    if isinstance(root, TimeoutError):
        return "connection timed out"
    return str(root) or type(root).__name__
