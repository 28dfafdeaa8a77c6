"""XML timeline rendering: format, demographics, modalities, escaping, errors, parsing back."""

from __future__ import annotations

from datetime import datetime

import pytest
from lxml import etree
from test_timeline_cases import BASE, SIMPLE_CATALOG, simple_record

from vista.shared.records import CodeCatalog, CodeInfo, Event, PatientRecord
from vista.shared.timeline import (
    DEFAULT_MODALITIES,
    Modality,
    ModalityTable,
    TimelineError,
    join_timelines,
    parse_timeline,
    render_timeline,
)
from vista.shared.tokens import count_tokens


def _record(*rows, subject_id=5):
    events = [Event(f"e{k}", t, code, v, x) for k, (t, code, v, x) in enumerate(rows)]
    return PatientRecord(subject_id=subject_id, shard="data/held_out/2.parquet", first_row=10, events=events)


def test_golden_timeline():
    rec = _record(
        (None, "GENDER//M", None, None),
        (None, "RACE//White", None, None),
        (None, "ETHNICITY//Not Hispanic or Latino", None, None),
        (None, "INSURANCE//medicare", None, None),
        (datetime(1948, 2, 29), "MEDS_BIRTH", None, None),
        (datetime(2019, 5, 2, 8, 15), "ENCOUNTER//ED", None, None),
        (datetime(2019, 5, 2, 8, 15), "RXNORM//197361", None, None),
        (datetime(2019, 5, 2, 8, 15), "ICD10CM//R05.9", None, None),
        (datetime(2019, 5, 2, 8, 15), "LOINC//8867-4", 88.0, None),
        (datetime(2019, 5, 2, 8, 15), "SNOMED//77176002", None, "Current every day smoker"),
        (datetime(2019, 6, 1), "CPT//71250", None, None),
        (datetime(2019, 6, 1), "NOTE//RADIOLOGY", None, "Spiculated 2.1 cm RUL nodule.\nRecommend biopsy."),
        (datetime(2020, 1, 1), "ICD10CM//C34.11", None, None),
    )
    catalog = CodeCatalog(
        [
            CodeInfo("ENCOUNTER//ED", "Emergency department visit"),
            CodeInfo("RXNORM//197361", "amlodipine 5 MG Oral Tablet"),
            CodeInfo("ICD10CM//R05.9", "Cough, unspecified"),
            CodeInfo("LOINC//8867-4", "Heart rate", unit="/min"),
            CodeInfo("SNOMED//77176002", "Smoker"),
            CodeInfo("CPT//71250", "CT thorax without contrast"),
            CodeInfo("NOTE//RADIOLOGY", "Radiology report"),
            CodeInfo("INSURANCE//medicare", "Medicare"),
        ]
    )
    timeline = render_timeline(rec, catalog, datetime(2020, 1, 1))
    assert timeline.to_xml() == (
        '<patient id="5" sex="M" birth_date="1948-02-29" race="White" ethnicity="Not Hispanic or Latino" prediction_time="2020-01-01">\n'
        '<other id="e3" code="INSURANCE//medicare">Medicare</other>\n'
        '<events time="2019-05-02 08:15">\n'
        "<visits>\n"
        '<visit id="e5" code="ENCOUNTER//ED">Emergency department visit</visit>\n'
        "</visits>\n"
        "<conditions>\n"
        '<condition id="e7" code="ICD10CM//R05.9">Cough, unspecified</condition>\n'
        "</conditions>\n"
        "<observations>\n"
        '<observation id="e8" code="LOINC//8867-4" value="88" unit="/min">Heart rate</observation>\n'
        '<observation id="e9" code="SNOMED//77176002">Smoker: Current every day smoker</observation>\n'
        "</observations>\n"
        "<medications>\n"
        '<medication id="e6" code="RXNORM//197361">amlodipine 5 MG Oral Tablet</medication>\n'
        "</medications>\n"
        "</events>\n"
        '<events time="2019-06-01">\n'
        "<procedures>\n"
        '<procedure id="e10" code="CPT//71250">CT thorax without contrast</procedure>\n'
        "</procedures>\n"
        "<notes>\n"
        '<note id="e11" code="NOTE//RADIOLOGY" title="Radiology report">Spiculated 2.1 cm RUL nodule.\nRecommend biopsy.</note>\n'
        "</notes>\n"
        "</events>\n"
        "</patient>\n"
    )
    # the event at the prediction time (C34.11 on 2020-01-01) is left out; ids give back the source rows
    assert timeline.event_ids() == ["e5", "e7", "e8", "e9", "e6", "e10", "e11"]
    assert rec.provenance("e11").row == 21


