"""A size cap on HTTP response bodies, enforced while they are read: an endpoint that streams an endless (or a huge)
body costs one failed call and a bounded amount of memory, never the process.

The `openai` client reads whole bodies (also the body of an error status) before handing them over, and its timeout
is a time between two reads, which a body that never ends never exceeds. So the cap sits under the client, in the
HTTP client (`ResponseCap`, a response hook run before the body is read): the body stream counts the bytes it yields
and raises `BodyTooLarge` past the cap, which the backend turns into `vista.shared.llm.errors.ResponseTooLarge`. The cap of a request
is set around the call with `body_limit` (a context variable, so concurrent calls on one client keep their own).
Bodies are asked for uncompressed (``Accept-Encoding: identity``), so the bytes counted are the bytes decoded.

>>> with body_limit(10):
...     current_limit()
10
>>> current_limit() is None
True
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import httpx2

IDENTITY_ENCODING = {"Accept-Encoding": "identity"}
"""Request header asking for an uncompressed body (a compressed one would be decoded past the cap)."""

_LIMIT: contextvars.ContextVar[int | None] = contextvars.ContextVar("vista_llm_body_limit", default=None)


class BodyTooLarge(Exception):
    """A response body went past its cap (raised from inside the HTTP client, while reading)."""

    def __init__(self, limit: int, url: str):
        super().__init__(f"response body larger than {limit:,} bytes from {url}")
        self.limit = limit
        self.url = url


@contextmanager
def body_limit(limit: int | None) -> Iterator[None]:
    """Cap the bodies of the responses read inside the block at ``limit`` bytes (None: the transport's default)."""
    token = _LIMIT.set(limit)
    try:
        yield
    finally:
        _LIMIT.reset(token)


def current_limit() -> int | None:
    """The cap set by the innermost `body_limit` block (None outside one)."""
    return _LIMIT.get()


def _limit_for(default: int) -> int:
    limit = _LIMIT.get()
    return default if limit is None else limit


class _CappedAsyncStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, url: str):
        self._inner, self._limit, self._url = inner, limit, url

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise BodyTooLarge(self._limit, self._url)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedSyncStream(httpx2.SyncByteStream):
    def __init__(self, inner: httpx2.SyncByteStream, limit: int, url: str):
        self._inner, self._limit, self._url = inner, limit, url

    def __iter__(self) -> Iterator[bytes]:
        seen = 0
        for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise BodyTooLarge(self._limit, self._url)
            yield chunk

    def close(self) -> None:
        self._inner.close()


def _where(request: httpx2.Request) -> str:
    """The request's host and path (no query, no credentials) for the error message."""
    url = request.url
    return f"{url.host}:{url.port or (443 if url.scheme == 'https' else 80)}{url.path}"


class ResponseCap:
    """An httpx ``response`` event hook that wraps each body stream in a counting one, before anything reads it: the
    cap is the `body_limit` in force, else ``default_limit``. A hook rather than a transport, so the client keeps
    its own transport and what it reads from the environment (``HTTPS_PROXY``, ...).

    >>> import asyncio
    >>> response = httpx2.Response(200, stream=httpx2.ByteStream(b"x" * 100), request=httpx2.Request("GET", "http://h/v1"))
    >>> asyncio.run(ResponseCap(10).async_hook(response))
    >>> asyncio.run(response.aread())
    Traceback (most recent call last):
    ...
    vista.shared.llm.body_limit.BodyTooLarge: response body larger than 10 bytes from h:80/v1
    """

    def __init__(self, default_limit: int):
        self.default_limit = default_limit

    async def async_hook(self, response: httpx2.Response) -> None:
        limit, where = _limit_for(self.default_limit), _where(response.request)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _CappedAsyncStream(response.stream, limit, where)

    def sync_hook(self, response: httpx2.Response) -> None:
        limit, where = _limit_for(self.default_limit), _where(response.request)
        assert isinstance(response.stream, httpx2.SyncByteStream)
        response.stream = _CappedSyncStream(response.stream, limit, where)


def too_large_cause(exc: BaseException) -> BodyTooLarge | None:
    """The `BodyTooLarge` behind ``exc`` (itself or in its cause/context chain), if any."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, BodyTooLarge):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None
