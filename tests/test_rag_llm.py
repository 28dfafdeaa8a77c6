"""One real RAG display on the embedded SmolLM2 model: proves retrieval + constrained answers + ref checks end to end.

SmolLM2-135M's clinical content is poor, so only invariants are asserted: a valid display, every cited id a real
graph event, the structured demographics untouched, calls and tokens counted.
"""

from __future__ import annotations

import asyncio

import pytest

from toa_fixtures import toa_graph
from vista.display import STRUCTURED_VARIABLES, load_variables
from vista.shared.llm import LLMConfig, open_gateway
from vista.rag import RagConfig, generate_rag_display

pytestmark = [pytest.mark.llm, pytest.mark.slow]


def test_real_model_writes_a_rag_display_citing_only_graph_events():
    graph = toa_graph()
    specs = [s for s in load_variables() if s.key in {"demographics", "histology", "stage", "biomarkers",
                                                     "performance_status", "latest_imaging", "surgery"}]
    config = RagConfig(chunk_size=120, overlap=20, top_k=2, max_tokens=400)

    async def go():
        async with open_gateway(LLMConfig(max_reasks=1, max_retries=0)) as gateway:
            return gateway, await generate_rag_display(graph, gateway, config, specs)

    gateway, build = asyncio.run(go())
    display = build.display
    assert display.method == "rag" and display.model == gateway.config.model
    assert [v.key for v in display.values] == [s.key for s in specs]
    assert display.value_of("demographics") == STRUCTURED_VARIABLES["demographics"](graph)
    assert display.calls == build.stats.groups == 2 and display.prompt_tokens > 0
    for value in display.values:
        assert all(graph.has_event(ref) for ref in value.source_refs)
        assert value.origin in {"structured", "llm", "uncited", "failed"}
        if value.origin == "llm":
            assert 0 < len(value.value) <= config.value_max_chars
    assert build.stats.passages_sent >= 1
