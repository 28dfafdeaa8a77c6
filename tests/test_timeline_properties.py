"""Properties of rendered timelines on random records: no leakage, well-formed XML, additive tokens, truncation."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree
from test_timeline_cases import catalogs, hostile_text, prediction_times, records

from vista.shared.meds import schema
from vista.shared.timeline import EventElement, Modality, TimeBlock, TimelineError, parse_timeline, render_timeline, truncate_left
from vista.shared.timeline.xmltext import parse_time, sanitize
from vista.shared.tokens import count_tokens

SETTINGS = settings(max_examples=100, deadline=None)


def check_no_leakage(record, prediction_time, timeline):
    """Every eligible event once, nothing at or after the prediction time, static rows and birth not events."""
    root = etree.fromstring(timeline.to_xml().encode())  # always well-formed
    expected = [
        e.event_id
        for e in record.events
        if e.time is not None and e.code != schema.BIRTH_CODE and (prediction_time is None or e.time < prediction_time)
    ]
    assert sorted(timeline.event_ids()) == sorted(expected)
    times = [parse_time(node.get("time")) for node in root.iter("events")]
    assert times == sorted(set(times))  # one element per distinct time, in order
    if prediction_time is not None:
        assert all(t < prediction_time for t in times)
        assert root.get("prediction_time") is not None
    static_ids = {e.event_id for e in record.events if e.time is None}
    assert not static_ids & set(timeline.event_ids())


def check_round_trip_and_texts(record, timeline):
    """Parsing gives the same document back, and every note text and code survives escaping exactly."""
    xml = timeline.to_xml()
    assert parse_timeline(xml).to_xml() == xml
    by_id = {e.event_id: e for e in record.events}
    root = etree.fromstring(xml.encode())
    for node in root.iter("note"):
        assert (node.text or "") == sanitize(by_id[node.get("id")].text_value or "")
    for node in root.iter():
        if node.get("code") is not None:
            assert node.get("code") == sanitize(by_id[node.get("id")].code)


def check_additive_tokens(timeline):
    """Each piece starts with '<' and ends with '>\\n', and the document's count is the sum of the pieces'."""
    for piece in [timeline.header, *(b.text for b in timeline.blocks), timeline.footer]:
        assert piece.startswith("<") and piece.endswith(">\n")
    assert timeline.n_tokens() == count_tokens(timeline.to_xml())
    assert timeline.block_tokens().tolist() == [count_tokens(b.text) for b in timeline.blocks]


@pytest.mark.slow
@SETTINGS
@given(records(), catalogs(), prediction_times)
def test_rendered_timelines_on_random_records(record, catalog, prediction_time):
    timeline = render_timeline(record, catalog, prediction_time)
    check_no_leakage(record, prediction_time, timeline)
    check_round_trip_and_texts(record, timeline)
    check_additive_tokens(timeline)


element_texts = st.lists(
    st.builds(
        lambda i, m, code, text: EventElement(f"e{i}", m, (("code", code),), text),
        st.integers(0, 999),
        st.sampled_from(list(Modality)),
        hostile_text,
        st.one_of(hostile_text, st.text(max_size=60)),
    ),
    min_size=1,
    max_size=6,
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.datetimes(min_value=datetime(1900, 1, 1)), element_texts), min_size=2, max_size=4))
def test_any_two_rendered_blocks_concatenate_additively(raw_blocks):
    texts = [TimeBlock(t, tuple(sanitize_element(e) for e in els)).text for t, els in raw_blocks]
    assert count_tokens("".join(texts)) == sum(count_tokens(t) for t in texts)


def sanitize_element(element: EventElement) -> EventElement:
    attributes = tuple((k, sanitize(v)) for k, v in element.attributes)
    return EventElement(element.event_id, element.modality, attributes, sanitize(element.content))


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(records(max_events=40), catalogs(), st.integers(20, 1500))
def test_left_truncation_keeps_the_most_recent_whole_timestamps(record, catalog, max_tokens):
    full = render_timeline(record, catalog)
    try:
        cut = render_timeline(record, catalog, max_tokens=max_tokens)
    except TimelineError as exc:
        assert "smaller than the patient root alone" in str(exc)
        everything_dropped = replace(full.root, dropped_events=len(full.event_ids()), truncated_before=None)
        assert count_tokens(everything_dropped.header + full.footer) > max_tokens
        return
    n = count_tokens(cut.to_xml())
    assert n <= max_tokens and n == cut.n_tokens()
    kept = len(cut.blocks)
    assert cut.blocks == full.blocks[len(full.blocks) - kept :]  # a suffix of whole timestamps, unchanged
    if kept == len(full.blocks):
        assert cut.to_xml() == full.to_xml()  # nothing dropped, nothing flagged
        assert 'dropped_events="' not in cut.header
    else:
        dropped = sum(len(b.elements) for b in full.blocks[: len(full.blocks) - kept])
        assert cut.root.dropped_events == dropped and f'dropped_events="{dropped}"' in cut.header
        if kept:
            assert cut.root.truncated_before == cut.blocks[0].time
        # maximal: keeping one more (older) timestamp, with the root flagged for that cut, would not fit
        older = full.blocks[len(full.blocks) - kept - 1]
        still_dropped = dropped - len(older.elements)
        alternative = replace(cut.root, truncated_before=older.time if still_dropped else None, dropped_events=still_dropped)
        with_older = alternative.header + older.text + "".join(b.text for b in cut.blocks) + cut.footer
        assert count_tokens(with_older) > max_tokens


@pytest.mark.parametrize("max_tokens", [60, 200])
def test_truncation_is_idempotent(max_tokens):
    from test_timeline_cases import SIMPLE_CATALOG, simple_record

    once = render_timeline(simple_record(n_days=20), SIMPLE_CATALOG, max_tokens=max_tokens)
    assert once.root.dropped_events > 0
    assert truncate_left(once, max_tokens) is once
