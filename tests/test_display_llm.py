"""One real display build on the embedded SmolLM2 model over the hand-made thoracic timeline.

It proves the machinery with a real model (schema-constrained group answers, cited-id checks, summary note, store
skip), not clinical quality: SmolLM2-135M's content is poor, so only invariants are asserted.
"""

from __future__ import annotations

import asyncio

import pytest

from display_fixtures import toa_timeline
from toa_fixtures import toa_graph
from vista.display import DisplayConfig, DisplayStore, TumorBoardDisplay, load_variables
from vista.llm import LLMConfig, LLMGateway
from vista.llm.config import EMBEDDED_MODEL_NAME

pytestmark = [pytest.mark.llm, pytest.mark.slow]


def test_real_model_fills_every_variable_with_checked_citations(tmp_path):
    graph, timeline = toa_graph(), toa_timeline()
    config = DisplayConfig()  # 15 model-answered variables in groups of 3: 5 group calls + the note
    store = DisplayStore(tmp_path)

    async def go():
        async with LLMGateway(LLMConfig(max_reasks=1, max_retries=0, timeout_s=600)) as gateway:
            first = await store.build(graph, timeline, gateway, config)
            second = await store.build(graph, timeline, gateway, config)
            return gateway, first, second

    gateway, (display, built), (again, rebuilt) = asyncio.run(go())
    assert built and not rebuilt and again.calls == 0 and len(gateway.ledger.records) == 6
    assert TumorBoardDisplay.model_validate_json(display.model_dump_json()) == display
    assert display.model == EMBEDDED_MODEL_NAME and display.calls == 6
    assert display.prompt_tokens > 0 and display.completion_tokens > 0
    assert [v.key for v in display.values] == [s.key for s in load_variables()]
    events = {e.event_id: e for e in timeline.events}
    for value in display.values:
        assert value.origin in ("structured", "llm"), f"{value.key}: {value.error}"
        assert value.value.strip()
        assert all(r in events for r in value.timeline_refs)
        assert all(graph.has_event(r) for r in value.source_refs)
        if value.origin == "llm":  # source refs are exactly the union of the cited events' refs
            assert set(value.source_refs) == {r for t in value.timeline_refs for r in events[t].source_event_refs}
    assert display.summary_note.strip() and all(r in events for r in display.summary_refs)
