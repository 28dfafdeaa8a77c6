"""The datasets of `tests/spellings.py` are what they claim: MEDS 0.4 with the stated arrow types, sorted, split,
seeded, spelled like their source, holding cases that satisfy the cohort rules (checked here on the raw rows, and by
the project's cohort builder) and the counts `EXPECTED` gives."""

from __future__ import annotations

import re
from datetime import timedelta

import polars as pl
import pyarrow.parquet as pq
import pytest

import spellings
from spellings import CANCERS, DIAGNOSES, EXPECTED, WRITERS
from vista.shared.meds import schema

NAMES = sorted(WRITERS)
VISIT = {"omop": r"^Visit/", "synthea": r"^ENCOUNTER/", "mimic": r"^(HOSPITAL_ADMISSION//|ED_REGISTRATION$)"}
FORBIDDEN = {"omop": r"//", "synthea": r"^(ICD|DIAGNOSIS)", "mimic": r"^DIAGNOSIS//ICD//[0-9]+//.*\."}


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, pl.DataFrame]:
    root = tmp_path_factory.mktemp("spellings")
    return {name: (WRITERS[name](root / name), pl.read_parquet(root / name / "data", hive_partitioning=False))
            for name in NAMES}


def raw_target_codes(name: str, cancer: str) -> set[str]:
    """The target codes of ``cancer`` as the spelling writes them (from the concept table, not from any profile)."""
    out = set()
    for d in DIAGNOSES.values():
        if d.cancer != cancer:
            continue
        if name == "omop":
            out |= {f"ICD10CM/{d.icd10}", f"SNOMED/{d.snomed}"}
        elif name == "synthea":
            out.add(f"SNOMED/{d.snomed}")
        else:
            out |= {f"DIAGNOSIS//ICD//10//{d.icd10.replace('.', '')}", f"DIAGNOSIS//ICD//9//{d.icd9.replace('.', '')}"}
    return out


@pytest.mark.parametrize("name", NAMES)
def test_files_types_order_and_metadata(written, name):
    root, data = written[name]
    facts = EXPECTED[name]
    shards = sorted(str(p.relative_to(root)) for p in (root / "data").rglob("*.parquet"))
    assert tuple(shards) == facts.shards
    seen: set[int] = set()
    for shard in shards:
        table = pq.read_table(root / shard)
        assert table.schema.names[:5] == schema.DATA_SCHEMA.names
        assert all(table.schema.field(f.name).type == f.type for f in schema.DATA_SCHEMA)
        assert {n: str(table.schema.field(n).type) for n in table.schema.names[5:]} == facts.extension_columns
        frame = pl.from_arrow(table)
        key = frame.select("subject_id", has_time=pl.col("time").is_not_null(), time=pl.col("time").fill_null(pl.datetime(1, 1, 1)))
        assert key.equals(key.sort("subject_id", "has_time", "time", maintain_order=True))
        ids = set(frame["subject_id"].unique().to_list())
        assert not ids & seen  # a subject lives in one shard
        seen |= ids
    assert data.height == facts.rows and sorted(seen) == sorted(facts.subjects)
    splits = pl.read_parquet(root / schema.SPLITS_FILE)
    assert dict(splits.iter_rows()) == facts.splits and set(facts.splits.values()) == {"train", "tuning", "held_out"}
    codes = pl.read_parquet(root / schema.CODES_FILE)
    assert pq.read_schema(root / schema.CODES_FILE).equals(schema.CODE_METADATA_SCHEMA)
    described = dict(codes.select("code", "description").iter_rows())
    assert set(data["code"].unique()) <= set(described)
    for cancer in CANCERS:
        used = raw_target_codes(name, cancer) & set(data["code"].unique())
        assert used and all(described[c] for c in used)
    assert not data["code"].str.contains(FORBIDDEN[name]).any()
    assert (root / schema.DATASET_FILE).exists()


