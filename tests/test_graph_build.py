"""MEDS Graph build: one node per event with provenance, typed edges, temporal order, encounter assignment, notes."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

import pyarrow.parquet as pq
import pytest

from tests.graph_fixtures import SMALL_CATALOG, small_record, synth_records, synth_root
from vista.graph import EdgeType, EncounterWindows, GraphConfig, GraphInputError, NodeType, build_graph
from vista.graph.mentions import TermMatcher, description_terms
from vista.graph.sections import split_sections
from vista.shared.meds import schema

T0 = datetime(2020, 1, 5, 9, 0)


# ------------------------------------------------------------------------------------------------ synthetic patients
@pytest.fixture(scope="module")
def synth_graphs():
    records, catalog = synth_records()
    return records, catalog, {sid: build_graph(r, catalog) for sid, r in records.items()}


def test_every_event_is_exactly_one_node_with_its_source_row(synth_graphs):
    records, _, graphs = synth_graphs
    tables = {}
    for sid, record in list(records.items())[:12]:
        graph = graphs[sid]
        source_ids = [i for i in graph.node_ids() if graph.has_event(i)]
        assert Counter(source_ids) == Counter(e.event_id for e in record.events)  # exactly one node each
        table = tables.setdefault(record.shard, pq.read_table(synth_root() / record.shard))
        for event in record.events:
            ref = graph.provenance(event.event_id)
            assert ref == record.provenance(event.event_id)
            row = table.slice(ref.row, 1).to_pylist()[0]
            assert row["subject_id"] == sid and row["code"] == event.code and row["time"] == event.time
            node = graph.event(event.event_id)
            assert (node.code, node.time, node.text) == (event.code, event.time, event.text_value)
            if event.numeric_value is None:
                assert row["numeric_value"] is None and node.value is None
            else:
                assert node.value == event.numeric_value
                assert abs(row["numeric_value"] - node.value) < 1e-4 * max(1, abs(node.value))


def test_edges_have_the_specified_types_and_ends(synth_graphs):
    records, catalog, graphs = synth_graphs
    allowed = {
        EdgeType.HAS_ENCOUNTER: {(NodeType.PATIENT, NodeType.ENCOUNTER)},
        EdgeType.HAS_EVENT: {(NodeType.PATIENT, NodeType.EVENT), (NodeType.ENCOUNTER, NodeType.EVENT),
                             (NodeType.ENCOUNTER, NodeType.NOTE)},
        EdgeType.HAS_CODE: {(t, NodeType.CODE) for t in (NodeType.EVENT, NodeType.NOTE, NodeType.ENCOUNTER)},
        EdgeType.IS_A: {(NodeType.CODE, NodeType.CODE)},
        EdgeType.HAS_SECTION: {(NodeType.NOTE, NodeType.SECTION)},
        EdgeType.MENTIONS: {(NodeType.SECTION, NodeType.CODE)},
        EdgeType.NEXT: {(NodeType.ENCOUNTER, NodeType.ENCOUNTER), (NodeType.EVENT, NodeType.EVENT),
                        (NodeType.EVENT, NodeType.NOTE), (NodeType.NOTE, NodeType.EVENT), (NodeType.NOTE, NodeType.NOTE)},
    }
    seen_types = set()
    for sid, graph in graphs.items():
        record = records[sid]
        for edge_type, ends in allowed.items():
            pairs = graph.edge_list(edge_type)
            seen_types.add(edge_type) if pairs else None
            assert {(graph.node_type(a), graph.node_type(b)) for a, b in pairs} <= ends, (sid, edge_type)
        # Each source event has one code edge, to its own code; each clinical event one encounter.
        has_code = graph.edge_list(EdgeType.HAS_CODE)
        assert len(has_code) == len(record.events)
        assert all(b == f"code:{graph.event(a).code}" for a, b in has_code)
        members = Counter(b for a, b in graph.edge_list(EdgeType.HAS_EVENT))
        assert set(members.values()) == {1}
        clinical = {e.event_id for e in graph.events_in_order()}
        level = {e.event_id for e in graph.patient_events()}
        encounters = {e.event_id for e in graph.encounters() if not e.pseudo}
        assert clinical | level | encounters == {e.event_id for e in record.events}
        assert len(graph.edge_list(EdgeType.HAS_ENCOUNTER)) == len(graph.encounters())
        # Code hierarchy = the catalog's parents.
        for code in graph.codes():
            assert code.parents == catalog.describe(code.code).parent_codes
            assert code.description == catalog.describe(code.code).description
        # Mentions: the term occurs in the section text and names the code's description.
        for note in graph.notes():
            sections = graph.sections(note)
            assert "".join(s.text for s in sections) == note.text
            for section in sections:
                for code, term in graph.mentions(section):
                    assert term in " ".join(section.text.lower().split()) or term.replace(" ", "") in section.text.lower()
                    assert tuple(term.split()) in description_terms(catalog.describe(code).description)
                    assert code in {e.code for e in record.events}
    assert seen_types == set(EdgeType)


def test_events_and_encounters_are_in_temporal_order(synth_graphs):
    _, _, graphs = synth_graphs
    for graph in graphs.values():
        events = graph.events_in_order()
        keys = [(e.time, e.provenance.row) for e in events]
        assert keys == sorted(keys)
        chain = [b for a, b in graph.edge_list(EdgeType.NEXT) if graph.node_type(a) is not NodeType.ENCOUNTER]
        assert chain == [e.event_id for e in events[1:]]
        encounters = graph.encounters()
        assert [e.start for e in encounters] == sorted(e.start for e in encounters)
        assert [b for a, b in graph.edge_list(EdgeType.NEXT) if graph.node_type(a) is NodeType.ENCOUNTER] == \
            [e.node_id for e in encounters[1:]]
        for encounter in encounters:
            inside = graph.events_of(encounter)
            assert all(encounter.start <= e.time <= encounter.end for e in inside)
            assert [e.time for e in inside] == sorted(e.time for e in inside)


def test_synthetic_events_join_the_visit_they_were_recorded_at(synth_graphs):
    """In the generator, every clinical row follows its visit's ENCOUNTER row within hours: no pseudo-encounters
    except for rows outside visits (death), and each event's encounter is the latest visit row before it."""
    records, _, graphs = synth_graphs
    for sid, graph in graphs.items():
        latest = None
        for event in sorted((e for e in records[sid].events if e.time is not None), key=lambda e: (e.time, int(e.event_id[1:]))):
            if event.code.startswith("ENCOUNTER//"):
                latest = event
            elif event.code not in (schema.BIRTH_CODE, schema.DEATH_CODE):
                assert graph.event(event.event_id).encounter == latest.event_id
        pseudo_members = {e.code for enc in graph.encounters() if enc.pseudo for e in graph.events_of(enc)}
        assert pseudo_members <= {schema.DEATH_CODE}


