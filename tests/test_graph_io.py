"""GraphML round trip (ours and networkx's reader) and XML patient input (both variants) with its errors."""

from __future__ import annotations

from datetime import datetime, timedelta

import networkx as nx
import pytest

from tests.graph_fixtures import SMALL_CATALOG, canonical, richest, small_record, synth_records
from vista.graph import GraphFileError, GraphInputError, build_graph, read_graph, write_graph
from vista.graph.columnar import columnar_paths, read_columnar, read_columnar_metadata, write_columnar
from vista.graph.xml_input import encounter_xml, read_patient_xml, source_from_xml
from vista.shared.timeline import render_timeline

T0 = datetime(2020, 1, 5, 9, 0)


def tricky_record():
    note = "RADIOLOGY REPORT\r\nFindings: 5 mm <nodule> & \"ground-glass\" ]]> opacity; café  \tdouble space\nImpression: ok  "
    return small_record([
        (None, "GENDER//F", None, None), (datetime(1950, 3, 1), "MEDS_BIRTH", None, None),
        (T0, "ENCOUNTER//AMB", None, None), (T0, "LOINC//718-7", 1e-07, None), (T0, "LOINC//718-7", 11.2, "hemolyzed"),
        (T0 + timedelta(minutes=5), "ICD10CM//J18.9", None, None), (T0 + timedelta(hours=1), "NOTE//PROGRESS", None, note),
        (T0 + timedelta(days=3, microseconds=7), "RXNORM//6809", None, None),
    ])


def graphs_under_test():
    records, catalog = synth_records()
    return [build_graph(r, catalog) for r in richest(3)] + [build_graph(tricky_record(), SMALL_CATALOG)]


# ------------------------------------------------------------------------------------------------ GraphML
@pytest.fixture(params=["python", "arrow"])
def formatter(request, monkeypatch):
    """Both GraphML formatters: Python (small graphs) and Arrow (large ones), the latter in blocks of 5 rows."""
    import vista.graph.graphml as graphml

    if request.param == "arrow":
        monkeypatch.setattr(graphml, "ARROW_MIN_ROWS", 0)
        monkeypatch.setattr(graphml, "CHUNK_ROWS", 5)
    return request.param


def test_graphml_round_trip_is_exact(tmp_path, formatter):
    for graph in graphs_under_test():
        path = write_graph(graph, tmp_path)
        assert path == tmp_path / f"{graph.subject_id}.graphml"
        back = read_graph(path)
        assert back == graph
        assert back.events_in_order() == graph.events_in_order() and back.encounters() == graph.encounters()
        assert not list(tmp_path.glob(".*.tmp"))  # atomic write left no temporary file


def test_networkx_reads_the_same_graph(tmp_path, formatter):
    for graph in graphs_under_test():
        path = write_graph(graph, tmp_path / "g.graphml")
        loaded = nx.read_graphml(path)
        expected = graph.to_networkx()
        assert isinstance(loaded, nx.DiGraph) and not loaded.is_multigraph()
        assert loaded.number_of_nodes() == graph.n_nodes and loaded.number_of_edges() == graph.n_edges
        assert dict(loaded.nodes(data=True)) == dict(expected.nodes(data=True))
        assert {(a, b): d for a, b, d in loaded.edges(data=True)} == {(a, b): d for a, b, d in expected.edges(data=True)}
        assert {k: v for k, v in loaded.graph.items() if not k.endswith("_default")} == expected.graph
        assert list(loaded.nodes) == graph.node_ids()  # document order = table order


# ------------------------------------------------------------------------------------------------ columnar copy
def test_columnar_round_trip_equals_the_graphml_one(tmp_path):
    for graph in graphs_under_test():
        stem = tmp_path / str(graph.subject_id)
        write_columnar(graph, stem, extra={"content_hash": "abc"})
        from_columnar, from_graphml = read_columnar(stem), read_graph(write_graph(graph, tmp_path))
        assert from_columnar == from_graphml == graph
        assert from_columnar.events_in_order() == from_graphml.events_in_order()
        assert from_columnar.to_networkx().nodes(data=True) == from_graphml.to_networkx().nodes(data=True)
        assert read_columnar_metadata(stem) == {"content_hash": "abc"}
        assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("damage", ["missing_nodes", "missing_edges", "corrupt", "edges_of_another_graph"])
