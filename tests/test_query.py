"""`vista.query.ask` with a scripted model: cited ids checked against the timeline shown, the verify path, failures,
context fitting and usage accounting."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re

import pytest

from toa_fixtures import toa_graph
from vista.toa.timeline_view import timeline_view
from vista.shared.llm import ErrorKind, LLMConfig, open_gateway
from vista.shared.llm.errors import BackendError
from vista.shared.testing.scripted import ScriptedBackend
from vista.shared.llm.backend import ChatRequest
from vista.query import ContextTooLongError, QueryConfig, QueryError, ask, timeline_text
from vista.shared.tokens import count_tokens
from vista.toa import ExtractionStats, PatientTimeline, TimelineEvent, load_profile, synthesize_episodes
from vista.toa.refs import graph_version, ref_fingerprints

EVENTS = [  # (id, day, type, subtype, description, refs) over toa_fixtures' graph
    ("t0", dt.date(2020, 1, 6), "background", "smoking", "Former smoker", ("e3",)),
    ("t1", dt.date(2020, 3, 2), "imaging", "ct", "CT chest: 3.1 cm right upper lobe mass", ("e6", "e7")),
    ("t2", dt.date(2020, 3, 10), "histology", "adenocarcinoma", "Adenocarcinoma on biopsy", ("e9", "e11")),
    ("t3", dt.date(2020, 3, 10), "diagnosis", "initial", "Lung cancer, right upper lobe", ("e10",)),
    ("t4", dt.date(2020, 4, 1), "systemic_therapy", "immunotherapy", "Pembrolizumab started", ("e13",)),
    ("t5", dt.date(2020, 7, 1), "progression", "radiographic", "Progression on CT", ("e16", "e17")),
    ("t6", dt.date(2020, 9, 1), "hospice", "enrolment", "Enrolled in hospice", ("e19",)),
]


def make_timeline(subject_id: int = 21) -> PatientTimeline:
    events = tuple(TimelineEvent(event_id=i, date=d, type=k, subtype=s, description=text, source_event_refs=refs)
                   for i, d, k, s, text, refs in EVENTS)
    stats = ExtractionStats(chunks=1, failed_chunks=0, proposed_events=7, kept_events=7, rejected_events=0,
                            dropped_refs=0, merged_groups=0)
    graph = toa_graph()
    return PatientTimeline(subject_id=subject_id, profile="thoracic", content_hash="h" * 64, events=events,
                           episodes=tuple(synthesize_episodes(events, load_profile())), rejected=(), stats=stats,
                           graph_hash=graph_version(graph),
                           ref_fingerprints=ref_fingerprints(graph, (r for e in events for r in e.source_event_refs)))


def scripted(answer: dict, verdict: dict | None = None, *, fail: str | None = None):
    """A backend answering AnswerDraft with ``answer`` and VerdictDraft with ``verdict`` (``fail``: that schema errors)."""

    def reply(request: ChatRequest):
        name = request.response_format["json_schema"]["name"]
        if name == fail:
            return BackendError(ErrorKind.HTTP_ERROR, "rejected", status=400)
        if name == "AnswerDraft":
            return json.dumps(answer)
        assert name == "VerdictDraft" and verdict is not None, f"unexpected call {name}"
        return json.dumps(verdict)

    return ScriptedBackend(reply)


def run(backend, question="When did immunotherapy start?", *, verify=False, config=QueryConfig(), timeline=None,
        **llm):
    async def go():
        gateway = open_gateway(LLMConfig(**({"model": "gpt-4.1-mini", "max_retries": 0, "max_reasks": 0} | llm)),
                               backend=backend)
        return await ask(question, timeline or make_timeline(), toa_graph(), gateway, config, verify=verify)
    return asyncio.run(go())


ANSWER = {"in_timeline": True, "answer": "Pembrolizumab started on 2020-04-01.", "confidence": "high",
          "cited_event_ids": ["t4", "t99", "t4", "t2"]}


def test_cited_ids_are_checked_unknown_ones_dropped_and_counted():
    backend = scripted(ANSWER)
    answer = run(backend)
    assert answer.status == "answered" and answer.answer == "Pembrolizumab started on 2020-04-01."
    assert [e.event_id for e in answer.cited] == ["t4", "t2"]
    assert answer.dropped_citations == ("t99",) and answer.dropped_count == 1
    assert answer.source_refs == ("e13", "e9", "e11")
    assert answer.model == "gpt-4.1-mini" and answer.timeline_hash == "h" * 64
    assert answer.usage.calls == 1 and (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (10, 5)
    assert answer.verification is None and answer.events_shown == 7 and answer.events_omitted == 0
    prompt = backend.requests[0].messages[-1].content  # the model reads the timeline and episodes, not the record
    assert "[t4] 2020-04-01 systemic_therapy/immunotherapy: Pembrolizumab started" in prompt
    assert "Episode ep" in prompt and "treatment line 1" in prompt
    assert "Question: When did immunotherapy start?" in prompt
    assert not re.search(r"\be\d+\b", prompt), "graph ids (the raw record) must not reach the answering model"


def test_only_events_shown_may_be_cited():
    shown = timeline_view(make_timeline(), max_events=2).shown_ids
    answer = run(scripted(ANSWER), config=QueryConfig(max_timeline_events=2))
    assert answer.events_shown == 2 and answer.events_omitted == 5
    assert [e.event_id for e in answer.cited] == [i for i in ("t4", "t2") if i in shown]
    assert answer.dropped_citations == tuple(i for i in ("t4", "t99", "t2") if i not in shown)
    assert len(answer.dropped_citations) >= 2  # t99, and t2 (a non-anchor event, cut first)


def test_not_in_timeline_and_uncited_answers_are_flagged_and_not_verified():
    backend = scripted({"in_timeline": False, "answer": "The timeline does not record EGFR testing.",
                        "confidence": "low", "cited_event_ids": []})
    answer = run(backend, "Was EGFR tested by NGS?", verify=True)
    assert answer.status == "not_in_timeline" and answer.cited == ()
    assert answer.verification.verdict == "not_checked" and len(backend.requests) == 1 and answer.usage.calls == 1
    uncited = run(scripted({"in_timeline": True, "answer": "2020-04-01", "confidence": "medium",
                            "cited_event_ids": ["t42"]}), verify=True)
    assert uncited.status == "uncited" and uncited.dropped_citations == ("t42",)
    assert uncited.verification.verdict == "not_checked" and uncited.source_refs == ()


def test_verify_reads_the_opened_sources_and_keeps_only_shown_evidence_ids():
    verdict = {"supported": True, "evidence_event_ids": ["e13", "e4", "e11"], "explanation": "Infusion row on 2020-04-01."}
    backend = scripted(ANSWER, verdict)
    answer = run(backend, verify=True)
    check = answer.verification
    assert check.verdict == "supported" and check.explanation == "Infusion row on 2020-04-01."
    assert check.sources_checked == ("e13", "e9", "e11") and check.sources_not_shown == 0
    assert check.evidence_event_ids == ("e13", "e11") and check.dropped_ids == ("e4",)
    assert answer.usage.calls == 2 and answer.usage.prompt_tokens == 20
    prompt = backend.requests[1].messages[-1].content
    assert "Answer: Pembrolizumab started on 2020-04-01." in prompt
    assert "[e13] 2020-04-01 08:00 RXNORM//1736854 pembrolizumab" in prompt
    assert "[e11]   Comment: EGFR negative, PD-L1 80%." in prompt  # a note's text lines, led by its id
    assert "[e4]" not in prompt and "data/train" not in prompt


def test_verify_reports_not_supported_and_caps_the_sources():
    verdict = {"supported": False, "evidence_event_ids": ["e13"], "explanation": "No date matches."}
    answer = run(scripted(ANSWER, verdict), verify=True, config=QueryConfig(max_verify_sources=1))
    assert answer.verification.verdict == "not_supported"
    assert answer.verification.sources_checked == ("e13",) and answer.verification.sources_not_shown == 2


def test_failed_calls_are_reported_not_raised():
    failed = run(scripted(ANSWER, fail="AnswerDraft"), verify=True)
    assert failed.status == "failed" and failed.answer == "" and failed.cited == ()
    assert failed.error.startswith("http_error") and failed.usage.failed_calls == 1
    unverified = run(scripted(ANSWER, fail="VerdictDraft"), verify=True)
    assert unverified.status == "answered" and unverified.verification.verdict == "not_checked"
    assert unverified.verification.error.startswith("http_error") and unverified.usage.calls == 2


def test_the_timeline_is_cut_to_the_context_window_or_refused():
    long_timeline = make_timeline().model_copy(update={"events": tuple(
        e.model_copy(update={"description": e.description + " " + "detail " * 25}) for e in make_timeline().events)})
    full = run(scripted(ANSWER), timeline=long_timeline)
    assert full.events_omitted == 0
    small = QueryConfig(max_tokens=300)
    backend = scripted(ANSWER)
    cut = run(backend, timeline=long_timeline, config=small, context_tokens=1600)
    assert 0 < cut.events_shown < 7 and cut.events_omitted == 7 - cut.events_shown
    prompt_tokens = sum(count_tokens(m.content) for m in backend.requests[0].messages)
    assert prompt_tokens + 300 + small.prompt_room_tokens <= 1600
    with pytest.raises(ContextTooLongError, match=r"subject 21: .*1000-token context of model 'gpt-4.1-mini'"):
        run(scripted(ANSWER), config=small, context_tokens=1000)


def test_bad_questions_and_mismatched_inputs_are_query_errors():
    with pytest.raises(QueryError, match="subject 21: the question is empty"):
        run(scripted(ANSWER), "   ")
    with pytest.raises(QueryError, match="timeline is of subject 5 but the graph of subject 21"):
        run(scripted(ANSWER), timeline=make_timeline(5))


def test_the_printed_timeline_shows_episodes_and_sources():
    text = timeline_text(make_timeline(), with_refs=True)
    assert "[t2] 2020-03-10 histology/adenocarcinoma: Adenocarcinoma on biopsy (sources e9, e11)" in text
    assert text.index("Episode ep") < text.index("[t0]") and "post-oncological" in text
