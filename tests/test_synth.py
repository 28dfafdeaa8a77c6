"""The synthetic EHR generator: MEDS validity, vocabulary, coding eras, sex restrictions, traps and ground truth."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import meds
import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from vista.shared.meds import schema
from vista.shared.synth import SynthConfig, SynthOutputError, generate
from vista.shared.synth.cancers import CANCERS, cancer_of_code
from vista.shared.synth.ground_truth import OncologyRecord, phenotype_index

N = 800


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[Path, SynthConfig]:
    root = tmp_path_factory.mktemp("synth")
    config = SynthConfig(n_subjects=N, seed=11, shard_size=400, workers=1, case_fraction=0.35, rule_out_rate=0.05)
    summary = generate(config, root, progress=False)
    assert summary.subjects == N and summary.shards == 2
    return root, config


@pytest.fixture(scope="module")
def data(dataset) -> pl.DataFrame:
    root, _ = dataset
    frames = []
    for path in sorted((root / "data").glob("*/*.parquet")):
        frames.append(pl.read_parquet(path).with_columns(pl.lit(str(path.relative_to(root))).alias("file"), pl.int_range(pl.len()).alias("row")))
    return pl.concat(frames)


@pytest.fixture(scope="module")
def subjects(dataset) -> pl.DataFrame:
    return pl.read_parquet(dataset[0] / "ground_truth" / "subjects.parquet")


@pytest.fixture(scope="module")
def records(dataset) -> list[OncologyRecord]:
    lines = (dataset[0] / "ground_truth" / "oncology.jsonl").read_text().splitlines()
    return [OncologyRecord.model_validate_json(line) for line in lines]


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="add up to 1"):
        SynthConfig(n_subjects=1, seed=0, splits={"train": 0.5, "tuning": 0.1, "held_out": 0.1})
    with pytest.raises(ValueError, match="unknown cancers"):
        SynthConfig(n_subjects=1, seed=0, cancer_weights={"kidney": 1.0})
    with pytest.raises(ValueError, match="at least 3 years"):
        SynthConfig(n_subjects=1, seed=0, window_start="2020-01-01", window_end="2021-01-01")
    with pytest.raises(ValueError):
        SynthConfig(n_subjects=0, seed=0)


def test_layout_and_metadata(dataset):
    root, config = dataset
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert "metadata/codes.parquet" in files and "metadata/dataset.json" in files and "metadata/subject_splits.parquet" in files
    assert "ground_truth/oncology.jsonl" in files and "ground_truth/subjects.parquet" in files
    assert {f for f in files if f.startswith("data/")} == {f"data/{s}/{k}.parquet" for s in ("train", "tuning", "held_out") for k in (0, 1)}
    assert not any(".tmp" in f or ".parts" in f for f in files)
    meta = json.loads((root / "metadata" / "dataset.json").read_text())
    meds.DatasetMetadataSchema.validate(meta)
    assert meta["dataset_name"] == config.dataset_name and meta["meds_version"] == meds.__version__
    splits = pq.read_table(root / "metadata" / "subject_splits.parquet")
    meds.SubjectSplitSchema.validate(splits)
    counts = dict(zip(*np.unique(splits.column("split").to_numpy(zero_copy_only=False), return_counts=True)))
    assert counts == {"train": 560, "tuning": 80, "held_out": 160}


def test_data_files_are_valid_meds_sorted_with_static_rows_first(dataset, data):
    root, _ = dataset
    for path in sorted((root / "data").glob("*/*.parquet")):
        table = pq.read_table(path)
        assert table.schema.equals(schema.DATA_SCHEMA)
        meds.DataSchema.validate(table)
    per_file = data.group_by("file").agg(pl.col("subject_id").n_unique().alias("n"))
    assert per_file["n"].sum() == N == data["subject_id"].n_unique(), "every subject lives in exactly one file"
    key = data.with_columns(t=pl.col("time").fill_null(datetime(1, 1, 1)))
    bad = key.group_by("file").agg(
        ((pl.col("subject_id").diff() < 0) | ((pl.col("subject_id").diff() == 0) & (pl.col("t").diff() < timedelta(0)))).sum().alias("bad"))
    assert bad["bad"].sum() == 0
    splits = pl.read_parquet(root / "metadata" / "subject_splits.parquet")
    joined = data.select("subject_id", "file").unique().join(splits, on="subject_id")
    assert (joined["file"].str.split("/").list.get(1) == joined["split"]).all()
    statics = data.filter(pl.col("time").is_null())
    assert set(statics["code"].str.split("//").list.first().unique()) == {"GENDER", "RACE", "ETHNICITY"}
    assert statics.group_by("subject_id").len()["len"].to_list() == [3] * N


def test_every_code_is_described_with_units_and_parents(dataset, data):
    codes = pl.read_parquet(dataset[0] / "metadata" / "codes.parquet")
    assert codes["code"].is_unique().all()
    described = dict(zip(codes["code"], codes["description"]))
    used = set(data["code"].unique())
    assert used <= set(described), sorted(used - set(described))[:10]
    assert all(described[c] for c in used)
    units = dict(zip(codes["code"], codes["unit"]))
    for code in used:
        if code.startswith("LOINC//") and code not in ("LOINC//21908-9", "LOINC//21905-5", "LOINC//21906-3", "LOINC//21907-1"):
            assert units[code], code
    parents = {p for ps in codes["parent_codes"].to_list() for p in ps}
    assert parents <= set(described)
    assert described["ICD10CM//C34.11"] == "Malignant neoplasm of upper lobe, right bronchus or lung"
    assert "ICD10CM//C34.1" in set(codes.filter(pl.col("code") == "ICD10CM//C34.11")["parent_codes"].to_list()[0])


def test_icd9_before_october_2015_and_code_eras(data):
    cut = datetime(2015, 10, 1)
    timed = data.filter(pl.col("time").is_not_null())
    icd9 = timed.filter(pl.col("code").str.starts_with("ICD9CM//"))
    icd10 = timed.filter(pl.col("code").str.starts_with("ICD10CM//"))
    assert len(icd9) > 0 and len(icd10) > 0
    assert icd9["time"].max() < cut <= icd10["time"].min()
    ldct_old = timed.filter(pl.col("code") == "HCPCS//G0297")
    ldct_new = timed.filter(pl.col("code") == "CPT//71271")
    assert ldct_old.is_empty() or ldct_old["time"].max() < datetime(2021, 1, 1)
    assert ldct_new.is_empty() or ldct_new["time"].min() >= datetime(2021, 1, 1)
    assert timed.filter(pl.col("code").is_in(["ICD10CM//R05", "ICD10CM//R05.9"]))["code"].n_unique() >= 1


def test_times_inside_window_and_death_last(dataset, data):
    _, config = dataset
    timed = data.filter(pl.col("time").is_not_null() & (pl.col("code") != "MEDS_BIRTH"))
    assert timed["time"].min() >= datetime.combine(config.window_start, datetime.min.time())
    assert timed["time"].max() < datetime.combine(config.window_end, datetime.min.time()) + timedelta(days=1)
    last = data.filter(pl.col("time").is_not_null()).group_by("subject_id").agg(pl.col("code").last(), pl.col("time").last())
    dead = data.filter(pl.col("code") == "MEDS_DEATH")["subject_id"]
    assert len(dead) > 0
    assert (last.filter(pl.col("subject_id").is_in(dead.implode()))["code"] == "MEDS_DEATH").all()
    births = data.filter(pl.col("code") == "MEDS_BIRTH").select("subject_id", pl.col("time").alias("birth"))
    first_enc = data.filter(pl.col("code").str.starts_with("ENCOUNTER//")).group_by("subject_id").agg(pl.col("time").min().alias("first"))
    ages = first_enc.join(births, on="subject_id").with_columns(age=(pl.col("first") - pl.col("birth")).dt.total_days() / 365.25)
    assert ages["age"].min() >= 17.9, "observation periods start in adulthood, years after birth"


def test_sex_restrictions(data, subjects):
    sex = data.filter(pl.col("code").str.starts_with("GENDER//")).select("subject_id", pl.col("code").str.slice(8).alias("sex"))
    fam = data.filter(pl.col("code").str.starts_with("ICD")).with_columns(
        pl.col("code").map_elements(cancer_of_code, return_dtype=pl.String).alias("cancer")).filter(pl.col("cancer").is_not_null())
    fam = fam.join(sex, on="subject_id")
    assert fam.filter((pl.col("cancer") == "prostate") & (pl.col("sex") == "F")).is_empty()
    assert fam.filter(pl.col("cancer").is_in(["cervical", "endometrial", "ovarian"]) & (pl.col("sex") == "M")).is_empty()
    cases = subjects.filter(pl.col("cancer").is_not_null())
    assert cases.filter((pl.col("cancer") == "prostate") & (pl.col("sex") == "F")).is_empty()
    assert cases.filter(pl.col("cancer").is_in(["cervical", "endometrial", "ovarian"]) & (pl.col("sex") == "M")).is_empty()


def _cancer_codes(data: pl.DataFrame) -> pl.DataFrame:
    icd = data.filter(pl.col("code").str.starts_with("ICD"))
    return icd.with_columns(pl.col("code").map_elements(cancer_of_code, return_dtype=pl.String).alias("family")).filter(pl.col("family").is_not_null())


def test_phenotype_recomputed_from_data_matches_ground_truth(data, subjects):
    codes = _cancer_codes(data)
    starts = data.filter(pl.col("code").str.starts_with("ENCOUNTER//")).group_by("subject_id").agg(pl.col("time").min().alias("start"))
    truth = {r["subject_id"]: r for r in subjects.iter_rows(named=True)}
    by_subject = codes.join(starts, on="subject_id").sort("subject_id", "time").group_by("subject_id", "family", maintain_order=True).agg(
        pl.col("time"), pl.col("start").first())
    assert len(by_subject) > 0
    for row in by_subject.iter_rows(named=True):
        t = truth[row["subject_id"]]
        assert t["cancer"] in (row["family"], None), "a case only carries codes of its own cancer"
        us = [int(x.timestamp() * 1e6) for x in row["time"]]
        idx, reason = phenotype_index(us, int(row["start"].timestamp() * 1e6))
        if t["cancer"] is None:
            assert t["trap_rule_out"] and idx is None and len(us) == 1, "non-cases only have single, never confirmed rule-out codes"
            continue
        assert t["is_incident_case"] == (idx is not None)
        if idx is not None:
            assert t["diagnosis_date"] == row["time"][idx].date()
            assert row["time"][idx] - row["start"] >= timedelta(days=180)
            assert all(not (row["time"][idx] - timedelta(days=180) <= x < row["time"][idx]) for x in row["time"])
        else:
            assert t["exclusion_reason"] == reason


def test_traps_present_and_behave(subjects, data):
    s = subjects
    assert s["trap_rule_out"].sum() > 0 and s["trap_prevalent"].sum() > 0
    assert s["trap_late_confirmation"].sum() > 0 and s["trap_short_history"].sum() > 0
    assert s["icd9_cancer_codes"].sum() > 0
    prevalent = s.filter(pl.col("trap_prevalent"))
    assert (prevalent["is_incident_case"] == False).all()  # noqa: E712
    assert set(prevalent["exclusion_reason"]) == {"prevalent"}
    short = s.filter(pl.col("trap_short_history"))
    assert (short["is_incident_case"] == False).all()  # noqa: E712
    late = s.filter(pl.col("trap_late_confirmation"))
    late_cases = late.filter(pl.col("is_incident_case"))
    # a later pair can qualify: then the index is after the first (unconfirmed) code
    assert (late_cases["diagnosis_date"] > late_cases["clinical_diagnosis_date"]).all()
    # an isolated earlier code outside the washout on both sides: still incident, but a leak the cohort must exclude
    prior = s.filter(pl.col("trap_prior_code"))
    assert prior.height > 0 and prior["is_incident_case"].all()
    assert ((prior["diagnosis_date"] - prior["prior_code_date"]).dt.total_days() >= 184).all()
    assert ((prior["prior_code_date"] - prior["record_start"]).dt.total_days() >= 184).all()
    assert s.filter(~pl.col("trap_prior_code"))["prior_code_date"].null_count() == N - prior.height
    rule = s.filter(pl.col("trap_rule_out"))
    assert rule["cancer"].null_count() == len(rule) and rule["rule_out_cancer"].null_count() == 0
    cases = s.filter(pl.col("cancer").is_not_null())
    assert 0.6 < cases["is_incident_case"].mean() < 0.95


@pytest.fixture(scope="module")
def blocks(data) -> dict[tuple[str, int], pl.DataFrame]:
    """Each subject's rows in file order, keyed by (data file, subject id)."""
    return {key: df.sort("row") for key, df in data.partition_by(["file", "subject_id"], as_dict=True).items()}


