"""Display generation through the gateway with a scripted "model": structured values, grouped calls, cited-id
checks, failed calls recorded, the summary note, call and token counts."""

from __future__ import annotations

import asyncio
import math

import pytest

from display_fixtures import fake_display_model, gateway_for, schema_of, toa_timeline
from toa_fixtures import toa_graph
from vista.display import (
    DisplayConfig,
    STRUCTURED_VARIABLES,
    DisplayError,
    build_display,
    generate_display,
    load_variables,
)
from vista.display.generate import VARIABLES_AGENT, plan_groups
from vista.shared.llm import ErrorKind, LLMCallFailed
from vista.shared.llm.errors import BackendError, LLMCallError
from vista.shared.testing.scripted import Delayed, ScriptedBackend

SPECS = load_variables()
ASKED = [s.key for s in SPECS if s.key not in STRUCTURED_VARIABLES]


def run(coro_factory):
    return asyncio.run(coro_factory())


def build(backend, config=DisplayConfig(), timeline=None, graph=None, **overrides):
    async def go():
        gateway = gateway_for(backend, **overrides)
        return await generate_display(graph or toa_graph(), timeline or toa_timeline(), gateway, config)
    return run(go)


def test_values_follow_the_variable_file_and_demographics_come_from_the_graph():
    backend = ScriptedBackend(fake_display_model())
    display = build(backend).display
    assert [v.key for v in display.values] == [s.key for s in SPECS]
    demo = display.value_of("demographics")
    assert demo.origin == "structured" and demo.timeline_refs == ()
    # born 1950-01-01, latest event 2020-09-01
    assert demo.value == "70 years, male, race not documented, ethnicity not documented"
    assert set(demo.source_refs) == {"e0", "e1", "e19"}  # sex row, birth, the latest event
    assert all(display.value_of(k).origin == "llm" for k in ASKED)
    assert display.method == "vista" and display.model == "gpt-4.1-mini"


def test_unknown_timeline_ids_are_dropped_and_counted_and_values_trace_to_graph_events():
    backend = ScriptedBackend(fake_display_model(refs=("t2", "t99", "t2", "t4")))
    built = build(backend)
    graph = toa_graph()
    for key in ASKED:
        value = built.display.value_of(key)
        assert value.timeline_refs == ("t2", "t4")  # t99 dropped, the repeated t2 kept once
        assert value.source_refs == ("e9", "e11")  # union of t2's (e9, e11) and t4's (e11), in order
        assert all(graph.has_event(r) for r in value.source_refs)
    assert built.display.summary_refs == ("t5",)  # t42 dropped
    assert built.stats.dropped_refs == len(ASKED) + 1


def test_ids_the_call_was_not_shown_cannot_be_cited():
    backend = ScriptedBackend(fake_display_model(refs=("t0", "t2")))
    built = build(backend, DisplayConfig(max_events=3))  # shows the tumor-board facts t3 (diagnosis), t2, t4
    prompt = backend.requests[0].messages[-1].content
    assert "[t2]" in prompt and "[t4]" in prompt and "[t0]" not in prompt and "[t8]" not in prompt
    assert "6 events are not shown" in prompt
    assert built.display.value_of("histology").timeline_refs == ("t2",)
    assert built.stats.dropped_refs == len(ASKED) + 2  # t0 in every variable, t5 and t42 in the note


def test_variables_are_asked_in_groups_concurrently_and_calls_and_tokens_are_counted():
    answer = fake_display_model()
    backend = ScriptedBackend(lambda request: Delayed(0.05, answer(request)), prompt_tokens=100, completion_tokens=20)
    config = DisplayConfig(group_size=4)
    display = build(backend, config, max_concurrency=8).display
    groups = math.ceil(len(ASKED) / 4)
    assert len(backend.requests) == groups + 1 and display.calls == groups + 1
    assert (display.prompt_tokens, display.completion_tokens) == (100 * (groups + 1), 20 * (groups + 1))
    assert backend.max_in_flight > 1
    asked = [list(schema_of(r)[1]["properties"]) for r in backend.requests if schema_of(r)[0] == "VariablesAnswer"]
    assert sorted(k for keys in asked for k in keys) == sorted(ASKED) and max(map(len, asked)) == 4
    prefixes = set()
    for request in backend.requests[:groups]:  # each prompt asks its own variables only, over the whole timeline
        keys = schema_of(request)[1]["properties"]
        text = request.messages[-1].content
        timeline, _, asked_part = text.partition("Variables to answer:")
        assert all(f"- {k} (" in asked_part for k in keys)
        assert not any(f"- {k} (" in text for k in ASKED if k not in keys)
        assert "[t0] 2020-01-06 background/smoking: Former smoker" in timeline
        prefixes.add((request.messages[0].content, timeline))
    assert len(prefixes) == 1  # every group's prompt starts the same way (prefix caches reuse the timeline)


