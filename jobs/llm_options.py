"""The LLM options every LLM-using job shares (predict, build-graphs): the same flags, the same precedence, one check.

Settings are resolved by `vista.shared.llm.LLMConfig.resolve`, the one rule every command shares: defaults <
``VISTA_LLM_*`` < the deprecated ``TRAJONCO_LLM_BASE_URL`` / ``TRAJONCO_LLM_MODEL`` < explicit options <
``--llm KEY=VALUE``, and a base URL named anywhere means that endpoint (backend openai). This module only wires the
job's flags onto it; the response cache defaults to ``OUT/llm_cache``, so rerunning a job in the same output
directory pays no call twice. The driver then checks the settings and the endpoint (`vista.shared.llm.endpoint_check`).
"""

from __future__ import annotations

import argparse


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


def _options(args: argparse.Namespace) -> tuple[dict[str, object | None], dict[str, str]]:
    """The job's flags as `vista.shared.llm.LLMConfig.resolve` options, with the labels its errors quote."""
    options = {
        "backend": args.backend, "base_url": args.base_url, "model": args.model, "api_key_env": args.api_key_env,
        "max_concurrency": args.max_concurrency, "timeout_s": args.llm_timeout,
        "cache_dir": "none" if args.no_cache else args.cache_dir,
    }
    labels = {"timeout_s": f"--llm-timeout {args.llm_timeout}", "cache_dir": "--no-cache" if args.no_cache else
              f"--cache-dir {args.cache_dir}"}
    return options, labels


def llm_configured(args: argparse.Namespace, env: dict[str, str] | None = None) -> bool:
    """True when the user chose a model (an option or an environment variable), rather than leaving the default."""
    from vista.shared.llm import LLMConfig

    return LLMConfig.model_chosen(env=env, options=_options(args)[0], items=args.llm)


def llm_config(args: argparse.Namespace, env: dict[str, str] | None = None):
    """The job's LLM settings (`vista.shared.llm.LLMConfig.resolve` over its options), the cache under ``OUT`` by default."""
    from vista.shared.llm import LLMConfig

    options, labels = _options(args)
    return LLMConfig.resolve(env=env, options=options, items=args.llm, option_labels=labels, cache_home=args.out)
