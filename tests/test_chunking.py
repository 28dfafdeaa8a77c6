"""Time-aware chunking: token bounds, exact coverage, timestamps kept whole or labelled, text splits, re-chunking."""

from __future__ import annotations

import itertools
import re
from datetime import datetime, timedelta

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from lxml import etree
from test_timeline_cases import BASE, SIMPLE_CATALOG, catalogs, prediction_times, records, simple_record

from trajonco.chunking import Chunk, ChunkingError, chunk_timeline, rechunk
from vista.shared.records import CodeCatalog, Event, PatientRecord
from vista.shared.timeline import Timeline, parse_timeline, render_timeline
from vista.shared.tokens import count_tokens


def collapse_runs(ids: list[str]) -> list[str]:
    """Consecutive repeats of one id (the pieces of a text-split event) counted once."""
    return [i for k, i in enumerate(ids) if k == 0 or ids[k - 1] != i]


def check_chunks(timeline: Timeline, chunks: list[Chunk], max_tokens: int) -> None:
    """Every invariant the chunker promises, checked on real token counts of the exact strings."""
    assert [c.index for c in chunks] == list(range(len(chunks)))
    header_root = etree.fromstring(timeline.to_xml().encode())
    flat: list[str] = []
    for chunk in chunks:
        assert count_tokens(chunk.xml) == chunk.n_tokens <= max_tokens
        root = etree.fromstring(chunk.xml.encode())  # a standalone, well-formed document
        assert dict(root.attrib) == dict(header_root.attrib)  # demographics on every chunk
        assert chunk.xml.startswith(timeline.header) and chunk.xml.endswith(timeline.footer)
        ids = [node.get("id") for block in root.iter("events") for group in block for node in group]
        assert tuple(ids) == chunk.event_ids
        times = [datetime.fromisoformat(b.get("time")) for b in root.iter("events")]
        if times:
            assert (chunk.start_time, chunk.end_time) == (times[0], times[-1])
        flat += ids
    # exact coverage, in order; repeats only for events whose text was split, in consecutive chunks
    assert collapse_runs(flat) == timeline.event_ids()
    split_ids = {i for k, i in enumerate(flat) if k and flat[k - 1] == i}
    for i in split_ids:
        assert sum(i in c.event_ids for c in chunks) == flat.count(i)
    assert all(f'id="{i}"' in c.xml and 'part="' in c.xml for c in chunks for i in c.event_ids if i in split_ids)
    # a timestamp that fits in the budget is never split; a larger one is split into labelled pieces
    budget = max_tokens - timeline.header_tokens() - timeline.footer_tokens()
    for block, n in zip(timeline.blocks, timeline.block_tokens().tolist()):
        holding = [c for c in chunks if set(block.event_ids) & set(c.event_ids)]
        if n <= budget:
            assert len(holding) == 1 and block.text in holding[0].xml
        else:
            assert len(holding) >= 2
            opening = f'<events time="{block.text.split(chr(34))[1]}" part="'
            for k, c in enumerate(holding, start=1):
                assert c.xml.count(f'{opening}{k}/{len(holding)}">') == 1
    # greedy: a chunk starting with a whole timestamp starts there because it did not fit in the previous chunk
    for before, after in itertools.pairwise(chunks):
        first = etree.fromstring(after.xml.encode()).find("events")
        if first is not None and first.get("part") is None:
            first_text = parse_timeline(after.xml).blocks[0].text
            assert after.xml.startswith(timeline.header + first_text)
            assert before.n_tokens + count_tokens(first_text) > max_tokens


def test_small_example_packs_whole_days():
    timeline = render_timeline(simple_record(n_days=6, labs_per_day=3), SIMPLE_CATALOG)
    per_day = int(timeline.block_tokens()[0])
    frame = timeline.header_tokens() + timeline.footer_tokens()
    chunks = chunk_timeline(timeline, max_tokens=frame + 2 * per_day)
    assert [len(c.event_ids) for c in chunks] == [8, 8, 8]
    assert [c.start_time.day for c in chunks] == [1, 3, 5]
    check_chunks(timeline, chunks, frame + 2 * per_day)


