"""Coding profiles: every spelling real MEDS datasets use maps to one canonical code, category and unit.

Unit tests of `vista.shared.coding` (normalisation, detection, coverage warnings, user profiles); the end-to-end checks on
whole datasets in other projects' spellings (timelines, graphs, displays, cohorts) are in test_real_spellings.py.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vista.shared.coding import Category, CodingProfileError, builtin_profiles, detect_profile, load_profile, profile_report
from vista.shared.meds.reader import MedsDataset
from vista.shared.records import Event


@pytest.mark.parametrize(("profile", "source", "code", "category"), [
    ("omop", "SNOMED/254637007", "SNOMED//254637007", Category.DIAGNOSIS),
    ("omop", "ICD10CM/C34.1", "ICD10CM//C34.1", Category.DIAGNOSIS),
    ("omop", "LOINC/8480-6", "LOINC//8480-6", Category.OBSERVATION),  # a vital sign, not a lab
    ("omop", "LOINC/718-7", "LOINC//718-7", Category.LAB),
    ("omop", "RxNorm/1049221", "RXNORM//1049221", Category.MEDICATION),
    ("omop", "Visit/IP", "ENCOUNTER//IP", Category.VISIT),
    ("omop", "Gender/F", "GENDER//F", Category.SEX),
    ("omop", "Race/5", "RACE//White", Category.RACE),
    ("omop", "CPT4/71260", "CPT//71260", Category.IMAGING),
    ("omop", "MEDS_BIRTH", "MEDS_BIRTH", Category.BIRTH),
    ("synthea", "SNOMED-CT/254837009", "SNOMED//254837009", Category.DIAGNOSIS),
    ("synthea", "ENCOUNTER/ambulatory", "ENCOUNTER//ambulatory", Category.VISIT),
    ("synthea", "CVX/140", "CVX//140", Category.MEDICATION),
    ("mimic_iv", "DIAGNOSIS//ICD//10//C3411", "ICD10CM//C34.11", Category.DIAGNOSIS),
    ("mimic_iv", "DIAGNOSIS//ICD//9//1625", "ICD9CM//162.5", Category.DIAGNOSIS),
    ("mimic_iv", "DIAGNOSIS//ICD//9//E8889", "ICD9CM//E888.9", Category.DIAGNOSIS),
    ("mimic_iv", "PROCEDURE//ICD//10//0BJ08ZZ", "ICD10PCS//0BJ08ZZ", Category.PROCEDURE),
    ("mimic_iv", "HOSPITAL_ADMISSION//EW EMER.//EMERGENCY ROOM", "ENCOUNTER//EW EMER.", Category.VISIT),
    ("mimic_iv", "ED_REGISTRATION", "ENCOUNTER//ED", Category.VISIT),
    ("mimic_iv", "HOSPITAL_DISCHARGE//HOME", "DISCHARGE//HOME", Category.VISIT),
    ("mimic_iv", "HOSPITAL_DISCHARGE//SKILLED NURSING FACILITY", "DISCHARGE//SKILLED NURSING FACILITY", Category.VISIT),
    ("mimic_iv", "HOSPITAL_DISCHARGE", "DISCHARGE//STAY", Category.VISIT),
    ("mimic_iv", "GENDER//F", "GENDER//F", Category.SEX),
    ("mimic_iv", "MEDICATION//START//Carboplatin", "MEDICATION//START//Carboplatin", Category.MEDICATION),
    ("vista_xml", "ICD10/C34.11", "ICD10CM//C34.11", Category.DIAGNOSIS),
    ("vista_xml", "CPT/71260", "CPT//71260", Category.IMAGING),
    ("vista_xml", "RxNorm/29046", "RXNORM//29046", Category.MEDICATION),
    ("meds_synth", "ICD10CM//C34.90", "ICD10CM//C34.90", Category.DIAGNOSIS),
    ("meds_synth", "NOTE//RADIOLOGY", "NOTE//RADIOLOGY", Category.NOTE),
    ("meds_synth", "ENCOUNTER//AMB", "ENCOUNTER//AMB", Category.VISIT),
])
def test_every_spelling_maps_to_one_canonical_code(profile, source, code, category):
    found = load_profile(profile).canonical(source)
    assert (found.code, found.category) == (code, category)


def test_units_embedded_in_codes_are_split_off():
    found = load_profile("mimic_iv").canonical("LAB//50912//mg/dL")
    assert (found.code, found.unit, found.category) == ("LAB//50912", "mg/dL", Category.LAB)


@pytest.mark.parametrize(("source", "kind"), [("Note/Radiology Report", "RADIOLOGY"), ("NOTE//Pathology", "PATHOLOGY"),
                                              ("NOTE//DS", "DISCHARGE"), ("Note/Progress note", "PROGRESS"),
                                              ("NOTE//Social work", "SOCIAL_WORK")])
def test_notes_are_recognised_by_kind(source, kind):
    found = load_profile("omop").canonical(source)
    assert (found.category, found.note_kind, found.code) == (Category.NOTE, kind, f"NOTE//{kind}")


def test_unknown_codes_stay_as_they_are_and_count_as_unplaced():
    found = load_profile("omop").canonical("CUSTOM_THING")
    assert (found.code, found.recognised) == ("CUSTOM_THING", False)


def test_source_table_refines_a_snomed_code():
    synthea = load_profile("synthea")
    assert synthea.category_of("SNOMED/73761001", "procedures") is Category.PROCEDURE
    assert synthea.category_of("SNOMED/254837009", "conditions") is Category.DIAGNOSIS
    assert synthea.category_of("LOINC/718-7", "observations") is Category.LAB  # a specific category is kept


def test_normalise_event_keeps_the_source_spelling():
    event = Event("e3", datetime(2020, 1, 1), "LAB//50912//mg/dL", 1.2, None)
    out = load_profile("mimic_iv").normalise_event(event)
    assert (out.code, out.source_code, out.unit, out.original_code) == ("LAB//50912", "LAB//50912//mg/dL", "mg/dL",
                                                                        "LAB//50912//mg/dL")
    same = Event("e0", None, "GENDER//F", None, None)
    assert load_profile("meds_synth").normalise_event(same) is same


def test_a_user_profile_toml_adds_a_vocabulary_and_rules(tmp_path):
    path = tmp_path / "site.toml"
    path.write_text('''
name = "site"
description = "our hospital's export"
visit_id_columns = ["csn"]
[aliases]
"DX" = "ICD10CM"
[[patterns]]
match = 'ONC_STAGE//(?P<value>.+)'
vocabulary = "OBSERVATION"
''')
    profile = load_profile(path)
    assert profile.canonical("DX/C349").code == "ICD10CM//C34.9"
    assert profile.canonical("ONC_STAGE//IIIA").category is Category.OBSERVATION
    assert profile.visit_id_columns == ("csn",)


@pytest.mark.parametrize(("text", "message"), [
    ("name = 'x'\nbogus = 1", "bogus"),
    ("name = 'x'\n[[patterns]]\nmatch = '('\nvocabulary = 'LAB'", "not a valid regular expression"),
    ("name = 'x'\n[[patterns]]\nmatch = 'LAB//.+'\nvocabulary = 'LAB'", "(?P<value>"),
    ("name = 'x'\nsignature_patterns = ['LAB//[']", "field signature_patterns.0: Value error, pattern 'LAB//[' is not a "
     "valid regular expression"),
    ("name = ", "not valid TOML"),
])
def test_bad_profile_files_are_one_clear_error(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(CodingProfileError, match=str(path)) as err:
        load_profile(path)
    assert message in str(err.value)


def test_unknown_profile_names_list_the_builtins():
    with pytest.raises(CodingProfileError, match="built-ins: meds_synth"):
        load_profile("epic")
    assert set(builtin_profiles()) >= {"meds_synth", "omop", "synthea", "mimic_iv", "vista_xml"}


def _write(root: Path, codes: list[str], **extra: list) -> Path:
    (root / "data").mkdir(parents=True)
    n = len(codes)
    columns = {"subject_id": pa.array([1 + i % 3 for i in range(n)], pa.int64()),
               "time": pa.array([datetime(2020, 1, 1 + i) for i in range(n)], pa.timestamp("us")),
               "code": codes, "numeric_value": pa.array([None] * n, pa.float32())}
    columns.update(extra)
    table = pa.table(columns).sort_by([("subject_id", "ascending"), ("time", "ascending")])
    pq.write_table(table, root / "data" / "0.parquet")
    return root


@pytest.mark.parametrize(("codes", "expected"), [
    (["DIAGNOSIS//ICD//10//C3411", "HOSPITAL_ADMISSION//EW EMER.//ER", "LAB//50912//mg/dL", "GENDER//F"], "mimic_iv"),
    (["SNOMED/254637007", "Visit/IP", "Gender/F", "LOINC/718-7"], "omop"),
    (["ICD10CM//C34.90", "ENCOUNTER//AMB", "GENDER//F", "NOTE//RADIOLOGY"], "meds_synth"),
])
def test_detection_picks_the_profile_of_the_spelling(tmp_path, codes, expected):
    root = _write(tmp_path / "ds", codes * 5)
    profile, scores = detect_profile(root)
    assert profile.name == expected
    assert scores[0].profile == expected and scores[0].recognised_share == 1.0


def test_synthea_is_told_from_omop_by_its_columns(tmp_path):
    codes = ["SNOMED/254837009", "ENCOUNTER/ambulatory", "LOINC/718-7", "Gender/F"] * 3
    n = len(codes)
    root = _write(tmp_path / "ds", codes, visit_id=pa.array(list(range(n)), pa.int64()),
                  end=pa.array([None] * n, pa.timestamp("us")), table=pa.array(["conditions"] * n))
    assert detect_profile(root)[0].name == "synthea"


def test_coverage_report_names_unplaced_codes_and_warns(tmp_path):
    root = _write(tmp_path / "ds", ["XX//1", "XX//1", "XX//2", "LOINC/718-7"])
    report = profile_report(root)
    assert report.recognised_share == pytest.approx(0.25)
    assert [u.code for u in report.unplaced] == ["XX//1", "XX//2"]
    text = " ".join(report.warnings)
    for phrase in ("places only 25%", "no encounter rows", "sex found for only 0%", "no notes recognised",
                   "no diagnosis codes"):
        assert phrase in text
    assert "WARNING" in report.render()


def test_reader_returns_canonical_events_with_units_visits_and_kinds(tmp_path):
    codes = ["Gender/F", "Visit/OP", "SNOMED/73761001", "LOINC/718-7"]
    root = _write(tmp_path / "ds", codes, visit_id=pa.array([None, 7, 7, 7], pa.int64()),
                  unit=pa.array([None, None, None, "g/dL"]), table=pa.array(["person", "visit", "procedure", "measurement"]))
    records = MedsDataset(root, profile="omop").load_patients([1, 2, 3])
    events = [e for r in records.values() for e in r.events]
    by_code = {e.code: e for e in events}
    assert set(by_code) == {"GENDER//F", "ENCOUNTER//OP", "SNOMED//73761001", "LOINC//718-7"}
    assert by_code["LOINC//718-7"].unit == "g/dL" and by_code["LOINC//718-7"].visit_id == "7"
    assert by_code["SNOMED//73761001"].kind == "procedure"  # the procedure table refines the SNOMED default
    assert by_code["GENDER//F"].source_code == "Gender/F"


def test_reader_detects_the_profile_and_warns_on_poor_coverage(tmp_path, caplog):
    root = _write(tmp_path / "ds", ["XX//1", "XX//2", "XX//3"])
    dataset = MedsDataset(root)
    with caplog.at_level("WARNING"):
        dataset.load_patients([1])
    assert "places only 0%" in caplog.text and "trajonco profile" in caplog.text


def test_catalog_answers_by_canonical_code_and_knows_icd10cm_titles(tmp_path):
    root = _write(tmp_path / "ds", ["DIAGNOSIS//ICD//10//R059", "LAB//50912//mg/dL"])
    (root / "metadata").mkdir()
    pq.write_table(pa.table({"code": ["LAB//50912//mg/dL"], "description": ["Creatinine"],
                             "parent_codes": pa.array([[]], pa.list_(pa.string()))}), root / "metadata" / "codes.parquet")
    catalog = MedsDataset(root, profile="mimic_iv").code_catalog()
    assert catalog.describe("LAB//50912").description == "Creatinine"
    assert catalog.describe("ICD10CM//R05.9").description == "Cough, unspecified"  # offline ICD-10-CM titles


def test_omop_note_rows_coded_by_note_class_become_notes(tmp_path):
    codes = ["Gender/F", "LOINC/11526-1", "LOINC/18748-4", "LOINC/718-7"]
    root = _write(tmp_path / "ds", codes, table=pa.array(["person", "note", "note", "measurement"]))
    events = [e for r in MedsDataset(root, profile="omop").load_patients([1, 2, 3]).values() for e in r.events]
    assert sorted(e.code for e in events) == ["GENDER//F", "LOINC//718-7", "NOTE//PATHOLOGY", "NOTE//RADIOLOGY"]
    assert {e.source_code for e in events if e.code.startswith("NOTE")} == {"LOINC/11526-1", "LOINC/18748-4"}


def test_shards_with_different_extension_columns_each_keep_theirs(tmp_path):
    """A unit column only in the second shard still gives that shard's events their units."""
    root = _write(tmp_path / "ds", ["LOINC/718-7", "Visit/OP"])
    pq.write_table(pa.table({"subject_id": pa.array([9], pa.int64()), "time": pa.array([datetime(2021, 1, 1)],
                             pa.timestamp("us")), "code": ["LOINC/718-7"], "numeric_value": pa.array([12.0], pa.float32()),
                             "unit": ["g/dL"]}), root / "data" / "1.parquet")
    records = MedsDataset(root, profile="omop").load_patients([1, 2, 9])
    assert records[9].events[0].unit == "g/dL" and records[1].events[0].unit is None