# ------------------------------------------------------------------------------------------------ encounter rule
def test_encounter_assignment_rule():
    rec = small_record([
        (None, "GENDER//F", None, None),
        (datetime(1950, 3, 1), schema.BIRTH_CODE, None, None),
        (T0 - timedelta(hours=2), "LOINC//718-7", 12.0, None),  # before any visit: pseudo-encounter of its day
        (T0, "ENCOUNTER//AMB", None, None),
        (T0, "ICD10CM//J18.9", None, None),  # same timestamp as the visit
        (T0 + timedelta(hours=3), "RXNORM//82122", None, None),  # inside the 12 h window
        (T0 + timedelta(hours=13), "LOINC//718-7", 11.0, None),  # after the window: pseudo-encounter
        (T0 + timedelta(days=10), "ENCOUNTER//IMP", None, None),
        (T0 + timedelta(days=12), "ENCOUNTER//AMB", None, None),  # a visit during the stay
        (T0 + timedelta(days=12, hours=2), "LOINC//718-7", 10.0, None),  # joins the latest start (AMB)
        (T0 + timedelta(days=12, hours=20), "LOINC//718-7", 9.5, None),  # AMB closed, IMP still open
        (T0 + timedelta(days=60), schema.DEATH_CODE, None, None),  # after everything: pseudo
    ])
    graph = build_graph(rec, SMALL_CATALOG)
    enc = {e.event_id: e.encounter for e in graph.events_in_order()}
    assert enc == {"e2": "day:2020-01-05", "e4": "e3", "e5": "e3", "e6": "day:2020-01-05", "e9": "e8", "e10": "e7",
                   "e11": "day:2020-03-05"}
    assert [e.event_id for e in graph.patient_events()] == ["e0", "e1"]
    encounters = {e.node_id: e for e in graph.encounters()}
    assert [e.node_id for e in graph.encounters()] == ["day:2020-01-05", "e3", "e7", "e8", "day:2020-03-05"]
    day = encounters["day:2020-01-05"]
    assert day.pseudo and day.encounter_type == "DAY"
    assert day.start == datetime(2020, 1, 5) and day.end == T0 + timedelta(hours=13)
    assert encounters["e3"].end == T0 + timedelta(hours=3) and encounters["e3"].encounter_type == "AMB"
    assert not graph.has_event("day:2020-01-05") and graph.has_event("e3")
    # Longer windows change the assignment.
    wide = build_graph(rec, SMALL_CATALOG, config=GraphConfig(windows=EncounterWindows(by_type={"AMB": timedelta(days=1)})))
    assert {e.event_id: e.encounter for e in wide.events_in_order()}["e6"] == "e3"


