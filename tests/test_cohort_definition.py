"""Cohort definitions: built-ins load, codes are real ICD-10-CM categories, TOML shorthands and errors are clear."""

from __future__ import annotations

from pathlib import Path

import pytest
import simple_icd_10_cm as icd

from trajonco.cohorts import CohortDefinitionError, builtin_names, load_definition

FIFTEEN = {
    "liver", "lung", "prostate", "breast", "bladder", "cervical", "esophageal", "endometrial",
    "gastric", "ovarian", "pancreatic", "colorectal", "leukemia", "multiple_myeloma", "lymphoma",
}  # fmt: skip


def test_every_cancer_and_any_cancer_is_built_in():
    assert set(builtin_names()) == FIFTEEN | {"any_cancer"}


@pytest.mark.parametrize("name", sorted(FIFTEEN))
def test_builtin_icd10_prefixes_are_malignant_neoplasm_categories(name):
    d = load_definition(name)
    assert [c.name for c in d.cancers] == [name]
    for prefix in d.cancers[0].icd10cm_prefixes:
        assert icd.is_valid_item(prefix), prefix
        description = icd.get_description(prefix).lower()
        assert any(word in description for word in ("malignant", "leukemia", "lymphoma", "myeloma")), description
    assert d.cancers[0].icd9cm_prefixes, "ICD-9-CM codes are needed for data before October 2015"


def test_defaults_follow_the_paper():
    d = load_definition("lung")
    assert (d.min_codes, d.max_days_between_codes, d.washout_days, d.gap_days) == (2, 60, 180, 365)
    assert (d.controls_per_case, d.matching_keys, d.age_band_years, d.min_visits) == (1, ("sex", "age_band"), 10, 2)
    assert (d.test_splits, d.train_splits, d.test_target_cases, d.train_target_cases) == (
        ("held_out",),
        ("train", "tuning"),
        500,
        None,
    )


def test_sex_restricted_cancers():
    assert load_definition("prostate").allowed_sexes == {"M"}
    assert load_definition("ovarian").allowed_sexes == {"F"}
    assert load_definition("cervical").allowed_sexes == {"F"}
    assert load_definition("endometrial").allowed_sexes == {"F"}
    assert load_definition("breast").allowed_sexes is None
    assert load_definition("any_cancer").allowed_sexes is None


def test_any_cancer_includes_all_fifteen_with_their_codes():
    d = load_definition("any_cancer")
    assert {c.name for c in d.cancers} == FIFTEEN
    assert {c.name: c for c in d.cancers}["prostate"] == load_definition("prostate").cancers[0]


def test_new_cancer_as_a_small_toml(tmp_path: Path):
    path = tmp_path / "kidney.toml"
    path.write_text(
        'name = "kidney"\nicd10cm_prefixes = ["C64"]\nicd9cm_prefixes = ["189.0"]\ngap_days = 730\nseed = 7\n'
    )
    d = load_definition(path)
    assert d.name == "kidney" and d.cancers[0].icd10cm_prefixes == ("C64",) and d.gap_days == 730 and d.seed == 7
    assert load_definition(str(path)) == d


def test_extends_overrides_only_what_it_names(tmp_path: Path):
    (tmp_path / "lung_3y.toml").write_text('extends = "lung"\nname = "lung_3y"\ngap_days = 1095\n')
    d = load_definition(tmp_path / "lung_3y.toml")
    assert d.name == "lung_3y" and d.gap_days == 1095
    assert d.cancers == load_definition("lung").cancers and d.washout_days == 180


def test_include_resolves_relative_paths(tmp_path: Path):
    (tmp_path / "kidney.toml").write_text('name = "kidney"\nicd10cm_prefixes = ["C64"]\n')
    (tmp_path / "mix.toml").write_text('name = "mix"\ninclude = ["lung", "kidney.toml"]\n')
    assert [c.name for c in load_definition(tmp_path / "mix.toml").cancers] == ["lung", "kidney"]


def test_gap_is_validated_and_the_error_names_file_and_field(tmp_path: Path):
    path = tmp_path / "bad.toml"
    path.write_text('extends = "lung"\ngap_days = 1827\n')
    with pytest.raises(CohortDefinitionError, match=r"bad\.toml.*gap_days"):
        load_definition(path)
    with pytest.raises(CohortDefinitionError, match="gap_days"):
        load_definition("lung").with_overrides(gap_days=-1)
    assert load_definition("lung").with_overrides(gap_days=0).gap_days == 0
    assert load_definition("lung").with_overrides(gap_days=1826).gap_days == 1826
    with pytest.raises(CohortDefinitionError, match="gap_days"):  # the CLI's model_copy(update=...) validates too
        load_definition("lung").model_copy(update={"gap_days": 5000})
    assert load_definition("lung").model_copy(update={"seed": 3}).seed == 3


def test_unknown_keys_and_names_are_refused(tmp_path: Path):
    with pytest.raises(CohortDefinitionError, match="built-ins: .*lung"):
        load_definition("lungs")
    path = tmp_path / "typo.toml"
    path.write_text('extends = "lung"\nwashout_dayz = 90\n')
    with pytest.raises(CohortDefinitionError, match="washout_dayz"):
        load_definition(path)
    with pytest.raises(CohortDefinitionError, match="not found"):
        load_definition(tmp_path / "missing.toml")


def test_bad_toml_and_inconsistent_definitions(tmp_path: Path):
    broken = tmp_path / "broken.toml"
    broken.write_text('name = "x\n')
    with pytest.raises(CohortDefinitionError, match=r"broken\.toml: not valid TOML"):
        load_definition(broken)
    overlap = tmp_path / "overlap.toml"
    overlap.write_text(
        'name = "o"\n[[cancers]]\nname = "a"\nicd10cm_prefixes = ["C34"]\n'
        '[[cancers]]\nname = "b"\nicd10cm_prefixes = ["C34.1"]\n'
    )
    with pytest.raises(CohortDefinitionError, match="also covered"):
        load_definition(overlap)
    no_codes = tmp_path / "nocodes.toml"
    no_codes.write_text('name = "n"\nsex = "F"\n')
    with pytest.raises(CohortDefinitionError, match="has no code set: give icd10cm_prefixes, icd9cm_prefixes, snomed_codes or patterns"):
        load_definition(no_codes)
    same_split = tmp_path / "split.toml"
    same_split.write_text('extends = "lung"\ntrain_splits = ["train", "held_out"]\n')
    with pytest.raises(CohortDefinitionError, match="both the test and the training"):
        load_definition(same_split)
    loop = tmp_path / "loop.toml"
    loop.write_text('extends = "loop.toml"\n')
    with pytest.raises(CohortDefinitionError, match="loop"):
        load_definition(loop)


def test_digest_is_stable_and_tracks_every_field():
    a, b = load_definition("lung"), load_definition("lung")
    assert a.digest() == b.digest() and len(a.digest()) == 64
    assert a.with_overrides(seed=1).digest() != a.digest()
    assert a.with_overrides(gap_days=730).digest() != a.digest()


def test_built_ins_agree_with_the_project_cancer_catalog():
    from trajonco.cancers import CANCERS

    assert set(builtin_names()) - {"any_cancer"} == set(CANCERS)
    for key, cancer in CANCERS.items():
        restriction = load_definition(key).cancers[0].sex
        assert (frozenset({"F", "M"}) if restriction is None else frozenset({restriction})) == cancer.sexes, key
