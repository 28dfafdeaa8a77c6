"""One question answered (and verified) by the real embedded SmolLM2 model over the hand-made lung-cancer timeline.

It proves the machinery with a real model (constrained decoding of both schemas, id checks, the verify path), not
answer quality: SmolLM2-135M's content is poor, so only invariants are asserted.
"""

from __future__ import annotations

import asyncio

import pytest

from test_query import make_timeline
from toa_fixtures import toa_graph
from vista.shared.llm import LLMConfig, open_gateway
from vista.shared.llm.config import EMBEDDED_MODEL_NAME
from vista.query import QueryConfig, ask, verify_answer

pytestmark = [pytest.mark.llm, pytest.mark.slow]


def test_real_model_answers_with_checked_citations_and_verifies():
    timeline, graph = make_timeline(), toa_graph()
    config = QueryConfig(max_tokens=200, verify_max_tokens=200, answer_chars=160, explanation_chars=160, max_citations=4)

    async def go():
        async with open_gateway(LLMConfig(max_reasks=1, max_retries=0)) as gateway:
            answer = await ask("When did pembrolizumab start?", timeline, graph, gateway, config, verify=True)
            # the model may cite nothing (then nothing is verified): run the verifier on a known citation as well
            verdict, record = await verify_answer("When did pembrolizumab start?", "It started on 2020-04-01.",
                                                  [timeline.events[4]], graph, gateway, config)
            return gateway, answer, verdict, record

    gateway, answer, verdict, record = asyncio.run(go())
    assert answer.model == EMBEDDED_MODEL_NAME and answer.events_shown == len(timeline.events)
    assert answer.status != "failed", answer.error
    known = {e.event_id: e for e in timeline.events}
    assert all(known[e.event_id] == e for e in answer.cited)  # whatever it cited, only real timeline events survive
    assert not {e.event_id for e in answer.cited} & set(answer.dropped_citations)
    assert answer.source_refs == tuple(dict.fromkeys(r for e in answer.cited for r in e.source_event_refs))
    check = answer.verification
    assert check is not None and set(check.evidence_event_ids) <= set(check.sources_checked) <= set(answer.source_refs)
    assert answer.usage.calls + 1 == len(gateway.ledger) and answer.usage.calls == 1 + bool(check.sources_checked)
    assert record is not None and record.ok and record.agent == "query_verifier", record.error_message
    assert verdict.verdict in ("supported", "not_supported") and verdict.sources_checked == ("e13",)
    assert set(verdict.evidence_event_ids) <= {"e13"} and len(verdict.explanation) <= 160
    assert all(r.prompt_tokens > 0 for r in gateway.ledger.records)
