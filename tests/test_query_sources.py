"""`open_sources`: source events opened from built graphs (hand-made, a stored synthetic cohort, XML) with their
content, note excerpts and MEDS row provenance — checked against the parquet rows themselves."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from graph_fixtures import synth_records, synth_root
from toa_fixtures import toa_graph
from vista.graph import GraphStore, read_patient_xml
from vista.query import UnknownEventError, excerpt, open_sources, source_lines, sources_text


def test_opened_events_carry_content_and_provenance():
    graph = toa_graph()
    lab, note, drug = open_sources(graph, ["e4", "e11", "e13", "e4"])  # duplicates opened once, order kept
    assert (lab.event_id, lab.kind, lab.code, lab.value, lab.unit) == ("e4", "event", "LOINC//718-7", 13.1, "g/dL")
    assert lab.description == "Hemoglobin" and lab.text is None and lab.text_chars == 0
    assert (lab.source, lab.row, lab.provenance_unit) == ("data/train/0.parquet", 504, "row")
    assert note.kind == "note" and note.text.startswith("Final diagnosis: adenocarcinoma") and not note.text_truncated
    assert note.encounter == "e8" and note.time.isoformat() == "2020-03-10T10:00:00"
    assert drug.description == "pembrolizumab" and graph.provenance("e13").row == drug.row == 513


def test_note_text_is_cut_to_an_excerpt_of_whole_words():
    (note,) = open_sources(toa_graph(), ["e17"], excerpt_chars=40)
    full = toa_graph().event("e17").text
    assert note.text_truncated and note.text_chars == len(full) and len(note.text) <= 40
    assert note.text.endswith("…") and full.startswith(note.text[:-1])
    assert "(excerpt: " in "\n".join(source_lines(note))
    assert excerpt("alpha beta gamma delta", 12) == "alpha beta …"


def test_unknown_and_non_source_ids_are_one_clear_error():
    with pytest.raises(UnknownEventError) as err:
        open_sources(toa_graph(), ["e4", "e999", "patient:21", "code:LOINC//718-7"])
    message = str(err.value)
    assert message.startswith("subject 21: no source event 'e999', 'patient:21', 'code:LOINC//718-7' in its MEDS Graph")
    assert "data/train/0.parquet" in message and err.value.ids == ("e999", "patient:21", "code:LOINC//718-7")


def test_sources_of_a_stored_graph_point_at_their_meds_rows(tmp_path):
    records, catalog = synth_records()
    chosen = sorted(records)[:3]
    store = GraphStore(tmp_path / "store")
    store.build_records((records[s] for s in chosen), catalog)
    for subject in chosen:
        graph = store.load(subject)  # read back from GraphML
        ids = [e.event_id for e in graph.events_in_order()]
        opened = open_sources(graph, ids)
        table = pq.read_table(synth_root() / opened[0].source, columns=["subject_id", "code", "numeric_value",
                                                                           "text_value"])
        for source in opened:
            row = table.slice(source.row, 1).to_pylist()[0]
            assert row["subject_id"] == subject and row["code"] == source.code, source.event_id
            if row["numeric_value"] is not None:
                assert source.value == pytest.approx(row["numeric_value"], rel=1e-6)
            if row["text_value"] is not None:
                assert source.text_chars == len(row["text_value"])
        assert len(sources_text(opened).splitlines()) >= len(opened)


def test_xml_input_without_a_meds_locator_gives_file_and_line(tmp_path):
    path = tmp_path / "p9.xml"
    path.write_text('<patient id="9" sex="F">\n'
                    '<encounter id="e0" type="AMB" start="2021-02-01T09:00:00">\n'
                    '<event id="e1" code="LOINC//718-7" time="2021-02-01T09:30:00" value="10.5" unit="g/dL"/>\n'
                    '<event id="e2" code="NOTE//PROGRESS" time="2021-02-01T10:00:00">Plan: iron.</event>\n'
                    '</encounter>\n</patient>\n')
    lab, note = open_sources(read_patient_xml(path), ["e1", "e2"])
    assert (lab.source, lab.row, lab.provenance_unit, lab.value, lab.unit) == (str(path), 3, "line", 10.5, "g/dL")
    assert (note.row, note.text) == (4, "Plan: iron.")
    assert source_lines(lab, with_provenance=True)[0].endswith(f"(event; {path} line 3)")
