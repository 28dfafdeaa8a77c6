"""Cohorts over any vocabulary: the same built-in definitions find lung, breast and colorectal cancers in MEDS datasets
spelled as OMOP/meds_etl, MIMIC-IV and Synthea write them (profile detected, codes matched canonically, SNOMED CT
descendants through codes.parquet), `--explain` says what matched, and an empty cohort says why."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trajonco.cli import main
from trajonco.cohorts import CohortDefinitionError, EmptyCohortError, build_cohort, load_definition
from trajonco.cohorts.source import open_events, scan_events
from vista.shared.meds import schema

DAY0 = date(2010, 1, 1)
VISIT_DAYS = [100 * k for k in range(25)]  # a visit every 100 days, 2010–2016
INDEX_DAY = 1500


def when(offset: int) -> datetime:
    return datetime.combine(DAY0 + timedelta(days=offset), time(9, 0))


@dataclass(frozen=True)
class Spelling:
    """How one family of MEDS datasets writes sex, visits, diagnoses and a lab; which extension columns it has."""

    name: str
    profile: str
    sex: str  # format string with {sex}
    visit: str
    lab: str
    diagnosis: dict[str, str]  # cancer → code of its diagnosis rows
    columns: tuple[str, ...] = ()  # extension columns: visit_id, table, unit, end, hadm_id
    dx_table: str = "condition_occurrence"


OMOP = Spelling(
    "omop", "omop", "Gender/{sex}", "Visit/OP", "LOINC/8480-6",
    {"lung": "ICD10CM/C34.1", "breast": "SNOMED/254837009", "colorectal": "SNOMED/363406005"},
    columns=("visit_id", "table", "unit"),
)
MIMIC = Spelling(
    "mimic", "mimic_iv", "GENDER//{sex}", "HOSPITAL_ADMISSION//EW EMER.//EMERGENCY ROOM", "LAB//50912//mg/dL",
    {"lung": "DIAGNOSIS//ICD//10//C3411", "breast": "DIAGNOSIS//ICD//10//C50911",
     "colorectal": "DIAGNOSIS//ICD//9//1534"},
    columns=("hadm_id",),
)
SYNTHEA = Spelling(
    "synthea", "synthea", "GENDER/{sex}", "ENCOUNTER/ambulatory", "LOINC/8302-2",
    # lung as a *descendant* concept (squamous NSCLC below 254637007), found only through codes.parquet's parents
    {"lung": "SNOMED/723301009", "breast": "SNOMED/254837009", "colorectal": "SNOMED/93761005"},
    columns=("visit_id", "unit", "end", "table"), dx_table="conditions",
)
SPELLINGS = {s.name: s for s in (OMOP, MIMIC, SYNTHEA)}

SYNTHEA_PARENTS = {
    "SNOMED/723301009": ["SNOMED/254637007"],  # Squamous non-small cell lung cancer → NSCLC
    "SNOMED/94391008": ["SNOMED/363358000", "SNOMED/128462008"],  # secondary malignant neoplasm of lung
}


@dataclass
class Person:
    subject_id: int
    sex: str = "F"
    split: str = "held_out"
    dx: list[tuple[int, str]] = field(default_factory=list)  # (day, code as spelled)
    birth: date = date(1950, 6, 15)


def case(sid: int, code: str, *, sex: str = "F", split: str = "held_out", extra: list[tuple[int, str]] = ()) -> Person:
    return Person(sid, sex, split, [(INDEX_DAY, code), (INDEX_DAY + 30, code), *extra])


def write(root: Path, spelling: Spelling, people: list[Person], *, parents: dict[str, list[str]] | None = None) -> Path:
    """A MEDS dataset in ``spelling``: one shard per split, rows sorted by subject and time, extension columns."""
    rows: list[dict] = []
    for p in people:
        def row(t, code, value=None, table=None):
            rows.append({"subject_id": p.subject_id, "time": t, "code": code, "numeric_value": value,
                         "text_value": None, "split": p.split, "table": table})
        row(None, spelling.sex.format(sex=p.sex), table="person")
        row(datetime.combine(p.birth, time(0)), schema.BIRTH_CODE, table="person")
        for d in sorted(set(VISIT_DAYS) | {d for d, _ in p.dx}):
            row(when(d), spelling.visit, table="visit_occurrence")
            row(when(d), spelling.lab, 120.0, table="measurement")
        for d, code in p.dx:
            row(when(d), code, table=spelling.dx_table)
    frame = pl.DataFrame(rows, schema={"subject_id": pl.Int64, "time": pl.Datetime("us"), "code": pl.String,
                                       "numeric_value": pl.Float32, "text_value": pl.String, "split": pl.String,
                                       "table": pl.String})
    frame = frame.sort("subject_id", pl.col("time").is_not_null(), "time")
    extensions = {
        "visit_id": pl.col("time").dt.date().cast(pl.Int64) + pl.col("subject_id") * 100_000,
        "hadm_id": pl.col("time").dt.date().cast(pl.Int64) + pl.col("subject_id") * 100_000,
        "unit": pl.when(pl.col("numeric_value").is_not_null()).then(pl.lit("mm[Hg]")),
        "end": pl.col("time"),
        "table": pl.col("table"),
    }
    data = root / "data"
    for (split,), part in frame.partition_by("split", as_dict=True).items():
        out = part.with_columns(**{c: extensions[c] for c in spelling.columns if c != "table"})
        keep = ["subject_id", "time", "code", "numeric_value", "text_value", *spelling.columns]
        (data / split).mkdir(parents=True, exist_ok=True)
        out.select(keep).write_parquet(data / split / "0.parquet")
    (root / "metadata").mkdir(parents=True, exist_ok=True)
    splits = frame.select("subject_id", "split").unique().sort("subject_id")
    pq.write_table(splits.to_arrow().cast(schema.SUBJECT_SPLIT_SCHEMA), root / schema.SPLITS_FILE)
    (root / schema.DATASET_FILE).write_text(json.dumps({"dataset_name": f"{spelling.name}-style"}))
    if parents is not None:
        codes = sorted(set(frame["code"].to_list()) | set(parents))
        pq.write_table(pa.table({"code": codes, "description": pa.array([None] * len(codes), pa.string()),
                                 "parent_codes": pa.array([parents.get(c, []) for c in codes], pa.list_(pa.string()))}),
                       root / schema.CODES_FILE)
    return root


def population(spelling: Spelling, cancer: str) -> list[Person]:
    """Four held-out cases of ``cancer`` (women, but men for a few colorectal ones), controls of both sexes."""
    code = spelling.diagnosis[cancer]
    male = cancer == "colorectal"
    people = [case(1, code), case(2, code), case(3, code, sex="M" if male else "F"), case(4, code)]
    people += [Person(sid, "F") for sid in range(20, 30)] + [Person(sid, "M") for sid in range(30, 34)]
    people += [case(101, code, split="train")] + [Person(sid, "F", "train") for sid in range(120, 124)]
    return people


def dataset(tmp_path: Path, spelling: Spelling, people: list[Person]) -> Path:
    return write(tmp_path / spelling.name, spelling, people,
                 parents=SYNTHEA_PARENTS if spelling is SYNTHEA else None)


@pytest.mark.parametrize("cancer", ["lung", "breast", "colorectal"])
@pytest.mark.parametrize("spelling", ["omop", "mimic", "synthea"])
def test_each_spelling_finds_the_cancer_through_canonical_codes(tmp_path, spelling, cancer):
    s = SPELLINGS[spelling]
    root = dataset(tmp_path, s, population(s, cancer))
    result = build_cohort(root, load_definition(cancer), tmp_path / "cohort")
    cases = result.test.filter(pl.col("role") == "case")
    assert sorted(cases["subject_id"].to_list()) == [1, 2, 3, 4]
    assert (cases["index_time"] == when(INDEX_DAY)).all()
    controls = result.test.filter(pl.col("role") == "control")
    assert controls.height == 4 and set(controls["subject_id"]) < set(range(20, 34))
    assert (result.train is not None) and result.train.filter(pl.col("role") == "case")["subject_id"].to_list() == [101]

    m = result.manifest
    assert m.coding is not None and (m.coding.profile, m.coding.chosen_by) == (s.profile, "detected")
    assert m.coding.respelled_codes > 0
    matched = m.code_matches
    assert matched is not None and matched.subjects_with_target_codes == 5
    vocabulary = "SNOMED" if s.diagnosis[cancer].startswith("SNOMED") else (
        "ICD9CM" if "//9//" in s.diagnosis[cancer] else "ICD10CM")
    assert [(v.vocabulary, v.subjects, v.events) for v in matched.by_vocabulary] == [(vocabulary, 5, 10)]
    # sex and visits came through the profile: GENDER//, ENCOUNTER// leads on canonical codes
    assert set(result.test["sex"]) <= {"F", "M"} and result.test["sex"].null_count() == 0
    json.loads((tmp_path / "cohort" / "manifest.json").read_text())


def test_canonical_codes_are_what_the_cohort_reads(tmp_path):
    root = dataset(tmp_path, MIMIC, population(MIMIC, "lung"))
    codes = set(scan_events(root).select("code").unique().collect()["code"])
    assert {"ICD10CM//C34.11", "GENDER//F", "ENCOUNTER//EW EMER.", "LAB//50912", "MEDS_BIRTH"} <= codes
    assert not any(c.startswith("DIAGNOSIS//") for c in codes)
    source = open_events(root, "mimic_iv")
    assert source.coding.chosen_by == "given" and source.coding.recognised_share is None
    assert source.code_rows.filter(pl.col("code") == "ICD10CM//C34.11")["rows"].item() == 10


def test_a_given_profile_is_used_and_recorded(tmp_path):
    root = dataset(tmp_path, OMOP, population(OMOP, "breast"))
    result = build_cohort(root, load_definition("breast").with_overrides(train_splits=()), tmp_path / "c",
                          profile="omop")
    assert result.manifest.coding is not None and result.manifest.coding.chosen_by == "given"
    assert result.manifest.test.cases == 4


def test_icd9_in_mimic_spelling_counts_for_lung(tmp_path):
    people = [case(1, "DIAGNOSIS//ICD//9//1625"), case(2, "DIAGNOSIS//ICD//10//C3490")] + [
        Person(sid) for sid in range(20, 24)]
    root = write(tmp_path / "m", MIMIC, people)
    result = build_cohort(root, load_definition("lung").with_overrides(train_splits=()), tmp_path / "c")
    assert result.manifest.test.cases == 2
    by_code = {c.code: (c.vocabulary, c.entry) for c in result.manifest.code_matches.codes}
    assert by_code == {"ICD9CM//162.5": ("ICD9CM", "162.5"), "ICD10CM//C34.90": ("ICD10CM", "C34")}


class TestSnomedHierarchy:
    def test_descendants_count_only_with_codes_parquet_parents(self, tmp_path):
        people = population(SYNTHEA, "lung")
        with_parents = write(tmp_path / "a", SYNTHEA, people, parents=SYNTHEA_PARENTS)
        lung = load_definition("lung").with_overrides(train_splits=())
        result = build_cohort(with_parents, lung, tmp_path / "ca")
        assert result.manifest.test.cases == 4
        (match,) = result.manifest.code_matches.codes
        assert (match.code, match.entry, match.how) == ("SNOMED//723301009", "254637007", "below it in codes.parquet")
        assert result.manifest.code_matches.hierarchy_codes == 2

        without = write(tmp_path / "b", SYNTHEA, people, parents=None)
        with pytest.raises(EmptyCohortError, match="no code of the definition in the data") as err:
            build_cohort(without, lung, tmp_path / "cb")
        assert "the data has SNOMED codes" in str(err.value) and "but none is one of the definition's" in str(err.value)

    def test_excluded_concepts_never_count_even_below_a_listed_one(self, tmp_path):
        # a breast-cancer patient with lung metastases coded as 'secondary malignant neoplasm of lung'
        people = [case(1, "SNOMED/94391008"), case(2, "SNOMED/254637007")] + [Person(s) for s in range(20, 24)]
        root = write(tmp_path / "s", SYNTHEA, people, parents=SYNTHEA_PARENTS)
        result = build_cohort(root, load_definition("lung").with_overrides(train_splits=()), tmp_path / "c")
        assert result.test.filter(pl.col("role") == "case")["subject_id"].to_list() == [2]
        assert [c.code for c in result.manifest.code_matches.codes] == ["SNOMED//254637007"]


class TestDefinitionKeys:
    def test_snomed_codes_and_patterns_in_a_toml(self, tmp_path):
        path = tmp_path / "local_lung.toml"
        path.write_text('name = "local_lung"\nsnomed_codes = [254637007]\npatterns = ["LOCAL/ONC-LUNG(-[0-9]+)?"]\n'
                        'train_splits = []\n')
        d = load_definition(path)
        assert d.cancers[0].snomed_codes == ("254637007",) and d.cancers[0].vocabularies == ("SNOMED", "patterns")
        # a site's own vocabulary no profile knows keeps its spelling: the pattern matches it as written
        people = [case(1, "LOCAL/ONC-LUNG-2"), case(2, "SNOMED/254637007")] + [Person(s) for s in range(20, 24)]
        result = build_cohort(write(tmp_path / "d", OMOP, people), d, tmp_path / "c")
        assert result.manifest.test.cases == 2
        assert {(c.vocabulary, c.how) for c in result.manifest.code_matches.codes} == {
            ("patterns", "pattern"), ("SNOMED", "exact id")}

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ('name = "x"\nsnomed_codes = ["C34"]\n', "snomed_codes"),
            ('name = "x"\npatterns = ["(unclosed"]\n', "not a valid regular expression"),
            ('name = "x"\npatterns = [".*"]\n', "matches every code"),
            ('name = "x"\nsnomed_codes = ["254637007"]\nsnomed_exclude = ["254637007"]\n', "both listed and excluded"),
            ('name = "x"\n[[cancers]]\nname = "a"\nsnomed_codes = ["254637007"]\n'
             '[[cancers]]\nname = "b"\nsnomed_codes = ["254637007"]\n', "listed for both 'a' and 'b'"),
        ],
    )
    def test_bad_code_sets_are_one_clear_error(self, tmp_path, text, message):
        path = tmp_path / "bad.toml"
        path.write_text(text)
        with pytest.raises(CohortDefinitionError, match=message):
            load_definition(path)

    def test_every_builtin_carries_icd10_icd9_and_snomed(self):
        for name in ("lung", "breast", "colorectal", "prostate", "leukemia", "lymphoma", "multiple_myeloma"):
            cancer = load_definition(name).cancers[0]
            assert cancer.icd10cm_prefixes and cancer.icd9cm_prefixes and cancer.snomed_codes, name
        assert "126906006" not in load_definition("prostate").cancers[0].snomed_codes  # 'neoplasm of prostate'
        assert "162573006" not in load_definition("lung").cancers[0].snomed_codes  # 'suspected lung cancer'
        assert len(load_definition("any_cancer").cancers) == 15  # SNOMED sets disjoint across the 15


class TestEmptyCohortsSayWhy:
    def test_no_code_of_the_definitions_vocabularies(self, tmp_path):
        people = [case(1, "LOCAL/ONC-LUNG"), case(2, "LOCAL/ONC-LUNG")] + [Person(s) for s in range(20, 24)]
        root = write(tmp_path / "d", OMOP, people)
        with pytest.raises(EmptyCohortError) as err:
            build_cohort(root, load_definition("lung"), tmp_path / "c")
        text = str(err.value)
        assert err.value.step == "no code of the definition in the data"
        assert "looks for ICD10CM, ICD9CM, SNOMED codes and the data has no code of those vocabularies" in text
        assert "LOCAL/ONC-LUNG (4 rows)" in text and "ENCOUNTER (" in text and "coding profile 'omop'" in text
        assert err.value.explanation is not None and err.value.explanation.code_matches.target_rows == 0

    def test_all_cases_excluded_names_the_reason_and_counts(self, tmp_path):
        code = OMOP.diagnosis["lung"]
        people = [case(i, code, extra=[(400, code)]) for i in (1, 2)] + [Person(s) for s in range(20, 24)]
        root = write(tmp_path / "d", OMOP, people)
        with pytest.raises(EmptyCohortError, match="all cases excluded — 2 phenotype cases, excluded as"
                                                   " prior_target_code: 2 — their records code the cancer"):
            build_cohort(root, load_definition("lung").with_overrides(train_splits=()), tmp_path / "c")

    def test_the_default_test_split_holds_no_cases(self, tmp_path):
        code = MIMIC.diagnosis["lung"]
        people = [case(i, code, split="train") for i in (1, 2, 3)] + [Person(s, split="train") for s in range(20, 26)]
        people += [Person(s) for s in range(40, 44)]
        root = write(tmp_path / "d", MIMIC, people)
        with pytest.raises(EmptyCohortError) as err:
            build_cohort(root, load_definition("lung"), tmp_path / "c")
        assert err.value.step == "no cases in its splits"
        assert "other splits hold 3 case(s) (train: 3)" in str(err.value)
        assert "test_splits in the definition TOML or --test-splits" in str(err.value)
        # following the advice works
        result = build_cohort(root, load_definition("lung").with_overrides(test_splits=("train",), train_splits=()),
                              tmp_path / "c2")
        assert result.manifest.test.cases == 3


class TestCommandLine:
    def test_explain_prints_matches_per_vocabulary_and_code(self, tmp_path, capsys):
        root = dataset(tmp_path, OMOP, population(OMOP, "colorectal"))
        assert main(["cohort", "colorectal", "--dataset", str(root), "--out", str(tmp_path / "c"), "--explain"]) == 0
        out = capsys.readouterr().out
        assert "coding profile 'omop' (detected" in out
        assert "definition looks for — colorectal: ICD10CM, ICD9CM, SNOMED" in out
        assert "no parent_codes in codes.parquet: SNOMED CT ids matched exactly only" in out
        assert "target codes: 10 rows of 5 subjects" in out
        assert "colorectal         SNOMED             5        10      1" in out
        assert "SNOMED//363406005" in out and "SNOMED 363406005 (exact id)" in out
        assert "phenotype in split held_out: case 4" in out
        assert "test (held_out): 4 phenotype cases → 4 eligible → 4 cases; case exclusions: none" in out

    def test_explain_on_an_empty_cohort_then_the_error_and_splits_from_the_command_line(self, tmp_path, capsys):
        code = OMOP.diagnosis["lung"]
        people = [case(i, code, split="train") for i in (1, 2)] + [Person(s, split="train") for s in range(20, 26)]
        people += [Person(s) for s in range(40, 44)]
        root = write(tmp_path / "d", OMOP, people)
        args = ["cohort", "lung", "--dataset", str(root), "--out", str(tmp_path / "c"), "--explain"]
        assert main(args) == 2
        captured = capsys.readouterr()
        assert "phenotype in split train: case 2" in captured.out and "EMPTY: test cohort is empty" in captured.out
        assert "no cases in its splits" in captured.err
        assert main(args + ["--test-splits", "train", "--train-splits"]) == 0
        assert "test (train): 2 cases, 2 controls" in capsys.readouterr().out

    def test_coding_profile_option(self, tmp_path, capsys):
        root = dataset(tmp_path, OMOP, population(OMOP, "breast"))
        assert main(["cohort", "breast", "--dataset", str(root), "--out", str(tmp_path / "c"),
                     "--coding-profile", "omop"]) == 0
        assert "coding profile 'omop' (given)" in capsys.readouterr().out


def test_visits_are_distinct_encounter_dates_without_a_visit_id(tmp_path):
    """population.py counts visits as distinct ENCOUNTER// dates on canonical codes; visit_id columns are not needed:
    the cohort is the same whether the shards carry one or not."""
    people = population(OMOP, "lung")
    with_ids = build_cohort(write(tmp_path / "a", OMOP, people), load_definition("lung"), tmp_path / "ca")
    plain = Spelling(**{**OMOP.__dict__, "columns": ()})
    without = build_cohort(write(tmp_path / "b", plain, people), load_definition("lung"), tmp_path / "cb")
    assert with_ids.test.equals(without.test)