def test_sections_mentions_and_accessors():
    note = "Office visit\nAssessment and plan: Pneumonia, improving. Continue levofloxacin.\nPlan: recheck hemoglobin in blood."
    rec = small_record([
        (T0, "ENCOUNTER//AMB", None, None), (T0, "ICD10CM//J18.9", None, None), (T0, "RXNORM//82122", None, None),
        (T0, "LOINC//718-7", 11.2, None), (T0 + timedelta(hours=1), "NOTE//PROGRESS", None, note),
    ])
    graph = build_graph(rec, SMALL_CATALOG)
    sections = graph.sections("e4")
    assert [s.title for s in sections] == [None, "Assessment and plan", "Plan"]
    assert [s.node_id for s in sections] == ["e4#s0", "e4#s1", "e4#s2"]
    assert [note[a:b] for a, b in (s.span for s in sections)] == [s.text for s in sections]
    assert graph.mentions(sections[1]) == [("ICD10CM//J18.9", "pneumonia"), ("RXNORM//82122", "levofloxacin")]
    assert graph.mentions(sections[2]) == [("LOINC//718-7", "hemoglobin in blood")]
    assert graph.mentions(sections[0]) == []
    assert graph.code("ICD10CM//J18.9").parents == ("ICD10CM//J18",)
    assert graph.neighbors("code:ICD10CM//J18", EdgeType.IS_A) == ["code:ICD10CM//J09-J18"]
    assert graph.neighbors("code:ICD10CM//J18", EdgeType.IS_A, direction="in") == ["code:ICD10CM//J18.9"]
    assert graph.neighbors("code:ICD10CM//J18.9", EdgeType.MENTIONS, direction="in") == ["e4#s1"]
    assert graph.event("e3").unit == "g/dL" and graph.event("e3").description == "Hemoglobin [Mass/volume] in Blood"
    assert graph.event("e1").unit is None and graph.event("e4").type is NodeType.NOTE
    assert [n.event_id for n in graph.notes()] == ["e4"]
    assert [e.event_id for e in graph.events_of("e0")] == ["e1", "e2", "e3", "e4"]
    with pytest.raises(KeyError, match="patient 7: no source event 'e99'"):
        graph.event("e99")
    with pytest.raises(KeyError, match="is not a note"):
        graph.sections("e1")
    assert not graph.has_event("code:LOINC//718-7") and not graph.has_event("e4#s0")