def test_one_chunk_when_everything_fits():
    timeline = render_timeline(simple_record(), SIMPLE_CATALOG)
    (chunk,) = chunk_timeline(timeline)
    assert chunk.xml == timeline.to_xml() and chunk.n_tokens == count_tokens(chunk.xml)


def test_timeline_without_events_gives_one_root_only_chunk():
    rec = PatientRecord(9, "s.parquet", 0, [Event("e0", None, "GENDER//M", None, None)])
    (chunk,) = chunk_timeline(render_timeline(rec, CodeCatalog()))
    assert chunk.xml == '<patient id="9" sex="M">\n</patient>\n'
    assert chunk.event_ids == () and chunk.start_time is None and chunk.end_time is None


def test_budget_too_small_for_the_root_is_an_error():
    timeline = render_timeline(simple_record(), SIMPLE_CATALOG)
    with pytest.raises(ChunkingError, match=r"subject 42: max_tokens=10 cannot hold the patient root \(\d+ tokens\)"):
        chunk_timeline(timeline, max_tokens=10)


def test_budget_too_small_for_one_event_piece_is_an_error():
    timeline = render_timeline(simple_record(n_days=1, note="word " * 200), SIMPLE_CATALOG)
    frame = timeline.header_tokens() + timeline.footer_tokens()
    with pytest.raises(ChunkingError, match=r"subject 42: max_tokens too small to split event e\d: a piece of it needs at least \d+"):
        chunk_timeline(timeline, max_tokens=frame + 45)


def test_oversized_timestamp_is_split_between_events_and_every_piece_keeps_the_time():
    timeline = render_timeline(simple_record(n_days=2, labs_per_day=40), SIMPLE_CATALOG)
    max_tokens = 400
    chunks = chunk_timeline(timeline, max_tokens)
    check_chunks(timeline, chunks, max_tokens)
    day1 = [c for c in chunks if c.start_time == BASE]
    assert len(day1) >= 3
    assert all('<events time="2015-03-01" part="' in c.xml for c in day1)
    # pieces reopen the modality group they continue
    assert all("<labs>" in c.xml for c in day1[1:])


def test_huge_note_is_split_by_text_as_a_last_resort():
    words = [f"finding{k % 97} <&> 😀 " if k % 50 == 0 else f"word{k % 13}" for k in range(6000)]
    note = " ".join(words) + "\n" + "x" * 3000 + "\r\nend"  # a 3000-character run with no space
    timeline = render_timeline(simple_record(n_days=3, labs_per_day=1, note=note), SIMPLE_CATALOG)
    max_tokens = 2000
    chunks = chunk_timeline(timeline, max_tokens)
    check_chunks(timeline, chunks, max_tokens)
    pieces = [etree.fromstring(c.xml.encode()).find(".//note") for c in chunks if "e8" in c.event_ids]
    assert len(pieces) >= 5
    assert [p.get("part") for p in pieces] == [f"{k}/{len(pieces)}" for k in range(1, len(pieces) + 1)]
    assert "".join(p.text for p in pieces) == note  # the text survives the split exactly
    assert all(p.get("title") == "Progress note" for p in pieces)
    assert min(c.n_tokens for c in chunks[1:-1]) > 0.9 * max_tokens  # pieces fill their chunks


