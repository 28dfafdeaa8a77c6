"""Edge cases of the shared per-patient record types."""

from datetime import datetime

import pytest

from vista.shared.records import Event, PatientRecord


def test_provenance_rejects_foreign_ids():
    rec = PatientRecord(1, "data/0.parquet", 0, [Event("e0", datetime(2020, 1, 1), "ENCOUNTER//AMB", None, None)])
    with pytest.raises(KeyError, match="subject 1"):
        rec.provenance("e5")
    with pytest.raises(KeyError, match="subject 1"):
        rec.provenance("x0")


def test_visit_dates_fall_back_to_clinical_dates():
    rec = PatientRecord(2, "d.parquet", 0, [
        Event("e0", datetime(1960, 1, 1), "MEDS_BIRTH", None, None),
        Event("e1", datetime(2020, 1, 1, 8), "ICD10CM//R05.1", None, None),
        Event("e2", datetime(2020, 1, 1, 9), "LOINC//718-7", 12.0, None),
        Event("e3", datetime(2021, 3, 4), "ICD10CM//R05.1", None, None),
    ])
    assert [d.isoformat() for d in rec.visit_dates()] == ["2020-01-01", "2021-03-04"]
