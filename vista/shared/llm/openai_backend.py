"""`OpenAIBackend`: one request to any OpenAI-compatible HTTP endpoint, over a pooled `aiohttp` session.

Why not the `openai` client: on the job's hot path it cost ~2.6 ms of CPU per call against ~0.4 ms for aiohttp posting
the same bodies (measured side by side in one process against the synthetic endpoint; most of it is the SDK's
per-call request transform and httpx's layers), and at millions of calls that is the job's CPU. The wire format is
the plain chat-completions JSON either way (`ChatRequest.payload`), and the gateway does the retries, so nothing the
client did is lost: statuses become typed `BackendError`s (Retry-After kept), a body that is not JSON is
``bad_response``, a timeout covers the whole exchange. Every body is read under a size cap (the request's
``max_response_bytes``, else `LISTING_LIMIT_BYTES`), so an endless or huge body fails the call with
`ResponseTooLarge` after at most that many bytes. Proxies are taken from the environment (``HTTPS_PROXY``,
``NO_PROXY``, read once per backend: aiohttp's own ``trust_env`` reads them, and ``~/.netrc``, on a thread for every
request), as the openai client did. The reply carries the model the server says answered.
"""

from __future__ import annotations

import asyncio
import json
import logging

import aiohttp

from vista.shared.llm.backend import ChatReply, ChatRequest, error_from_body, parse_completion
from vista.shared.llm.body_limit import IDENTITY_ENCODING, ResponseCap
from vista.shared.llm.config import url_host
from vista.shared.llm.errors import BackendError, ErrorKind, LLMConfigError, ResponseTooLarge
from vista.shared.llm.retry import retry_after_from_headers

log = logging.getLogger(__name__)

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
# Local servers (vLLM, llama.cpp) accept any key; send a placeholder as the openai client did.
_PLACEHOLDER_KEY = "EMPTY"
LISTING_LIMIT_BYTES = 8 << 20
"""Cap of a ``GET /models`` body (and of any body read without a request's own cap): a listing is a few KB."""
_LISTING_TIMEOUT_S = 10.0


def capped_sync_client():
    """The `openai` client's synchronous HTTP client (its own defaults), its bodies capped by `ResponseCap`
    (`LISTING_LIMIT_BYTES` unless a `body_limit` block says otherwise): for the one-off endpoint checks."""
    import openai

    return openai.DefaultHttpxClient(event_hooks={"response": [ResponseCap(LISTING_LIMIT_BYTES).sync_hook]})


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (``HTTPS_PROXY``/``HTTP_PROXY``, unless ``NO_PROXY`` exempts its
    host), or None.

    >>> import os
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "localhost,127.0.0.1"}):
    ...     env_proxy("https://api.openai.com/v1"), env_proxy("https://127.0.0.1:8000/v1")
    ('http://proxy:3128', None)
    """
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies_environment().get(parts.scheme)
    if proxy is None or urllib.request.proxy_bypass_environment(parts.hostname or ""):
        return None
    return proxy


class _TooLarge(Exception):
    """A body went past its cap while it was read."""


async def _read_capped(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body, or `_TooLarge` as soon as it passes ``limit`` bytes (decoded bytes: a compressed body is
    counted as it is inflated)."""
    if response.content_length is not None and response.content_length > limit:
        raise _TooLarge
    chunks: list[bytes] = []
    seen = 0
    async for chunk in response.content.iter_any():
        seen += len(chunk)
        if seen > limit:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


class OpenAIBackend:
    """Chat completions over HTTP at ``base_url`` (None = api.openai.com).

    The session is made on first use, on the loop that uses it (create the backend anywhere, use it on one loop).
    """

    def __init__(self, *, base_url: str | None, api_key: str | None, api_key_env: str = "OPENAI_API_KEY", model: str = ""):
        if api_key is None and base_url is None:
            raise LLMConfigError(
                f"backend 'openai' at {OPENAI_DEFAULT_URL} needs an API key: set the environment variable {api_key_env}"
            )
        self.base_url = (base_url or OPENAI_DEFAULT_URL).rstrip("/")
        self.kind = "openai"
        self.host = url_host(self.base_url)  # host:port, safe to record (no path, credentials or key)
        self.name = f"openai:{self.host}"
        self.identity = self.base_url  # which server answers (part of the response-cache key)
        self._model = model
        self._served: str | None = None
        self._listed = False
        self.context_window: int | None = None
        self._headers = {"Authorization": f"Bearer {api_key or _PLACEHOLDER_KEY}", "Content-Type": "application/json",
                         **IDENTITY_ENCODING}
        self._chat_url = f"{self.base_url}/chat/completions"
        self._proxy = env_proxy(self.base_url)
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # no connection limit here: the gateway's budgets decide how many requests are in flight
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
                                                  headers=self._headers, proxy=self._proxy)
        return self._session

    async def complete(self, request: ChatRequest) -> ChatReply:
        source = f"{self.host} ({request.model})"
        data = json.dumps(request.payload(), separators=(",", ":")).encode()
        limit = request.max_response_bytes or LISTING_LIMIT_BYTES
        try:
            async with self._client().post(self._chat_url, data=data,
                                           timeout=aiohttp.ClientTimeout(total=request.timeout_s)) as response:
                status = response.status
                body = await _read_capped(response, limit)
                headers = response.headers
        except _TooLarge:
            raise ResponseTooLarge(f"{source}: response body larger than {limit:,} bytes (max_response_bytes; "
                                   f"max_tokens {request.max_tokens})") from None
        except asyncio.TimeoutError:
            raise BackendError(ErrorKind.TIMEOUT, f"{source}: no answer within {request.timeout_s:g} s") from None
        except aiohttp.ClientConnectorError as exc:
            raise BackendError(ErrorKind.CONNECTION_ERROR, f"{source}: {connection_problem(exc.os_error)}") from None
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            raise BackendError(ErrorKind.CONNECTION_ERROR, f"{source}: {type(exc).__name__}: {exc}") from None
        except aiohttp.ClientError as exc:  # any other failure to send or read (a bad URL, a protocol error)
            raise BackendError(ErrorKind.BAD_RESPONSE, f"{source}: {type(exc).__name__}: {exc}") from None
        try:
            decoded = json.loads(body)
        except ValueError:
            decoded = None
        if status >= 400:
            error = decoded.get("error", decoded) if isinstance(decoded, dict) else body[:500].decode("utf-8", "replace")
            err = error_from_body(error, source=source, status=status)
            err.retry_after_s = retry_after_from_headers(headers)
            raise err
        if decoded is None:
            raise BackendError(ErrorKind.BAD_RESPONSE, f"{source}: HTTP {status} body is not JSON")
        return parse_completion(decoded, source=source)

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
            async with self._client().get(f"{self.base_url}/models",
                                          timeout=aiohttp.ClientTimeout(total=_LISTING_TIMEOUT_S)) as response:
                body = await _read_capped(response, LISTING_LIMIT_BYTES)
                if response.status >= 400:
                    return None
            entries = json.loads(body).get("data", [])
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, AttributeError, _TooLarge) as exc:
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
        if self._session is not None:
            await self._session.close()


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