def test_snomed_parents_and_mimic_diagnosis_parents(written):
    synthea = pl.read_parquet(written["synthea"][0] / schema.CODES_FILE)
    parents = {c: p for c, p in synthea.select("code", "parent_codes").iter_rows()}
    assert parents["SNOMED/254626006"] == ["SNOMED/254637007"] and parents["SNOMED/254637007"] == ["SNOMED/363358000"]
    assert parents["SNOMED/93761005"] == ["SNOMED/363406005"]
    mimic = pl.read_parquet(written["mimic"][0] / schema.CODES_FILE)
    parents = {c: p for c, p in mimic.select("code", "parent_codes").iter_rows()}
    assert parents["DIAGNOSIS//ICD//10//C3411"] == ["ICD10CM/C34.11"] and parents["LAB//51222//g/dL"] == ["LOINC/718-7"]


@pytest.mark.parametrize("name", NAMES)
def test_cases_satisfy_the_cohort_rules_on_the_raw_rows(written, name):
    _, data = written[name]
    facts = EXPECTED[name]
    visits = data.filter(pl.col("code").str.contains(VISIT[name]) & pl.col("time").is_not_null())
    all_targets = set().union(*(raw_target_codes(name, c) for c in CANCERS))
    for cancer in CANCERS:
        targets = raw_target_codes(name, cancer)
        for sid in facts.cases[cancer]:
            days = sorted(set(data.filter((pl.col("subject_id") == sid) & pl.col("code").is_in(targets))["time"].dt.date()))
            index = days[0]
            assert index == facts.index_dates[sid]
            assert 1 <= (days[1] - index).days <= 60  # the pair, on distinct days
            visit_days = sorted(set(visits.filter(pl.col("subject_id") == sid)["time"].dt.date()))
            assert (index - visit_days[0]).days >= 180  # washout after the first visit
            assert sum(d < index - timedelta(days=365) for d in visit_days) >= 2  # visits before the prediction time
            others = all_targets - targets
            assert data.filter((pl.col("subject_id") == sid) & pl.col("code").is_in(others)).is_empty()
    for sid in facts.controls:
        assert data.filter((pl.col("subject_id") == sid) & pl.col("code").is_in(all_targets)).is_empty()
    for sid in facts.excluded["earlier_target_code"]:
        days = sorted(set(data.filter((pl.col("subject_id") == sid) & pl.col("code").is_in(all_targets))["time"].dt.date()))
        assert (days[1] - days[0]).days > 365  # isolated, then the pair a long time later
    sexes = dict(data.filter(pl.col("code").str.contains(r"(?i)^gender/")).select("subject_id", "code").iter_rows())
    assert {sid: re.split(r"/+", code)[-1] for sid, code in sexes.items()} == facts.sex


@pytest.mark.parametrize("name", NAMES)
def test_the_same_call_writes_the_same_data(tmp_path, written, name):
    again = WRITERS[name](tmp_path / name)
    assert pl.read_parquet(again / "data", hive_partitioning=False).equals(written[name][1])


def test_mimic_date_shift(tmp_path):
    shifted = pl.read_parquet(spellings.write_mimic_style(tmp_path / "m", date_shift_years=100) / "data",
                              hive_partitioning=False)
    assert shifted["time"].dt.year().min() >= 2030 and shifted.height == EXPECTED["mimic"].rows


@pytest.mark.parametrize("name", NAMES)
def test_the_cohort_builder_finds_the_cases_of_each_cancer(written, name, tmp_path):
    from trajonco.cohorts.builder import build_cohort
    from trajonco.cohorts.definition import load_definition

    root, _ = written[name]
    facts = EXPECTED[name]
    for cancer in CANCERS:
        result = build_cohort(root, load_definition(cancer).with_overrides(test_target_cases=None), tmp_path / cancer)
        labels = pl.concat([result.test, result.train])
        assert sorted(labels.filter("boolean_value")["subject_id"].to_list()) == sorted(facts.cases[cancer])
        assert result.manifest.test.cases == sum(facts.splits[s] == "held_out" for s in facts.cases[cancer])
        if cancer == "lung":
            assert result.manifest.test.case_exclusions["prevalent"] == 1
            assert result.manifest.test.case_exclusions["no_qualifying_pair"] == 1
        if cancer == "colorectal":
            assert result.manifest.test.case_exclusions["prior_target_code"] == 1