def test_a_damaged_columnar_copy_raises_graph_file_error_naming_the_file(tmp_path, damage):
    small, other = build_graph(tricky_record(), SMALL_CATALOG), graphs_under_test()[0]
    nodes, edges = columnar_paths(tmp_path / "g")
    write_columnar(small, tmp_path / "g")
    if damage == "missing_nodes":
        nodes.unlink()
        culprit, words = nodes, "no such columnar graph file"
    elif damage == "missing_edges":
        edges.unlink()
        culprit, words = edges, "no such columnar graph file"
    elif damage == "corrupt":
        nodes.write_bytes(b"not arrow")
        culprit, words = nodes, "not a readable Arrow IPC file"
    else:
        write_columnar(other, tmp_path / "o")
        columnar_paths(tmp_path / "o")[1].replace(edges)
        culprit, words = edges, "an interrupted write"
    with pytest.raises(GraphFileError, match=rf"{culprit}: .*{words}"):
        read_columnar(tmp_path / "g")


def test_tricky_text_survives_graphml(tmp_path):
    graph = build_graph(tricky_record(), SMALL_CATALOG)
    loaded = nx.read_graphml(write_graph(graph, tmp_path / "t.graphml"))
    assert loaded.nodes["e6"]["text"] == tricky_record().events[6].text_value
    assert loaded.nodes["e3"]["value"] == 1e-07 and loaded.nodes["e7"]["time"] == "2020-01-08T09:00:00.000007"


@pytest.mark.parametrize(("content", "words"), [
    (b"<graphml", "not well-formed XML"),
    (b"<nodes/>", "not a GraphML document"),
])
def test_unreadable_graphml_files_raise_graph_file_error(tmp_path, content, words):
    path = tmp_path / "bad.graphml"
    path.write_bytes(content)
    with pytest.raises(GraphFileError, match=words) as caught:
        read_graph(path)
    assert str(path) in str(caught.value)
    with pytest.raises(GraphFileError, match="cannot read"):
        read_graph(tmp_path / "missing.graphml")


def test_graphml_with_a_bad_value_names_node_and_attribute(tmp_path):
    graph = build_graph(tricky_record(), SMALL_CATALOG)
    path = write_graph(graph, tmp_path / "g.graphml")
    path.write_text(path.read_text().replace('<data key="n_value">11.2</data>', '<data key="n_value">eleven</data>'))
    with pytest.raises(GraphFileError, match="node e4: attribute 'value' has a bad value 'eleven'"):
        read_graph(path)


# ------------------------------------------------------------------------------------------------ XML input
def with_locator(xml: str, record) -> str:
    return xml.replace(f'<patient id="{record.subject_id}"',
                       f'<patient id="{record.subject_id}" shard="{record.shard}" first_row="{record.first_row}"', 1)


def without_patient_level(graph):
    """Canonical nodes/edges without the static rows and birth (which a timeline keeps on its root) and their codes."""
    nodes, edges = canonical(graph)
    dropped = {e.event_id for e in graph.patient_events()}
    kept_codes = {nodes[i]["code"] for i in nodes if graph.has_event(i) and i not in dropped}
    dropped |= {f"code:{graph.event(d).code}" for d in list(dropped) if graph.event(d).code not in kept_codes}
    return ({k: v for k, v in nodes.items() if k not in dropped},
            {e for e in edges if e[0] not in dropped and e[1] not in dropped})


def event_facts(graph, codes):
    return [(e.event_id, e.time, e.value, e.unit, e.description, e.text) for e in graph.events_in_order() if e.code in codes]


