"""build_cohort end to end on hand-made MEDS datasets: outputs, exclusions, matching, seeds, clear errors."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

import meds
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cohort_meds import Patient, at, day, write_dataset

from trajonco.cohorts import (
    LABELS_SCHEMA,
    CohortDataError,
    CohortManifest,
    EmptyCohortError,
    build_cohort,
    load_definition,
)
from vista.shared.meds.labels import read_label_table

LUNG = load_definition("lung")
C34 = "ICD10CM//C34.11"
REGULAR = [day(100 * k) for k in range(25)]  # a visit every 100 days from 2010 to 2016


def lung_case(sid: int, index_day: int = 1500, split: str = "held_out", **kw) -> Patient:
    return Patient(sid, split=split, visits=REGULAR, codes=[(day(index_day), C34), (day(index_day + 30), C34)], **kw)


def control(sid: int, split: str = "held_out", **kw) -> Patient:
    return Patient(sid, split=split, visits=kw.pop("visits", REGULAR), **kw)


def small_population() -> list[Patient]:
    """8 held-out and 8 training lung cases (all F, born 1950), 12 + 12 possible controls of the same kind."""
    people = [lung_case(i) for i in range(1, 9)] + [lung_case(i, split="train") for i in range(101, 109)]
    people += [control(i) for i in range(20, 32)] + [control(i, split="tuning") for i in range(120, 132)]
    return people


@pytest.fixture()
def dataset(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "meds", small_population())


def test_outputs_follow_the_label_schema_and_the_manifest_is_complete(dataset: Path, tmp_path: Path):
    result = build_cohort(dataset, LUNG, tmp_path / "cohort")
    path = tmp_path / "cohort" / "labels" / "test.parquet"
    meds.LabelSchema.validate(pq.read_table(path))  # the file as written: only the MEDS label columns
    table = read_label_table(path)  # with the cohort's columns from label_details/test.parquet
    assert [(f.name, f.type) for f in table.schema] == [(f.name, f.type) for f in LABELS_SCHEMA]
    labels = pl.from_arrow(table)
    assert labels.filter(pl.col("role") == "case")["subject_id"].sort().to_list() == list(range(1, 9))
    assert labels.height == 16 and labels["boolean_value"].sum() == 8
    assert (labels["prediction_time"] == labels["index_time"] - timedelta(days=365)).all()
    cases = labels.filter(pl.col("role") == "case")
    assert (cases["index_time"] == at(day(1500))).all() and (cases["cancer"] == "lung").all()
    assert cases["matched_to"].null_count() == 8
    ctrl = labels.filter(pl.col("role") == "control")
    assert ctrl["cancer"].null_count() == 8 and sorted(ctrl["matched_to"].to_list()) == list(range(1, 9))

    manifest = CohortManifest.read(tmp_path / "cohort" / "manifest.json")
    assert manifest == result.manifest
    assert manifest.definition == LUNG and manifest.definition_hash == LUNG.digest()
    assert manifest.dataset.path == str(dataset.resolve()) and manifest.dataset.name == "cohort-test"
    assert manifest.subjects_in_dataset == 40 and manifest.subjects_without_split == 0
    assert (manifest.test.cases, manifest.test.controls, manifest.test.controls_unused) == (8, 8, 4)
    assert manifest.train is not None and manifest.train.splits == ("train", "tuning")
    assert (manifest.train.cases, manifest.train.controls) == (8, 8)
    assert manifest.test.matching.share_matched == 1.0 and manifest.test.matching.sex_agreement == 1.0
    assert manifest.test.matching.controls_per_case == {"1": 8}
    assert manifest.test.matching.age_difference_years.n == 8
    assert "8 cases, 8 controls" in manifest.summary_text()
    json.loads((tmp_path / "cohort" / "manifest.json").read_text())  # plain JSON for other tools


def test_training_cohort_is_disjoint_and_drawn_from_training_splits(dataset: Path, tmp_path: Path):
    result = build_cohort(dataset, LUNG, tmp_path / "cohort")
    assert result.train is not None
    assert set(result.test["split"]) == {"held_out"} and set(result.train["split"]) <= {"train", "tuning"}
    assert not set(result.test["subject_id"]) & set(result.train["subject_id"])
    assert result.label_paths["train"].is_file()


def test_same_seed_same_cohort_other_seed_other_controls(dataset: Path, tmp_path: Path):
    a = build_cohort(dataset, LUNG, tmp_path / "a")
    b = build_cohort(dataset, LUNG, tmp_path / "b")
    assert a.test.equals(b.test) and a.manifest == b.manifest
    for name in ("labels/test.parquet", "label_details/test.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    others = [build_cohort(dataset, LUNG, tmp_path / f"s{s}", seed=s) for s in (1, 2, 3)]
    assert any(not o.test.equals(a.test) for o in others)
    assert others[0].manifest.definition.seed == 1 and others[0].manifest.definition_hash != a.manifest.definition_hash


def test_target_size_and_controls_per_case(tmp_path: Path):
    people = [lung_case(i) for i in range(1, 11)] + [control(i) for i in range(20, 50)]
    root = write_dataset(tmp_path / "meds", people)
    d = LUNG.with_overrides(test_target_cases=4, controls_per_case=3, train_splits=())
    result = build_cohort(root, d, tmp_path / "cohort")
    report = result.manifest.test
    assert (report.cases, report.controls) == (4, 12) and report.cases_not_sampled == 6
    assert report.matching.controls_per_case == {"3": 4} and result.manifest.train is None and result.train is None
    assert not (tmp_path / "cohort/labels/train.parquet").exists()
    counts = result.test.filter(pl.col("role") == "control").group_by("matched_to").len()["len"]
    assert (counts == 3).all()


def test_every_exclusion_is_counted_by_reason(tmp_path: Path):
    late = [day(100 * k) for k in range(12, 25)]
    people = [
        lung_case(1),
        lung_case(2, sex=None),  # missing sex
        lung_case(3, birth=None),  # missing birth
        Patient(4, visits=late, codes=[(day(1500), C34), (day(1510), C34)]),  # 2nd visit after prediction time
        Patient(5, visits=REGULAR, codes=[(day(50), C34), (day(60), C34)]),  # prevalent (first visit at day 0)
        Patient(6, visits=REGULAR, codes=[(day(900), C34)]),  # rule-out code only
        Patient(7, visits=REGULAR, codes=[(day(900), C34), (day(1000), C34)]),  # pair 100 days apart
        lung_case(8, sex="M"),  # no male control exists
        Patient(9, visits=REGULAR, codes=[(day(400), C34), (day(1500), C34), (day(1530), C34)]),  # earlier lone code
        control(20),
        control(21, sex=None),
        control(22, visits=[day(0)]),  # a single visit
        control(23, visits=[day(0), day(10), day(300)]),  # visits, but none a year after the 2nd one
    ]
    result = build_cohort(
        write_dataset(tmp_path / "meds", people), LUNG.with_overrides(train_splits=()), tmp_path / "c"
    )
    report = result.manifest.test
    assert report.case_exclusions == {
        "prevalent": 1,
        "no_qualifying_pair": 2,
        "missing_birth_or_sex": 2,
        "sex_restriction": 0,
        "index_before_birth": 0,
        "too_few_visits_before_prediction": 1,
        "prior_target_code": 1,
        "no_matching_control": 1,
    }
    assert report.control_exclusions == {
        "missing_birth_or_sex": 1,
        "sex_restriction": 0,
        "too_few_visits": 1,
        "no_eligible_index_date": 1,
        "index_before_birth": 0,
    }
    assert (report.phenotype_cases, report.eligible_cases, report.cases) == (6, 2, 1)
    assert (report.control_candidates, report.eligible_controls, report.controls) == (4, 1, 1)
    assert result.test["subject_id"].to_list() == [1, 20]
    assert report.matching.share_matched == 0.5


def test_subjects_with_any_target_code_are_never_controls(tmp_path: Path):
    people = [lung_case(1), lung_case(2)] + [
        Patient(i, visits=REGULAR, codes=[(day(2000), C34)]) for i in range(10, 20)
    ]
    root = write_dataset(tmp_path / "meds", people + [control(30)])
    result = build_cohort(root, LUNG.with_overrides(train_splits=()), tmp_path / "c")
    assert result.test.filter(pl.col("role") == "control")["subject_id"].to_list() == [30]


def test_sex_restricted_cancer(tmp_path: Path):
    ovary = "ICD10CM//C56.1"
    people = [
        Patient(1, visits=REGULAR, codes=[(day(1500), ovary), (day(1520), ovary)]),
        Patient(2, sex="M", visits=REGULAR, codes=[(day(1500), ovary), (day(1520), ovary)]),  # coding error
        control(20, sex="M"),
        control(21, sex="M"),
        control(22),
    ]
    result = build_cohort(
        write_dataset(tmp_path / "meds", people),
        load_definition("ovarian").with_overrides(train_splits=()),
        tmp_path / "c",
    )
    assert result.manifest.test.case_exclusions["sex_restriction"] == 1
    assert result.manifest.test.control_exclusions["sex_restriction"] == 2
    assert result.test["subject_id"].to_list() == [1, 22]


def test_matching_uses_the_age_band_at_each_index_date(tmp_path: Path):
    # case born 1950-06-15, index 2014-02-09 → 63 → band 60; control 20 is 61–68 at every visit, control 21 20–26
    people = [lung_case(1), control(20, birth=date(1948, 3, 1)), control(21, birth=date(1990, 1, 1))]
    result = build_cohort(
        write_dataset(tmp_path / "meds", people), LUNG.with_overrides(train_splits=()), tmp_path / "c"
    )
    labels = result.test.sort("subject_id")
    assert labels["subject_id"].to_list() == [1, 20]
    assert (labels["age_at_index"] // 10).to_list() == [6, 6]


def test_visits_fall_back_to_clinical_dates_without_encounter_rows(tmp_path: Path):
    people = [lung_case(1, encounters=False), control(20, encounters=False)]
    result = build_cohort(
        write_dataset(tmp_path / "meds", people), LUNG.with_overrides(train_splits=()), tmp_path / "c"
    )
    assert result.test.height == 2


def test_gap_zero_predicts_at_the_index(dataset: Path, tmp_path: Path):
    result = build_cohort(dataset, LUNG.with_overrides(gap_days=0), tmp_path / "c")
    assert (result.test["prediction_time"] == result.test["index_time"]).all()


class TestEmptyCohorts:
    def build(self, tmp_path: Path, people: list[Patient], **overrides):
        root = write_dataset(tmp_path / "meds", people)
        return build_cohort(root, LUNG.with_overrides(train_splits=(), **overrides), tmp_path / "c")

    def test_no_cases_found(self, tmp_path: Path):
        with pytest.raises(EmptyCohortError, match="test cohort is empty: no cases found .*1 prevalent") as err:
            self.build(tmp_path, [control(20), Patient(5, visits=REGULAR, codes=[(day(50), C34), (day(60), C34)])])
        assert err.value.step == "no cases found"

    def test_all_cases_excluded(self, tmp_path: Path):
        with pytest.raises(EmptyCohortError, match="all cases excluded .*missing_birth_or_sex: 1"):
            self.build(tmp_path, [lung_case(1, sex=None), control(20)])

    def test_no_eligible_controls(self, tmp_path: Path):
        with pytest.raises(
            EmptyCohortError, match="no eligible controls .*1 eligible cases.*among 1 eligible controls"
        ):
            self.build(tmp_path / "a", [lung_case(1), control(20, sex="M")])
        with pytest.raises(EmptyCohortError, match="no eligible controls .*among 0 eligible controls"):
            self.build(tmp_path / "b", [lung_case(1), control(20, birth=None)])

    def test_no_subject_in_the_splits(self, tmp_path: Path):
        with pytest.raises(EmptyCohortError, match=r"no subjects in its splits .*\['held_out'\].*\['train'\]"):
            self.build(tmp_path, [lung_case(1, split="train"), control(20, split="train")])

    def test_training_cohort_names_itself(self, tmp_path: Path):
        with pytest.raises(EmptyCohortError, match="train cohort is empty: no cases in its splits") as err:
            root = write_dataset(tmp_path / "meds", [lung_case(1), control(20), control(120, split="train")])
            build_cohort(root, LUNG, tmp_path / "c")
        # says where the cases are and how to point the cohort there
        assert "other splits hold 1 case(s) (held_out: 1)" in str(err.value)
        assert "train_splits in the definition TOML or --train-splits" in str(err.value)


class TestBadInput:
    def test_missing_splits_file(self, dataset: Path, tmp_path: Path):
        (dataset / "metadata" / "subject_splits.parquet").unlink()
        with pytest.raises(CohortDataError, match="subject_splits.parquet: missing"):
            build_cohort(dataset, LUNG, tmp_path / "c")

    def test_not_a_dataset(self, tmp_path: Path):
        with pytest.raises(CohortDataError, match="no parquet files"):
            build_cohort(tmp_path, LUNG, tmp_path / "c")

    def test_conflicting_sex_names_the_subject(self, tmp_path: Path):
        p = control(20, static_codes=["GENDER//M"])
        with pytest.raises(CohortDataError, match="subject 20: field sex: GENDER//<sex> rows disagree"):
            build_cohort(write_dataset(tmp_path / "meds", [lung_case(1), p]), LUNG, tmp_path / "c")

    def test_two_birth_dates_name_the_subject(self, tmp_path: Path):
        root = write_dataset(tmp_path / "meds", [lung_case(1), control(20)])
        shard = root / "data" / "held_out" / "0.parquet"
        table = pq.read_table(shard)
        extra = pa.table(
            {
                "subject_id": [20],
                "time": [at(day(5))],
                "code": ["MEDS_BIRTH"],
                "numeric_value": [None],
                "text_value": [None],
            }
        ).cast(table.schema)
        pq.write_table(pa.concat_tables([table, extra]), shard)
        with pytest.raises(CohortDataError, match="subject 20: field birth_time: several MEDS_BIRTH times"):
            build_cohort(root, LUNG, tmp_path / "c")

    def test_wrong_column_type(self, tmp_path: Path):
        root = tmp_path / "meds"
        (root / "data").mkdir(parents=True)
        pq.write_table(
            pa.table({"subject_id": ["a"], "time": [at(day(1))], "code": ["X"]}), root / "data" / "0.parquet"
        )
        with pytest.raises(CohortDataError, match="column 'subject_id' has type String"):
            build_cohort(root, LUNG, tmp_path / "c")

    def test_subjects_missing_from_the_splits_are_counted(self, dataset: Path, tmp_path: Path):
        splits = pl.read_parquet(dataset / "metadata" / "subject_splits.parquet").filter(pl.col("subject_id") != 131)
        splits.write_parquet(dataset / "metadata" / "subject_splits.parquet")
        assert build_cohort(dataset, LUNG, tmp_path / "c").manifest.subjects_without_split == 1
