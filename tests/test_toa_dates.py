"""A timeline event must bear the dates of the events it cites: one dated outside them (beyond the unifier's window)
is sent back once, like an event citing no shown id, then dropped with a per-event record, counted, and never
reaches the episodes."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

from toa_fixtures import toa_graph
from vista.shared.llm import LLMConfig, open_gateway
from vista.shared.testing.scripted import ScriptedBackend
from vista.shared.llm.backend import ChatRequest
from vista.toa import ChunkSize, TOAConfig, build_timeline
from vista.toa.unify import MERGE_WINDOW_DAYS

ONE_CHUNK = TOAConfig(budget=ChunkSize(limit=100_000), safety_net=False, resolve_ambiguous=False)
HISTOLOGY = {"date": "2020-03-10", "type": "histology", "subtype": "adenocarcinoma",
             "description": "Adenocarcinoma on biopsy", "source_event_refs": ["e11"]}
LATE_DIAGNOSIS = {"date": "2024-07-15", "type": "diagnosis", "subtype": "initial",
                  "description": "Lung cancer, right upper lobe", "source_event_refs": ["e9", "e10"]}  # both 2020-03-10


def build(first: list[dict], again: list[dict]):
    """A scripted extractor: ``first`` for the chunk, ``again`` for the follow-up turn (4 messages)."""
    def script(request: ChatRequest) -> str:
        return json.dumps({"events": again if len(request.messages) == 4 else first})

    backend = ScriptedBackend(script)
    gateway = open_gateway(LLMConfig(model="gpt-4.1-mini", max_retries=0), backend=backend)
    return asyncio.run(build_timeline(toa_graph(), gateway, ONE_CHUNK)), backend


def test_an_event_dated_after_its_cited_events_is_reasked_then_dropped_and_counted():
    timeline, backend = build([HISTOLOGY, LATE_DIAGNOSIS], [LATE_DIAGNOSIS])
    assert [(e.date, e.type) for e in timeline.events] == [(dt.date(2020, 3, 10), "histology")]
    assert all(ep.end < dt.date(2024, 1, 1) for ep in timeline.episodes)  # no episode built around it
    (record,) = timeline.rejected
    assert (record.problem, record.reasked, record.date) == ("misdated", True, dt.date(2024, 7, 15))
    assert record.reason == (f"dated 2024-07-15, after its cited events' dates (2020-03-10, ±{MERGE_WINDOW_DAYS} "
                             "days)")
    stats = timeline.stats
    assert (stats.reasked_events, stats.misdated_events, stats.rejected_events) == (1, 1, 1)
    assert len(backend.requests) == 2  # the chunk, then one follow-up turn (never a second)
    follow_up = backend.requests[1].messages
    assert follow_up[2].role == "assistant" and "2024-07-15" in follow_up[2].content
    assert "2024-07-15 diagnosis: Lung cancer, right upper lobe — dated 2024-07-15, after" in follow_up[3].content


def test_a_correction_given_on_the_reask_is_kept():
    fixed = dict(LATE_DIAGNOSIS, date="2020-03-10")
    timeline, backend = build([HISTOLOGY, LATE_DIAGNOSIS], [fixed])
    assert sorted((e.date, e.type) for e in timeline.events) == [(dt.date(2020, 3, 10), "diagnosis"),
                                                                 (dt.date(2020, 3, 10), "histology")]
    assert timeline.rejected == () and timeline.stats.reasked_events == 1 and timeline.stats.misdated_events == 0


def test_the_window_is_the_unifiers_and_a_note_may_recount_an_earlier_event():
    near = dict(LATE_DIAGNOSIS, date=(dt.date(2020, 3, 10) + dt.timedelta(days=MERGE_WINDOW_DAYS)).isoformat())
    recounted = {"date": "2019-05-01", "type": "background", "subtype": "smoking", "description": "Quit smoking",
                 "source_event_refs": ["e7"]}  # a note (2020-03-02) recounting an earlier event
    early_code = dict(recounted, description="Ex-smoker code", source_event_refs=["e3"])  # a coded row of 2020-01-06
    timeline, backend = build([near, recounted, early_code], [])
    assert sorted(e.description for e in timeline.events) == ["Lung cancer, right upper lobe", "Quit smoking"]
    (record,) = timeline.rejected
    assert record.problem == "misdated" and "before its cited events' dates (2020-01-06" in record.reason
    assert record.reasked and timeline.stats.misdated_events == 1 and len(backend.requests) == 2


def test_a_failed_reask_drops_the_event_with_the_reason():
    from vista.shared.llm import ErrorKind
    from vista.shared.llm.errors import BackendError

    def script(request: ChatRequest):
        if len(request.messages) == 4:
            return BackendError(ErrorKind.SERVER_ERROR, "down", status=500)
        return json.dumps({"events": [HISTOLOGY, LATE_DIAGNOSIS]})

    gateway = open_gateway(LLMConfig(model="gpt-4.1-mini", max_retries=0), backend=ScriptedBackend(script))
    timeline = asyncio.run(build_timeline(toa_graph(), gateway, ONE_CHUNK))
    (record,) = timeline.rejected
    assert record.reason.endswith("; re-ask failed: server_error") and timeline.stats.failed_chunks == 0
    assert [e.type for e in timeline.events] == ["histology"]
