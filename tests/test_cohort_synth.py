"""Cohorts on a realistic synthetic dataset (vista.shared.synth): the phenotype reproduces the generator's ground truth for
all 15 cancers, and built cohorts keep their promises on it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from trajonco.cohorts import build_cohort, builtin_names, load_definition
from trajonco.cohorts.phenotype import classify_subjects, target_code_rows
from trajonco.cohorts.population import load_population
from trajonco.cohorts.source import read_splits, scan_events

pytestmark = pytest.mark.slow

GENERATOR_KEY = {"multiple_myeloma": "myeloma"}  # the generator's ground truth spells this one cancer differently


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    from vista.shared.synth import SynthConfig, generate

    root = tmp_path_factory.mktemp("synth") / "meds"
    generate(SynthConfig(n_subjects=3000, seed=5), root, progress=False)
    return root


@pytest.fixture(scope="module")
def truth(synth: Path) -> pl.DataFrame:
    return pl.read_parquet(synth / "ground_truth" / "subjects.parquet")


@pytest.fixture(scope="module")
def first_visits(synth: Path) -> pl.DataFrame:
    population = load_population(scan_events(synth), read_splits(synth), min_visits=2, source=str(synth))
    return population.subjects.select("subject_id", "first_visit_time")


@pytest.mark.parametrize("name", [n for n in builtin_names() if n != "any_cancer"])
def test_phenotype_finds_exactly_the_generators_incident_cases(name, synth, truth, first_visits):
    definition = load_definition(name)
    found = classify_subjects(target_code_rows(scan_events(synth), definition).collect(), first_visits, definition)
    cases = found.filter(pl.col("status") == "case").select("subject_id", index_date=pl.col("index_time").dt.date())
    expected = truth.filter(pl.col("is_incident_case") & (pl.col("cancer") == GENERATOR_KEY.get(name, name)))
    assert cases.height > 0 or expected.height == 0
    assert cases.sort("subject_id").rows() == expected.select("subject_id", "diagnosis_date").sort("subject_id").rows()


def test_any_cancer_statuses_match_the_ground_truth(synth, truth, first_visits):
    definition = load_definition("any_cancer")
    found = classify_subjects(target_code_rows(scan_events(synth), definition).collect(), first_visits, definition)
    joined = truth.join(found, on="subject_id", how="left", suffix="_cohort")
    expected_status = (
        pl.when(pl.col("is_incident_case"))
        .then(pl.lit("case"))
        .when(pl.col("exclusion_reason").is_in(["prevalent", "insufficient_history"]))
        .then(pl.lit("prevalent"))
        .when((pl.col("exclusion_reason") == "no_qualifying_pair") | pl.col("trap_rule_out"))
        .then(pl.lit("no_qualifying_pair"))
    )
    mismatched = joined.filter(expected_status.ne_missing(pl.col("status")))
    assert mismatched.is_empty(), mismatched.head(5)
    cases = joined.filter(pl.col("status") == "case")
    assert (cases["cancer_cohort"].replace(GENERATOR_KEY) == cases["cancer"]).all()
    assert cases.height > 100 and joined["trap_rule_out"].sum() > 0


@pytest.mark.parametrize("name", ["lung", "any_cancer", "ovarian"])
def test_cohorts_on_synthetic_data_keep_their_promises(name, synth, truth, tmp_path):
    definition = load_definition(name)
    result = build_cohort(synth, definition, tmp_path / name)
    assert result.train is not None
    facts = truth.select(
        "subject_id", "split", "sex", "birth_date", "record_start", "record_end", "cancer", "trap_rule_out"
    )
    for labels, splits in ((result.test, {"held_out"}), (result.train, {"train", "tuning"})):
        rows = labels.join(facts, on="subject_id", suffix="_truth")
        assert rows.height == labels.height and set(rows["split_truth"]) <= splits
        assert (rows["sex"] == rows["sex_truth"]).all()
        assert (rows["prediction_time"] == rows["index_time"] - timedelta(days=definition.gap_days)).all()
        controls = rows.filter(pl.col("role") == "control")
        index_day = controls["index_time"].dt.date()
        assert ((index_day >= controls["record_start"]) & (index_day <= controls["record_end"])).all()
        if name == "any_cancer":  # no code of any of the 15 cancers, ever
            assert controls["cancer_truth"].is_null().all() and not controls["trap_rule_out"].any()
        else:
            assert (controls["cancer_truth"].fill_null("") != GENERATOR_KEY.get(name, name)).all()
        cases = rows.filter(pl.col("role") == "case")
        assert (cases["cancer"].replace(GENERATOR_KEY) == cases["cancer_truth"]).all()
        if name == "ovarian":
            assert set(rows["sex"]) == {"F"}
    assert not set(result.test["subject_id"]) & set(result.train["subject_id"])
    report = result.manifest.test
    assert report.matching.sex_agreement == 1.0 and report.matching.age_band_agreement == 1.0
    assert abs(report.matching.age_difference_years.mean or 0.0) < 5


def test_planted_early_target_codes_are_excluded_and_counted_by_default(synth, truth, tmp_path):
    """The generator plants, in a few cases, one isolated code of their cancer long before the diagnosis (outside the
    washout, so the phenotype still calls them incident). Where that code precedes the prediction time the case would
    hand a model the answer: by default it is excluded and counted; ``exclude_prior_target_codes = false`` keeps it."""
    definition = load_definition("any_cancer").with_overrides(test_target_cases=None)
    gap = timedelta(days=definition.gap_days)
    planted = truth.filter(pl.col("trap_prior_code") & pl.col("is_incident_case"))
    leaking = planted.filter(pl.col("prior_code_date") < pl.col("diagnosis_date") - gap)
    assert leaking.height >= 3  # the seed-5 population plants some in both the test and training splits

    def by_split(frame: pl.DataFrame) -> dict[str, int]:
        return {"test": frame.filter(pl.col("split") == "held_out").height,
                "train": frame.filter(pl.col("split") != "held_out").height}

    strict = build_cohort(synth, definition, tmp_path / "strict")
    kept = build_cohort(synth, definition.with_overrides(exclude_prior_target_codes=False), tmp_path / "kept")
    expected = by_split(leaking)
    for name in ("test", "train"):
        strict_report, kept_report = getattr(strict.manifest, name), getattr(kept.manifest, name)
        labels = getattr(strict, name).filter(pl.col("role") == "case")
        # excluded: none of the leaking cases is a case, and each excluded one is counted (rule order: last reason,
        # so a leaking case excluded for an earlier reason counts there)
        assert labels.join(leaking, on="subject_id").is_empty()
        assert 0 < strict_report.case_exclusions["prior_target_code"] <= expected[name]
        assert strict_report.cases_with_prior_target_code == 0
        # kept: the same subjects come back as cases, counted as kept
        kept_labels = getattr(kept, name).filter(pl.col("role") == "case")
        back = kept_labels.join(leaking, on="subject_id")
        assert 0 < back.height == kept_report.cases_with_prior_target_code
        assert back.height <= strict_report.case_exclusions["prior_target_code"]  # (a few may find no control)
        assert kept_report.case_exclusions["prior_target_code"] == 0
        excluded = strict_report.case_exclusions["prior_target_code"]
        assert kept_report.eligible_cases == strict_report.eligible_cases + excluded