def test_blocks_are_one_per_distinct_time_in_order_with_event_ids():
    timeline = render_timeline(simple_record(n_days=3, labs_per_day=2), SIMPLE_CATALOG)
    assert [b.time for b in timeline.blocks] == sorted({b.time for b in timeline.blocks})
    assert [b.event_ids for b in timeline.blocks] == [("e2", "e3", "e4"), ("e5", "e6", "e7"), ("e8", "e9", "e10")]
    for block in timeline.blocks:
        assert block.text.startswith("<events ") and block.text.endswith("</events>\n")
        assert all(f'id="{i}"' in block.text for i in block.event_ids)


def test_unsorted_input_is_grouped_by_time():
    rec = _record(
        (datetime(2020, 1, 2), "ICD10CM//R05.9", None, None),
        (datetime(2020, 1, 1), "ICD10CM//R05.9", None, None),
        (datetime(2020, 1, 2), "LOINC//718-7", 1.0, None),
    )
    timeline = render_timeline(rec, CodeCatalog())
    assert [(b.time.day, b.event_ids) for b in timeline.blocks] == [(1, ("e1",)), (2, ("e0", "e2"))]


def test_prediction_time_is_exclusive_and_birth_and_statics_go_to_the_root():
    rec = simple_record(n_days=4)
    cutoff = BASE.replace(day=BASE.day + 2)  # day 2's events are exactly at the cutoff
    timeline = render_timeline(rec, SIMPLE_CATALOG, cutoff)
    assert all(b.time < cutoff for b in timeline.blocks)
    assert len(timeline.blocks) == 2
    ids = set(timeline.event_ids())
    assert "e0" not in ids and "e1" not in ids  # GENDER and MEDS_BIRTH
    root = etree.fromstring(timeline.to_xml().encode())
    assert root.get("sex") == "F" and root.get("birth_date") == "1950-03-01" and root.get("prediction_time") == "2015-03-03"


def test_lab_value_and_unit_come_from_the_row_and_the_catalog():
    rec = _record((datetime(2020, 1, 1), "LOINC//718-7", 11.199999809265137, None), (datetime(2020, 1, 1), "LOINC//2345-7", 101.0, None))
    timeline = render_timeline(rec, CodeCatalog([CodeInfo("LOINC//718-7", "Hemoglobin", unit="g/dL")]))
    labs = etree.fromstring(timeline.to_xml().encode()).findall(".//lab")
    assert [(e.get("value"), e.get("unit"), e.text) for e in labs] == [("11.2", "g/dL", "Hemoglobin"), ("101", None, "LOINC//2345-7")]


def test_hostile_text_is_escaped_and_illegal_characters_are_dropped():
    nasty = "a < b && c ]]> d <![CDATA[x]]> \x00\x1b\x0b\ud800\ufffe 😀 <|endoftext|> </note></patient>\r\nend"
    rec = _record((datetime(2020, 1, 1), "NOTE//PROGRESS", None, nasty), (datetime(2020, 1, 1), "ICD10CM//X", None, None))
    catalog = CodeCatalog([CodeInfo("NOTE//PROGRESS", 'Note "quoted" <&>\n\ttab'), CodeInfo("ICD10CM//X", "]]>\x07")])
    xml = render_timeline(rec, catalog).to_xml()
    root = etree.fromstring(xml.encode())  # parses
    note = root.find(".//note")
    assert note.text == "a < b && c ]]> d <![CDATA[x]]>  😀 <|endoftext|> </note></patient>\r\nend"
    assert note.get("title") == 'Note "quoted" <&>\n\ttab'
    assert root.find(".//condition").text == "]]>"
    assert count_tokens(xml) > 0  # special-token text counts as plain text


def test_unknown_vocabulary_goes_to_other_or_fails_with_a_clear_error():
    rec = _record((datetime(2020, 1, 1), "FOO//1", None, None))
    assert render_timeline(rec, CodeCatalog()).blocks[0].elements[0].modality is Modality.OTHER
    strict = ModalityTable(DEFAULT_MODALITIES.vocabularies, DEFAULT_MODALITIES.codes, default=None)
    with pytest.raises(TimelineError, match=r"data/held_out/2\.parquet: subject 5, event e0: code 'FOO//1' matches no modality rule"):
        render_timeline(rec, CodeCatalog(), modalities=strict)


