"""Checking, on a job's driver and before any actor starts, that its LLM settings and endpoint can work.

`check_llm` fails in one line on a missing key or model file; `check_endpoint` asks the endpoint once (``GET
/models``): reachable, key accepted, model served, context window known. A wrong URL or model name then costs one
line and no patient.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from vista.shared.llm.config import LLMConfig
from vista.shared.llm.errors import LLMConfigError, LLMEndpointFailure

log = logging.getLogger(__name__)


def endpoint_of(llm: LLMConfig) -> str:
    """The endpoint as the user knows it (for messages): the base URL, api.openai.com or the embedded model.

    >>> endpoint_of(LLMConfig(backend="openai", base_url="http://127.0.0.1:8000/v1/", model="m"))
    'http://127.0.0.1:8000/v1'
    """
    if llm.backend == "embedded":
        return f"embedded model {llm.model}"
    from vista.shared.llm.openai_backend import OPENAI_DEFAULT_URL

    return (llm.base_url or OPENAI_DEFAULT_URL).rstrip("/")


def check_llm(llm: LLMConfig) -> None:
    """Fail on the driver, in one line, when the LLM settings cannot work (missing key or model file), rather than
    in every actor: an OpenAI-compatible backend is built (no request is sent), the embedded model file is located."""
    if llm.backend == "embedded":
        from vista.shared.llm.embedded import default_model_path

        path = llm.model_path or default_model_path()
        if not Path(path).is_file():
            raise LLMConfigError(f"embedded backend: model file {path} does not exist")
        return
    from vista.shared.llm.gateway import build_backend

    build_backend(llm)


@dataclass(frozen=True, slots=True)
class EndpointFacts:
    """What the driver learned about the endpoint before starting any actor."""

    endpoint: str  # base URL (or "embedded model ...")
    models: tuple[str, ...] | None  # what GET /models lists (None: the server does not list models)
    context_tokens: int | None  # the context window the job will budget prompts against


def warn_if_unpriced(llm: LLMConfig) -> None:
    """One warning, on the driver, when the model has no price in the price table (its cost is then counted as
    unpriced calls, never as $0); its actors' gateways say nothing (``warn_unpriced=False``)."""
    from vista.shared.llm.prices import PriceTable

    if PriceTable.load(llm.prices_path).get(llm.model) is None:
        log.warning("model %r has no price in the price table: its calls are counted as unpriced (no cost)", llm.model)


def check_endpoint(llm: LLMConfig, *, context_tokens: int | None = None, needs_context: bool = False,
                   timeout_s: float = 30.0) -> EndpointFacts:
    """Ask the endpoint once, on the driver, whether the job can work: one ``GET /models``.

    Raises `LLMEndpointFailure` (one line naming the URL and the option to check) when the endpoint cannot be
    reached, refuses the key, answers something that is not an OpenAI-compatible API, or lists models without
    the one asked for (llama.cpp servers, which answer any model name, are let through); `LLMConfigError` naming
    ``--context-tokens`` when ``needs_context`` and nobody knows the model's context window (the option, the
    LLM settings, the listing, the price table).
    """
    url = endpoint_of(llm)
    if llm.backend == "embedded":
        return EndpointFacts(url, None, context_tokens or llm.context_tokens or llm.n_ctx)
    entries = _listed_models(llm, url, timeout_s)
    models = None if entries is None else tuple(str(e["id"]) for e in entries if isinstance(e, dict) and "id" in e)
    if models and llm.model not in models and not _answers_any_name(entries):
        shown = ", ".join(models[:8]) + (", ..." if len(models) > 8 else "")
        raise LLMEndpointFailure(f"LLM endpoint {url}: model {llm.model!r} is not served there (it lists {shown}) "
                                 "— check --model")
    context = context_tokens or llm.context_tokens or _listed_context(entries, llm.model) or _priced_context(llm)
    if needs_context and context is None:
        raise LLMConfigError(f"the context window of model {llm.model!r} at {url} is unknown (its /models listing "
                             "does not report it and the price table does not list the model) — pass --context-tokens N")
    return EndpointFacts(url, models, context)


def _listed_models(llm: LLMConfig, url: str, timeout_s: float) -> list | None:
    """The ``data`` of ``GET {url}/models`` (None when the server does not list models)."""
    import openai

    from vista.shared.llm.body_limit import IDENTITY_ENCODING, BodyTooLarge, too_large_cause
    from vista.shared.llm.openai_backend import capped_sync_client, connection_problem

    key_hint = f"check --api-key-env (now {llm.api_key_env}{'' if llm.api_key() else ', which is not set'})"
    client = openai.OpenAI(base_url=url, api_key=llm.api_key() or "EMPTY", max_retries=0,
                           http_client=capped_sync_client(), default_headers=IDENTITY_ENCODING)
    too_big = (f"LLM endpoint {url}: GET /models answered a body too large to be a model listing — is this an "
               "OpenAI-compatible API root? check --base-url")
    try:
        raw = client.models.with_raw_response.list(timeout=timeout_s)
        text = raw.text
    except BodyTooLarge:
        raise LLMEndpointFailure(too_big) from None
    except openai.APITimeoutError:
        raise LLMEndpointFailure(f"LLM endpoint {url}: no answer to GET /models within {timeout_s:g} s — check "
                                 "--base-url (is the server up?)") from None
    except openai.APIConnectionError as exc:
        if too_large_cause(exc) is not None:
            raise LLMEndpointFailure(too_big) from None
        raise LLMEndpointFailure(f"LLM endpoint {url}: {connection_problem(exc)} — check --base-url") from None
    except openai.APIStatusError as exc:
        status = exc.status_code
        if status in (401, 403):
            raise LLMEndpointFailure(f"LLM endpoint {url}: the API key was refused (HTTP {status}) — {key_hint}") from None
        if status >= 500:
            raise LLMEndpointFailure(f"LLM endpoint {url}: GET /models answered HTTP {status} — is the server "
                                     "healthy?") from None
        return None  # 404/405...: this server does not list its models; the chat calls will tell
    finally:
        client.close()
    try:
        body = json.loads(text)
    except ValueError:
        raise LLMEndpointFailure(f"LLM endpoint {url}: GET /models did not answer JSON — is this an OpenAI-compatible "
                                 "API root (usually ending in /v1)? check --base-url") from None
    data = body.get("data") if isinstance(body, dict) else None
    return data if isinstance(data, list) else None


def _answers_any_name(entries: list | None) -> bool:
    """llama.cpp's server lists its one model under the file's alias and answers whatever model name is sent."""
    return bool(entries) and all(isinstance(e, dict) and e.get("owned_by") == "llamacpp" for e in entries)


def _listed_context(entries: list | None, model: str) -> int | None:
    from vista.shared.llm.openai_backend import listed_context_window

    return listed_context_window(entries, model) if entries else None


def _priced_context(llm: LLMConfig) -> int | None:
    from vista.shared.llm.prices import PriceTable

    priced = PriceTable.load(llm.prices_path).get(llm.model)
    return priced.context_window if priced else None
