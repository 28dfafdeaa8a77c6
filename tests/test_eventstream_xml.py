"""The VISTA team's ``<eventstream>`` XML (their meds2text markup) into the MEDS Graph: every event present with its
provenance line, codes normalised by the ``vista_xml`` profile, notes with their kind and text, visits as real
encounters, providers and care sites kept, demographics from ``<person>``; bad input as one clear error; and a
folder of such files through ``vista graph --xml-dir`` and ``jobs.build_graphs --xml-dir``."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import networkx as nx
import pyarrow as pa
import pytest
from lxml import etree

from spellings import EVENTSTREAM_DEMO, EXPECTED
from vista.graph import (
    GraphInputError,
    GraphStore,
    NodeType,
    build_graph,
    read_graph,
    read_patient_xml,
    source_from_xml,
    write_graph,
)
from vista.shared.records import RowRef

FACTS = EXPECTED["eventstream_demo"]


def demo_graph():
    return read_patient_xml(EVENTSTREAM_DEMO)


def event_elements() -> list[etree._Element]:
    """The ``<event>`` elements of the demo file in document order, found independently of the reader."""
    return etree.parse(str(EVENTSTREAM_DEMO)).getroot().findall(".//event")


# ------------------------------------------------------------------------------------------------ the demo file
def test_every_event_of_the_file_is_a_graph_event_pointing_to_its_line():
    graph = demo_graph()
    elements = event_elements()
    assert len(elements) == FACTS.events
    assert Counter(e.get("type") for e in elements) == FACTS.events_by_type
    source_ids = [i for i in graph.node_ids() if graph.has_event(i)]
    assert sorted(source_ids, key=lambda i: int(i[1:])) == [f"e{k}" for k in range(FACTS.events)]
    assert graph.info.source_format == "xml-eventstream" and graph.info.subject_id == FACTS.subject_id
    for k, element in enumerate(elements):
        event = graph.event(f"e{k}")
        assert event.provenance == RowRef(str(EVENTSTREAM_DEMO), element.sourceline)
        assert event.original_code == element.get("code")
        assert event.time == datetime.fromisoformat(element.getparent().get("timestamp"))
        assert event.attribute("table") == element.get("type")
        assert event.visit_id == element.get("visit_id")
        for name in ("provider_id", "care_site_id", "note_id", "procedure_id"):
            given = element.get(name)
            assert event.attribute(name) == (given if given not in (None, "_") else None), (k, name)
        if element.get("name") and event.attribute("name") is None:
            assert event.description == element.get("name")


def test_codes_are_in_the_canonical_spelling_and_keep_the_source_one():
    graph = demo_graph()
    events = [graph.event(f"e{k}") for k in range(FACTS.events)]
    assert all("//" in e.code for e in events)
    lung = [e for e in events if e.code == "ICD10CM//C34.11"]
    assert len(lung) == FACTS.lung_cancer_events and {e.source_code for e in lung} == {"ICD10/C34.11"}
    assert {e.code for e in events if e.attribute("table") == "procedure"} == {"CPT//71260", "CPT//31628", "CPT//78815"}
    assert {e.code for e in events if e.attribute("table") == "drug_exposure"} == \
        {"RXNORM//197361", "RXNORM//1049221", "RXNORM//40048", "RXNORM//56946"}
    assert graph.code("ICD10CM//C34.11").description == "Malignant neoplasm of upper lobe, right bronchus or lung"


def test_values_and_units_of_measurements_and_observations():
    graph = demo_graph()
    valued = {e.code: (e.value, e.unit) for e in graph.events_in_order() if e.value is not None}
    assert {code: unit for code, (_, unit) in valued.items()} == dict(FACTS.units)
    assert valued["LOINC//718-7"] == (pytest.approx(11.8), "g/dL")
    smoking = next(e for e in graph.events_in_order() if e.code == "LOINC//72166-2")
    assert smoking.value is None and smoking.text.startswith("Former smoker")


def test_notes_keep_their_kind_text_and_sections():
    graph = demo_graph()
    notes = graph.notes()
    assert Counter(n.code.removeprefix("NOTE//") for n in notes) == FACTS.notes_by_kind
    elements = {f"e{k}": e for k, e in enumerate(event_elements())}
    for note in notes:
        assert note.type is NodeType.NOTE and note.text == elements[note.event_id].text
        assert note.attribute("note_id") == elements[note.event_id].get("note_id")
    radiology = next(n for n in notes if n.code == "NOTE//RADIOLOGY")
    assert [s.title for s in graph.sections(radiology)] == ["EXAM", "Findings", "Impression"]
    pathology = next(n for n in notes if n.code == "NOTE//PATHOLOGY")
    assert pathology.source_code == "LOINC/11526-1" and "Adenocarcinoma" in pathology.text


def test_visits_are_real_encounters_with_their_events():
    graph = demo_graph()
    encounters = {e.node_id: e for e in graph.encounters()}
    real = {e.visit_id: e for e in encounters.values() if not e.pseudo}
    assert {v: e.encounter_type for v, e in real.items()} == FACTS.visits
    first = real["7001"]
    members = [e.event_id for e in graph.events_of(first)]
    assert members == [f"e{k}" for k in range(1, 8)]  # e4 has no visit_id: its <encounter> holds that visit only
    assert first.start == datetime(2023, 1, 9, 9) and first.end == datetime(2023, 1, 9, 11, 30)  # end_timestamp
    inpatient = real["7002"]
    assert inpatient.end == datetime(2023, 2, 8, 9)  # its last event: no end_timestamp on that <encounter>
    assert {e.visit_id for e in graph.events_of(inpatient)} == {"7002"}
    (only_id,) = FACTS.visit_only_ids
    visit = encounters[f"visit:{only_id}"]
    assert visit.pseudo and visit.encounter_type == "VISIT" and visit.visit_id == only_id
    assert [e.code for e in graph.events_of(visit)][-1] == "NOTE//RADIOLOGY"
    day = encounters["day:2023-03-20"]  # drugs without any visit id: the day they were given
    assert day.encounter_type == "DAY" and {e.code for e in graph.events_of(day)} == {"RXNORM//40048", "RXNORM//56946"}
    assert sum(len(graph.events_of(e)) for e in encounters.values()) == FACTS.events - len(FACTS.visits)


def test_providers_care_sites_payer_plan_and_demographics():
    graph = demo_graph()
    assert tuple(p.provider_id for p in graph.info.providers) == FACTS.providers
    assert tuple(s.care_site_id for s in graph.info.care_sites) == FACTS.care_sites
    ct = next(e for e in graph.events_in_order() if e.code == "CPT//71260")
    radiologist = graph.provider_of(ct)
    assert (radiologist.specialty, radiologist.gender, radiologist.year_of_birth) == ("Diagnostic Radiology", "MALE", None)
    assert radiologist.care_site_id == "32"  # linked by its care-site name
    assert graph.care_site_of(ct).name == "Radiology Department"
    pathologist = graph.provider_of(next(n for n in graph.notes() if n.code == "NOTE//PATHOLOGY"))
    assert pathologist.specialty == "Pathology" and pathologist.care_site_id is None  # "_" is no value
    assert graph.care_site_of(next(e for e in graph.events_in_order() if e.code == "ICD10CM//R91.1")) is None
    assert ct.attribute("payer_plan") == "Medicare"
    demo = graph.info.demographics
    assert (demo.sex, demo.birth, demo.race, demo.ethnicity) == (FACTS.sex, FACTS.birth, FACTS.race, FACTS.ethnicity)


def test_graphml_keeps_everything_and_networkx_reads_it(tmp_path):
    graph = demo_graph()
    path = write_graph(graph, tmp_path / "g.graphml")
    again = read_graph(path)
    assert again == graph and again.info.providers == graph.info.providers
    assert again.event("e5").attributes == graph.event("e5").attributes
    loaded = nx.read_graphml(path)
    assert loaded.nodes["e13"]["source_code"] == "ICD10/C34.11" and loaded.nodes["e8"]["visit_id"] == "7002"


def test_store_builds_the_file_once(tmp_path):
    store = GraphStore(tmp_path / "store")
    assert store.build_xml([EVENTSTREAM_DEMO]).built == 1
    assert store.build_xml([EVENTSTREAM_DEMO]).skipped == 1
    stored, direct = store.load(FACTS.subject_id), demo_graph()
    assert replace(stored.info, content_hash=None) == direct.info
    assert stored.nodes.equals(direct.nodes) and stored.edges.equals(direct.edges)


# ------------------------------------------------------------------------------------------------ the newer spelling
NEWER = """<?xml version='1.0' encoding='utf-8'?>
<eventstream person_id="77">
  <encounter>
    <person>
      <birthdate>1949-11-30</birthdate>
      <demographics><gender code="Gender/8507">MALE</gender><race>Asian</race></demographics>
    </person>
    <providers><provider provider_id="5" speciality="Oncology" year_of_birth="1970" care_site_id="9" npi="1234567890"/></providers>
    <events>
      <entry timestamp="2019-04-02 10:00">
        <event table="visit" code="Visit/ER" name="Emergency Room Visit" visit_id="300" provider_id="5" care_site_id="9"/>
      </entry>
      <entry timestamp="2019-04-02 10:20">
        <event table="measurement" code="LOINC/8867-4" name="Heart rate" visit_id="300" provider_id="5">96</event>
        <event table="note" code="Note/34117-2" name="History and Physical" visit_id="300" provider_id="_">Chief complaint: dyspnea.</event>
      </entry>
    </events>
  </encounter>
  <encounter>
    <events>
      <entry timestamp="2019-05-14 08:05">
        <event table="measurement" code="LOINC/2160-0" name="Creatinine" visit_id="301">1.25</event>
        <event table="condition" code="ICD10CM/C34.90" name="Malignant neoplasm of unspecified part of unspecified bronchus or lung" visit_id="301"/>
      </entry>
    </events>
  </encounter>
