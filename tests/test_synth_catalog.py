"""The generator's clinical vocabulary and cancer profiles are valid, consistent and complete."""

from __future__ import annotations

import random

import pytest
import simple_icd_10_cm as cm

from vista.shared.synth import catalog
from vista.shared.synth.biomarkers import sample_biomarkers
from vista.shared.synth.cancers import CANCER_CODE_PREFIXES, CANCER_KEYS, CANCERS, PROFILES, cancer_of_code
from vista.shared.synth.regimens import FIRST_LINE, LATER_LINES, choose_plan
from vista.shared.synth.vocabulary import code_metadata, vocabulary

FIFTEEN = {"liver", "lung", "prostate", "breast", "bladder", "cervical", "esophageal", "endometrial", "gastric", "ovarian", "pancreatic",
           "colorectal", "leukemia", "myeloma", "lymphoma"}


def test_the_fifteen_trajonco_cancers_with_their_code_families():
    assert set(CANCER_KEYS) == FIFTEEN
    assert CANCER_CODE_PREFIXES["lung"] == (("C34",), ("162",))
    assert CANCER_CODE_PREFIXES["colorectal"][0] == ("C18", "C19", "C20")
    assert CANCER_CODE_PREFIXES["endometrial"][0] == ("C54",)
    assert CANCER_CODE_PREFIXES["myeloma"][0] == ("C90.0",)
    assert set(CANCER_CODE_PREFIXES["leukemia"][0]) == {"C91", "C92", "C93", "C94", "C95"}


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.key)
def test_site_codes_exist_and_map_back_to_their_cancer(profile):
    for site in profile.sites:
        assert cm.is_valid_item(site.icd10) and cm.is_leaf(site.icd10), site.icd10
        assert cancer_of_code(f"ICD10CM//{site.icd10}") == profile.key
        assert cancer_of_code(f"ICD9CM//{site.icd9}") == profile.key
    assert 60.0 <= profile.age_median <= 75.0, "TrajOnco Table 1: median case age 60-75"
    assert abs(sum(profile.stage_weights) - 1.0) < 1e-9


def test_sex_restrictions_of_the_profiles():
    assert CANCERS["prostate"].female_share == 0.0
    for key in ("cervical", "endometrial", "ovarian"):
        assert CANCERS[key].female_share == 1.0
    assert CANCERS["breast"].female_share > 0.95


def test_non_cancer_diagnoses_never_match_a_cancer_family():
    for d in catalog.DX.values():
        assert cancer_of_code(d.code) is None, d.code
        assert cancer_of_code(d.icd9_code) is None, d.icd9_code


def test_every_icd10_code_is_valid_in_simple_icd_10_cm():
    for d in catalog.DX.values():
        assert cm.is_valid_item(d.icd10) and cm.is_leaf(d.icd10), d.icd10
    for r in catalog.REVISIONS:
        if r.before.startswith("ICD10CM//"):
            assert cm.is_valid_item(r.before.split("//")[1])


def test_icd9_equivalent_for_every_icd10_code():
    v = vocabulary()
    for i, code in enumerate(v.codes):
        if code.startswith("ICD10CM//"):
            assert v.icd9_of[i] >= 0 and v.codes[v.icd9_of[i]].startswith("ICD9CM//"), code


def test_code_metadata_covers_the_vocabulary():
    v = vocabulary()
    infos = {i.code: i for i in code_metadata()}
    assert set(v.codes) <= set(infos)
    for code in v.codes:
        assert infos[code].description, code
    for lab in catalog.LABS.values():
        assert infos[lab.code].unit == lab.unit
    assert infos["ICD10CM//C34.1"].parent_codes == ("ICD10CM//C34",)


@pytest.mark.parametrize("key", CANCER_KEYS)
def test_every_case_gets_a_first_line_plan(key):
    profile = CANCERS[key]
    rng = random.Random(0)
    for _ in range(200):
        hist = rng.choices(profile.histologies, [h.weight for h in profile.histologies])[0]
        flags = set(hist.flags)
        bucket = rng.randrange(4)
        results, extra = sample_biomarkers(rng, key, flags, bucket, smoker=rng.random() < 0.5, asian=False, brca=rng.random() < 0.05)
        assert all(name and result for name, result in results)
        flags |= extra
        for year in (2009.0, 2024.0):
            for age in (55.0, 85.0):
                plan = choose_plan(FIRST_LINE[key][bucket], flags, year, age, rng.random()) or choose_plan(FIRST_LINE[key][3], flags, year, age, 0.5)
                assert plan is not None, (key, bucket, sorted(flags), year, age)
    assert LATER_LINES[key]