_BLOCKS: dict = {}


def _rows_of(data: pl.DataFrame, record: OncologyRecord, event_ids: list[str]) -> pl.DataFrame:
    block = _BLOCKS[(record.data_file, record.subject_id)]
    assert len(block) > 0
    offsets = [int(e[1:]) for e in event_ids]
    assert all(0 <= o < len(block) for o in offsets)
    return block[offsets]


def test_oncology_records_point_at_the_rows_that_carry_them(data, records, subjects, blocks):
    _BLOCKS.clear()
    _BLOCKS.update(blocks)
    assert len(records) == subjects["cancer"].drop_nulls().len()
    checked_lines = 0
    for rec in records:
        profile = CANCERS[rec.cancer]
        if rec.is_incident_case:
            rows = _rows_of(data, rec, rec.diagnosis_event_ids)
            assert len(rows) == 2 and all(cancer_of_code(c) == rec.cancer for c in rows["code"])
            assert rows["time"][0].date() == rec.diagnosis_date and rows["code"][0] == rec.icd_code
            assert timedelta(0) < rows["time"][1] - rows["time"][0] <= timedelta(days=60)
        if rec.stage.event_ids:
            rows = _rows_of(data, rec, rec.stage.event_ids)
            grp = rows.filter(pl.col("code") == "LOINC//21908-9")
            assert grp["text_value"].to_list() == [rec.stage.group]
            note = rows.filter(pl.col("code") == "NOTE//PROGRESS")["text_value"][0]
            assert rec.stage.group in note and rec.histology in note
        for img in rec.imaging:
            rows = _rows_of(data, rec, img.event_ids)
            assert img.code in rows["code"].to_list()
            report = rows.filter(pl.col("code") == "NOTE//RADIOLOGY")["text_value"][0]
            assert img.impression in report and rows["time"][0].date() == img.date
        for path in rec.pathology:
            rows = _rows_of(data, rec, path.event_ids)
            assert path.code in rows["code"].to_list()
        for b in rec.biomarkers:
            rows = _rows_of(data, rec, b.event_ids)
            assert f"{b.name}: {b.result}" in rows.filter(pl.col("code") == "NOTE//PATHOLOGY")["text_value"][0]
        for line in rec.treatment_lines:
            if line.event_ids:
                rows = _rows_of(data, rec, line.event_ids)
                assert rows["time"].min().date() >= line.start_date
                checked_lines += 1
        for ps in rec.performance_status:
            rows = _rows_of(data, rec, ps.event_ids)
            assert rows["code"].to_list() == ["LOINC//89247-1"] and rows["numeric_value"][0] == ps.ecog
        if rec.smoking.event_ids:
            rows = _rows_of(data, rec, rec.smoking.event_ids)
            assert rows["code"][0].startswith("SNOMED//")
        if rec.death_date is not None:
            rows = _rows_of(data, rec, rec.death_event_ids)
            assert rows["code"].to_list() == ["MEDS_DEATH"]
        if rec.hospice_date is not None:
            assert "HCPCS//Q5001" in _rows_of(data, rec, rec.hospice_event_ids)["code"].to_list()
        assert profile.name == rec.cancer_name
    assert checked_lines > 0