</eventstream>
"""


def test_newer_table_spelling_numeric_content_and_visits_known_by_id():
    graph = build_graph(source_from_xml(NEWER, path="newer.xml"))
    assert [e.code for e in graph.events_in_order()] == ["LOINC//8867-4", "NOTE//HISTORY_AND_PHYSICAL", "LOINC//2160-0",
                                                         "ICD10CM//C34.90"]
    heart, note, creatinine, lung = graph.events_in_order()
    assert (heart.value, heart.text, creatinine.value) == (96.0, None, 1.25)
    assert note.text == "Chief complaint: dyspnea." and note.attribute("provider_id") is None
    (er,) = [e for e in graph.encounters() if not e.pseudo]
    assert (er.encounter_type, er.visit_id) == ("ER", "300") and graph.events_of(er) == [heart, note]
    visit = graph.encounter("visit:301")
    assert visit.start == datetime(2019, 5, 14, 8, 5) and graph.events_of(visit) == [creatinine, lung]
    (provider,) = graph.info.providers
    assert provider.attributes == (("npi", "1234567890"),) and graph.provider_of(heart).specialty == "Oncology"
    assert (graph.info.demographics.sex, graph.info.demographics.race) == ("M", "Asian")


# ------------------------------------------------------------------------------------------------ bad input
def _doc(events: str, *, root: str = '<eventstream person_id="5">', person: str = "", group: str = "<encounter>") -> str:
    return f"{root}{group}{person}<events>{events}</events></encounter></eventstream>"


_OK = '<entry timestamp="2020-01-01 09:00"><event type="condition" code="ICD10/I10" name="Hypertension"/></entry>'


@pytest.mark.parametrize("document, field, words", [
    (_doc(_OK, root='<eventstream person_id="P-5">'), "person_id", "not an integer subject id"),
    (_doc(_OK, root="<eventstream>"), "person_id", "not an integer subject id"),
    (_doc('<entry><event type="condition" code="ICD10/I10"/></entry>'), "timestamp", "has no timestamp"),
    (_doc('<entry timestamp="2020-13-45 09:00"><event code="ICD10/I10"/></entry>'), "timestamp", "is not a date/time"),
    (_doc('<entry timestamp="2020-01-01 09:00"><event type="condition" name="x"/></entry>'), "code", "has no code"),
    (_doc('<entry timestamp="2020-01-01 09:00"><event code="_"/></entry>'), "code", "has no code"),
    (_doc('<entry timestamp="2020-01-01 09:00"><event code="ICD10/I10"><b>x</b></event></entry>'), None, "text only"),
    (_doc(_OK + "<visit/>"), None, "unexpected element <visit> in <events>"),
    (_doc(_OK, group='<encounter start_timestamp="2020-02-01 00:00" end_timestamp="2020-01-01 00:00">'),
     "end_timestamp", "before start_timestamp"),
    (_doc(_OK, person="<person><birthdate>1950-02-30</birthdate></person>"), "birthdate", "not a date"),
    (_doc(_OK, person="<person><height>170</height></person>"), None, "unexpected element <height> in <person>"),
    (_doc(_OK, person='<providers><provider provider_id="1" year_of_birth="nineteen"/></providers>'),
     "year_of_birth", "not a year"),
    (_doc(_OK, person='<providers><provider gender="MALE"/></providers>'), "provider_id", "has no provider_id"),
    (_doc(""), "events", "holds no <event>"),
    (_doc('<entry timestamp="2300-01-01 09:00"><event code="ICD10/I10"/></entry>'), "time", "implausible date"),
])
def test_bad_documents_raise_one_error_naming_file_patient_element_and_field(tmp_path, document, field, words):
    path = tmp_path / "bad.xml"
    path.write_text(document)
    with pytest.raises(GraphInputError) as caught:
        read_patient_xml(path)
    error = caught.value
    assert error.source == str(path) and words in error.problem, str(error)
    assert error.field == field, str(error)
    if "person_id" not in (field or ""):
        assert error.patient == "5"
    assert error.element is not None or field == "time" or words.startswith("holds no")


def test_person_blocks_that_disagree_are_an_error(tmp_path):
    groups = ("<encounter><person><demographics><gender>FEMALE</gender></demographics></person><events>" + _OK +
              "</events></encounter><encounter><person><demographics><gender>MALE</gender></demographics></person>"
              "</encounter>")
    path = tmp_path / "two.xml"
    path.write_text(f'<eventstream person_id="5">{groups}</eventstream>')
    with pytest.raises(GraphInputError, match=r"line 1 <gender>: field 'sex': this <person> says 'M' but an earlier"):
        read_patient_xml(path)


def test_other_roots_name_both_accepted_shapes(tmp_path):
    path = tmp_path / "x.xml"
    path.write_text("<record id='1'/>")
    with pytest.raises(GraphInputError, match=r"root element is <record>, expected <patient> or <eventstream>"):
        read_patient_xml(path)


# ------------------------------------------------------------------------------------------------ folders of files
def xml_folder(root: Path) -> dict[str, int]:
    """A folder with the demo file, the newer-spelling file and a bad one; file → subject id of the good ones."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "demo.xml").write_bytes(EVENTSTREAM_DEMO.read_bytes())
    (root / "newer.xml").write_text(NEWER)
    (root / "broken.xml").write_text(_doc('<entry timestamp="2020-01-01 09:00"><event type="note"/></entry>'))
    return {"demo.xml": FACTS.subject_id, "newer.xml": 77}


