"""The citation contract of display values: a model answer citing no event it was shown is shown, counted and scored
as "Not found", never as a fact (VISTA and the RAG baseline alike)."""

from __future__ import annotations

import asyncio
import json
import re

from display_fixtures import fake_display_model, gateway_for, schema_of, toa_timeline
from toa_fixtures import toa_graph
from vista.display import STRUCTURED_VARIABLES, TumorBoardDisplay, VariableValue, generate_display, load_variables
from vista.display.render import citation_summary, display_markdown
from vista.evaluation import evaluate
from vista.evaluation.expected import EXAMPLE_TRUTH, expected_values
from vista.shared.llm import LLMConfig, open_gateway
from vista.shared.testing.scripted import ScriptedBackend
from vista.rag import RagConfig, generate_rag_display
from vista.shared.synth.ground_truth import OncologyRecord

SPECS = load_variables()
ASKED = [s.key for s in SPECS if s.key not in STRUCTURED_VARIABLES]


def build(script, timeline=None):
    async def go():
        return await generate_display(toa_graph(), timeline or toa_timeline(), gateway_for(ScriptedBackend(script)))
    return asyncio.run(go())


def test_a_timeline_without_events_gives_not_found_values_counted_never_facts():
    """The defect: 0 timeline events, 17 answers citing ids that do not exist, all kept as facts with error null."""
    empty = toa_timeline(events=[])
    built = build(fake_display_model(refs=("t0", "t3")), empty)
    display = built.display
    assert len(ASKED) == 17
    for key in ASKED:
        value = display.value_of(key)
        assert (value.value, value.origin, value.uncited_answer) == ("Not found", "uncited", f"{key} value")
        assert value.timeline_refs == () and value.source_refs == ()
        assert value.error == "cited t0, t3, not an event of the timeline shown; shown as Not found"
    assert display.uncited_values == built.stats.uncited_values == 17 and display.uncited_keys() == ASKED
    assert all(display.value_of(k).origin == "structured" for k in STRUCTURED_VARIABLES)
    markdown = display_markdown(display)
    assert "**UNCITED: 17 value(s) shown as Not found" in markdown
    assert "histology value" not in markdown  # the model's words are never shown as the value
    assert "17 shown as Not found (uncited)" in citation_summary(display)
    summary_prompt = next(r for r in built_requests(empty) if schema_of(r)[0] == "SummaryAnswer").messages[-1].content
    assert "- Histology: Not found" in summary_prompt  # the note is not written from uncited answers either
    stored = TumorBoardDisplay.model_validate_json(display.model_dump_json())
    assert stored.uncited_values == 17 and stored.value_of("stage").uncited_answer == "stage value"


def built_requests(timeline):
    backend = ScriptedBackend(fake_display_model(refs=("t0", "t3")))

    async def go():
        await generate_display(toa_graph(), timeline, gateway_for(backend))
    asyncio.run(go())
    return backend.requests


def test_a_value_citing_nothing_is_not_found_but_not_documented_needs_no_citation():
    def script(request):
        name, schema = schema_of(request)
        if name == "SummaryAnswer":
            return json.dumps({"note": "Adenocarcinoma.", "timeline_refs": ["t2"]})
        answers = {k: {"value": f"{k} value", "timeline_refs": []} for k in schema["properties"]}
        answers.update({k: {"value": "Not documented.", "timeline_refs": []} for k in ("allergies",) if k in answers})
        answers.update({k: {"value": "Adenocarcinoma", "timeline_refs": ["t2"]} for k in ("histology",)
                        if k in answers})
        return json.dumps(answers)

    display = build(script).display
    assert display.value_of("histology").value == "Adenocarcinoma" and display.value_of("histology").origin == "llm"
    allergies = display.value_of("allergies")
    assert (allergies.value, allergies.origin, allergies.uncited) == ("Not documented.", "llm", False)
    stage = display.value_of("stage")
    assert stage.value == "Not found" and stage.error == "no id of the timeline cited; shown as Not found"
    assert display.uncited_values == len(ASKED) - 2


def test_a_rag_value_citing_no_shown_passage_is_not_found_too():
    graph = toa_graph()

    def script(request):
        shown = sorted(set(re.findall(r"\[(e\d+)\]", request.messages[1].content)))
        keys = list(schema_of(request)[1]["properties"])
        return json.dumps({k: {"value": f"{k} value", "source_refs": shown[:1] if k == "histology" else ["e999"]}
                           for k in keys})

    gateway = open_gateway(LLMConfig(model="m", max_retries=0, max_reasks=0), backend=ScriptedBackend(script))
    display = asyncio.run(generate_rag_display(graph, gateway, RagConfig(chunk_size=200, chunk_unit="chars",
                                                                         overlap=0))).display
    assert display.value_of("histology").origin == "llm"
    stage = display.value_of("stage")
    assert (stage.value, stage.origin, stage.uncited_answer) == ("Not found", "uncited", "stage value")
    assert "cited e999, not an event of the passages shown" in stage.error
    assert display.uncited_values == len(ASKED) - 1


def _display(values: dict[str, VariableValue]) -> TumorBoardDisplay:
    rest = [VariableValue(key=s.key, value="Not documented", origin="llm") for s in SPECS if s.key not in values]
    return TumorBoardDisplay(subject_id=2, method="vista", model="writer", content_hash="h",
                             values=tuple(values.get(s.key) or next(v for v in rest if v.key == s.key) for s in SPECS))


def test_the_evaluation_scores_an_uncited_answer_as_not_found_and_counts_it():
    truth = OncologyRecord.model_validate_json(EXAMPLE_TRUTH.replace("\n", ""))
    right = expected_values(truth, SPECS)["diagnosis_date"].reference
    uncited = VariableValue(key="diagnosis_date", value="Not found", origin="uncited", uncited_answer=right,
                            error="no id of the timeline cited; shown as Not found")
    legacy = VariableValue(key="diagnosis_date", value=right, origin="llm")  # a display stored before the rule
    cited = VariableValue(key="diagnosis_date", value=right, origin="llm", timeline_refs=("t2",), source_refs=("e11",))
    judge = open_gateway(LLMConfig(model="judge", max_retries=0), backend=ScriptedBackend(
        lambda request: json.dumps({"score": 2, "rationale": "scripted"})))
    scores = {}
    for name, value in (("uncited", uncited), ("legacy", legacy), ("cited", cited)):
        report = asyncio.run(evaluate([_display({"diagnosis_date": value})], {truth.subject_id: truth}, judge,
                                      n_resamples=50))
        item = next(i for i in report.items if i.key == "diagnosis_date")
        scores[name] = (item.value, item.score, item.uncited, report.variable("vista", "diagnosis_date").uncited)
        if name != "cited":
            assert "shown and scored as Not found: vista 1" in report.to_markdown()
            assert "1 uncited (scored as Not found)" in report.to_markdown()
    assert scores["cited"] == (right, 10, False, 0)
    assert scores["uncited"] == scores["legacy"] == ("Not found", 0, True, 1)
