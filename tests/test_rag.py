"""The BM25 RAG baseline: chunking, retrieval, passage selection and the display flow on a scripted model."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re

import pytest
from pydantic import ValidationError

from toa_fixtures import toa_graph
from vista.display import DEFAULT_GROUP_SIZE, DisplayConfig, STRUCTURED_VARIABLES, load_variables
from vista.shared.llm import ErrorKind, LLMConfig, LLMGateway, open_gateway
from vista.shared.llm.errors import BackendError
from vista.shared.testing.scripted import ScriptedBackend
from vista.rag import (
    RagConfig,
    RagError,
    RagIndex,
    RecordChunk,
    build_index,
    build_rag_display,
    chunk_record,
    generate_rag_display,
    rag_hash,
    record_lines,
    select_passages,
    window_lines,
)
from vista.rag.index import Hit
from vista.shared.tokens import count_tokens

SPECS = load_variables()


def gateway(backend: ScriptedBackend, **overrides) -> LLMGateway:
    return open_gateway(LLMConfig(**({"model": "scripted-model", "max_retries": 0, "max_reasks": 0} | overrides)),
                        backend=backend)


def run(coro):
    return asyncio.run(coro)


def schema_keys(request) -> list[str]:
    return list(request.response_format["json_schema"]["schema"]["required"])


def answer_all(refs_for=lambda key: ["e7"], value_for=lambda key: f"value of {key}"):
    """A scripted model answering every variable of the request's schema."""
    def script(request):
        return json.dumps({k: {"value": value_for(k), "source_refs": refs_for(k)} for k in schema_keys(request)})
    return script


# ------------------------------------------------------------------------------------------------ config + chunks
def test_config_rejects_overlap_not_below_size_and_matches_display_defaults():
    with pytest.raises(ValidationError, match="overlap"):
        RagConfig(chunk_size=100, overlap=100)
    config, display = RagConfig(), DisplayConfig()
    assert config.group_size == DEFAULT_GROUP_SIZE == display.group_size
    assert (config.value_max_chars, config.max_cited) == (display.value_max_chars, display.max_cited)


@pytest.mark.parametrize("unit,size,overlap", [("chars", 300, 80), ("tokens", 60, 15), ("chars", 120, 0)])
def test_chunks_cover_every_line_within_budget_with_overlap(unit, size, overlap):
    graph = toa_graph()
    config = RagConfig(chunk_size=size, chunk_unit=unit, overlap=overlap)
    chunks = chunk_record(graph, config)
    lines, _ = record_lines(graph)
    measure = len if unit == "chars" else count_tokens
    shown = [line for c in chunks for line in c.text.splitlines()]
    assert set(lines) <= set(shown), "every serialized line is in some chunk"
    for chunk in chunks:
        assert sum(measure(line + "\n") for line in chunk.text.splitlines()) <= size
    if overlap:
        repeated = [set(a.text.splitlines()) & set(b.text.splitlines()) for a, b in zip(chunks, chunks[1:])]
        assert any(repeated), "consecutive chunks share their boundary lines"
    else:
        assert len(shown) == len(lines)
    every_id = {e.event_id for e in graph.events_in_order()}
    assert set().union(*(c.event_ids for c in chunks)) == every_id
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert all(c.start <= c.end for c in chunks) and chunks[0].start == dt.date(2020, 1, 6)


def test_an_over_long_line_is_cut_and_every_piece_keeps_its_event_id():
    line = "[e42] 2020-01-01 NOTE " + " ".join(f"word{k}" for k in range(200))
    chunks = window_lines([line], [dt.date(2020, 1, 1)], RagConfig(chunk_size=120, chunk_unit="chars", overlap=0))
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.text.startswith("[e42] ") and len(chunk.text) <= 120 and chunk.event_ids == {"e42"}
    words = " ".join(c.text[len("[e42] "):].strip() for c in chunks)
    assert words == line[len("[e42] "):]


def test_a_patient_without_clinical_events_is_a_clear_error():
    from vista.graph import build_graph
    from vista.shared.records import CodeCatalog, Event, PatientRecord

    visits_only = [Event("e0", None, "GENDER//F", None, None), Event("e1", dt.datetime(2020, 1, 1), "ENCOUNTER//AMB", None, None)]
    empty = build_graph(PatientRecord(9, "data/train/0.parquet", 0, visits_only), CodeCatalog())
    with pytest.raises(RagError, match="patient 9"):
        chunk_record(empty)