def test_duplicate_event_ids_are_rejected():
    rec = PatientRecord(3, "data/x.parquet", 0, [Event("e0", datetime(2020, 1, 1), "ICD10CM//A", None, None)] * 2)
    with pytest.raises(TimelineError, match=r"data/x\.parquet: subject 3: duplicate event ids \['e0'\]"):
        render_timeline(rec, CodeCatalog())


def test_modality_table():
    assert DEFAULT_MODALITIES.modality_of("SNOMED//77176002") is Modality.OBSERVATION  # smoker
    assert DEFAULT_MODALITIES.modality_of("SNOMED//38341003") is Modality.CONDITION  # hypertension
    assert DEFAULT_MODALITIES.modality_of("HCPCS//G0297") is Modality.PROCEDURE
    assert DEFAULT_MODALITIES.modality_of("MEDS_DEATH") is Modality.OBSERVATION
    custom = ModalityTable.from_rules({"LOINC": "observation", "LOINC//718-7": "lab"})
    assert custom.modality_of("LOINC//1") is Modality.OBSERVATION and custom.modality_of("LOINC//718-7") is Modality.LAB
    assert custom.modality_of("RXNORM//1") is Modality.OTHER
    with pytest.raises(ValueError, match="unknown modality 'imaging'"):
        ModalityTable.from_rules({"DICOM": "imaging"})
    assert [m.group_tag for m in Modality][:3] == ["visits", "conditions", "observations"]


def test_select_keeps_only_chosen_events():
    timeline = render_timeline(simple_record(n_days=3), SIMPLE_CATALOG)
    chosen = timeline.select(["e3", "e9"])
    assert chosen.event_ids() == ["e3", "e9"]
    assert len(chosen.blocks) == 2 and chosen.header == timeline.header
    assert count_tokens(chosen.to_xml()) == chosen.n_tokens()


def test_parse_round_trip_and_errors():
    timeline = render_timeline(simple_record(n_days=3, note="x < y\r\n"), SIMPLE_CATALOG, datetime(2030, 1, 1))
    again = parse_timeline(timeline.to_xml())
    assert again.to_xml() == timeline.to_xml()
    assert again.root == timeline.root and again.blocks == timeline.blocks
    with pytest.raises(TimelineError, match=r"chunk\.xml: (line \d+: )?not well-formed XML"):
        parse_timeline("<patient id='1'><events>", source="chunk.xml")
    with pytest.raises(TimelineError, match="expected <patient>"):
        parse_timeline("<person id='1'/>")
    with pytest.raises(TimelineError, match="unknown group <images>"):
        parse_timeline("<patient id='1'><events time='2020-01-01'><images/></events></patient>")
    with pytest.raises(TimelineError, match="has no id attribute"):
        parse_timeline("<patient id='1'><events time='2020-01-01'><labs><lab>x</lab></labs></events></patient>")
    with pytest.raises(TimelineError, match="is not an ISO date/time"):
        parse_timeline("<patient id='1'><events time='yesterday'/></patient>")
    with pytest.raises(TimelineError, match="not an integer subject id"):
        parse_timeline("<patient id='abc'/>")
    with pytest.raises(TimelineError, match="different subjects"):
        join_timelines(["<patient id='1'/>", "<patient id='2'/>"])
    with pytest.raises(TimelineError, match="out of time order"):
        join_timelines(
            [
                "<patient id='1'><events time='2020-01-02'><labs><lab id='e1'>x</lab></labs></events></patient>",
                "<patient id='1'><events time='2020-01-01'><labs><lab id='e2'>x</lab></labs></events></patient>",
            ]
        )


def test_xml_entities_are_not_expanded():
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE p [<!ENTITY a "aaaaaaaaaa">]><patient id="1"><events time="2020-01-01">'
        '<notes><note id="e1">x&a;y</note></notes></events></patient>'
    )
    with pytest.raises(TimelineError, match=r"line 1: entity &a; is declared in the document.s DTD and is not expanded"):
        parse_timeline(bomb)


def test_timelines_and_chunks_pickle_for_ray_workers():
    import pickle

    from trajonco.chunking import chunk_timeline

    timeline = render_timeline(simple_record(n_days=3, note="a < b"), SIMPLE_CATALOG)
    again = pickle.loads(pickle.dumps(timeline))
    assert again.to_xml() == timeline.to_xml() and again.blocks == timeline.blocks
    chunks = chunk_timeline(timeline, 200)
    assert pickle.loads(pickle.dumps(chunks)) == chunks
