"""Agent answer schemas are fully bounded; prompt templates fill every placeholder and describe every answer key."""

from __future__ import annotations

from datetime import date

import pytest
from pydantic import ValidationError

from trajonco.agents.prompts import AGENT_TEMPLATES, PromptContext, horizon_text, render_pair
from trajonco.agents.schemas import (
    COMPACT_LIMITS,
    STANDARD_LIMITS,
    ManagerOutput,
    WorkerOutput,
    fit_limits,
    limits_of,
    output_models,
    resolve_limits,
    worst_case_chars,
)
from trajonco.cancers import CANCERS, UnknownCancerError, applicable_cancers, get_cancer

ALL_MODELS = [m for limits in (STANDARD_LIMITS, COMPACT_LIMITS) for m in (
    output_models(limits).worker, output_models(limits).manager, output_models(limits).preprocessor)]


def _walk(node: dict, defs: dict, path: str, problems: list[str]) -> None:
    if "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[-1]]
    kind = node.get("type")
    if kind == "object":
        if node.get("additionalProperties") is not False:
            problems.append(f"{path}: extra keys allowed")
        if set(node.get("required", [])) != set(node["properties"]):
            problems.append(f"{path}: not every key required")
        for name, child in node["properties"].items():
            _walk(child, defs, f"{path}.{name}", problems)
    elif kind == "array":
        if "maxItems" not in node:
            problems.append(f"{path}: unbounded list")
        _walk(node["items"], defs, f"{path}[]", problems)
    elif kind == "string":
        if not ({"maxLength", "enum", "format", "pattern"} & set(node)):
            problems.append(f"{path}: unbounded string")
    elif kind == "integer":
        if "minimum" not in node or "maximum" not in node:
            problems.append(f"{path}: unbounded integer")
    elif "enum" not in node:
        problems.append(f"{path}: unexpected schema {node}")


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda m: m.__name__)
def test_every_answer_schema_is_fully_bounded(model):
    schema = model.model_json_schema()
    problems: list[str] = []
    _walk(schema, schema.get("$defs", {}), model.__name__, problems)
    assert problems == []


def test_compact_models_are_tighter_subclasses_of_the_standard_ones():
    compact = output_models(COMPACT_LIMITS)
    assert issubclass(compact.worker, WorkerOutput) and issubclass(compact.manager, ManagerOutput)
    assert output_models(COMPACT_LIMITS) is compact  # cached: the same classes, so the same schema hash
    long_summary = "x" * (COMPACT_LIMITS.summary_chars + 1)
    answer = {"updated_summary": long_summary, "new_events": [], "temporal_analysis": "", "risk_reasoning": "r", "risk_level": "Low"}
    WorkerOutput.model_validate(answer)
    with pytest.raises(ValidationError):
        compact.worker.model_validate(answer)


@pytest.mark.parametrize("bad", [
    {"timestamp": "2020-13-01", "description": "x", "event_ids": []},
    {"timestamp": "2020-01-01", "description": "x", "event_ids": ["E3"]},
    {"timestamp": "2020-01-01", "description": "", "event_ids": []},
    {"timestamp": "2020-01-01", "description": "x", "event_ids": [], "extra": 1},
])
def test_event_validation_rejects_bad_dates_ids_and_extra_keys(bad):
    answer = {"risk_evolution_summary": "s", "final_events": [bad], "risk_reasoning": "r", "risk_score": 3}
    with pytest.raises(ValidationError):
        ManagerOutput.model_validate(answer)


@pytest.mark.parametrize("score", [0, 11])
def test_manager_score_is_one_to_ten(score):
    with pytest.raises(ValidationError):
        ManagerOutput.model_validate({"risk_evolution_summary": "s", "final_events": [], "risk_reasoning": "r", "risk_score": score})


VALUES = {"chunk_xml": "<patient/>", "chunk_number": 2, "n_chunks": 3, "previous_output": "{}", "memory_events": "- none",
          "final_worker_output": "{}", "memory_note": "", "timeline_xml": "<patient/>", "truncation_note": ""}
ANSWER_MODEL = {"worker_first": WorkerOutput, "worker_next": WorkerOutput, "manager": ManagerOutput,
                "single_agent": ManagerOutput, "preprocessor": output_models(STANDARD_LIMITS).preprocessor}


