"""Small hand-built patients for the agent and pipeline tests (and a check that they render as expected)."""

from __future__ import annotations

from datetime import datetime, timedelta

from vista.shared.records import CodeCatalog, CodeInfo, Event, PatientRecord
from vista.shared.timeline import render_timeline

CATALOG = CodeCatalog([
    CodeInfo("ICD10CM//J44.9", "Chronic obstructive pulmonary disease, unspecified"),
    CodeInfo("ICD10CM//R05.9", "Cough, unspecified"),
    CodeInfo("ICD10CM//I10", "Essential (primary) hypertension"),
    CodeInfo("ICD10CM//R63.4", "Abnormal weight loss"),
    CodeInfo("LOINC//718-7", "Hemoglobin [Mass/volume] in Blood", unit="g/dL"),
    CodeInfo("LOINC//2951-2", "Sodium [Moles/volume] in Serum or Plasma", unit="mmol/L"),
    CodeInfo("RXNORM//197361", "amlodipine 5 MG Oral Tablet"),
    CodeInfo("SNOMED//8517006", "Ex-smoker"),
    CodeInfo("CPT//71046", "Radiologic examination, chest; 2 views"),
])

NOTE = ("Follow-up visit. History: COPD, former smoker with 40 pack-years, quit 2015. "
        "Reports chronic cough, no hemoptysis. Plan: continue inhalers.")


def lung_patient(subject_id: int = 42, n_visits: int = 6, *, start: datetime = datetime(2018, 3, 1), note: str = NOTE,
                 shard: str = "data/train/0.parquet", first_row: int = 1000) -> PatientRecord:
    """A former smoker with COPD seen every ~2 months: each visit has an encounter, labs, a condition, often a note.

    The same progress note is copied forward into every third visit, as EHRs do.
    """
    events: list[tuple[datetime | None, str, float | None, str | None]] = [
        (None, "GENDER//M", None, None),
        (None, "RACE//White", None, None),
        (datetime(1952, 5, 17), "MEDS_BIRTH", None, None),
    ]
    for v in range(n_visits):
        t = start + timedelta(days=61 * v, hours=9)
        events.append((t, "ENCOUNTER//AMB", None, None))
        events.append((t, "ICD10CM//J44.9" if v % 2 == 0 else "ICD10CM//R05.9", None, None))
        events.append((t, "LOINC//718-7", round(14.1 - 0.35 * v, 1), None))
        events.append((t, "LOINC//2951-2", 140.0, None))
        if v % 2 == 1:
            events.append((t, "RXNORM//197361", None, None))
        if v % 3 == 0:
            events.append((t, "NOTE//PROGRESS", None, note))
        if v == 1:
            events.append((t, "SNOMED//8517006", None, None))
        if v == n_visits - 1:
            events.append((t, "ICD10CM//R63.4", None, None))
            events.append((t, "CPT//71046", None, None))
    return PatientRecord(
        subject_id, shard, first_row,
        [Event(f"e{k}", t, code, value, text) for k, (t, code, value, text) in enumerate(events)],
    )


def test_lung_patient_renders_every_timed_event_with_its_id():
    record = lung_patient(n_visits=4)
    timeline = render_timeline(record, CATALOG, datetime(2020, 1, 1))
    timed = [e.event_id for e in record.events if e.time is not None and e.code != "MEDS_BIRTH"]
    assert sorted(timeline.event_ids()) == sorted(timed)
    assert 'sex="M"' in timeline.to_xml()
