"""One short patient through the one-stage and the two-stage chain on the real embedded model (SmolLM2-135M).

The answers are capped at ``max_tokens=256`` (the compact bounds shrink to fit it, as for any small setting): the same
chains and checks at a third of the generated tokens of the default 1,024."""

from __future__ import annotations

import asyncio

import pytest

from test_agents_chain import PREDICTION
from test_agents_patients import CATALOG, lung_patient
from trajonco.agents.results import Variant
from trajonco.pipeline import PipelineConfig, run_patient
from vista.shared.llm import LLMConfig, open_gateway
from vista.shared.timeline import render_timeline

pytestmark = pytest.mark.llm
ANSWER_TOKENS = 256


def test_one_and_two_stage_chains_on_the_embedded_model(tmp_path):
    record = lung_patient(n_visits=2)
    timeline_ids = set(render_timeline(record, CATALOG, PREDICTION).event_ids())

    async def go():
        async with open_gateway(LLMConfig(cache_dir=tmp_path, timeout_s=300, max_tokens=ANSWER_TOKENS)) as gateway:
            results = []
            for variant in (Variant.ONE_STAGE, Variant.TWO_STAGE):
                config = PipelineConfig(variant=variant, chunk_tokens=350)
                results.append(await run_patient(record, CATALOG, gateway, config, prediction_time=PREDICTION))
            return results, gateway.ledger

    (one, two), ledger = asyncio.run(go())
    for result in (one, two):
        assert result.status == "ok", result.errors
        assert result.model == LLMConfig().model
        assert result.risk_score is not None and 1 <= result.risk_score <= 10
        assert result.summary and result.reasoning
        assert all(step.risk_level is not None for step in result.risk_trajectory)
        assert all(s.event_id in timeline_ids and s.row == record.first_row + int(s.event_id[1:])
                   for e in result.events for s in e.sources)
        assert sum(u.prompt_tokens for u in result.usage.values()) > 0
    assert one.chunks.n_chunks >= 2 and len(one.risk_trajectory) == one.chunks.n_chunks
    assert two.chunks.n_chunks == one.chunks.n_chunks
    assert 1 <= two.chunks.n_chunks_reduced <= two.chunks.n_chunks
    assert len(two.risk_trajectory) == two.chunks.n_chunks_reduced
    assert two.usage["preprocessor"].calls == two.chunks.n_chunks
    assert len(ledger.records) == sum(u.calls for r in (one, two) for u in r.usage.values())


def test_any_cancer_chain_on_the_embedded_model_names_a_possible_cancer(tmp_path):
    from trajonco.cancers import applicable_cancers
    from trajonco.any_cancer import run_any_cancer

    record = lung_patient(n_visits=3)

    async def go():
        async with open_gateway(LLMConfig(cache_dir=tmp_path, timeout_s=300, max_tokens=ANSWER_TOKENS)) as gateway:
            return await run_any_cancer(record, CATALOG, gateway, PipelineConfig(chunk_tokens=700),
                                        prediction_time=PREDICTION)

    result = asyncio.run(go())
    assert result.mode == "chain" and result.status == "ok", result.results[0].errors
    assert result.risk_score is not None and 1 <= result.risk_score <= 10
    assert result.strongest_cancer in {c.key for c in applicable_cancers(None)}  # the schema's enum holds all 15
    assert result.results[0].usage["manager"].calls == 1
