"""LLMConfig: documented defaults, environment and key=value overrides, clear errors."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from vista.shared.llm.config import LLMConfig
from vista.shared.llm.errors import LLMConfigError


def test_defaults_run_the_embedded_model_deterministically():
    cfg = LLMConfig()
    assert cfg.backend == "embedded" and cfg.temperature == 0.0 and cfg.schema_mode == "json_schema"
    assert cfg.max_reasks == 2 and cfg.cache_dir is None and cfg.n_ctx == 8192
    assert all(field.description for field in LLMConfig.model_fields.values()), "every field is described"


def test_environment_overrides_with_types_and_none():
    env = {
        "VISTA_LLM_BACKEND": "openai",
        "VISTA_LLM_BASE_URL": "http://127.0.0.1:8000/v1",
        "VISTA_LLM_QPS": "2.5",
        "VISTA_LLM_CACHE_DIR": "/tmp/llm-cache",
        "VISTA_LLM_TEMPERATURE": "none",
        "VISTA_LLM_SCHEMA_IN_PROMPT": "true",
        "UNRELATED": "x",
    }
    cfg = LLMConfig.from_env(env)
    assert cfg.backend == "openai" and cfg.qps == 2.5 and cfg.cache_dir == Path("/tmp/llm-cache")
    assert cfg.temperature is None and cfg.schema_in_prompt is True


def test_errors_name_the_variable_or_flag():
    with pytest.raises(LLMConfigError, match="environment variable VISTA_LLM_MAX_TOKENS = 'lots'"):
        LLMConfig.from_env({"VISTA_LLM_MAX_TOKENS": "lots"})
    with pytest.raises(LLMConfigError, match="--llm schema_mode=xml"):
        LLMConfig.from_cli(["schema_mode=xml"], env={})
    with pytest.raises(LLMConfigError, match=r"unknown LLM setting\(s\) \['modle'\]"):
        LLMConfig().with_overrides(["modle=gpt-4.1"])
    with pytest.raises(LLMConfigError, match="not of the form key=value"):
        LLMConfig().with_overrides(["gpt-4.1"])


def test_cli_flag_applies_after_environment():
    parser = argparse.ArgumentParser()
    LLMConfig.add_cli_argument(parser)
    args = parser.parse_args(["--llm", "model=gpt-4.1-mini", "--llm", "max_concurrency=8"])
    cfg = LLMConfig.from_cli(args.llm, env={"VISTA_LLM_MODEL": "gpt-4o", "VISTA_LLM_BACKEND": "openai"})
    assert (cfg.backend, cfg.model, cfg.max_concurrency) == ("openai", "gpt-4.1-mini", 8)


def test_config_is_frozen_and_holds_no_secret(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-secret")
    cfg = LLMConfig(api_key_env="MY_KEY")
    assert cfg.api_key() == "sk-secret"
    assert "sk-secret" not in repr(cfg) and "sk-secret" not in cfg.model_dump_json()
    with pytest.raises(Exception):
        cfg.model = "other"  # type: ignore[misc]
