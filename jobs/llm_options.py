"""The LLM options every LLM-using job shares (predict, build-graphs): the same flags, the same precedence, one check.

Settings are resolved by `vista.llm.LLMConfig.resolve`, the one rule every command shares: defaults <
``VISTA_LLM_*`` < the deprecated ``TRAJONCO_LLM_BASE_URL`` / ``TRAJONCO_LLM_MODEL`` < explicit options <
``--llm KEY=VALUE``, and a base URL named anywhere means that endpoint (backend openai). This module only wires the
job's flags onto it; the response cache defaults to ``OUT/llm_cache``, so rerunning a job in the same output
directory pays no call twice.

Before any actor starts, the driver checks the settings (`check_llm`: key present, model file found) and the
endpoint itself (`check_endpoint`: one ``GET /models`` — reachable, key accepted, model served, context window
known), so a wrong URL or model name costs one line and no patient.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

LLM_ANSWER_FIELDS = ("backend", "model", "schema_mode", "schema_in_prompt", "temperature", "max_tokens",
                     "max_tokens_field", "reasoning_effort", "seed", "model_path", "n_ctx", "context_tokens")
"""LLM settings that change answers (hence outputs). The others (endpoint URL, timeouts, concurrency, cache) only
change where and how fast answers come; like the response cache's key, the manifest ignores them."""



def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``LLM`` option group (the job must also have ``--out``, the default home of the response cache)."""
    llm = parser.add_argument_group(
        "LLM", "Defaults: the embedded SmolLM2 model; VISTA_LLM_<FIELD> environment variables (the same for every "
        "command), then these options apply, --llm KEY=VALUE last.")
    llm.add_argument("--backend", choices=["embedded", "openai"], help="embedded (in-process llama.cpp) or openai "
                     "(any OpenAI-compatible endpoint; implied by a base URL)")
    llm.add_argument("--base-url", help="an OpenAI-compatible endpoint root, e.g. http://HOST:8000/v1: the job asks "
                     "it (backend openai); without one (and no VISTA_LLM_BASE_URL) the embedded model answers")
    llm.add_argument("--model", help="model name sent to the endpoint")
    llm.add_argument("--api-key-env", help="environment variable holding the API key (default OPENAI_API_KEY)")
    llm.add_argument("--max-concurrency", type=int, help="requests in flight per actor gateway (default 4)")
    llm.add_argument("--requests-per-second", type=float, help="the job's LLM budget: requests started per second "
                     "over every actor (default: no limit)")
    llm.add_argument("--tokens-per-minute", type=int, help="the job's LLM budget: prompt + completion tokens per "
                     "minute over every actor, e.g. your OpenAI tier's TPM (default: no limit)")
    llm.add_argument("--llm-timeout", type=float, help="seconds allowed for one request (default 120)")
    llm.add_argument("--cache-dir", type=str, help="LLM response cache, a path or an s3://… URI (default OUT/llm_cache; "
                     "must be shared by the nodes for resumes to be free on a cluster; answers from a cache outside OUT are "
                     "counted as shared_cache_hits in summary.json, not as this output's cache hits)")
    llm.add_argument("--no-cache", action="store_true", help="no LLM response cache")
    llm.add_argument("--llm", action="append", default=[], metavar="KEY=VALUE", help="any other LLMConfig field "
                     "(repeatable), e.g. --llm qps=5 --llm schema_mode=json_object")


def llm_configured(args: argparse.Namespace, env: dict[str, str] | None = None) -> bool:
    """True when the user chose a model (an option or an environment variable), rather than leaving the default."""
    from vista.llm.config import DEPRECATED_ENV, ENV_PREFIX, MODEL_CHOICE_FIELDS

    env = dict(os.environ if env is None else env)
    explicit = (args.backend, args.base_url, args.model) != (None, None, None)
    named = [ENV_PREFIX + field.upper() for field in MODEL_CHOICE_FIELDS] + list(DEPRECATED_ENV)
    items = {item.partition("=")[0].strip() for item in args.llm}
    return explicit or bool(items & set(MODEL_CHOICE_FIELDS)) or any(env.get(var) for var in named)


def llm_config(args: argparse.Namespace, env: dict[str, str] | None = None):
    """The job's LLM settings (`vista.llm.LLMConfig.resolve` over its options), the cache under ``OUT`` by default."""
    from vista.llm import LLMConfig
    from vista.storage import is_remote, join

    options = {
        "backend": args.backend, "base_url": args.base_url, "model": args.model, "api_key_env": args.api_key_env,
        "max_concurrency": args.max_concurrency, "timeout_s": args.llm_timeout,
        "cache_dir": "none" if args.no_cache else args.cache_dir,
    }
    labels = {"timeout_s": f"--llm-timeout {args.llm_timeout}", "cache_dir": "--no-cache" if args.no_cache else
              f"--cache-dir {args.cache_dir}"}
    config = LLMConfig.resolve(env=os.environ if env is None else env, options=options, items=args.llm,
                               option_labels=labels)
    named = args.no_cache or args.cache_dir is not None or any(
        item.partition("=")[0].strip() == "cache_dir" for item in args.llm)
    if config.cache_dir is None and not named:
        config = config.with_overrides({"cache_dir": join(args.out, "llm_cache")})
    if config.cache_dir is not None and not is_remote(config.cache_dir):
        config = config.with_overrides({"cache_dir": Path(config.cache_dir).resolve()})
    return config