def test_rechunk_joins_pieces_and_chunks_again():
    note = " ".join(f"w{k}" for k in range(3000))
    timeline = render_timeline(simple_record(n_days=8, labs_per_day=30, note=note), SIMPLE_CATALOG)
    small = chunk_timeline(timeline, 600)
    assert rechunk([c.xml for c in small], 600) == small  # parse + join gives the same timeline back
    assert [c.xml for c in rechunk([c.xml for c in small], 20_000)] == [timeline.to_xml()]
    # a "filtered" set of chunks (every other chunk dropped) still gives valid chunks
    kept = [c.xml for c in small[::2]]
    again = rechunk(kept, 1000)
    joined = [i for c in small[::2] for i in c.event_ids]
    assert collapse_runs([i for c in again for i in c.event_ids]) == collapse_runs(joined)
    assert all(count_tokens(c.xml) == c.n_tokens <= 1000 for c in again)


def test_select_then_chunk_is_the_id_based_filter():
    timeline = render_timeline(simple_record(n_days=10, labs_per_day=5), SIMPLE_CATALOG)
    keep = timeline.event_ids()[::3]
    chunks = chunk_timeline(timeline.select(keep), 300)
    assert [i for c in chunks for i in c.event_ids] == keep


def test_verification_catches_a_wrong_count(monkeypatch):
    timeline = render_timeline(simple_record(n_days=4), SIMPLE_CATALOG)
    monkeypatch.setattr(Timeline, "block_tokens", lambda self: np.array([count_tokens(b.text) - 1 for b in self.blocks]))
    with pytest.raises(ChunkingError, match="not additive"):
        chunk_timeline(timeline, 500)
    assert chunk_timeline(timeline, 500, verify=False)[0].n_tokens == count_tokens(timeline.to_xml()) - len(timeline.blocks)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(
    st.one_of(records(max_events=40), records(min_events=10, max_events=40, days=2, max_note=3000)),
    st.one_of(catalogs(), st.just(SIMPLE_CATALOG)),
    prediction_times,
    st.floats(0.0, 1.5),
    st.integers(60, 160),
)
def test_chunk_properties_on_random_records(record, catalog, prediction_time, scale, extra):
    timeline = render_timeline(record, catalog, prediction_time)
    # budgets around the largest timestamp's size, so that splits of timestamps and of texts happen often
    largest = int(timeline.block_tokens().max()) if timeline.blocks else 0
    max_tokens = timeline.header_tokens() + timeline.footer_tokens() + int(scale * largest) + extra
    try:
        chunks = chunk_timeline(timeline, max_tokens)
    except ChunkingError as exc:
        assert "cannot hold the patient root" in str(exc) or "max_tokens too small to split event" in str(exc)
        event("budget too small")
        return
    xml = "".join(c.xml for c in chunks)
    event("event text split" if re.search(r'<\w+ id="[^"]*"[^>]* part="', xml) else "timestamp split" if 'part="' in xml else "no split")
    check_chunks(timeline, chunks, max_tokens)
    assert all(c.end_time < prediction_time for c in chunks if prediction_time is not None and c.end_time is not None)
    assert rechunk([c.xml for c in chunks], max_tokens) == chunks


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(0, 120), st.integers(0, 4000), st.integers(250, 3000))
def test_chunk_properties_on_long_records(n_days, labs_per_day, note_words, max_tokens):
    note = " ".join(f"w{k % 91}{'&' if k % 17 == 0 else ''}" for k in range(note_words)) if note_words else None
    timeline = render_timeline(simple_record(n_days, labs_per_day, note), SIMPLE_CATALOG)
    chunks = chunk_timeline(timeline, max_tokens)
    xml = "".join(c.xml for c in chunks)
    event("event text split" if re.search(r'<note id="[^"]*"[^>]* part="', xml) else "timestamp split" if 'part="' in xml else "no split")
    check_chunks(timeline, chunks, max_tokens)


def test_hostile_times_and_many_timestamps():
    rows = [Event(f"e{k}", BASE + timedelta(seconds=37 * k, microseconds=k), "ICD10CM//R05.9", None, None) for k in range(300)]
    timeline = render_timeline(PatientRecord(1, "s", 0, rows), CodeCatalog())
    check_chunks(timeline, chunk_timeline(timeline, 500), 500)