def test_progress_notes_agree_with_the_vitals_of_their_visit(data):
    notes = data.filter(pl.col("code") == "NOTE//PROGRESS")
    vit = data.filter(pl.col("code").is_in(["LOINC//8480-6", "LOINC//8462-4"]))
    checked = 0
    for row in notes.head(400).iter_rows(named=True):
        m = re.search(r"BP (\d+)/(\d+)", row["text_value"])
        if not m:
            continue
        same = vit.filter((pl.col("subject_id") == row["subject_id"]) & (pl.col("time") <= row["time"])
                          & (pl.col("time") >= row["time"] - timedelta(minutes=90)))
        sbp = same.filter(pl.col("code") == "LOINC//8480-6")["numeric_value"].to_list()
        dbp = same.filter(pl.col("code") == "LOINC//8462-4")["numeric_value"].to_list()
        assert int(m.group(1)) in [round(x) for x in sbp] and int(m.group(2)) in [round(x) for x in dbp]
        checked += 1
    assert checked > 20


def test_existing_output_is_not_overwritten_silently(dataset, tmp_path):
    config = SynthConfig(n_subjects=20, seed=1, workers=1)
    generate(config, tmp_path, progress=False)
    with pytest.raises(SynthOutputError, match="already holds"):
        generate(config, tmp_path, progress=False)
    generate(config, tmp_path, progress=False, overwrite=True)