def test_vista_graph_xml_dir_loads_eventstream_files(tmp_path, capsys):
    from vista.cli import main

    folder = tmp_path / "xml"
    good = xml_folder(folder)
    store = tmp_path / "store"
    assert main(["graph", "--xml-dir", str(folder), "--store", str(store)]) == 2  # broken.xml: one-line error
    err = capsys.readouterr().err
    assert "broken.xml: patient 5: event e0 (line 1): field 'code': <event> has no code" in err
    (folder / "broken.xml").unlink()
    assert main(["graph", "--xml-dir", str(folder), "--store", str(store)]) == 0
    assert "built 2 graph(s)" in capsys.readouterr().out
    loaded = GraphStore(store)
    assert loaded.subject_ids() == sorted(good.values())
    assert len([i for i in loaded.load(FACTS.subject_id).node_ids() if loaded.load(FACTS.subject_id).has_event(i)]) == FACTS.events


def test_vista_job_actor_builds_eventstream_files_and_reports_the_broken_one(tmp_path):
    from vista.shared.meds.tasks import keys_table
    from jobs.vista_actor import VistaSettings
    from jobs.vista_tasks import XML_FILE
    from vista.graph.xml_files import list_xml_patients
    from vista.graph.store import read_stored_graph
    from test_jobs_vista import rows_of, run_actor

    folder = tmp_path / "xml"
    good = xml_folder(folder)
    tasks, _ = list_xml_patients(folder)
    batch = keys_table([t.key for t in tasks]).append_column(XML_FILE, pa.array([t.relative for t in tasks]))
    out = tmp_path / "out"
    statuses = run_actor(VistaSettings(out=out, xml_dir=folder, run_id="x"), batch)
    assert sorted(s["status"] for s in statuses) == ["error", "ok", "ok"]
    rows = {Path(r.source).name: r for r in rows_of(out).values()}
    for file, subject in good.items():
        assert (rows[file].status, rows[file].subject_id) == ("ok", subject)
        graph = read_stored_graph(out, rows[file].graph_file, graphml=True)
        assert graph.info.source_format == "xml-eventstream" and rows[file].n_events > 0
    assert rows["demo.xml"].n_events == FACTS.events
    broken = rows["broken.xml"]
    assert broken.error_kind == "input" and "field 'code'" in broken.error and broken.subject_id == 5