def test_summary_sees_the_filled_variables_and_can_be_switched_off():
    backend = ScriptedBackend(fake_display_model())
    display = build(backend).display
    summary_prompt = backend.requests[-1].messages[-1].content
    assert schema_of(backend.requests[-1])[0] == "SummaryAnswer"
    assert "- Histology: histology value" in summary_prompt and "Oncology timeline:" in summary_prompt
    assert display.summary_note.startswith("Adenocarcinoma")
    backend = ScriptedBackend(fake_display_model())
    display = build(backend, DisplayConfig(summary_note=False)).display
    assert display.summary_note == "" and display.summary_refs == ()
    assert all(schema_of(r)[0] == "VariablesAnswer" for r in backend.requests)


def test_a_failed_call_leaves_its_variables_not_available_and_the_display_is_still_made():
    answer = fake_display_model()

    def script(request):
        name, schema = schema_of(request)
        if "stage" in schema["properties"] or name == "SummaryAnswer":
            return BackendError(ErrorKind.HTTP_ERROR, "bad request", status=400)
        return answer(request)

    backend = ScriptedBackend(script)
    built = build(backend, DisplayConfig(group_size=3))
    failed_group = next(g for g in plan_groups(SPECS, 3) if any(s.key == "stage" for s in g))
    for spec in failed_group:
        value = built.display.value_of(spec.key)
        assert (value.origin, value.value, value.timeline_refs) == ("failed", "Not available", ())
        assert "http_error" in value.error and "400" in value.error
    others = [k for k in ASKED if k not in {s.key for s in failed_group}]
    assert all(built.display.value_of(k).origin == "llm" for k in others)
    assert built.display.summary_note == "" and "http_error" in built.stats.summary_error
    assert built.stats.failed_calls == 2
    assert built.display.calls == len(backend.requests)  # failed calls are still calls


def test_invalid_answers_count_as_failed_after_the_reasks():
    backend = ScriptedBackend(lambda request: '{"nonsense": 1}')
    built = build(backend, DisplayConfig(summary_note=False), max_reasks=1)
    assert all(built.display.value_of(k).origin == "failed" for k in ASKED)
    assert all("invalid_output" in built.display.value_of(k).error for k in ASKED)
    assert len(backend.requests) == 2 * len(plan_groups(SPECS, DisplayConfig().group_size))


class RaisingGateway:
    """A gateway whose calls raise `LLMCallFailed` (what `LLMResult.unwrap()` callers see)."""

    def __init__(self, inner):
        self.inner = inner
        self.config = inner.config
        self.context_tokens = inner.context_tokens

    async def complete(self, messages, response_model, *, agent, patient_id=None, max_tokens=None):
        if agent == VARIABLES_AGENT:
            raise LLMCallFailed(LLMCallError(ErrorKind.TIMEOUT, "no answer", attempts=3), agent=agent, patient_id=None)
        return await self.inner.complete(messages, response_model, agent=agent, patient_id=patient_id,
                                         max_tokens=max_tokens)


def test_a_raised_llm_call_failed_is_recorded_like_a_failed_result():
    backend = ScriptedBackend(fake_display_model())

    async def go():
        return await build_display(toa_graph(), toa_timeline(), RaisingGateway(gateway_for(backend)))

    display = run(go)
    assert all(display.value_of(k).origin == "failed" and "timeout" in display.value_of(k).error for k in ASKED)
    assert display.value_of("demographics").origin == "structured"
    assert display.summary_note and display.calls == 1  # only the summary call reached the model


def test_a_timeline_of_another_patient_or_graph_is_refused():
    backend = ScriptedBackend(fake_display_model())
    other = toa_timeline().model_copy(update={"subject_id": 99})
    with pytest.raises(DisplayError, match="subject 21: the timeline given is subject 99"):
        build(backend, timeline=other)
    bad_event = toa_timeline().events[0].model_copy(update={"source_event_refs": ("e3", "e500")})
    foreign = toa_timeline().model_copy(update={"events": (bad_event, *toa_timeline().events[1:])})
    with pytest.raises(DisplayError, match=r"subject 21: timeline event t0 field source_event_refs cites \['e500'\]"):
        build(backend, timeline=foreign)
    assert backend.requests == []


def test_an_empty_timeline_still_gives_a_display():
    backend = ScriptedBackend(fake_display_model(refs=()))
    empty = toa_timeline().model_copy(update={"events": (), "episodes": ()})
    display = build(backend, timeline=empty).display
    assert "Timeline of 0 events" in backend.requests[0].messages[-1].content
    assert len(display.values) == len(SPECS) and display.value_of("histology").timeline_refs == ()


def test_any_variable_key_works_as_an_answer_field(tmp_path):
    path = tmp_path / "vars.toml"
    path.write_text('[[variable]]\nkey = "json"\nlabel = "J"\nquestion = "q1"\ncomparison = "judge"\n\n'
                    '[[variable]]\nkey = "model_config"\nlabel = "M"\nquestion = "q2"\ncomparison = "exact"\n')
    backend = ScriptedBackend(fake_display_model())
    display = build(backend, DisplayConfig(variables=path, summary_note=False)).display
    assert [(v.key, v.value) for v in display.values] == [("json", "json value"),
                                                          ("model_config", "model_config value")]