def _digest(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_same_seed_same_bytes_whatever_the_workers(tmp_path):
    config = SynthConfig(n_subjects=150, seed=5, shard_size=50, workers=1)
    generate(config, tmp_path / "a", progress=False)
    generate(config, tmp_path / "b", progress=False)
    generate(config.model_copy(update={"workers": 2}), tmp_path / "c", progress=False)
    a, b, c = _digest(tmp_path / "a"), _digest(tmp_path / "b"), _digest(tmp_path / "c")
    assert a == b
    assert a == c
    generate(config.model_copy(update={"seed": 6}), tmp_path / "d", progress=False)
    d = _digest(tmp_path / "d")
    assert d["data/train/0.parquet"] != a["data/train/0.parquet"]


def test_signal_and_workup_codes_also_occur_in_non_cases(data, subjects):
    """Pre-diagnostic signals and work-up procedures exist at background rates, so no code marks cases by itself."""
    controls = subjects.filter(pl.col("cancer").is_null())["subject_id"]
    ctrl_codes = set(data.filter(pl.col("subject_id").is_in(controls.implode()))["code"].unique())
    concepts = {
        "cough": {"ICD10CM//R05.9", "ICD10CM//R05", "ICD9CM//786.2"},
        "iron deficiency anemia": {"ICD10CM//D50.9", "ICD9CM//280.9"},
        "weight loss": {"ICD10CM//R63.4", "ICD9CM//783.21"},
        "hematuria": {"ICD10CM//R31.9", "ICD9CM//599.70"},
        "pulmonary nodule": {"ICD10CM//R91.1", "ICD9CM//793.11"},
        "chest CT": {"CPT//71250", "CPT//71260"},
        "colonoscopy": {"CPT//45378", "HCPCS//G0121", "CPT//45385"},
        "mammography": {"CPT//77067", "CPT//77057"},
        "PSA": {"LOINC//2857-1"},
        "biopsy pathology": {"NOTE//PATHOLOGY"},
        "radiology report": {"NOTE//RADIOLOGY"},
    }
    missing = [name for name, codes in concepts.items() if not (codes & ctrl_codes)]
    assert not missing, f"only cases get: {missing}"


def test_a_failing_shard_is_reported_with_its_subjects(tmp_path, monkeypatch):
    from vista.shared.synth import SynthShardError, generator

    def boom(*args, **kwargs):
        raise ValueError("broken course")

    monkeypatch.setattr(generator, "write_case_courses", boom)
    with pytest.raises(SynthShardError, match=r"shard 0 \(subjects 1\.\.30\) failed: broken course"):
        generate(SynthConfig(n_subjects=30, seed=1, workers=1), tmp_path, progress=False)
    assert not (tmp_path / "ground_truth" / ".parts").exists()