# ------------------------------------------------------------------------------------------------ index + selection
def test_bm25_ranks_the_chunk_with_the_question_words_first_and_skips_zero_scores():
    config = RagConfig(chunk_size=60, chunk_unit="chars", overlap=0)
    index = build_index(toa_graph(), config)
    hits = index.search("Histology: adenocarcinoma or squamous cell?", k=3)
    assert hits and "adenocarcinoma" in hits[0].chunk.text
    assert [h.rank for h in hits] == list(range(len(hits))) and all(h.score > 0 for h in hits)
    assert index.search("xylophone quartz", k=3) == []
    assert len(index.search("encounter", k=1000)) <= len(index)


def test_stemming_matches_inflected_words_and_can_be_turned_off():
    day = dt.date(2020, 1, 1)
    chunks = [RecordChunk(0, "[e1] smokes daily, biopsies done", frozenset({"e1"}), day, day),
              RecordChunk(1, "[e2] hemoglobin normal", frozenset({"e2"}), day, day)]
    stemmed = RagIndex.build(1, chunks)
    plain = RagIndex.build(1, chunks, stemmer="none")
    assert [h.chunk.index for h in stemmed.search("smoking biopsy", k=2)] == [0]
    assert plain.search("smoking biopsy", k=2) == []


def test_select_passages_merges_by_rank_within_the_budget_in_record_order():
    day = dt.date(2020, 1, 1)
    c = [RecordChunk(i, f"t{i}", frozenset(), day, day) for i in range(5)]
    first = [Hit(c[4], 3.0, 0), Hit(c[2], 2.0, 1), Hit(c[0], 1.0, 2)]
    second = [Hit(c[1], 3.0, 0), Hit(c[4], 2.0, 1)]
    chosen, left = select_passages([first, second], [10] * 5, None)
    assert [x.index for x in chosen] == [0, 1, 2, 4] and left == 0
    chosen, left = select_passages([first, second], [10] * 5, 25)
    assert [x.index for x in chosen] == [1, 4] and left == 2  # both rank-0 chunks first, then nothing else fits


# ------------------------------------------------------------------------------------------------ display flow
def shown_ids(request) -> list[str]:
    return sorted(set(re.findall(r"\[(e\d+)\]", request.messages[1].content)), key=lambda r: int(r[1:]))


