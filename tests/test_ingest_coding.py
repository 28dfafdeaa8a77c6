"""Nothing lost on the way in from MEDS spellings (issue 17): Synthea's image table is imaging, missing code
descriptions come from the shipped ICD-10-CM titles, the MIMIC discharge location is kept, and cohort-query codes
are accepted in the data's own spelling."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.cli import trajonco_main, vista_main
from vista.graph import build_graph
from vista.shared.meds.reader import MedsDataset


def _write(root: Path, rows: list[tuple], *, codes: pa.Table | None = None, extra: dict[str, pa.Array] | None = None) -> Path:
    """A one-subject MEDS dataset of (time, code, text) rows, with extension columns ``extra``."""
    (root / "data").mkdir(parents=True)
    n = len(rows)
    columns = {"subject_id": pa.array([1] * n, pa.int64()), "time": pa.array([r[0] for r in rows], pa.timestamp("us")),
               "code": [r[1] for r in rows], "numeric_value": pa.array([None] * n, pa.float32()),
               "text_value": pa.array([r[2] for r in rows], pa.string()), **(extra or {})}
    pq.write_table(pa.table(columns), root / "data" / "0.parquet")
    if codes is not None:
        (root / "metadata").mkdir()
        pq.write_table(codes, root / "metadata" / "codes.parquet")
    return root


def _synthea(root: Path) -> Path:
    rows = [(None, "GENDER/F", None), (datetime(1960, 1, 1), "MEDS_BIRTH", None),
            (datetime(2020, 1, 1, 9), "ENCOUNTER/ambulatory", None),
            (datetime(2020, 1, 1, 10), "SNOMED/51185008", None),  # Synthea's image table: the body site (thorax)
            (datetime(2020, 1, 1, 11), "SNOMED/254837009", None)]
    tables = ["patients", "patients", "encounters", "image", "conditions"]
    return _write(root, rows, extra={"table": pa.array(tables), "visit_id": pa.array([None, None, "v1", "v1", "v1"])})


def test_rows_of_synthea_image_table_are_imaging_studies(tmp_path):
    from vista.toa import imaging_candidates

    dataset = MedsDataset(_synthea(tmp_path / "d"), profile="synthea")
    graph = build_graph(dataset.load_patients([1])[1], dataset.code_catalog())
    assert [d.isoformat() for d in imaging_candidates(graph)] == ["2020-01-01"]
    timeline = subprocess.run([sys.executable, "-c", "import sys; from jobs.cli import trajonco_main; "
                               "sys.exit(trajonco_main(sys.argv[1:]))", "timeline", "--dataset", str(tmp_path / "d"),
                               "--subject", "1", "--prediction-time", "2021-01-01", "--coding-profile", "synthea"],
                              capture_output=True, text=True, check=True).stdout
    (line,) = [line for line in timeline.splitlines() if "SNOMED//51185008" in line]
    assert not line.startswith("<condition"), line


def _mimic(root: Path, description: str | None) -> Path:
    rows = [(None, "GENDER//F", None), (datetime(1960, 1, 1), "MEDS_BIRTH", None),
            (datetime(2020, 1, 1, 9), "HOSPITAL_ADMISSION//EW EMER.//EMERGENCY ROOM", None),
            (datetime(2020, 1, 3, 9), "DIAGNOSIS//ICD//10//C3411", None),
            (datetime(2020, 1, 3, 9), "HOSPITAL_DISCHARGE//SKILLED NURSING FACILITY", None)]
    codes = pa.table({"code": ["DIAGNOSIS//ICD//10//C3411"], "description": pa.array([description], pa.string()),
                      "parent_codes": pa.array([[]], pa.list_(pa.string()))})
    return _write(root, rows, codes=codes, extra={"hadm_id": pa.array([None, None, 7, 7, 7], pa.int64())})


def test_a_diagnosis_without_a_description_gets_its_icd10cm_title_and_the_discharge_keeps_its_location(tmp_path, capsys):
    for name, description in (("null", None), ("empty", "")):
        root = _mimic(tmp_path / name, description)
        assert trajonco_main(["timeline", "--dataset", str(root), "--subject", "1", "--prediction-time", "2021-01-01",
                              "--coding-profile", "mimic_iv"]) == 0
        out = capsys.readouterr().out
        (diagnosis,) = [line for line in out.splitlines() if "ICD10CM//C34.11" in line]
        assert "Malignant neoplasm of upper lobe, right bronchus or lung" in diagnosis, diagnosis
        assert "SKILLED NURSING FACILITY" in out and "DISCHARGE//STAY" not in out


def test_an_eventstream_code_without_a_name_gets_its_icd10cm_title(tmp_path):
    from vista.graph import read_patient_xml

    path = tmp_path / "p.xml"
    path.write_text('<eventstream person_id="5"><encounter><events><entry timestamp="2020-01-01 09:00">'
                    '<event type="condition" code="ICD10/C34.11"/></entry></events></encounter></eventstream>')
    graph = read_patient_xml(path)
    assert graph.code("ICD10CM//C34.11").description == "Malignant neoplasm of upper lobe, right bronchus or lung"


def test_cohort_query_accepts_the_datas_own_spelling_and_hints_when_nothing_matches(tmp_path, capsys):
    store = str(tmp_path / "store")
    assert vista_main(["graph", "--dataset", str(_synthea(tmp_path / "d")), "--store", store,
                       "--coding-profile", "synthea"]) == 0
    capsys.readouterr()
    assert vista_main(["cohort-query", "--store", store, "--code", "x=SNOMED/254837009", "--json"]) == 0
    captured = capsys.readouterr()
    assert [m["subject_id"] for m in json.loads(captured.out)["matches"]] == [1]
    assert "'SNOMED/254837009' read as 'SNOMED//254837009'" in captured.err
    assert vista_main(["cohort-query", "--store", store, "--code", "x=SNOMED-CT/254837009",
                       "--coding-profile", "synthea", "--json"]) == 0
    assert [m["subject_id"] for m in json.loads(capsys.readouterr().out)["matches"]] == [1]
    assert vista_main(["cohort-query", "--store", store, "--code", "x=SNOMED//2548370.09"]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no event has code SNOMED//2548370.09; the store spells it SNOMED//254837009" in err
    assert vista_main(["cohort-query", "--store", store, "--code", "x=LOINC//0000-0"]) == 0
    assert "no event has code LOINC//0000-0 (store codes are canonical" in capsys.readouterr().err
