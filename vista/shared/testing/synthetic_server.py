"""An OpenAI-compatible endpoint on 127.0.0.1 that answers structured-output requests with made-up, schema-valid JSON.

For dry runs of a cluster job without paying for a model, for tests of the jobs (it counts and logs every
request it answers, so a test can prove that a resumed job asked nothing twice), and for scaling benchmarks
(answers take ``latency_s + per_token_s x completion tokens``). The answers are deterministic functions of the
request (same request, same answer) and reuse ids and dates found in the prompt, so agents' evidence links to real
timeline elements; their clinical content is meaningless.

    python -m vista.shared.testing.synthetic_server --port 8000 --latency-ms 200 --per-token-ms 2
    python -m jobs.predict ... --backend openai --base-url http://127.0.0.1:8000/v1 --model synthetic

Requests whose messages contain one of ``fail_markers`` are rejected with HTTP 400 (a non-retryable error), to
test how a job isolates a patient whose calls fail. Like vLLM and OpenAI, a request for a model the server does
not serve gets HTTP 404 ``model_not_found``. For fail-fast and budget tests it can also answer every chat request
with one status (``reject_status``, e.g. 401; ``quota_exhausted``: OpenAI's 429 ``insufficient_quota``), answer
content that never validates (``invalid_answers``), or
answer a burst of 429s with Retry-After (``rate_limit_burst``), or answer every chat and listing request with a
runaway body (``body_bytes`` of JSON-looking text, or ``endless_body``: streamed until the client hangs up) to test
the response-size cap. ``served_model`` is the name its answers and listing carry (default: ``model``, the name it
accepts). It records each request's arrival time and status
(``stats.arrivals``) and the most requests it held at once (``stats.max_in_flight``, also in ``GET /stats``). To prove
a client reaches a concurrency without paying a long latency per call, ``hold_until_in_flight=N`` holds every chat
request until N are open at once (or ``hold_timeout_s`` after the first one arrived), then answers all of them and
every later one at once. It
can append every chat body it receives to a JSON-lines file (``record_bodies``: what a benchmark replays to send a
job's exact requests; the bodies hold the prompts, so keep that file as private as the data).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from aiohttp import web

from vista.shared.tokens import count_tokens

JsonSchema = Mapping[str, object]
_ID_ATTRIBUTE = re.compile(r'\bid="([^"]+)"')
_TOKEN = re.compile(r"[A-Za-z0-9_.:-]+")
_EVENT_DATE = re.compile(r'(?:\btime="|^- )(\d{4}-\d{2}-\d{2})', re.M)
_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_WORDS = ("stable", "follow-up", "labs", "visit", "noted", "trend", "review", "history", "screening", "signs")


class SchemaAnswerer:
    """Makes a JSON value valid under a (bounded) JSON schema, choosing ids and dates from the prompt.

    Strings with a ``pattern`` (and arrays of them) take values found in the prompt — ``id="..."`` attributes first,
    then any word — that match it; dates come from the prompt's ``time="..."`` attributes.

    >>> schema = {"type": "object", "additionalProperties": False, "required": ["level", "ids", "score"],
    ...           "properties": {"level": {"enum": ["Low", "High"]}, "score": {"type": "integer", "minimum": 1, "maximum": 3},
    ...                          "ids": {"type": "array", "maxItems": 2, "items": {"type": "string", "pattern": "^e[0-9]+$"}}}}
    >>> value = SchemaAnswerer().answer(schema, '<lab id="e4">x</lab><lab id="e9">y</lab>')
    >>> value["level"] in ("Low", "High"), 1 <= value["score"] <= 3, set(value["ids"]) <= {"e4", "e9"}
    (True, True, True)
    >>> value == SchemaAnswerer().answer(schema, '<lab id="e4">x</lab><lab id="e9">y</lab>')
    True
    """

    def answer(self, schema: JsonSchema, prompt: str) -> object:
        rng = random.Random(hashlib.sha256(prompt.encode("utf-8")).digest())
        ids = list(dict.fromkeys(_ID_ATTRIBUTE.findall(prompt) + _TOKEN.findall(prompt)))
        dates = list(dict.fromkeys(_EVENT_DATE.findall(prompt) or _DATE.findall(prompt)))
        return self._value(schema, schema, rng, ids, dates)

    def _value(self, node: JsonSchema, root: JsonSchema, rng: random.Random, ids: list[str], dates: list[str]) -> object:
        if "$ref" in node:
            node = _resolve(root, str(node["$ref"]))
        for combinator in ("anyOf", "oneOf"):
            if combinator in node:
                options = [o for o in node[combinator] if o.get("type") != "null"] or list(node[combinator])  # type: ignore[union-attr]
                return self._value(options[0], root, rng, ids, dates)
        if "allOf" in node:
            return self._value(node["allOf"][0], root, rng, ids, dates)  # type: ignore[index]
        if "const" in node:
            return node["const"]
        if "enum" in node:
            return rng.choice(list(node["enum"]))  # type: ignore[arg-type]
        kind = node.get("type")
        if kind == "object" or "properties" in node:
            properties: Mapping[str, JsonSchema] = node.get("properties", {})  # type: ignore[assignment]
            return {name: self._value(sub, root, rng, ids, dates) for name, sub in properties.items()}
        if kind == "array":
            return self._array(node, root, rng, ids, dates)
        if kind == "integer":
            low, high = int(node.get("minimum", 0)), int(node.get("maximum", 100))  # type: ignore[arg-type]
            return rng.randint(low, max(low, high))
        if kind == "number":
            low, high = float(node.get("minimum", 0.0)), float(node.get("maximum", 1.0))  # type: ignore[arg-type]
            return round(rng.uniform(low, max(low, high)), 3)
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "null":
            return None
        return self._string(node, rng, ids, dates)

    def _array(self, node: JsonSchema, root: JsonSchema, rng: random.Random, ids: list[str], dates: list[str]) -> list:
        items: JsonSchema = node.get("items", {})  # type: ignore[assignment]
        low = int(node.get("minItems", 0))  # type: ignore[arg-type]
        high = int(node.get("maxItems", low + 3))  # type: ignore[arg-type]
        pattern = items.get("pattern") if isinstance(items, Mapping) else None
        if pattern is not None:  # e.g. event ids: only values the prompt offers can be valid
            offered = [i for i in ids if re.fullmatch(str(pattern), i)]
            count = min(len(offered), max(low, rng.randint(1, max(1, min(high, 5)))))
            return sorted(rng.sample(offered, count), key=offered.index)
        count = max(low, rng.randint(min(1, high), min(high, 3)))
        return [self._value(items, root, rng, ids, dates) for _ in range(count)]

    def _string(self, node: JsonSchema, rng: random.Random, ids: list[str], dates: list[str]) -> str:
        if node.get("format") == "date":
            return rng.choice(dates) if dates else (date(2020, 1, 1) + timedelta(days=rng.randint(0, 2000))).isoformat()
        pattern = node.get("pattern")
        if pattern is not None:
            offered = [i for i in ids if re.fullmatch(str(pattern), i)]
            if offered:
                return rng.choice(offered)
            raise ValueError(f"cannot make a string matching {pattern!r} from the prompt")
        low = int(node.get("minLength", 0))  # type: ignore[arg-type]
        high = int(node.get("maxLength", 80))  # type: ignore[arg-type]
        text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 12)))
        text = text[: max(high, 0)]
        return text + "x" * max(0, low - len(text))


def _resolve(root: JsonSchema, ref: str) -> JsonSchema:
    node: object = root
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]  # type: ignore[index]
    return node  # type: ignore[return-value]


def _schema_of(body: Mapping[str, object]) -> JsonSchema | None:
    fmt = body.get("response_format")
    if not isinstance(fmt, Mapping):
        return None
    if fmt.get("type") == "json_schema" and isinstance(fmt.get("json_schema"), Mapping):
        return fmt["json_schema"].get("schema")  # type: ignore[union-attr,return-value]
    if fmt.get("type") == "json_object" and isinstance(fmt.get("schema"), Mapping):
        return fmt["schema"]  # type: ignore[return-value]
    return None


def prompt_text(body: Mapping[str, object]) -> str:
    """The text of every message of a chat-completions body, joined."""
    messages = body.get("messages") or []
    return "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, Mapping))  # type: ignore[union-attr]


def synthetic_content(body: Mapping[str, object], answerer: SchemaAnswerer | None = None) -> str:
    """The answer text for a chat-completions body: JSON valid under its response schema (raises ValueError if the
    schema asks for something the prompt cannot supply). Also usable without a server, e.g. behind a
    `vista.shared.testing.scripted.ScriptedBackend`: ``ScriptedBackend(lambda request: synthetic_content(request.payload()))``."""
    schema = _schema_of(body)
    value = (answerer or SchemaAnswerer()).answer(schema, prompt_text(body)) if schema is not None else {"text": "synthetic"}
    return json.dumps(value)


def request_digest(body: Mapping[str, object]) -> str:
    """sha256 of a request's answer-determining fields (model, messages, response_format, sampling parameters)."""
    material = {k: body.get(k) for k in ("model", "messages", "response_format", "temperature", "seed", "max_tokens",
                                         "max_completion_tokens")}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class RateLimitBurst:
    """Answer 429 + ``Retry-After: retry_after_s`` to the ``count`` chat requests that arrive after the first
    ``after`` ones (then answer normally again)."""

    after: int
    count: int = 1
    retry_after_s: float = 3.0