@pytest.mark.ray
@pytest.mark.slow
def test_build_graphs_job_runs_on_a_folder_of_eventstream_files(ray_session, tmp_path, capsys):
    from jobs.build_graphs import main

    folder = tmp_path / "xml"
    good = xml_folder(folder)
    (folder / "broken.xml").unlink()
    out = tmp_path / "out"
    assert main(["--xml-dir", str(folder), "--out", str(out), "--progress-every", "0"]) == 0
    import polars as pl

    rows = pl.read_parquet(out / "patients.parquet")
    assert sorted(rows["subject_id"].to_list()) == sorted(good.values()) and set(rows["status"]) == {"ok"}
    index = GraphStore(out).scan_index().collect()  # the job's output directory is a graph store
    assert index.filter((pl.col("subject_id") == FACTS.subject_id) & pl.col("row").is_not_null()).height == FACTS.events


# ------------------------------------------------------------------------------------------------ visit ids from MEDS
def test_meds_rows_with_visit_ids_make_real_encounters_and_round_trip(tmp_path):
    """What the reader gives the builder for an OMOP/Synthea/MIMIC record: visit ids, units from the row, sex rows
    timed at the birth (meds_etl) — visits by id, units kept, sex found, and the encounter XML reads back the same."""
    from vista.graph import encounter_xml
    from vista.shared.records import CodeCatalog, Event, PatientRecord

    t = datetime(2021, 3, 1, 9)
    record = PatientRecord(12, "data/0.parquet", 40, [
        Event("e0", datetime(1960, 5, 1), "MEDS_BIRTH", None, None),
        Event("e1", datetime(1960, 5, 1), "GENDER//F", None, None, source_code="Gender/F"),
        Event("e2", t, "ENCOUNTER//IP", None, None, source_code="Visit/IP", visit_id="81"),
        Event("e3", t + timedelta(days=3), "LOINC//718-7", 10.9, None, source_code="LOINC/718-7", unit="g/dL",
              visit_id="81"),
        Event("e4", t + timedelta(days=40), "ICD10CM//C34.11", None, None, visit_id="81"),  # past any window
        Event("e5", t + timedelta(days=90), "LAB//50912", 1.1, None, source_code="LAB//50912//mg/dL", unit="mg/dL",
              visit_id="95"),
        Event("e6", t + timedelta(days=90, hours=5), "ICD10CM//I10", None, None, visit_id="95"),
        Event("e7", t + timedelta(days=200), "RXNORM//29046", None, None),
    ])
    graph = build_graph(record, CodeCatalog())
    assert graph.info.demographics.sex == "F" and [e.event_id for e in graph.patient_events()] == ["e0", "e1"]
    visit, by_id, day = graph.encounters()
    assert (visit.node_id, visit.visit_id, visit.encounter_type) == ("e2", "81", "IP")
    assert [e.event_id for e in graph.events_of(visit)] == ["e3", "e4"] and visit.end == t + timedelta(days=40)
    assert (by_id.node_id, by_id.encounter_type, by_id.start) == ("visit:95", "VISIT", t + timedelta(days=90))
    assert [e.event_id for e in graph.events_of(by_id)] == ["e5", "e6"] and day.node_id.startswith("day:")
    assert graph.event("e5").unit == "mg/dL" and graph.event("e5").source_code == "LAB//50912//mg/dL"
    assert graph.event("e3").provenance == RowRef("data/0.parquet", 43)
    path = tmp_path / "12.xml"
    path.write_text(encounter_xml(graph))
    again = read_patient_xml(path, CodeCatalog())  # the same (empty) catalog: no titles looked up either way
    assert again.nodes.equals(graph.nodes) and again.edges.equals(graph.edges)
    assert again.info.demographics == graph.info.demographics and again.info.source_format == "xml-encounters"
