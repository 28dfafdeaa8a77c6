"""The LLM options every LLM-using job shares (predict, build-graphs): the same flags, the same precedence, one check.

Settings are resolved as defaults < ``VISTA_LLM_*`` < ``TRAJONCO_LLM_BASE_URL`` / ``TRAJONCO_LLM_MODEL`` (written
by cluster.yaml on every node) < explicit options < ``--llm KEY=VALUE``; the response cache defaults to
``OUT/llm_cache``, so rerunning a job in the same output directory pays no call twice.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

LLM_ANSWER_FIELDS = ("backend", "model", "schema_mode", "schema_in_prompt", "temperature", "max_tokens",
                     "max_tokens_field", "reasoning_effort", "seed", "model_path", "n_ctx", "context_tokens")
"""LLM settings that change answers (hence outputs). The others (endpoint URL, timeouts, concurrency, cache) only
change where and how fast answers come; like the response cache's key, the manifest ignores them."""

CLUSTER_ENV = {"base_url": "TRAJONCO_LLM_BASE_URL", "model": "TRAJONCO_LLM_MODEL"}
"""Environment variables cluster.yaml writes on every node; setting one selects the openai backend."""


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``LLM`` option group (the job must also have ``--out``, the default home of the response cache)."""
    llm = parser.add_argument_group(
        "LLM", "Defaults: the embedded SmolLM2 model; VISTA_LLM_<FIELD> environment variables, then "
        "TRAJONCO_LLM_BASE_URL / TRAJONCO_LLM_MODEL (set by cluster.yaml), then these options apply.")
    llm.add_argument("--backend", choices=["embedded", "openai"], help="embedded (in-process llama.cpp) or openai "
                     "(any OpenAI-compatible endpoint)")
    llm.add_argument("--base-url", help="endpoint root for --backend openai, e.g. http://HOST:8000/v1")
    llm.add_argument("--model", help="model name sent to the endpoint")
    llm.add_argument("--api-key-env", help="environment variable holding the API key (default OPENAI_API_KEY)")
    llm.add_argument("--max-concurrency", type=int, help="requests in flight per actor gateway (default 4)")
    llm.add_argument("--llm-timeout", type=float, help="seconds allowed for one request (default 120)")
    llm.add_argument("--cache-dir", type=Path, help="LLM response cache (default OUT/llm_cache; must be shared by the "
                     "nodes for resumes to be free on a cluster)")
    llm.add_argument("--no-cache", action="store_true", help="no LLM response cache")
    llm.add_argument("--llm", action="append", default=[], metavar="KEY=VALUE", help="any other LLMConfig field "
                     "(repeatable), e.g. --llm qps=5 --llm schema_mode=json_object")


MODEL_CHOICE_ENV = ("VISTA_LLM_BACKEND", "VISTA_LLM_BASE_URL", "VISTA_LLM_MODEL", *CLUSTER_ENV.values())
"""Environment variables that choose a model (others, such as a timeout, only tune the default one)."""


def llm_configured(args: argparse.Namespace, env: dict[str, str] | None = None) -> bool:
    """True when the user chose a model (an option or an environment variable), rather than leaving the default."""
    env = dict(os.environ if env is None else env)
    explicit = (args.backend, args.base_url, args.model) != (None, None, None)
    return explicit or any(env.get(var) for var in MODEL_CHOICE_ENV)


def llm_config(args: argparse.Namespace, env: dict[str, str] | None = None):
    """The LLM settings: defaults < VISTA_LLM_* < TRAJONCO_LLM_* < explicit options < --llm KEY=VALUE."""
    from vista.llm import LLMConfig

    env = dict(os.environ if env is None else env)
    config = LLMConfig.from_env(env)
    cluster = {field: env[var] for field, var in CLUSTER_ENV.items() if env.get(var)}
    if cluster:
        config = config.with_overrides({"backend": "openai", **cluster})
    explicit = {
        "backend": args.backend, "base_url": args.base_url, "model": args.model, "api_key_env": args.api_key_env,
        "max_concurrency": args.max_concurrency, "timeout_s": args.llm_timeout,
    }
    config = config.with_overrides({k: v for k, v in explicit.items() if v is not None})
    if args.no_cache:
        config = config.with_overrides({"cache_dir": None})
    elif args.cache_dir is not None:
        config = config.with_overrides({"cache_dir": args.cache_dir})
    elif config.cache_dir is None:
        config = config.with_overrides({"cache_dir": args.out / "llm_cache"})
    if args.llm:
        config = config.with_overrides(args.llm)
    if config.cache_dir is not None:
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
