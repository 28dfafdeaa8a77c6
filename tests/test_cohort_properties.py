"""Property tests: on random small populations every built cohort keeps its promises (checked against the inputs)."""

from __future__ import annotations

import tempfile
from datetime import date, timedelta
from pathlib import Path

import polars as pl
from cohort_meds import Patient, at, day, write_dataset
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from trajonco.cohorts import EmptyCohortError, build_cohort, load_definition

LUNG = load_definition("lung")
LUNG_CODES = ["ICD10CM//C34.11", "ICD10CM//C34.90", "ICD9CM//162.3"]


@st.composite
def patient(draw, sid: int) -> Patient:
    start = draw(st.integers(0, 500))
    gaps = draw(st.lists(st.integers(20, 400), min_size=3, max_size=14))
    visits = [start + sum(gaps[:i]) for i in range(len(gaps) + 1)]
    codes: list[tuple[date, str]] = []
    kind = draw(st.sampled_from(["none", "none", "none", "none", "pair", "pair", "pair", "single", "far", "early"]))
    first = start + draw(st.integers(0, 400) if kind == "early" else st.integers(150, 2500))
    if kind != "none":
        codes.append((day(first), draw(st.sampled_from(LUNG_CODES))))
    if kind in ("pair", "far", "early"):
        second = first + (draw(st.integers(61, 200)) if kind == "far" else draw(st.integers(1, 60)))
        codes.append((day(second), draw(st.sampled_from(LUNG_CODES))))
    return Patient(
        sid,
        split=draw(st.sampled_from(["held_out", "held_out", "train", "tuning"])),
        sex=draw(st.sampled_from(["F", "M"])) if draw(st.integers(0, 19)) else None,
        birth=date(draw(st.integers(1940, 1965)), draw(st.integers(1, 12)), 1),
        visits=[day(v) for v in visits],
        codes=codes,
    )


@st.composite
def population(draw) -> list[Patient]:
    n = draw(st.integers(20, 40))
    return [draw(patient(sid)) for sid in range(1, n + 1)]


def visit_times(p: Patient) -> list:
    return sorted({at(d) for d in p.visits} | {at(d) for d, _ in p.codes})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    population(),
    st.sampled_from([0, 180, 365, 730]),
    st.integers(1, 2),
    st.sampled_from([None, 3]),
    st.integers(0, 1000),
)
def test_built_cohorts_keep_their_promises(people, gap, per_case, target, seed):
    definition = LUNG.with_overrides(gap_days=gap, controls_per_case=per_case, test_target_cases=target, seed=seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = write_dataset(Path(tmp) / "meds", people)
        try:
            result = build_cohort(root, definition, Path(tmp) / "cohort")
        except EmptyCohortError as exc:
            assert exc.step in {
                "no subjects in its splits",
                "no code of the definition in the data",
                "no cases found",
                "no cases in its splits",
                "all cases excluded",
                "no eligible controls",
            }
            event(f"empty: {exc.step}")
            return
    event("built")
    by_id = {p.subject_id: p for p in people}
    cohorts = {"test": result.test, "train": result.train}
    assert result.train is not None
    assert not set(result.test["subject_id"]) & set(result.train["subject_id"])
    for name, labels in cohorts.items():
        report = getattr(result.manifest, name)
        allowed = {"held_out"} if name == "test" else {"train", "tuning"}
        assert labels["subject_id"].is_unique().all()
        assert set(labels["split"]) <= allowed
        assert all(by_id[s].split == sp for s, sp in labels.select("subject_id", "split").iter_rows())
        assert (labels["prediction_time"] == labels["index_time"] - timedelta(days=gap)).all()
        cases = labels.filter(pl.col("role") == "case")
        controls = labels.filter(pl.col("role") == "control")
        assert cases["boolean_value"].all() and not controls["boolean_value"].any()
        if target is not None and name == "test":
            assert cases.height <= target
        for row in labels.iter_rows(named=True):
            p = by_id[row["subject_id"]]
            visits = visit_times(p)
            # the input window holds at least min_visits visits strictly before the prediction time
            assert sum(v < row["prediction_time"] for v in visits) >= definition.min_visits
            assert row["sex"] == p.sex and p.birth is not None
            assert abs(row["age_at_index"] - (row["index_time"].date() - p.birth).days / 365.25) < 1e-9
            if row["role"] == "control":
                assert not p.codes  # never a target code
                assert row["index_time"] in visits  # a visit of its own, inside its observed period
                assert visits[0] <= row["index_time"] <= visits[-1]
            else:
                days = sorted(d for d, _ in p.codes)
                assert row["index_time"] == at(days[0]) and (days[1] - days[0]).days <= 60
                assert (days[0] - min(visits).date()).days >= definition.washout_days
        pairs = controls.join(cases, left_on="matched_to", right_on="subject_id", suffix="_case")
        assert pairs.height == controls.height  # every control points to a case of the same cohort
        assert (pairs["sex"] == pairs["sex_case"]).all()
        assert ((pairs["age_at_index"] // 10) == (pairs["age_at_index_case"] // 10)).all()
        per_case = controls.group_by("matched_to").len()
        assert per_case.height == cases.height and per_case["len"].max() <= definition.controls_per_case
        # the manifest's counts add up
        assert (report.cases, report.controls) == (cases.height, controls.height)
        assert (
            report.eligible_cases
            == report.cases + report.case_exclusions["no_matching_control"] + report.cases_not_sampled
        )
        phenotype_level = ("prevalent", "no_qualifying_pair", "no_matching_control")
        excluded_before_matching = sum(v for k, v in report.case_exclusions.items() if k not in phenotype_level)
        assert report.phenotype_cases == report.eligible_cases + excluded_before_matching
        assert report.eligible_controls == report.controls + report.controls_unused
        assert report.control_candidates == report.eligible_controls + sum(report.control_exclusions.values())
        assert report.matching.sex_agreement == 1.0 and report.matching.age_band_agreement == 1.0
