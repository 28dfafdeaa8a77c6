"""One real display build on the embedded SmolLM2 model over the hand-made thoracic timeline.

It proves the machinery with a real model (schema-constrained group answers, cited-id checks, summary note, store
skip), not clinical quality: SmolLM2-135M's content is poor, so only invariants are asserted.
"""

from __future__ import annotations

import asyncio

import pytest

from display_fixtures import toa_timeline
from toa_fixtures import toa_graph
from vista.display import DisplayConfig, DisplayStore, TumorBoardDisplay, generate_display, load_variables
from vista.display.generate import plan_groups, variables_view
from vista.shared.llm import LLMConfig, open_gateway
from vista.shared.llm.config import EMBEDDED_MODEL_NAME

pytestmark = [pytest.mark.llm, pytest.mark.slow]


def test_real_model_fills_every_variable_with_checked_citations(tmp_path):
    graph, timeline = toa_graph(), toa_timeline()
    config = DisplayConfig()  # the model-answered variables in groups of 3, then the note
    calls = len(plan_groups(load_variables(), config.group_size)) + 1
    store = DisplayStore(tmp_path)

    async def go():
        async with open_gateway(LLMConfig(max_reasks=1, max_retries=0, timeout_s=600)) as gateway:
            first = await store.build(graph, timeline, gateway, config)
            second = await store.build(graph, timeline, gateway, config)
            return gateway, first, second

    gateway, (display, built), (again, rebuilt) = asyncio.run(go())
    assert built and not rebuilt and again.calls == 0 and len(gateway.ledger.records) == calls
    assert TumorBoardDisplay.model_validate_json(display.model_dump_json()) == display
    assert display.model == EMBEDDED_MODEL_NAME and display.calls == calls
    assert display.prompt_tokens > 0 and display.completion_tokens > 0
    assert [v.key for v in display.values] == [s.key for s in load_variables()]
    events = {e.event_id: e for e in timeline.events}
    for value in display.values:
        assert value.origin in ("structured", "llm", "uncited"), f"{value.key}: {value.error}"
        assert value.value.strip()
        assert (value.origin == "uncited") == (value.value == "Not found" and value.uncited_answer is not None)
        assert all(r in events for r in value.timeline_refs)
        assert all(graph.has_event(r) for r in value.source_refs)
        if value.origin == "llm":  # source refs are exactly the union of the cited events' refs
            assert set(value.source_refs) == {r for t in value.timeline_refs for r in events[t].source_event_refs}
    assert display.summary_note.strip() and all(r in events for r in display.summary_refs)
    assert display.uncited_values == sum(v.origin == "uncited" for v in display.values)


WINDOW = 2048  # a quarter of SmolLM2's 8,192: the same cut and overflow check, with a quarter of the prompt to read


def test_a_long_timeline_is_fitted_to_the_embedded_models_context_window(tmp_path):
    """400 follow-up events (≈40k characters) cut to what the embedded model's context holds (loaded with a 2k
    window): the call succeeds (no context overflow: the model itself refuses a longer prompt) and the view keeps
    histology, stage and biomarkers."""
    from test_display_view import KEY_IDS, long_timeline

    variables = tmp_path / "variables.toml"
    variables.write_text('[[variable]]\nkey = "histology"\nlabel = "Histology"\nquestion = "Histological type?"\n'
                         'comparison = "judge"\n')
    config = DisplayConfig(variables=variables, summary_note=False)

    async def go():
        settings = LLMConfig(max_reasks=0, max_retries=0, timeout_s=900, max_tokens=256, n_ctx=WINDOW)
        async with open_gateway(settings) as gateway:
            view = variables_view(long_timeline(), plan_groups(load_variables(variables), config.group_size),
                                  gateway, config)
            built = await generate_display(toa_graph(), long_timeline(), gateway, config)
            return gateway, view, built

    gateway, view, built = asyncio.run(go())
    assert view.omitted > 0 and KEY_IDS <= view.shown_ids  # cut to the window, the tumor-board facts kept
    (record,) = gateway.ledger.records
    assert record.ok, record.error_message
    # the model's own count of the prompt it read: the view fills the window, and no more
    assert WINDOW // 2 < record.prompt_tokens and record.prompt_tokens + 256 <= WINDOW
    assert built.display.value_of("histology").origin in ("llm", "uncited") and built.stats.failed_calls == 0