def answer_fields(llm) -> dict[str, object]:
    """The answer-determining LLM settings (for a job's manifest)."""
    dumped = llm.model_dump(mode="json")
    return {name: dumped[name] for name in LLM_ANSWER_FIELDS}


def check_llm(llm) -> None:
    """Fail on the driver, in one line, when the LLM settings cannot work (missing key or model file), rather than
    in every actor: an OpenAI-compatible backend is built (no request is sent), the embedded model file is located."""
    from vista.llm import LLMConfigError

    if llm.backend == "embedded":
        from vista.llm.embedded import default_model_path

        path = llm.model_path or default_model_path()
        if not Path(path).is_file():
            raise LLMConfigError(f"embedded backend: model file {path} does not exist")
        return
    from vista.llm import build_backend

    build_backend(llm)


@dataclass(frozen=True, slots=True)
class EndpointFacts:
    """What the driver learned about the endpoint before starting any actor."""

    endpoint: str  # base URL (or "embedded model ...")
    models: tuple[str, ...] | None  # what GET /models lists (None: the server does not list models)
    context_tokens: int | None  # the context window the job will budget prompts against


def check_endpoint(llm, *, context_tokens: int | None = None, needs_context: bool = False,
                   timeout_s: float = 30.0) -> EndpointFacts:
    """Ask the endpoint once, on the driver, whether the job can work: one ``GET /models``.

    Raises `LLMEndpointFailure` (one line naming the URL and the option to check) when the endpoint cannot be
    reached, refuses the key, answers something that is not an OpenAI-compatible API, or lists models without
    the one asked for (llama.cpp servers, which answer any model name, are let through); `LLMConfigError` naming
    ``--context-tokens`` when ``needs_context`` and nobody knows the model's context window (the option, the
    LLM settings, the listing, the price table).
    """
    from vista.llm import LLMConfigError
    from vista.llm.errors import LLMEndpointFailure

    from jobs.llm_budget import endpoint_of

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


def _listed_models(llm, url: str, timeout_s: float) -> list | None:
    """The ``data`` of ``GET {url}/models`` (None when the server does not list models)."""
    import openai

    from vista.llm.body_limit import IDENTITY_ENCODING, BodyTooLarge, too_large_cause
    from vista.llm.errors import LLMEndpointFailure
    from vista.llm.openai_backend import capped_sync_client, connection_problem

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
    from vista.llm.openai_backend import listed_context_window

    return listed_context_window(entries, model) if entries else None


def _priced_context(llm) -> int | None:
    from vista.llm import PriceTable

    priced = PriceTable.load(llm.prices_path).get(llm.model)
    return priced.context_window if priced else None