def test_timeline_xml_gives_the_meds_graph():
    records, catalog = synth_records()
    for record in richest(3):
        meds = build_graph(record, catalog)
        xml = with_locator(render_timeline(record, catalog).to_xml(), record)
        from_xml = build_graph(source_from_xml(xml, path="p.xml", catalog=catalog))
        assert from_xml.info.source_format == "xml-timeline" and from_xml.info.source == record.shard
        assert from_xml.info.demographics == meds.info.demographics
        assert without_patient_level(from_xml) == without_patient_level(meds)
        # Without the catalog, descriptions and units come from the document itself (no parents then). A code whose
        # every element carries ": text" cannot be told apart from its description: those are left out here.
        bare = build_graph(source_from_xml(xml, path="p.xml"))
        plain = {e.code for e in from_xml.events_in_order() if e.text is None}
        assert event_facts(bare, plain) == event_facts(from_xml, plain)
        assert all(not c.parents for c in bare.codes())


def test_encounter_xml_gives_the_meds_graph(tmp_path):
    records, catalog = synth_records()
    for record in richest(3) + [tricky_record()]:
        cat = catalog if record.subject_id != 7 else SMALL_CATALOG
        meds = build_graph(record, cat)
        path = tmp_path / f"{record.subject_id}.xml"
        path.write_text(encounter_xml(meds), encoding="utf-8")
        from_xml = read_patient_xml(path, cat)
        assert from_xml.info.source_format == "xml-encounters"
        assert from_xml.nodes.equals(meds.nodes) and from_xml.edges.equals(meds.edges)
        assert from_xml.info.demographics == meds.info.demographics


ENCOUNTER_DOC = """<patient id="7" sex="F" birth_date="1950-03-01">
<event id="e0" code="GENDER//F"/>
<encounter id="V1" type="AMB" start="2020-01-05T09:00:00">
<event id="L1" code="LOINC//718-7" time="2020-01-05T09:30:00" value="11.2" unit="g/dL" description="Hemoglobin"/>
<event id="L2" code="LOINC//718-7" time="2020-01-07T09:30:00" value="10.1" unit="g/dL"/>
</encounter>
<event id="N1" code="NOTE//PROGRESS" time="2020-01-05T10:00:00">Findings: hemoglobin low.
Plan: iron.</event>
<encounter id="d" type="DAY" start="2020-02-01">
<event id="L3" code="LOINC//718-7" time="2020-02-01T08:00:00" value="12.0"/>
</encounter>
</patient>
"""


def test_encounter_variant_keeps_its_nesting_and_points_to_lines(tmp_path):
    path = tmp_path / "p7.xml"
    path.write_text(ENCOUNTER_DOC)
    graph = read_patient_xml(path)
    enc = {e.event_id: e.encounter for e in graph.events_in_order()}
    assert enc == {"L1": "V1", "N1": "V1", "L2": "V1", "L3": "d"}  # L2 stays in V1 although 2 days later; N1 by rule
    assert graph.encounter("d").pseudo and graph.encounter("V1").event_id == "V1"
    assert graph.event("V1").code == "ENCOUNTER//AMB"
    lines = path.read_text().splitlines()
    for event_id in ("e0", "V1", "L1", "N1", "L3"):
        ref = graph.provenance(event_id)
        assert ref.shard == str(path) and f'id="{event_id}"' in lines[ref.row - 1]
    assert graph.info.demographics.sex == "F" and graph.info.demographics.birth.isoformat() == "1950-03-01"
    assert graph.event("L3").unit is None and graph.code("LOINC//718-7").description == "Hemoglobin"
    assert [s.title for s in graph.sections("N1")] == ["Findings", "Plan"]
    assert graph.mentions("N1#s0") == [("LOINC//718-7", "hemoglobin")]


# ------------------------------------------------------------------------------------------------ bad XML
TIMELINE_OK = ('<patient id="7" sex="F"><events time="2020-01-05 09:00"><visits><visit id="e1" code="ENCOUNTER//AMB">'
               'Visit</visit></visits><labs><lab id="e2" code="LOINC//718-7" value="11.2">Hemoglobin</lab></labs>'
               '</events></patient>')


