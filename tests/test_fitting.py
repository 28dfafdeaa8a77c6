"""Answer fit: max_tokens fitted to each agent's worst-case answer within the model's limits, per call."""

from __future__ import annotations

import asyncio
import math

import pytest

from test_agents_chain import PREDICTION, Script, keep_labs_and_notes, manager_answer, worker_answer
from test_agents_patients import CATALOG, lung_patient
from trajonco.agents.schemas import COMPACT_LIMITS, STANDARD_LIMITS, fit_limits, output_models, worst_case_chars
from trajonco.fitting import (
    ROLES,
    STANDARD_CHARS_PER_TOKEN,
    GatewayFacts,
    answer_fit,
    answer_cap,
    context_fit,
    gateway_facts,
    model_output_tokens,
)
from trajonco.pipeline import PipelineConfig, run_patient
from vista.shared.llm import LLMConfig, open_gateway
from vista.shared.testing.scripted import ScriptedBackend

CONFIG = PipelineConfig()


def worst_tokens(limits, role):
    return math.ceil(worst_case_chars(getattr(output_models(limits), role)) / STANDARD_CHARS_PER_TOKEN)


@pytest.mark.parametrize("model, limit", [("gpt-4o", 16_384), ("gpt-4o-mini-2024-07-18", 16_384), ("gpt-4.1-nano", 32_768),
                                          ("o1-mini", 65_536), ("o1", 100_000), ("gpt-4-turbo-preview", 4_096),
                                          ("gpt-4", 8_192), ("openai/gpt-5-mini", 128_000), ("llama-3.1-70b", None)])
def test_known_output_limits(model, limit):
    assert model_output_tokens(model) == limit


def test_gpt41_asks_each_agent_for_its_worst_case_with_the_standard_bounds():
    facts = GatewayFacts("gpt-4.1", 1_047_576, 1024, "o200k_base")
    plan = answer_fit(CONFIG, facts)
    assert plan.limits == STANDARD_LIMITS
    for role in ROLES:
        assert plan.tokens_for(role) == worst_tokens(STANDARD_LIMITS, role) <= 32_768
    assert plan.tokens_for("manager") > 1024 * 10  # far above the old 1,024 default that cut GPT-4-class answers
    assert plan.reserve == max(plan.tokens_for(r) for r in ROLES)
    fit = context_fit(CONFIG, facts, plan)
    assert fit.output_tokens == plan.reserve and fit.encoding == "o200k_base"
    assert fit.input_tokens == int(1_047_576 * 0.8) - plan.reserve


def test_gpt4o_output_limit_shrinks_the_standard_bounds_a_little():
    plan = answer_fit(CONFIG, GatewayFacts("gpt-4o", 128_000, 1024, "o200k_base"))
    assert plan.limits == fit_limits(STANDARD_LIMITS, int(16_384 * STANDARD_CHARS_PER_TOKEN))
    assert 0.75 * STANDARD_LIMITS.summary_chars <= plan.limits.summary_chars < STANDARD_LIMITS.summary_chars
    assert all(plan.tokens_for(role) == worst_tokens(plan.limits, role) <= 16_384 for role in ROLES)


def test_a_low_cap_shrinks_the_bounds_until_every_answer_fits():
    facts = GatewayFacts("my-vllm-model", 32_768, 1024)  # unknown output limit: half the planned context
    cap = answer_cap(CONFIG, facts)
    assert cap == int(32_768 * 0.8) // 2
    plan = answer_fit(CONFIG, facts)
    assert plan.limits == fit_limits(STANDARD_LIMITS, int(cap * STANDARD_CHARS_PER_TOKEN))
    assert plan.limits.name.startswith("standard-") and plan.limits.summary_chars < STANDARD_LIMITS.summary_chars
    for role in ROLES:
        assert plan.tokens_for(role) == worst_tokens(plan.limits, role) <= cap
    old_gpt4 = answer_fit(PipelineConfig(output_limits="standard"), GatewayFacts("gpt-4-turbo", 128_000, 1024))
    assert max(n for _, n in old_gpt4.tokens) <= 4_096


def test_reasoning_models_get_the_whole_cap_and_fixed_mode_keeps_the_settings():
    reasoning = answer_fit(CONFIG, GatewayFacts("o3", 200_000, 1024, "o200k_base", reasoning=True))
    assert {n for _, n in reasoning.tokens} == {min(100_000, int(200_000 * 0.8) // 2)}
    fixed = answer_fit(PipelineConfig(answer_tokens="fixed"), GatewayFacts("gpt-4o", 128_000, 4096))
    assert fixed.tokens == () and fixed.reserve == 4096 and fixed.limits == STANDARD_LIMITS


def test_small_contexts_keep_the_compact_bounds_fitted_to_the_settings_max_tokens():
    plan = answer_fit(CONFIG, GatewayFacts("smollm2", 8192, 1024))
    assert plan.limits == fit_limits(COMPACT_LIMITS, 1024) and plan.tokens == () and plan.reserve == 1024


def test_gateway_facts_use_the_models_encoding_and_reasoning_field():
    async def go(llm):
        async with open_gateway(llm, backend=ScriptedBackend([], context_window=128_000)) as gateway:
            return await gateway_facts(gateway, CONFIG)
    facts = asyncio.run(go(LLMConfig(model="gpt-4.1-mini", max_tokens_field="max_completion_tokens")))
    assert facts.encoding == "o200k_base" and facts.reasoning and facts.context_tokens == 128_000
    assert asyncio.run(go(LLMConfig(model="llama-3.1-8b"))).encoding == "cl100k_base"


def test_every_call_asks_for_its_agents_max_tokens():
    script = Script(preprocessor=keep_labs_and_notes, worker=worker_answer, manager=manager_answer())

    async def go():
        backend = ScriptedBackend(script, context_window=128_000)
        async with open_gateway(LLMConfig(model="gpt-4o", max_retries=0), backend=backend) as gateway:
            config = PipelineConfig(variant="two_stage", chunk_tokens=500)
            return await run_patient(lung_patient(n_visits=12), CATALOG, gateway, config, prediction_time=PREDICTION)

    result = asyncio.run(go())
    assert result.status == "ok"
    plan = answer_fit(CONFIG, GatewayFacts("gpt-4o", 128_000, 1024))
    asked = {(agent, request.max_tokens) for agent, request in script.seen}
    assert asked == {("preprocessor", plan.tokens_for("preprocessor")), ("worker", plan.tokens_for("worker")),
                     ("manager", plan.tokens_for("manager"))}