def test_rag_display_matches_the_display_contract_and_validates_refs():
    graph = toa_graph()
    all_ids = {e.event_id for e in graph.events_in_order()}

    def script(request):
        shown = shown_ids(request)
        unseen = sorted(all_ids - set(shown))[:1]  # a real graph event the call was not shown
        cited = [*shown[:1], "e999", *shown[:1], *unseen]
        return json.dumps({k: {"value": f"  value of {k} ", "source_refs": cited} for k in schema_keys(request)})

    backend = ScriptedBackend(script)
    build = run(generate_rag_display(graph, gateway(backend), RagConfig(chunk_size=120, chunk_unit="chars", overlap=30,
                                                                        top_k=1)))
    display = build.display
    assert display.method == "rag" and display.model == "scripted-model" and display.subject_id == 21
    assert [v.key for v in display.values] == [s.key for s in SPECS]
    assert display.value_of("demographics") == STRUCTURED_VARIABLES["demographics"](graph)  # same as VISTA's
    histology = display.value_of("histology")
    assert histology.origin == "llm" and histology.value == "value of histology" and histology.timeline_refs == ()
    assert len(histology.source_refs) == 1 and graph.has_event(histology.source_refs[0])  # retrieved for histology
    asked = len(SPECS) - len(STRUCTURED_VARIABLES)
    assert build.stats.dropped_refs >= asked  # e999 always; the unseen real id whenever one exists
    groups = -(-asked // DEFAULT_GROUP_SIZE)
    assert display.calls == len(backend.requests) == groups == build.stats.groups
    assert build.stats.queries == asked and build.stats.chunks == len(chunk_record(graph, RagConfig(
        chunk_size=120, chunk_unit="chars", overlap=30)))
    assert build.stats.dropped_refs == 2 * asked  # with top_k=1 every call misses some graph events
    assert display.prompt_tokens == 10 * groups and display.completion_tokens == 5 * groups


def test_each_call_shows_the_excerpts_retrieved_for_its_variables():
    graph = toa_graph()
    backend = ScriptedBackend(answer_all())
    run(build_rag_display(graph, gateway(backend), RagConfig(chunk_size=120, chunk_unit="chars", overlap=0, top_k=2)))
    histology_call = next(r for r in backend.requests if "histology" in schema_keys(r))
    system_text, user_text = histology_call.messages[0].content, histology_call.messages[1].content
    assert "- histology (Histology):" in system_text and "{variables}" not in system_text
    assert "adenocarcinoma" in user_text
    excerpts = re.findall(r"--- excerpt (\d+): (\S+) to (\S+) ---", user_text)
    assert 1 <= len(excerpts) <= 2 * DEFAULT_GROUP_SIZE
    starts = [e[1] for e in excerpts]
    assert starts == sorted(starts), "excerpts are shown in date order"


def test_a_failed_call_marks_its_variables_failed_and_the_display_is_still_made():
    graph = toa_graph()
    failing = {"histology"}

    def script(request):
        if failing & set(schema_keys(request)):
            return BackendError(ErrorKind.SERVER_ERROR, "boom", status=500)
        return answer_all(refs_for=lambda key: shown_ids(request)[:1])(request)  # cited: not shown as Not found

    build = run(generate_rag_display(graph, gateway(ScriptedBackend(script)), RagConfig(chunk_unit="chars",
                                                                                       chunk_size=200, overlap=0)))
    failed = [v for v in build.display.values if v.origin == "failed"]
    group = next(g for g in _groups() if "histology" in g)
    assert {v.key for v in failed} == set(group)
    assert all(v.value == "Not available" and "server_error" in (v.error or "") for v in failed)
    assert build.stats.failed_calls == 1
    origins = {v.origin for v in build.display.values}  # uncited: a call shown no passage cites nothing
    assert {"structured", "llm", "failed"} <= origins <= {"structured", "llm", "uncited", "failed"}


def _groups() -> list[tuple[str, ...]]:
    asked = [s.key for s in SPECS if s.key not in STRUCTURED_VARIABLES]
    return [tuple(asked[i:i + DEFAULT_GROUP_SIZE]) for i in range(0, len(asked), DEFAULT_GROUP_SIZE)]


def test_invalid_answers_are_failures_not_silent_values():
    build = run(generate_rag_display(toa_graph(), gateway(ScriptedBackend(lambda r: '{"nope": 1}')),
                                     RagConfig(chunk_unit="chars", chunk_size=200, overlap=0)))
    assert {v.origin for v in build.display.values if v.key not in STRUCTURED_VARIABLES} == {"failed"}
    assert all("invalid_output" in (v.error or "") for v in build.display.values if v.origin == "failed")


def test_context_budget_limits_the_excerpts_sent():
    graph = toa_graph()
    backend = ScriptedBackend(answer_all())
    config = RagConfig(chunk_size=60, chunk_unit="tokens", overlap=0, top_k=10, max_context_tokens=130)
    build = run(generate_rag_display(graph, gateway(backend), config))
    for request in backend.requests:
        excerpt_text = request.messages[1].content.split("\n", 1)[1]
        assert count_tokens(excerpt_text) <= 130 + 40  # excerpt headers are not counted in the budget
    assert build.stats.passages_left_out > 0


def test_a_context_too_small_for_any_excerpt_is_a_clear_error():
    with pytest.raises(RagError, match="context"):
        run(build_rag_display(toa_graph(), gateway(ScriptedBackend(answer_all()), context_tokens=1500)))


def test_content_hash_follows_record_config_and_model():
    graph = toa_graph()
    a = gateway(ScriptedBackend(answer_all()))
    b = gateway(ScriptedBackend(answer_all()), model="other-model")
    base = rag_hash(graph, a, RagConfig())
    assert base == rag_hash(graph, a, RagConfig())
    assert base != rag_hash(graph, a, RagConfig(top_k=5))
    assert base != rag_hash(graph, b, RagConfig())
    assert base != rag_hash(graph, a, RagConfig(), SPECS[:5])
