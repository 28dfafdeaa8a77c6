"""OpenAIBackend against a tiny local HTTP server: status codes, Retry-After, bodies that are not completions."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest
from aiohttp import web

from llm_models import Risk
from vista.shared.testing.clocks import FakeClock
from vista.shared.llm import ErrorKind, LLMConfig, LLMGateway, user
from vista.shared.llm.backend import ChatRequest
from vista.shared.llm.errors import BackendError
from vista.shared.llm.errors import LLMConfigError
from vista.shared.llm.openai_backend import OpenAIBackend

GOOD = {
    "id": "x",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": '{"level":"Low","reason":"ok"}'}}],
    "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18, "prompt_tokens_details": {"cached_tokens": 4}},
}


class FakeServer:
    """Plays a list of (status, body, headers) answers to /v1/chat/completions and records request bodies."""

    def __init__(self, answers, models=None):
        self.answers = list(answers)
        self.models = models
        self.bodies: list[dict] = []
        self.auth: list[str | None] = []

    async def chat(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.json())
        self.auth.append(request.headers.get("Authorization"))
        status, body, headers = self.answers.pop(0)
        if body == "hang":
            await asyncio.sleep(0.6)  # beyond the 0.2 s client timeout
        if isinstance(body, str):
            return web.Response(text=body, status=status, headers=headers, content_type="application/json")
        return web.json_response(body, status=status, headers=headers)

    async def list_models(self, request: web.Request) -> web.Response:
        return web.json_response(self.models or {"data": []})

    async def __aenter__(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.list_models)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"

    async def __aexit__(self, *exc) -> None:
        await self.runner.cleanup()


def request(**kw) -> ChatRequest:
    return ChatRequest(messages=(user("hi"),), model="m", max_tokens=20, timeout_s=kw.pop("timeout_s", 5.0), **kw)


async def one(answer, **kw):
    server = FakeServer([answer])
    async with server as url:
        backend = OpenAIBackend(base_url=url, api_key="k")
        try:
            return await backend.complete(request(**kw)), server
        finally:
            await backend.aclose()


def test_completion_is_parsed_and_payload_is_openai_shaped():
    rf = {"type": "json_schema", "json_schema": {"name": "R", "schema": {"type": "object"}, "strict": True}}
    reply, server = asyncio.run(one((200, GOOD, {}), seed=3, response_format=rf, max_tokens_field="max_completion_tokens"))
    assert reply.content == '{"level":"Low","reason":"ok"}' and reply.finish_reason == "stop"
    assert (reply.prompt_tokens, reply.completion_tokens, reply.cached_prompt_tokens) == (11, 7, 4)
    body = server.bodies[0]
    assert body["messages"] == [{"role": "user", "content": "hi"}] and body["response_format"] == rf
    assert body["max_completion_tokens"] == 20 and "max_tokens" not in body and body["seed"] == 3 and body["temperature"] == 0.0
    assert server.auth == ["Bearer k"]


@pytest.mark.parametrize(
    ("answer", "kind", "status", "retry_after"),
    [
        ((429, {"error": {"message": "slow down"}}, {"Retry-After": "3"}), ErrorKind.RATE_LIMITED, 429, 3.0),
        ((429, {"error": {"message": "slow down"}}, {"retry-after-ms": "1500"}), ErrorKind.RATE_LIMITED, 429, 1.5),
        ((500, {"error": {"message": "boom"}}, {}), ErrorKind.SERVER_ERROR, 500, None),
        ((503, "<html>unavailable</html>", {}), ErrorKind.SERVER_ERROR, 503, None),
        ((400, {"error": {"message": "bad field"}}, {}), ErrorKind.HTTP_ERROR, 400, None),
        ((401, {"error": {"message": "Invalid API Key"}}, {}), ErrorKind.AUTH_ERROR, 401, None),
        ((404, {"error": {"message": "The model `gpt-9` does not exist", "code": "model_not_found"}}, {}),
         ErrorKind.UNKNOWN_MODEL, 404, None),
        ((404, {"object": "error", "message": "The model `x` does not exist.", "type": "NotFoundError", "code": 404}, {}),
         ErrorKind.UNKNOWN_MODEL, 404, None),
        ((429, {"error": {"message": "You exceeded your current quota", "type": "insufficient_quota",
                          "code": "insufficient_quota"}}, {}), ErrorKind.QUOTA_EXCEEDED, 429, None),
        (
            (400, {"error": {"message": "This model's maximum context length is 8192 tokens", "code": "context_length_exceeded"}}, {}),
            ErrorKind.CONTEXT_OVERFLOW,
            400,
            None,
        ),
        ((200, '{"choices": [ not json', {}), ErrorKind.BAD_RESPONSE, None, None),
        ((200, {"id": "x", "object": "chat.completion"}, {}), ErrorKind.BAD_RESPONSE, None, None),
        ((200, {"error": {"message": "exceeds the available context size", "code": 400, "type": "exceed_context_size_error"}}, {}),
         ErrorKind.CONTEXT_OVERFLOW, 400, None),
    ],
    ids=["429", "429-ms", "500", "503-html", "400", "401", "404-openai", "404-vllm", "quota", "context", "garbage",
         "no-choices", "error-200"],
)
def test_failures_become_typed_backend_errors(answer, kind, status, retry_after):
    with pytest.raises(BackendError) as caught:
        asyncio.run(one(answer))
    assert caught.value.kind is kind and caught.value.status == status and caught.value.retry_after_s == retry_after
    assert "127.0.0.1" in caught.value.message  # names the endpoint


def test_http_date_retry_after():
    when = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    with pytest.raises(BackendError) as caught:
        asyncio.run(one((429, {"error": {"message": "later"}}, {"Retry-After": when})))
    assert 25 <= caught.value.retry_after_s <= 30


def test_timeout_and_connection_errors():
    with pytest.raises(BackendError) as caught:
        asyncio.run(one((200, "hang", {}), timeout_s=0.2))
    assert caught.value.kind is ErrorKind.TIMEOUT

    async def closed_port():
        backend = OpenAIBackend(base_url="http://127.0.0.1:9/v1", api_key="k")
        try:
            await backend.complete(request())
        finally:
            await backend.aclose()

    with pytest.raises(BackendError) as caught:
        asyncio.run(closed_port())
    assert caught.value.kind is ErrorKind.CONNECTION_ERROR


def test_gateway_retries_over_http_and_counts_every_attempt():
    server = FakeServer([
        (429, {"error": {"message": "slow"}}, {"Retry-After": "2"}),
        (502, "bad gateway", {}),
        (200, "{garbage", {}),
        (200, GOOD, {}),
    ])

    async def go():
        async with server as url:
            clock = FakeClock()
            config = LLMConfig(backend="openai", base_url=url, model="gpt-4o-mini")
            async with LLMGateway(config, clock=clock) as gateway:
                return await gateway.complete([user("hi")], Risk, agent="worker", patient_id=1), clock

    result, clock = asyncio.run(go())
    assert result.ok and result.usage.attempts == 4 and result.usage.retries == 3
    assert clock.sleeps[0] >= 2.0  # Retry-After
    assert result.usage.cost_usd == pytest.approx((7 * 0.15 + 4 * 0.075 + 7 * 0.60) / 1e6)
    assert len(server.bodies) == 4  # the openai client's own retries are off


def test_context_window_is_discovered_from_models():
    server = FakeServer([], models={"data": [{"id": "qwen", "max_model_len": 32768}, {"id": "other", "max_model_len": 4096}]})

    async def go():
        async with server as url:
            async with LLMGateway(LLMConfig(backend="openai", base_url=url, model="qwen")) as gateway:
                before = gateway.context_tokens
                return before, await gateway.discover_context_tokens()

    assert asyncio.run(go()) == (None, 32768)


def test_official_endpoint_needs_a_key(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(LLMConfigError, match="NO_SUCH_KEY_VAR"):
        LLMGateway(LLMConfig(backend="openai", model="gpt-4.1", api_key_env="NO_SUCH_KEY_VAR"))
    # a local endpoint works without one
    gateway = LLMGateway(LLMConfig(backend="openai", base_url="http://127.0.0.1:1/v1", api_key_env="NO_SUCH_KEY_VAR"))
    asyncio.run(gateway.aclose())
