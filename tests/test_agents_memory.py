"""Long-term memory: deduplication rules, chronological order, last-k; the id checks and source keys it relies on."""

from __future__ import annotations

from datetime import date, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajonco.agents.evidence import EventRules, SourceIndex, clean_events, keep_known_ids
from trajonco.agents.memory import LongTermMemory, MemoryEvent, normalize_text, render_events
from trajonco.agents.schemas import ExtractedEvent
from test_agents_patients import lung_patient


def ev(day: int, text: str, ids: tuple[str, ...] = (), keys: frozenset[str] = frozenset(), chunk: int = 0) -> MemoryEvent:
    return MemoryEvent(date(2020, 1, day), text, ids, chunk, keys)


def test_same_text_same_date_is_stored_once_and_lends_its_ids():
    ltm = LongTermMemory()
    assert ltm.add([ev(5, "Chronic cough", ("e3",))]).added == 1
    report = ltm.add([ev(5, "chronic  COUGH.", ("e9",), chunk=2)])
    assert (report.added, report.duplicates) == (0, 1)
    assert [(e.description, e.event_ids, e.chunk_index) for e in ltm] == [("Chronic cough", ("e3", "e9"), 0)]


def test_same_sources_same_date_is_a_duplicate_even_when_worded_differently():
    ltm = LongTermMemory()
    ltm.add([ev(5, "Hemoglobin 9.1 g/dL", ("e12",))])
    assert ltm.add([ev(5, "Anemia (Hb 9.1)", ("e12",))]).duplicates == 1
    assert len(ltm) == 1


def test_repeated_measurements_on_different_dates_are_kept():
    ltm = LongTermMemory()
    ltm.add([ev(5, "Hemoglobin low", ("e12",), frozenset({"id:e12"})), ev(9, "Hemoglobin low", ("e40",), frozenset({"id:e40"}))])
    assert len(ltm) == 2


def test_copy_forwarded_note_repeating_a_finding_is_stored_once():
    """The same note text on a later visit yields the same event under a new date: one memory entry."""
    record = lung_patient(n_visits=7)  # the progress note is copied into visits 1, 4 and 7
    notes = [e.event_id for e in record.events if e.code == "NOTE//PROGRESS"]
    assert len(notes) == 3
    sources = SourceIndex.from_record(record)
    assert len(sources.keys(notes)) == 1  # identical text, one key
    ltm = LongTermMemory()
    for chunk, note_id in enumerate(notes):
        when = next(e.time.date() for e in record.events if e.event_id == note_id)
        reported = ExtractedEvent(timestamp=when, description="Former smoker, 40 pack-years", event_ids=[note_id])
        cleaned = clean_events([reported], EventRules(frozenset({note_id}), sources=sources), chunk_index=chunk)
        assert cleaned.dropped_ids == 0
        ltm.add(cleaned.events)
    assert len(ltm) == 1
    assert ltm.events()[0].event_ids == tuple(notes)


def test_a_note_with_different_text_is_not_a_copy():
    sources = SourceIndex({"e1": "note:aaa", "e2": "note:bbb"})
    ltm = LongTermMemory()
    ltm.add([ev(1, "Smoker", ("e1",), sources.keys(["e1"])), ev(20, "Smoker", ("e2",), sources.keys(["e2"]))])
    assert len(ltm) == 2


def test_events_are_kept_in_date_order_with_arrival_order_on_ties():
    ltm = LongTermMemory()
    ltm.add([ev(20, "late"), ev(3, "early"), ev(10, "middle A")])
    ltm.add([ev(10, "middle B"), ev(1, "earliest")])
    assert [e.description for e in ltm] == ["earliest", "early", "middle A", "middle B", "late"]


def test_last_k_are_the_latest_events_oldest_first():
    ltm = LongTermMemory()
    ltm.add([ev(d, f"event {d}") for d in range(1, 16)])
    assert [e.description for e in ltm.last(3)] == ["event 13", "event 14", "event 15"]
    assert len(ltm.last(10)) == 10
    assert len(ltm.last(100)) == 15
    assert ltm.last(0) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 28), st.sampled_from(["cough", "Cough.", "weight loss", "COPD", "copd "])), max_size=40))
def test_memory_never_holds_two_events_with_the_same_date_and_text(items):
    ltm = LongTermMemory()
    for day, text in items:
        ltm.add([ev(day, text)])
    keys = [(e.time, normalize_text(e.description)) for e in ltm]
    assert len(keys) == len(set(keys)) == len({(date(2020, 1, d), normalize_text(t)) for d, t in items})
    assert [e.time for e in ltm] == sorted(e.time for e in ltm)


def test_unknown_ids_are_dropped_and_counted_but_the_event_stays():
    reported = ExtractedEvent(timestamp=date(2020, 1, 5), description=" Cough ", event_ids=["e3", "e404", "e3", "e5"])
    cleaned = clean_events([reported], EventRules(frozenset({"e3", "e5"})), chunk_index=4)
    (event,) = cleaned.events
    assert (event.description, event.event_ids, event.chunk_index, cleaned.dropped_ids) == ("Cough", ("e3", "e5"), 4, 1)
    assert keep_known_ids([], {"e1"}) == ((), 0)


@pytest.mark.parametrize("cutoff,kept", [(datetime(2021, 1, 1), 1), (datetime(2021, 1, 1, 12), 2), (datetime(2020, 12, 31), 0)])
def test_events_dated_at_or_after_the_prediction_time_are_dropped(cutoff, kept):
    reported = [ExtractedEvent(timestamp=date(2020, 12, 31), description="seen", event_ids=[]),
                ExtractedEvent(timestamp=date(2021, 1, 1), description="as of today", event_ids=[])]
    cleaned = clean_events(reported, EventRules(frozenset(), cutoff), chunk_index=0)
    assert (len(cleaned.events), cleaned.dropped_events) == (kept, 2 - kept)


def test_render_events_lists_date_text_and_ids():
    text = render_events([ev(5, "Cough", ("e3", "e4"))])
    assert text == "- 2020-01-05: Cough [e3, e4]"
    assert render_events([]) == "(none yet)"


@pytest.mark.parametrize("raw,expected", [("Hb 9.1 g/dL.", "hb 9.1 g dl"), ("  COPD,  stage II ", "copd stage ii"), ("e.g. x", "e g x")])
def test_normalize_text(raw, expected):
    assert normalize_text(raw) == expected
