"""EmbeddedBackend's request handling, with a stand-in for the loaded model (the real one is in test_llm_real)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from vista.shared.llm import ErrorKind, user
from vista.shared.llm.backend import ChatRequest
from vista.shared.llm.errors import BackendError
from vista.shared.llm.embedded import EmbeddedBackend, EmbeddedSettings, compact_json_grammar, default_model_path, default_threads
from vista.shared.llm.errors import LLMConfigError

COMPLETION = {
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": '{"a":1}'}}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 2}},
}


class StandInModel:
    """Answers like xllamacpp.Server.handle_chat_completions, one request at a time, after ``seconds``."""

    def __init__(self, seconds=0.0, answer=COMPLETION):
        self.settings = EmbeddedSettings(Path("stand-in.gguf"), n_ctx=4096, threads=1)
        self.seconds = seconds
        self.answer = answer
        self.payloads: list[dict] = []
        self.spans: list[tuple[float, float]] = []
        self._lock = threading.Lock()

    def chat(self, payload):
        with self._lock:
            begin = time.monotonic()
            self.payloads.append(payload)
            time.sleep(self.seconds)
            self.spans.append((begin, time.monotonic()))
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer


def request(timeout_s=5.0, **kw):
    return ChatRequest(messages=(user("hi"),), model="m", max_tokens=10, timeout_s=timeout_s, **kw)


def test_schema_becomes_a_compact_grammar_and_usage_is_read():
    model = StandInModel()
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False}
    rf = {"type": "json_schema", "json_schema": {"name": "A", "schema": schema, "strict": True}}
    reply = asyncio.run(EmbeddedBackend(model).complete(request(response_format=rf)))
    assert (reply.content, reply.prompt_tokens, reply.completion_tokens, reply.cached_prompt_tokens) == ('{"a":1}', 5, 4, 2)
    sent = model.payloads[0]
    assert "response_format" not in sent and sent["grammar"] == compact_json_grammar(schema)
    assert sent["t_max_predict_ms"] == 5000
    asyncio.run(EmbeddedBackend(model, compact_json=False).complete(request(response_format=rf)))
    assert model.payloads[1]["response_format"] == rf and "grammar" not in model.payloads[1]
    llama_form = {"type": "json_object", "schema": schema}
    asyncio.run(EmbeddedBackend(model).complete(request(response_format=llama_form)))
    assert model.payloads[2]["grammar"] == compact_json_grammar(schema)


def test_queued_requests_do_not_spend_their_timeout_waiting():
    model = StandInModel(seconds=0.2)
    backend = EmbeddedBackend(model)

    async def four():
        return await asyncio.gather(*(backend.complete(request(timeout_s=0.5)) for _ in range(4)))

    assert len(asyncio.run(four())) == 4  # 0.8 s in total, each within its own 0.5 s


def test_timeout_is_reported_promptly_and_the_model_is_not_double_booked():
    model = StandInModel(seconds=2.0)  # far beyond the timeout: a prompt report stands clear of load noise
    backend = EmbeddedBackend(model)

    async def go():
        began = time.monotonic()
        with pytest.raises(BackendError) as caught:
            await backend.complete(request(timeout_s=0.1))
        reported = time.monotonic() - began
        model.seconds = 0.0
        await backend.complete(request())
        return caught.value, reported

    error, reported = asyncio.run(go())
    assert error.kind is ErrorKind.TIMEOUT and reported < 1.5
    (first_begin, first_end), (second_begin, _) = model.spans
    assert second_begin >= first_end  # the second request waited for the abandoned one to finish


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (ValueError("Expected 'messages' to be an array"), ErrorKind.HTTP_ERROR),
        (RuntimeError("llama_decode failed"), ErrorKind.SERVER_ERROR),
        ({"error": {"code": 400, "message": "request (9031 tokens) exceeds the available context size (8192 tokens)",
                    "type": "exceed_context_size_error"}}, ErrorKind.CONTEXT_OVERFLOW),
        ({"choices": []}, ErrorKind.BAD_RESPONSE),
    ],
    ids=["rejected", "crashed", "context", "empty"],
)
def test_model_failures_become_typed_errors(answer, kind):
    with pytest.raises(BackendError) as caught:
        asyncio.run(EmbeddedBackend(StandInModel(answer=answer)).complete(request()))
    assert caught.value.kind is kind and "stand-in.gguf" in caught.value.message


def test_model_file_and_threads_defaults(monkeypatch):
    assert default_model_path().name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert default_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert default_threads() == 3
    from vista.shared.llm.embedded import EmbeddedModel

    with pytest.raises(LLMConfigError, match="does not exist"):
        EmbeddedModel(EmbeddedSettings(Path("/nonexistent/model.gguf")))
