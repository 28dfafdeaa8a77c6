"""`OpenAIBackend`: one request to any OpenAI-compatible HTTP endpoint through the `openai` package.

The client's own retries are disabled (the gateway counts and paces its retries), and bodies are
decoded here rather than by the client, so a proxy answering garbage becomes a typed
`BackendError(BAD_RESPONSE)` instead of a stray exception or a half-built object.
"""

from __future__ import annotations

import json
import logging

import openai

from vista.llm.backend import ChatReply, ChatRequest, error_from_body, kind_for_status, parse_completion
from vista.llm.errors import BackendError, ErrorKind, LLMConfigError
from vista.llm.retry import retry_after_from_headers

log = logging.getLogger(__name__)

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
# Local servers (vLLM, llama.cpp) accept any key; the openai client insists on a non-empty one.
_PLACEHOLDER_KEY = "EMPTY"


class OpenAIBackend:
    """Chat completions over HTTP at ``base_url`` (None = api.openai.com)."""

    def __init__(self, *, base_url: str | None, api_key: str | None, api_key_env: str = "OPENAI_API_KEY", model: str = ""):
        if api_key is None and base_url is None:
            raise LLMConfigError(
                f"backend 'openai' at {OPENAI_DEFAULT_URL} needs an API key: set the environment variable {api_key_env}"
            )
        self.base_url = base_url or OPENAI_DEFAULT_URL
        self.name = f"openai:{self.base_url}"
        self.identity = self.base_url.rstrip("/")  # which server answers (part of the response-cache key)
        self._model = model
        self.context_window: int | None = None
        self._client = openai.AsyncOpenAI(base_url=self.base_url, api_key=api_key or _PLACEHOLDER_KEY, max_retries=0)

    async def complete(self, request: ChatRequest) -> ChatReply:
        source = f"{self.base_url} ({request.model})"
        try:
            raw = await self._client.chat.completions.with_raw_response.create(
                **request.payload(), timeout=request.timeout_s
            )
            text = raw.text
        except openai.APITimeoutError:
            raise BackendError(ErrorKind.TIMEOUT, f"{source}: no answer within {request.timeout_s:g} s") from None
        except openai.APIConnectionError as exc:
            raise BackendError(ErrorKind.CONNECTION_ERROR, f"{source}: {connection_problem(exc)}") from None
        except openai.APIStatusError as exc:
            err = error_from_body(exc.body if exc.body is not None else exc.message, source=source, status=exc.status_code)
            err.retry_after_s = retry_after_from_headers(exc.response.headers)
            raise err from None
        except openai.APIError as exc:  # any other client-side failure to read the answer
            raise BackendError(ErrorKind.BAD_RESPONSE, f"{source}: {type(exc).__name__}: {exc}") from None
        try:
            body = json.loads(text)
        except ValueError:
            raise BackendError(ErrorKind.BAD_RESPONSE, f"{source}: HTTP {raw.status_code} body is not JSON") from None
        if raw.status_code >= 400:  # pragma: no cover - the client raises APIStatusError first
            raise BackendError(kind_for_status(raw.status_code), f"{source}: HTTP {raw.status_code}", status=raw.status_code)
        return parse_completion(body, source=source)

    async def discover_context_window(self) -> int | None:
        """The context window the server reports in ``/models`` (llama.cpp ``meta.n_ctx``, vLLM ``max_model_len``)."""
        try:
            raw = await self._client.models.with_raw_response.list(timeout=10.0)
            entries = json.loads(raw.text).get("data", [])
        except (openai.OpenAIError, ValueError, AttributeError) as exc:
            log.debug("no context window from %s/models: %s", self.base_url, type(exc).__name__)
            return None
        found = listed_context_window(entries, self._model)
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
