"""TOA pure parts: profile, serialization, chunking, ref checks, union-find, episodes, safety-net candidates."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toa_fixtures import CLINICAL_IDS, toa_graph
from vista.toa import (
    ChunkSize,
    ChunkingError,
    EncounterBlock,
    ExtractedEvent,
    ProfileError,
    TimelineEvent,
    ambiguous_pairs,
    check_event,
    imaging_candidates,
    load_profile,
    missing_dates,
    plan_chunks,
    ref_groups,
    serialize_graph,
    synthesize_episodes,
    unify,
)
from vista.toa.model import EpisodeKind


# ----------------------------------------------------------------------------- profile
def test_default_profile_has_the_thoracic_types():
    p = load_profile()
    assert set(p.type_names) >= {"diagnosis", "staging", "histology", "biomarkers", "imaging", "procedures",
                                 "systemic_therapy", "radiation", "surgery", "progression", "toxicity", "hospice"}
    assert "other" in p.subtypes_of("imaging")


def test_bad_profiles_name_file_and_field(tmp_path):
    with pytest.raises(ProfileError, match="no packaged"):
        load_profile("cardiology")
    bad = tmp_path / "p.toml"
    bad.write_text('name = "x"\n[[types]]\nname = "Bad Name"\ndefinition = "d"\nimaging = true\n')
    with pytest.raises(ProfileError, match=r"p\.toml: field types\.0\.name"):
        load_profile(bad)
    bad.write_text('name = "x"\n[[types]]\nname = "a"\ndefinition = "d"\n')
    with pytest.raises(ProfileError, match="imaging"):
        load_profile(bad)
    bad.write_text("name = [")
    with pytest.raises(ProfileError, match="not valid TOML"):
        load_profile(bad)
    with pytest.raises(ProfileError, match="cannot read"):
        load_profile(tmp_path / "missing.toml")


# ----------------------------------------------------------------------------- serialization
def test_serialization_is_temporal_grouped_and_covers_every_clinical_event():
    graph = toa_graph()
    blocks = serialize_graph(graph)
    assert [b.start for b in blocks] == sorted(b.start for b in blocks)
    ids = [i for b in blocks for i in b.event_ids]
    assert tuple(ids) == CLINICAL_IDS == tuple(e.event_id for e in graph.events_in_order())
    for block in blocks:
        assert block.lines[0].startswith("=== encounter ")
        assert all(re.match(r"^\[e\d+\] ", line) for line in block.lines[1:])  # every line carries its provenance
    text = "".join(b.text for b in blocks)
    assert "[e17]   ## Impression: progression of disease." in text
    assert "[e4] 2020-01-06 LOINC//718-7 Hemoglobin = 13.1 g/dL" in text


def test_serialization_date_window():
    blocks = serialize_graph(toa_graph(), start=dt.date(2020, 3, 1), end=dt.date(2020, 3, 31))
    assert [b.start for b in blocks] == [dt.date(2020, 3, 2), dt.date(2020, 3, 10)]


# ----------------------------------------------------------------------------- chunks
def _blocks(sizes: list[list[int]]) -> list[EncounterBlock]:
    out, k = [], 0
    for i, lines in enumerate(sizes):
        body = []
        for n in lines:
            body.append(f"[e{k}] " + "w " * n)
            k += 1
        out.append(EncounterBlock(f"v{i}", dt.date(2020, 1, 1) + dt.timedelta(days=i), (f"=== encounter v{i} ===", *body), ()))
    return out


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.integers(0, 120), min_size=0, max_size=6), min_size=1, max_size=8), st.integers(80, 400))
def test_chunks_respect_budget_keep_order_and_split_only_oversize_encounters(sizes, limit):
    blocks = _blocks(sizes)
    budget = ChunkSize(limit=limit)
    chunks = plan_chunks(blocks, budget)
    assert all(len(c.text) <= limit for c in chunks)
    # encounters appear in order; an encounter spans several chunks only if it alone exceeds the budget
    seen = [e for c in chunks for e in c.encounter_ids]
    assert list(dict.fromkeys(seen)) == [b.encounter_id for b in blocks]
    for block in blocks:
        if len(block.text) <= limit:
            assert seen.count(block.encounter_id) == 1
    # no provenance lost: every body line's id is in some chunk, and every chunk line carries an id or is a header
    ids = {re.match(r"\[(e\d+)\]", line).group(1) for b in blocks for line in b.lines[1:]}
    assert set().union(*(c.event_ids for c in chunks)) == ids
    for c in chunks:
        assert all(line.startswith(("[e", "=== encounter")) for line in c.text.splitlines())


def test_a_budget_too_small_for_a_header_is_a_clear_error():
    blocks = _blocks([[200]])
    with pytest.raises(ChunkingError, match="encounter v0"):
        plan_chunks([EncounterBlock("v0", blocks[0].start, ("=" * 60, *blocks[0].lines[1:]), ())], ChunkSize(limit=60))


def test_token_budget():
    blocks = serialize_graph(toa_graph())
    budget = ChunkSize(limit=120, unit="tokens")
    chunks = plan_chunks(blocks, budget)
    seen = [e for c in chunks for e in c.encounter_ids]
    assert len(chunks) > 1 and list(dict.fromkeys(seen)) == [b.encounter_id for b in blocks]
    assert all(budget.size(c.text) <= 120 for c in chunks)
    for block in blocks:  # only an encounter over the budget on its own is split
        assert (seen.count(block.encounter_id) > 1) == (budget.size(block.text) > 120)


# ----------------------------------------------------------------------------- ref checks
def _proposed(refs, kind="imaging", description="CT chest: mass"):
    return ExtractedEvent(date=dt.date(2020, 3, 2), type=kind, subtype="ct", description=description, source_event_refs=refs)


def test_unknown_refs_are_dropped_and_refless_events_rejected():
    graph, profile = toa_graph(), load_profile()
    kept, record = check_event(_proposed(["e6", "e999", "e6", "e7"]), graph, profile, chunk=0)
    assert kept.refs == ("e6", "e7") and record.dropped_refs == ("e999",)
    kept, record = check_event(_proposed(["e999", "e1000000"]), graph, profile, chunk=0)
    assert kept is None and record.dropped_refs == ("e999", "e1000000")
    empty = ExtractedEvent.model_construct(**{**_proposed(["e6"]).model_dump(), "source_event_refs": []})
    kept, record = check_event(empty, graph, profile, chunk=0)
    assert kept is None and record.reason == "no source_event_refs"
    # the encounter row e5 is a graph event but a chunk may only cite what it showed
    kept, record = check_event(_proposed(["e6", "e16"]), graph, profile, chunk=0, allowed={"e6", "e7"})
    assert kept.refs == ("e6",) and record.dropped_refs == ("e16",)
    kept, record = check_event(_proposed(["e6"], kind="astrology"), graph, profile, chunk=0)
    assert kept is None and "not in profile" in record.reason


def test_answer_models_force_well_formed_refs():
    with pytest.raises(ValueError):
        ExtractedEvent(date=dt.date(2020, 1, 1), type="imaging", subtype="ct", description="x", source_event_refs=[])
    with pytest.raises(ValueError):
        ExtractedEvent(date=dt.date(2020, 1, 1), type="imaging", subtype="ct", description="x", source_event_refs=["x1"])


def test_timeline_event_requires_refs():
    with pytest.raises(ValueError):
        TimelineEvent(event_id="t0", date=dt.date(2020, 1, 1), type="imaging", subtype="ct", description="x",
                      source_event_refs=())


# ----------------------------------------------------------------------------- union-find
ref_lists = st.lists(st.lists(st.sampled_from([f"e{i}" for i in range(12)]), min_size=1, max_size=4, unique=True),
                     min_size=0, max_size=14)


def _components(ref_sets):
    """Reference: connected components by repeated graph search (no union-find)."""
    n, left, out = len(ref_sets), set(range(len(ref_sets))), []
    while left:
        frontier, group = [min(left)], set()
        while frontier:
            i = frontier.pop()
            if i in group:
                continue
            group.add(i)
            frontier.extend(j for j in range(n) if j not in group and set(ref_sets[i]) & set(ref_sets[j]))
        left -= group
        out.append(sorted(group))
    return out


@settings(max_examples=200, deadline=None)
@given(ref_lists)
def test_union_find_groups_exactly_the_events_linked_by_shared_refs(ref_sets):
    groups = ref_groups(ref_sets)
    assert groups == _components(ref_sets)
    where = {i: k for k, g in enumerate(groups) for i in g}
    for i in range(len(ref_sets)):
        for j in range(len(ref_sets)):
            if set(ref_sets[i]) & set(ref_sets[j]):
                assert where[i] == where[j]  # sharing a ref always merges
    for g in groups:  # and every merged group is connected through shared refs
        assert _components([ref_sets[i] for i in g]) == [list(range(len(g)))]


def _event(k, day, refs, kind="imaging", description="x"):
    return TimelineEvent(event_id=f"c0.{k}", date=dt.date(2020, 1, day), type=kind, subtype="other",
                         description=description, source_event_refs=tuple(refs), chunks=(k,))


@settings(max_examples=100, deadline=None)
@given(ref_lists)
def test_unify_keeps_every_ref_once_and_merges_only_linked_events(ref_sets):
    # all on one day and of one type: no ref is a hub, so unify merges exactly the connected components
    # (hubs and date windows: tests/test_toa_structure.py)
    events = [_event(k, 1, refs) for k, refs in enumerate(ref_sets)]
    merged, n_merged = unify(events)
    assert len(merged) == len(ref_groups(ref_sets))
    all_refs = [r for e in merged for r in e.source_event_refs]
    assert sorted(all_refs) == sorted({r for refs in ref_sets for r in refs})  # refs partitioned across events
    assert [e.event_id for e in merged] == [f"t{k}" for k in range(len(merged))]
    assert [e.date for e in merged] == sorted(e.date for e in merged)
    assert n_merged == sum(len(g) > 1 for g in ref_groups(ref_sets))


def test_events_of_different_types_citing_one_note_are_not_merged():
    events = [_event(0, 2, ["e7"], kind="imaging"), _event(1, 2, ["e7"], kind="progression"),
              _event(2, 2, ["e7", "e8"], kind="imaging")]
    merged, n = unify(events)
    assert n == 1 and sorted((e.type, e.source_event_refs) for e in merged) == [
        ("imaging", ("e7", "e8")), ("progression", ("e7",))]


def test_merge_takes_earliest_date_and_richest_wording_and_reports_ambiguous_residue():
    events = [_event(0, 3, ["e1"], description="short"), _event(1, 2, ["e1", "e2"], description="CT: mass 3 cm"),
              _event(2, 2, ["e5"], description="CT, other report")]
    merged, n = unify(events)
    assert n == 1 and len(merged) == 2
    first = next(e for e in merged if "e1" in e.source_event_refs)
    assert first.date == dt.date(2020, 1, 2) and first.description == "CT: mass 3 cm"
    assert first.source_event_refs == ("e1", "e2") and first.chunks == (0, 1)
    assert ambiguous_pairs(merged) == [(merged[0].event_id, merged[1].event_id)]


# ----------------------------------------------------------------------------- episodes
KINDS = ["background", "imaging", "procedures", "systemic_therapy", "surgery", "progression", "toxicity", "hospice",
         "biomarkers"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.sampled_from(KINDS)), min_size=0, max_size=25))
def test_episodes_cover_every_event_once_without_overlap(rows):
    profile = load_profile()
    events = [TimelineEvent(event_id=f"t{k}", date=dt.date(2021, 1, 1) + dt.timedelta(days=d), type=kind,
                            subtype="other", description="x", source_event_refs=(f"e{k}",)) for k, (d, kind) in enumerate(rows)]
    episodes = synthesize_episodes(events, profile)
    assigned = [i for ep in episodes for i in ep.event_ids]
    assert sorted(assigned) == sorted(e.event_id for e in events)  # each event in exactly one episode
    for a, b in zip(episodes, episodes[1:]):
        assert a.start <= a.end < b.start and b.start - a.end == dt.timedelta(days=1)  # contiguous, no overlap
    by_id = {e.event_id: e for e in events}
    for ep in episodes:
        assert all(ep.start <= by_id[i].date <= ep.end for i in ep.event_ids)
    lines = [ep.line for ep in episodes if ep.kind is EpisodeKind.TREATMENT_LINE]
    assert lines == list(range(1, len(lines) + 1))
    kinds = [ep.kind for ep in episodes]
    assert kinds.count(EpisodeKind.POST_ONCOLOGICAL) <= 1 and kinds.count(EpisodeKind.DIAGNOSIS) <= 1
    if EpisodeKind.POST_ONCOLOGICAL in kinds:
        assert kinds[-1] is EpisodeKind.POST_ONCOLOGICAL
    # the event that ends a line stays in it, unless hospice opens the post-oncological episode that very day
    for ep in episodes:
        if ep.kind is EpisodeKind.TREATMENT_LINE:
            enders = [by_id[i] for i in ep.event_ids if profile.get(by_id[i].type).ends_line]
            nxt = episodes[episodes.index(ep) + 1] if ep is not episodes[-1] else None
            if enders and nxt is not None and nxt.kind is EpisodeKind.TREATMENT_LINE:
                assert min(e.date for e in enders) < nxt.start


def test_episodes_without_treatment_are_baseline_and_diagnosis():
    profile = load_profile()
    events = [_event(0, 1, ["e1"], kind="background"), _event(1, 5, ["e2"], kind="imaging"),
              _event(2, 9, ["e3"], kind="diagnosis")]
    episodes = synthesize_episodes(unify(events)[0], profile)
    assert [(e.kind, e.start.day, e.end.day) for e in episodes] == [(EpisodeKind.BASELINE, 1, 4), (EpisodeKind.DIAGNOSIS, 5, 9)]
    # imaging with no diagnosis on the timeline is no diagnostic work-up: all baseline
    episodes = synthesize_episodes(unify(events[:2])[0], profile)
    assert [(e.kind, e.start.day, e.end.day) for e in episodes] == [(EpisodeKind.BASELINE, 1, 5)]
    assert synthesize_episodes([], profile) == []


# ----------------------------------------------------------------------------- safety-net candidates
def test_imaging_candidates_and_missing_dates():
    graph = toa_graph()
    candidates = imaging_candidates(graph)
    assert candidates == {dt.date(2020, 3, 2): ("e6", "e7"), dt.date(2020, 7, 1): ("e16", "e17")}
    covered = [_event(0, 1, ["e6"]).model_copy(update={"date": dt.date(2020, 3, 4)})]
    assert missing_dates(candidates, covered, "imaging", 3) == [dt.date(2020, 7, 1)]
    assert list(imaging_candidates(graph, dt.date(2020, 3, 3), dt.date(2020, 12, 31))) == [dt.date(2020, 7, 1)]
    assert list(imaging_candidates(graph, None, dt.date(2020, 7, 1))) == [dt.date(2020, 3, 2), dt.date(2020, 7, 1)]
    assert missing_dates(candidates, covered, "imaging", 1) == [dt.date(2020, 3, 2), dt.date(2020, 7, 1)]
    other_type = [covered[0].model_copy(update={"type": "progression"})]
    assert len(missing_dates(candidates, other_type, "imaging", 3)) == 2