@dataclass
class SyntheticLLMStats:
    """What the server has answered so far."""

    requests: int = 0
    rejected: int = 0
    prompt_tokens: int = 0  # over every answered request (what an endpoint bills)
    completion_tokens: int = 0
    digests: Counter[str] = field(default_factory=Counter)
    arrivals: list[tuple[float, int]] = field(default_factory=list)  # (time.time() at arrival, HTTP status) per request
    in_flight: int = 0
    max_in_flight: int = 0
    last_answered: float | None = None  # time.time() when the latest answer was sent
    burst_started: float | None = None  # time.time() of the first 429 of the rate-limit burst


class SyntheticLLMServer:
    """The endpoint, on its own thread: ``with SyntheticLLMServer() as server: ... server.base_url``."""

    def __init__(self, *, model: str = "synthetic", context_window: int | None = 8192, latency_s: float = 0.0,
                 per_token_s: float = 0.0, fail_markers: Sequence[str] = (), request_log: Path | None = None,
                 host: str = "127.0.0.1", port: int = 0, reject_status: int | None = None,
                 invalid_answers: bool = False, rate_limit_burst: RateLimitBurst | None = None,
                 quota_exhausted: bool = False, served_model: str | None = None, body_bytes: int | None = None,
                 endless_body: bool = False, record_bodies: Path | None = None,
                 hold_until_in_flight: int | None = None, hold_timeout_s: float = 120.0):
        self.model = model
        self.hold_until_in_flight = hold_until_in_flight
        self.hold_timeout_s = hold_timeout_s
        self._gate: asyncio.Event | None = None  # set once: the held requests go (made on the server's loop)
        self._first_held: float | None = None
        self.record_bodies = record_bodies
        self.served_model = served_model or model
        self.body_bytes = body_bytes
        self.endless_body = endless_body
        self.context_window = context_window
        self.latency_s = latency_s
        self.per_token_s = per_token_s
        self.fail_markers = tuple(fail_markers)
        self.reject_status = 429 if quota_exhausted else reject_status
        self.quota_exhausted = quota_exhausted  # every chat request: OpenAI's 429 insufficient_quota
        self.invalid_answers = invalid_answers
        self.rate_limit_burst = rate_limit_burst
        self.request_log = request_log
        self.host, self.port = host, port
        self.stats = SyntheticLLMStats()
        self._chat_seen = 0  # chat requests with a known model, in arrival order (for the rate-limit burst)
        self.answerer = SchemaAnswerer()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    # --------------------------------------------------------------------------------------------- handlers
    async def _chat(self, request: web.Request) -> web.StreamResponse:
        arrived = time.time()
        with self._lock:
            self.stats.in_flight += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
        await self._hold()
        if self.endless_body or self.body_bytes is not None:
            response = await self._runaway(request)
        else:
            response = await self._answer(request, arrived)
        with self._lock:
            self.stats.in_flight -= 1
            self.stats.arrivals.append((arrived, response.status))
            self.stats.last_answered = time.time()
        return response

    async def _hold(self) -> None:
        """With ``hold_until_in_flight``: wait until that many requests are open at once, or until ``hold_timeout_s``
        after the first held one arrived; either opens the gate for good."""
        if self.hold_until_in_flight is None or self._gate is None or self._gate.is_set():
            return
        now = time.monotonic()
        if self._first_held is None:
            self._first_held = now
        if self.stats.in_flight >= self.hold_until_in_flight:
            self._gate.set()
            return
        try:
            await asyncio.wait_for(self._gate.wait(), max(0.0, self._first_held + self.hold_timeout_s - now))
        except TimeoutError:
            self._gate.set()

    def _fault(self, body: Mapping[str, object], arrived: float) -> web.Response | None:
        """The configured failure for this request, if any (unknown model, forced status, rate-limit burst)."""
        if body.get("model") != self.model:
            return _error(404, f"The model `{body.get('model')}` does not exist.", code="model_not_found",
                          kind="NotFoundError")
        if self.reject_status == 429 and self.quota_exhausted:
            return _error(429, "You exceeded your current quota, please check your plan and billing details.",
                          code="insufficient_quota", kind="insufficient_quota")
        if self.reject_status is not None:
            return _error(self.reject_status, f"rejected by the synthetic endpoint (HTTP {self.reject_status})")
        burst = self.rate_limit_burst
        if burst is not None:
            with self._lock:
                self._chat_seen += 1
                limited = burst.after < self._chat_seen <= burst.after + burst.count
                if limited and self.stats.burst_started is None:
                    self.stats.burst_started = arrived
            if limited:
                return web.json_response(
                    {"error": {"message": "rate limited (synthetic burst)", "type": "rate_limit_error", "code": 429}},
                    status=429, headers={"Retry-After": f"{burst.retry_after_s:g}"})
        return None

    async def _answer(self, request: web.Request, arrived: float) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "request body is not JSON")
        if (fault := self._fault(body, arrived)) is not None:
            return fault
        if self.record_bodies is not None:
            self._record(body)
        prompt = prompt_text(body)
        digest = request_digest(body)
        if any(marker in prompt for marker in self.fail_markers):
            with self._lock:
                self.stats.rejected += 1
            self._log(digest, rejected=True)
            return _error(400, "rejected by the synthetic endpoint (fail marker in the prompt)")
        try:
            content = synthetic_content(body, self.answerer)
        except (ValueError, KeyError, TypeError) as exc:
            return _error(400, f"cannot answer this schema: {exc}")
        if self.invalid_answers:
            content = "Sure! The risk looks moderate to me."
        prompt_tokens, completion_tokens = count_tokens(prompt), max(1, count_tokens(content))
        delay = self.latency_s + self.per_token_s * completion_tokens
        if delay > 0:
            await asyncio.sleep(delay)
        with self._lock:
            self.stats.requests += 1
            self.stats.prompt_tokens += prompt_tokens
            self.stats.completion_tokens += completion_tokens
            self.stats.digests[digest] += 1
        self._log(digest, rejected=False)
        return web.json_response({
            "id": f"synthetic-{digest[:12]}", "object": "chat.completion", "created": int(time.time()),
            "model": self.served_model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        })

    def _record(self, body: Mapping[str, object]) -> None:
        line = json.dumps(body, separators=(",", ":")) + "\n"
        with self._lock, self.record_bodies.open("a", encoding="utf-8") as handle:  # type: ignore[union-attr]
            handle.write(line)

    async def _runaway(self, request: web.Request, *, count: bool = True) -> web.StreamResponse:
        """A chat completion whose content never ends (``endless_body``) or ends after ``body_bytes`` bytes."""
        await request.read()
        if count:
            with self._lock:
                self.stats.requests += 1
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        head = b'{"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "'
        tail = b'"}, "finish_reason": "stop"}]}'
        block = b"a" * (1 << 20)
        left = None if self.endless_body else max(0, (self.body_bytes or 0) - len(head) - len(tail))
        try:
            await response.write(head)
            while left is None or left > 0:
                piece = block if left is None or left >= len(block) else block[:left]
                await response.write(piece)
                if left is not None:
                    left -= len(piece)
            await response.write(tail)
            await response.write_eof()
        except (ConnectionError, RuntimeError):  # the client hung up (as it should, at its cap)
            pass
        return response

    def _log(self, digest: str, *, rejected: bool) -> None:
        if self.request_log is not None:
            with self._lock, self.request_log.open("a", encoding="utf-8") as handle:
                handle.write(f"{digest} {'rejected' if rejected else 'answered'}\n")

    async def _models(self, request: web.Request) -> web.StreamResponse:
        if self.endless_body or self.body_bytes is not None:  # a runaway endpoint runs away on every route
            return await self._runaway(request, count=False)
        owner = "synthetic" if self.served_model == self.model else "llamacpp"  # llama.cpp: one file, any name
        entry: dict[str, object] = {"id": self.served_model, "object": "model", "owned_by": owner}
        if self.context_window is not None:
            entry["max_model_len"] = self.context_window
        return web.json_response({"object": "list", "data": [entry]})

    async def _health(self, _: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _stats(self, _: web.Request) -> web.Response:
        with self._lock:
            return web.json_response({"requests": self.stats.requests, "rejected": self.stats.rejected,
                                      "distinct": len(self.stats.digests), "in_flight": self.stats.in_flight,
                                      "max_in_flight": self.stats.max_in_flight,
                                      # time.time() of the earliest chat request (None before one arrived)
                                      "first_arrival": min((t for t, _ in self.stats.arrivals), default=None),
                                      "last_answered": self.stats.last_answered})

    # --------------------------------------------------------------------------------------------- lifecycle
    async def _start(self) -> None:
        self._gate = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_get("/stats", self._stats)
        # stopping cancels what is still open after 1 s (a held or slow request of a job that is gone), instead of
        # aiohttp's 60 s wait for every handler to finish
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.base_url = f"http://{self.host}:{port}/v1"

    def start(self) -> SyntheticLLMServer:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="synthetic-llm", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._loop.close()
        self._loop = None

    def __enter__(self) -> SyntheticLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _error(status: int, message: str, *, code: str | int | None = None, kind: str = "invalid_request_error") -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "code": status if code is None else code}},
                             status=status)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vista.shared.testing.synthetic_server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free port)")
    parser.add_argument("--model", default="synthetic", help="model name it reports (default synthetic)")
    parser.add_argument("--context-window", type=int, default=8192, help="context length it reports (default 8192)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="fixed delay per answer, milliseconds")
    parser.add_argument("--per-token-ms", type=float, default=0.0, help="extra delay per completion token, milliseconds")
    parser.add_argument("--fail-marker", action="append", default=[], help="reject requests containing this text "
                        "(HTTP 400; repeatable)")
    parser.add_argument("--request-log", type=Path, help="append one line per request (digest, answered/rejected)")
    parser.add_argument("--reject-status", type=int, help="answer every chat request with this HTTP status (e.g. 401), "
                        "to drill a job's fail-fast")
    parser.add_argument("--invalid-answers", action="store_true", help="answer text that never validates")
    parser.add_argument("--record-bodies", type=Path, help="append every chat request body it answers to this JSON-lines "
                        "file (holds the prompts)")
    args = parser.parse_args(argv)
    server = SyntheticLLMServer(model=args.model, context_window=args.context_window, latency_s=args.latency_ms / 1000,
                                per_token_s=args.per_token_ms / 1000, fail_markers=args.fail_marker,
                                request_log=args.request_log, host=args.host, port=args.port,
                                reject_status=args.reject_status, invalid_answers=args.invalid_answers,
                                record_bodies=args.record_bodies).start()
    print(f"synthetic LLM endpoint at {server.base_url} (model {server.model}); Ctrl-C to stop", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
