"""`FaultProxy`: an HTTP proxy on 127.0.0.1 that breaks a seeded share of chat requests, to test resilience.

In front of any OpenAI-compatible server it answers some ``/chat/completions`` requests itself:
429 with ``Retry-After``, 500, a body that is not JSON, a well-formed completion whose content is
not JSON, a response held longer than the client's timeout, or a completion cut off at its token limit
(``finish_reason: length``, half a JSON object); the rest are forwarded unchanged.
``counts`` tells how many of each it produced, ``requests`` how many it saw.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass

from aiohttp import ClientSession, ClientTimeout, web

FAULTS = ("rate_limit", "server_error", "garbage_body", "garbage_content", "slow", "truncated")


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """Share of chat requests to answer with each fault (the rest are forwarded)."""

    rate_limit: float = 0.0  # 429 with Retry-After: retry_after_s
    server_error: float = 0.0  # 500 with a JSON error body
    garbage_body: float = 0.0  # 200 whose body is not JSON
    garbage_content: float = 0.0  # 200 chat completion whose message content is not JSON
    slow: float = 0.0  # held for slow_s seconds (beyond the client's timeout), then 503; never forwarded
    truncated: float = 0.0  # 200 chat completion cut off at the token limit (finish_reason "length")
    retry_after_s: float = 1.0
    slow_s: float = 10.0

    def __post_init__(self) -> None:
        total = sum(getattr(self, name) for name in FAULTS)
        if any(getattr(self, name) < 0 for name in FAULTS) or total > 1.0:
            raise ValueError(f"fault shares must be >= 0 and sum to at most 1, got total {total}")

    def draw(self, rng: random.Random) -> str | None:
        """The fault for the next request (None = forward it)."""
        u, edge = rng.random(), 0.0
        for name in FAULTS:
            edge += getattr(self, name)
            if u < edge:
                return name
        return None


class FaultProxy:
    """``async with FaultProxy(upstream, plan, seed=...) as proxy:`` then point a client at ``proxy.base_url``."""

    def __init__(self, upstream_base_url: str, plan: FaultPlan, *, seed: int = 0, upstream_api_key: str | None = None):
        self.upstream = upstream_base_url.rstrip("/")
        self.plan = plan
        self.counts: Counter[str] = Counter()
        self.requests = 0
        self._rng = random.Random(seed)
        self._upstream_key = upstream_api_key
        self._runner: web.AppRunner | None = None
        self._session: ClientSession | None = None
        self._closing = asyncio.Event()
        self.base_url = ""

    async def __aenter__(self) -> FaultProxy:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._forward)
        self._session = ClientSession(timeout=ClientTimeout(total=600))
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._closing.set()  # release requests held by the "slow" fault so shutdown does not wait for them
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        fault = self.plan.draw(self._rng)
        self.counts[fault or "forwarded"] += 1
        if fault == "rate_limit":
            return web.json_response(
                {"error": {"message": "rate limited by fault proxy", "type": "rate_limit_error", "code": 429}},
                status=429,
                headers={"Retry-After": f"{self.plan.retry_after_s:g}"},
            )
        if fault == "server_error":
            return web.json_response({"error": {"message": "injected failure", "type": "server_error", "code": 500}}, status=500)
        if fault == "garbage_body":
            return web.Response(text='{"choices": [ this is not json', content_type="application/json")
        if fault == "garbage_content":
            return web.json_response(_completion("Sure! Here is what you asked for: risk is low-ish {"))
        if fault == "truncated":
            return web.json_response(_completion('{"risk": "Mod', finish_reason="length"))
        if fault == "slow":
            try:
                await asyncio.wait_for(self._closing.wait(), self.plan.slow_s)
            except TimeoutError:
                pass
            return web.json_response({"error": {"message": "held too long", "code": 503}}, status=503)
        return await self._forward(request)

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
        auth = f"Bearer {self._upstream_key}" if self._upstream_key else request.headers.get("Authorization")
        if auth:
            headers["Authorization"] = auth
        body = await request.read()
        url = self.upstream + request.path.removeprefix("/v1")
        async with self._session.request(request.method, url, data=body or None, headers=headers) as upstream:
            payload = await upstream.read()
            content_type = upstream.headers.get("Content-Type", "application/json").split(";")[0]
            return web.Response(body=payload, status=upstream.status, content_type=content_type)


def _completion(content: str, finish_reason: str = "stop") -> dict[str, object]:
    return {
        "id": "fault-proxy",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "fault-proxy",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 12, "total_tokens": 13},
    }