@pytest.mark.parametrize("agent", AGENT_TEMPLATES)
@pytest.mark.parametrize("hints", [False, True])
def test_templates_fill_cancer_date_horizon_and_describe_every_answer_key(agent, hints):
    ctx = PromptContext(CANCERS["pancreatic"], date(2019, 4, 30), horizon_days=730, hints=hints)
    system, user = render_pair(agent, ctx, **VALUES)
    assert "$" not in system + user
    assert "pancreatic cancer" in system and "2019-04-30" in system and "2 years" in system
    for key in ANSWER_MODEL[agent].model_fields:
        assert f'"{key}"' in system, f"{agent}: answer key {key} not described"
    assert ("new-onset diabetes" in system) is hints


def test_the_memory_size_is_stated_in_the_subsequent_worker_prompt():
    ctx = PromptContext(CANCERS["lung"], date(2019, 4, 30), memory_k=7)
    system, user = render_pair("worker_next", ctx, **VALUES)
    assert "last 7 entries" in system and "Last 7 events" in user


def test_missing_placeholder_is_named():
    ctx = PromptContext(CANCERS["lung"], date(2019, 4, 30))
    with pytest.raises(KeyError, match=r"\$chunk_xml"):
        render_pair("worker_first", ctx, chunk_number=1, n_chunks=1)


@pytest.mark.parametrize("days,text", [(365, "1 year"), (366, "1 year"), (1826, "5 years"), (182, "6 months"), (30, "1 month"), (10, "10 days")])
def test_horizon_text(days, text):
    assert horizon_text(days) == text


def test_cancer_catalog():
    assert len(CANCERS) == 15
    assert get_cancer("lung").display_name == "lung cancer"
    assert get_cancer("Colorectal Cancer").key == "colorectal"
    with pytest.raises(UnknownCancerError, match="expected one of"):
        get_cancer("skin")
    assert {c.key for c in applicable_cancers("F")} == set(CANCERS) - {"prostate"}
    assert {c.key for c in applicable_cancers(None)} == set(CANCERS)
    assert all(len(c.hints) >= 3 for c in CANCERS.values())


def _largest_answer(schema: dict, defs: dict) -> object:
    """The longest valid answer: every string at its max length, every list full, the longest enum value."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    if "enum" in schema:
        return max(schema["enum"], key=lambda v: len(str(v)))
    kind = schema["type"]
    if kind == "object":
        return {k: _largest_answer(v, defs) for k, v in schema["properties"].items()}
    if kind == "array":
        return [_largest_answer(schema["items"], defs) for _ in range(schema["maxItems"])]
    if kind == "integer":
        return schema["maximum"]
    if schema.get("format") == "date":
        return "2020-01-01"
    if "pattern" in schema:
        return "e" + "9" * (schema["maxLength"] - 1)
    return "x" * schema["maxLength"]


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda m: m.__name__)
def test_worst_case_chars_is_the_length_of_the_largest_valid_answer(model):
    schema = model.model_json_schema()
    largest = model.model_validate(_largest_answer(schema, schema.get("$defs", {})))
    assert len(largest.model_dump_json()) == worst_case_chars(model)


@pytest.mark.parametrize("max_tokens", [300, 700, 1024, 4096])
def test_fitted_compact_limits_never_exceed_the_answer_budget(max_tokens):
    fitted = fit_limits(COMPACT_LIMITS, max_tokens)
    models = output_models(fitted)
    assert all(worst_case_chars(m) <= max_tokens for m in (models.worker, models.manager, models.preprocessor))
    assert fitted.worker_events >= 1 and fitted.summary_chars <= COMPACT_LIMITS.summary_chars
    assert (fitted is COMPACT_LIMITS) == (max_tokens >= 1024)  # the compact bounds fit the default 1024-token budget


@pytest.mark.parametrize("name", ["standard", "compact", "compact-512", "compact-700"])
def test_limits_are_rebuilt_from_their_name_into_the_same_classes(name):
    limits = resolve_limits(name)
    assert limits.name == name
    models = output_models(limits)
    assert all(limits_of(m) == limits for m in (models.worker, models.manager, models.preprocessor))
    assert output_models(resolve_limits(limits.name)).worker is models.worker


@pytest.mark.parametrize("bad", ["compact-x", "tiny", "standard-"])
def test_unknown_limit_names_are_refused(bad):
    with pytest.raises(ValueError, match="unknown output limits"):
        resolve_limits(bad)