def test_section_splitting_and_term_matching_rules():
    assert split_sections("no headers at all")[0].title is None
    text = "Exam: CT\nnot a header: lower case\nNor is this one, it has a comma: x\nBP 120/80: short labels are"
    assert [s.title for s in split_sections(text)] == ["Exam", "BP 120/80"]
    too_long = "A very long label that has too many words: x\nImpression: ok"
    assert [s.title for s in split_sections(too_long)] == [None, "Impression"]
    matcher = TermMatcher.from_descriptions([(0, "Pneumonia, unspecified organism")])
    assert matcher.find("pneumonias and pneumoniae") == []
    assert [m.term for m in matcher.find("PNEUMONIA, unspecified organism")] == ["pneumonia unspecified organism"]


# ------------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(("rows", "field", "words"), [
    ([(datetime(2400, 1, 1), "ENCOUNTER//AMB", None, None)], "time", "on or after 2300-01-01"),
    ([(datetime(1899, 12, 31), "ENCOUNTER//AMB", None, None)], "time", "before 1900-01-01"),
    ([(None, "GENDER//F", None, None), (datetime(1950, 1, 1), schema.BIRTH_CODE, None, None)], "time", "no events"),
    ([(T0, "", None, None)], "code", "without a code"),
    ([(T0, "ENCOUNTER//AMB\x00", None, None)], "code", "characters XML cannot carry"),
])
def test_bad_records_raise_clear_errors(rows, field, words):
    with pytest.raises(GraphInputError, match=words) as caught:
        build_graph(small_record(rows), SMALL_CATALOG)
    assert caught.value.field == field and caught.value.patient == "7" and caught.value.source == "data/train/0.parquet"
    assert str(caught.value).startswith("data/train/0.parquet: patient 7: ")


def test_duplicate_or_malformed_event_ids_are_rejected():
    rec = small_record([(T0, "ENCOUNTER//AMB", None, None), (T0, "LOINC//718-7", 1.0, None)])
    rec.events[1] = rec.events[1].__class__("e0", T0, "LOINC//718-7", 1.0, None)
    with pytest.raises(GraphInputError, match="'e0' is used twice"):
        build_graph(rec, SMALL_CATALOG)
    rec.events[1] = rec.events[1].__class__("x1", T0, "LOINC//718-7", 1.0, None)
    with pytest.raises(GraphInputError, match="field 'id': event id 'x1' is not of the form e<k>"):
        build_graph(rec, SMALL_CATALOG)


def test_text_is_stored_xml_safe():
    rec = small_record([(T0, "ENCOUNTER//AMB", None, None), (T0, "NOTE//PROGRESS", None, "bad\x00char\r\nPlan: ok"),
                        (T0, "LOINC//718-7", 1.0, "")])
    graph = build_graph(rec, SMALL_CATALOG)
    assert graph.event("e1").text == "badchar\r\nPlan: ok" and graph.event("e2").text is None


def test_benchmark_compares_like_with_like():
    """The benchmark's networkx build makes the same nodes and edges as `build_graph` (a fair comparison)."""
    from benchmarks.bench_graph import large_patient, networkx_build

    record, catalog = large_patient(target_nodes=800, seed=3)
    graph = build_graph(record, catalog)
    reference = networkx_build(record, catalog)
    assert 700 <= graph.n_nodes <= 1000
    assert set(reference.nodes) == set(graph.node_ids()) and set(reference.edges) == set(graph.edge_list())
    assert {n for n, d in reference.nodes(data=True) if d["type"] == "section"} == set(graph.node_ids(NodeType.SECTION))