@pytest.mark.parametrize(("document", "field", "words"), [
    ("<patient id='7'><events time='2020-01-05'>", None, "not well-formed XML"),
    ("<person id='7'/>", None, "root element is <person>"),
    ("<patient id='seven'/>", "id", "is not an integer subject id"),
    ("<patient id='7'/>", "time", "no events"),
    ("<patient id='7'><event id='e0' code='GENDER//F'/></patient>", "time", "no events"),
    (TIMELINE_OK.replace("2020-01-05 09:00", "2400-01-05 09:00"), "time", "2400-01-05T09:00:00 is on or after 2300-01-01"),
    (TIMELINE_OK.replace("2020-01-05 09:00", "1890-01-05"), "time", "before 1900-01-01"),
    (TIMELINE_OK.replace("2020-01-05 09:00", "last tuesday"), "time", "'last tuesday' is not an ISO date/time"),
    (TIMELINE_OK.replace(' id="e2"', ""), "id", "<lab> has no id attribute"),
    (TIMELINE_OK.replace(' code="LOINC//718-7"', ""), "code", "<lab> has no code attribute"),
    (TIMELINE_OK.replace('value="11.2"', 'value="high"'), "value", "'high' is not a number"),
    (TIMELINE_OK.replace('id="e2"', 'id="e1"'), "id", "'e1' is used twice"),
    (TIMELINE_OK.replace('<lab id="e2"', '<lab part="1/2" id="e2"'), "part", "join the chunks first"),
    (TIMELINE_OK.replace("<labs>", "<stuff>").replace("</labs>", "</stuff>"), None, "unknown group <stuff>"),
    ("<patient id='7'><encounter type='AMB' start='2020-01-05'/></patient>", "id", "<encounter> has no id"),
    ("<patient id='7'><encounter id='v' type='AMB'/></patient>", "start", "has no start attribute"),
    ("<patient id='7'><encounter id='v' type='AMB' start='2020-01-05'><event id='a' code='X//1'/></encounter></patient>",
     "time", "<event> has no time attribute"),
    ("<patient id='7'><encounter id='v' start='2020-01-05'/></patient>", "code", "neither a type nor a code"),
    ("<patient id='7' sex='M'><event id='e0' code='GENDER//F'/><event id='e1' code='X//1' time='2020-01-01'/></patient>",
     "sex", "root says 'M' but the events say 'F'"),
    ("<patient id='7' shard='data/0.parquet'><event id='e1' code='X//1' time='2020-01-01'/></patient>", "first_row",
     "shard and first_row go together"),
    ("<patient id='7' shard='data/0.parquet' first_row='3'><event id='x1' code='X//1' time='2020-01-01'/></patient>", "id",
     "is not of the form e<k>"),
])
def test_bad_xml_raises_a_clear_error(tmp_path, document, field, words):
    path = tmp_path / "patient.xml"
    path.write_text(document)
    with pytest.raises(GraphInputError, match=words) as caught:
        read_patient_xml(path)
    error = caught.value
    assert error.field == field
    assert str(path) in str(error) and error.__cause__ is None and (error.__suppress_context__ or error.__context__ is None)
    if "root element" not in words and "well-formed" not in words:
        assert error.patient in ("7", "seven")
        assert "patient " in str(error)


def test_missing_xml_file(tmp_path):
    with pytest.raises(GraphInputError, match="cannot read the file"):
        read_patient_xml(tmp_path / "nope.xml")


def test_out_of_range_time_with_a_locator_names_file_and_shard(tmp_path):
    path = tmp_path / "p.xml"
    located = TIMELINE_OK.replace('sex="F"', 'sex="F" shard="data/0.parquet" first_row="10"')
    path.write_text(located.replace("2020-01-05 09:00", "2301-01-01"))
    with pytest.raises(GraphInputError) as caught:
        read_patient_xml(path)
    assert str(caught.value).startswith(f"{path} (rows of data/0.parquet): patient 7: event e1: field 'time'")
