"""Summary features: the input window, the ≥1 % vocabulary rule, every feature family, and clear errors."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pytest

from baselines.errors import EventDataError, FeatureMismatchError, LabelDataError, NotFittedError
from baselines.features import (
    FeatureConfig,
    SummaryFeaturizer,
    days_from_recency,
    recency_from_days,
)
from baselines.labels import read_labels

T0 = datetime(2020, 1, 1, 9)
ONLY_COUNTS = FeatureConfig(min_prevalence=0.0, recency=False, last_values=False, static=False, demographics=False,
                            summary=False)


def events_frame(rows: list[tuple[int, datetime | None, str, float | None]]) -> pl.LazyFrame:
    sid, time, code, value = zip(*rows)
    return pl.LazyFrame({"subject_id": list(sid), "time": list(time), "code": list(code), "numeric_value": list(value)},
                        schema={"subject_id": pl.Int64, "time": pl.Datetime("us"), "code": pl.String,
                                "numeric_value": pl.Float32})


def labels_frame(subjects: list[int], times: list[datetime] | datetime = T0, outcome: list[bool] | None = None):
    times = times if isinstance(times, list) else [times] * len(subjects)
    outcome = outcome if outcome is not None else [i % 2 == 0 for i in range(len(subjects))]
    return pl.DataFrame({"subject_id": subjects, "prediction_time": times, "boolean_value": outcome},
                        schema={"subject_id": pl.Int64, "prediction_time": pl.Datetime("us"), "boolean_value": pl.Boolean})


def base_rows(sid: int) -> list[tuple[int, datetime | None, str, float | None]]:
    """Every subject gets a visit long before T0 so it exists in the data."""
    return [(sid, T0 - timedelta(days=1000), "ENCOUNTER//AMB", None)]


# --------------------------------------------------------------------------------------------- the input window
def test_a_row_at_prediction_time_does_not_count_and_one_just_before_does():
    rows = base_rows(1) + [
        (1, T0 - timedelta(microseconds=1), "ICD10CM//J44.9", None),  # just before: inside
        (1, T0, "ICD10CM//J44.9", None),  # at the prediction time: outside
        (1, T0, "ICD10CM//R91.1", None),  # only ever at the prediction time: never a feature
        (1, T0 + timedelta(days=3), "ICD10CM//J44.9", None),  # after: outside
    ]
    fm = SummaryFeaturizer(ONLY_COUNTS).fit_transform(events_frame(rows), labels_frame([1]))
    assert fm.column("count:ICD10CM//J44.9").tolist() == [1.0]
    assert "count:ICD10CM//R91.1" not in fm.feature_names


def test_each_label_row_uses_its_own_prediction_time():
    rows = base_rows(1) + [(1, T0 + timedelta(days=d), "LOINC//718-7", float(d)) for d in (10, 20, 30)]
    labels = labels_frame([1, 1], [T0 + timedelta(days=15), T0 + timedelta(days=31)])
    fm = SummaryFeaturizer(FeatureConfig(min_prevalence=0.0)).fit_transform(events_frame(rows), labels)
    assert fm.column("count:LOINC//718-7").tolist() == [1.0, 3.0]
    assert fm.column("last:LOINC//718-7").tolist() == [10.0, 30.0]
    assert fm.subject_ids.tolist() == [1, 1]


# --------------------------------------------------------------------------------------------- the ≥1 % rule
def _prevalence_data(n: int, with_a: int, with_b: int):
    rows = []
    for sid in range(n):
        rows += base_rows(sid)
        if sid < with_a:
            rows.append((sid, T0 - timedelta(days=5), "ICD10CM//A00", None))
        if sid < with_b:
            rows.append((sid, T0 - timedelta(days=5), "ICD10CM//B00", None))
    return events_frame(rows), labels_frame(list(range(n)))


def test_a_feature_in_exactly_one_percent_of_training_rows_is_kept_and_just_below_is_dropped():
    events, labels = _prevalence_data(300, with_a=3, with_b=2)  # A in 1.000 %, B in 0.667 %
    fm = SummaryFeaturizer(FeatureConfig(min_prevalence=0.01)).fit_transform(events, labels)
    assert "count:ICD10CM//A00" in fm.feature_names and "recency:ICD10CM//A00" in fm.feature_names
    assert "count:ICD10CM//B00" not in fm.feature_names and "recency:ICD10CM//B00" not in fm.feature_names
    assert fm.vocabulary is not None and fm.vocabulary.min_count == 3


def test_one_percent_of_an_uneven_count_rounds_up():
    events, labels = _prevalence_data(250, with_a=3, with_b=2)  # need ceil(2.5) = 3 rows
    fm = SummaryFeaturizer(FeatureConfig(min_prevalence=0.01)).fit_transform(events, labels)
    assert "count:ICD10CM//A00" in fm.feature_names and "count:ICD10CM//B00" not in fm.feature_names


def test_prevalence_counts_rows_inside_the_window_only():
    # 3 of 300 have A, but for one of them it is at the prediction time: 2 / 300 < 1 %
    rows = []
    for sid in range(300):
        rows += base_rows(sid)
        if sid < 3:
            rows.append((sid, T0 if sid == 0 else T0 - timedelta(days=1), "ICD10CM//A00", None))
    fm = SummaryFeaturizer(FeatureConfig(min_prevalence=0.01)).fit_transform(events_frame(rows), labels_frame(list(range(300))))
    assert "count:ICD10CM//A00" not in fm.feature_names


def test_the_vocabulary_is_fitted_on_training_labels_and_applied_unchanged_to_test():
    rows = []
    for sid in range(1, 7):
        rows += base_rows(sid) + [(sid, T0 - timedelta(days=2), "ICD10CM//TRAIN", None)]
    rows += [(7, T0 - timedelta(days=2), "ICD10CM//TEST_ONLY", None), (8, T0 - timedelta(days=2), "ICD10CM//TRAIN", None)]
    events = events_frame(rows)
    featurizer = SummaryFeaturizer(ONLY_COUNTS)
    train = featurizer.fit_transform(events, labels_frame(list(range(1, 7))))
    test = featurizer.transform(events, labels_frame([7, 8]))
    assert test.feature_names == train.feature_names
    assert "count:ICD10CM//TEST_ONLY" not in test.feature_names
    assert test.column("count:ICD10CM//TRAIN").tolist() == [0.0, 1.0]
    train.check_same_features(test)


def test_matrices_from_different_vocabularies_are_refused():
    events = events_frame(base_rows(1) + base_rows(2) + [(2, T0 - timedelta(days=1), "ICD10CM//X", None)])
    a = SummaryFeaturizer(ONLY_COUNTS).fit_transform(events, labels_frame([1]))
    b = SummaryFeaturizer(ONLY_COUNTS).fit_transform(events, labels_frame([2]))
    with pytest.raises(FeatureMismatchError, match="same fitted SummaryFeaturizer"):
        a.check_same_features(b)


# --------------------------------------------------------------------------------------------- feature families
def test_every_feature_family_on_one_patient():
    rows = [
        (1, None, "GENDER//F", None), (1, None, "RACE//Asian", None),
        (1, datetime(1950, 1, 1), "MEDS_BIRTH", None),
        (1, datetime(2015, 1, 1, 9), "ENCOUNTER//AMB", None),
        (1, datetime(2015, 1, 1, 9), "LOINC//718-7", 12.0),
        (1, datetime(2019, 1, 1, 9), "ENCOUNTER//AMB", None),
        (1, datetime(2019, 1, 1, 9), "LOINC//718-7", 10.0),
        (1, datetime(2019, 1, 1, 9), "LOINC//718-7", 9.0),  # same time: the larger value is "last"
        (1, datetime(2019, 1, 1, 10), "ICD10CM//J44.9", None),
    ]
    prediction = datetime(2020, 1, 1, 9)
    fm = SummaryFeaturizer(FeatureConfig(min_prevalence=0.0)).fit_transform(events_frame(rows), labels_frame([1], prediction))
    value = {name: fm.column(name)[0] for name in fm.feature_names}
    assert value["count:LOINC//718-7"] == 3 and value["count:ENCOUNTER//AMB"] == 2
    assert value["last:LOINC//718-7"] == 10.0
    assert value["static:GENDER//F"] == 1 and value["static:RACE//Asian"] == 1
    assert value["demographic:age_years"] == pytest.approx((prediction.date() - datetime(1950, 1, 1).date()).days / 365.25)
    days = (prediction - datetime(2019, 1, 1, 10)).total_seconds() / 86400
    assert value["recency:ICD10CM//J44.9"] == pytest.approx(recency_from_days(days), rel=1e-6)
    assert days_from_recency(value["recency:ICD10CM//J44.9"]) == pytest.approx(days, rel=1e-4)
    assert value["summary:n_events"] == 6  # clinical timed rows (birth excluded)
    assert value["summary:n_visit_days"] == 2
    assert value["summary:record_years"] == pytest.approx((prediction - datetime(2015, 1, 1, 9)).days / 365.25, rel=1e-6)
    assert not any(name.endswith("MEDS_BIRTH") for name in fm.feature_names)


def test_visit_days_fall_back_to_event_days_without_encounter_codes():
    rows = [(1, datetime(2019, 1, d, 9), "LOINC//718-7", 11.0) for d in (1, 1, 2, 5)]
    fm = SummaryFeaturizer(FeatureConfig(min_prevalence=0.0)).fit_transform(events_frame(rows), labels_frame([1]))
    assert fm.column("summary:n_visit_days").tolist() == [3.0]


def test_rows_follow_label_order_and_absent_features_are_zero():
    rows = base_rows(5) + base_rows(3) + [(3, T0 - timedelta(days=1), "ICD10CM//X", None)]
    fm = SummaryFeaturizer(ONLY_COUNTS).fit_transform(events_frame(rows), labels_frame([5, 3], outcome=[True, False]))
    assert fm.subject_ids.tolist() == [5, 3] and fm.y.tolist() == [True, False]
    assert fm.column("count:ICD10CM//X").tolist() == [0.0, 1.0]
    assert fm.X.format == "csr" and fm.X.has_sorted_indices


def test_the_matrix_matches_a_per_patient_python_computation():
    rng = np.random.default_rng(3)
    codes = [f"ICD10CM//C{i}" for i in range(12)] + ["LOINC//1-1", "LOINC//2-2"]
    rows, times = [], []
    for sid in range(60):
        prediction = T0 + timedelta(days=int(rng.integers(0, 400)))
        times.append(prediction)
        rows.append((sid, None, "GENDER//" + "FM"[sid % 2], None))
        for _ in range(int(rng.integers(1, 25))):
            code = codes[int(rng.integers(len(codes)))]
            when = T0 + timedelta(days=int(rng.integers(-300, 500)))
            rows.append((sid, when, code, float(rng.integers(0, 20)) if code.startswith("LOINC") else None))
    labels = labels_frame(list(range(60)), times)
    fm = SummaryFeaturizer(FeatureConfig(min_prevalence=0.05)).fit_transform(events_frame(rows), labels)
    for sid, prediction in enumerate(times):
        window = [r for r in rows if r[0] == sid and r[1] is not None and r[1] < prediction]
        for code in codes:
            hits = [r for r in window if r[2] == code]
            name = f"count:{code}"
            if name in fm.feature_names:
                assert fm.column(name)[sid] == len(hits), (sid, code)
            if hits and f"last:{code}" in fm.feature_names and code.startswith("LOINC"):
                last = max(hits, key=lambda r: (r[1], r[3]))
                assert fm.column(f"last:{code}")[sid] == last[3]
    names = set(fm.feature_names)
    present = {c for c in codes if sum(any(r[0] == s and r[2] == c and r[1] < times[s] for r in rows) for s in range(60)) >= 3}
    assert {n.split(":", 1)[1] for n in names if n.startswith("count:")} == present


# --------------------------------------------------------------------------------------------- errors
def test_a_labelled_subject_without_rows_is_an_error_naming_it():
    with pytest.raises(EventDataError, match=r"test labels: subject 99: .*1 labelled subject"):
        SummaryFeaturizer(ONLY_COUNTS).fit_transform(events_frame(base_rows(1)), labels_frame([1, 99]),
                                                     source="test labels")


def test_wrong_event_column_types_are_reported_with_the_field():
    events = events_frame(base_rows(1)).with_columns(pl.col("code").cast(pl.Categorical).to_physical())
    with pytest.raises(EventDataError, match="field 'code'"):
        SummaryFeaturizer().fit_transform(events, labels_frame([1]))
    with pytest.raises(EventDataError, match="field 'numeric_value': column is missing"):
        SummaryFeaturizer().fit_transform(events_frame(base_rows(1)).drop("numeric_value"), labels_frame([1]))


def test_null_codes_and_nan_values_are_reported_with_the_subject():
    nan = events_frame(base_rows(1) + base_rows(2) + [(2, T0 - timedelta(days=1), "LOINC//718-7", float("nan"))])
    with pytest.raises(EventDataError, match="MEDS events: subject 2: field 'numeric_value': 1 NaN/inf values"):
        SummaryFeaturizer().fit_transform(nan, labels_frame([1, 2]))
    null_code = events_frame(base_rows(1) + [(1, T0 - timedelta(days=1), None, None)])
    with pytest.raises(EventDataError, match="subject 1: field 'code': 1 null codes"):
        SummaryFeaturizer().fit_transform(null_code, labels_frame([1]))


def test_bad_label_tables_are_reported_with_file_subject_and_field(tmp_path):
    events = events_frame(base_rows(1) + base_rows(2))
    repeated = labels_frame([1, 1])
    with pytest.raises(LabelDataError, match="subject 1: field 'prediction_time': 2 rows repeat"):
        SummaryFeaturizer().fit_transform(events, repeated)
    path = tmp_path / "train.parquet"
    labels_frame([1, 2]).with_columns(pl.col("prediction_time").cast(pl.String)).write_parquet(path)
    with pytest.raises(LabelDataError, match=r"train\.parquet: field 'prediction_time': has type large_string, expected a timestamp"):
        read_labels(path)
    with pytest.raises(LabelDataError, match="label file not found"):
        read_labels(tmp_path / "absent.parquet")


def test_transform_before_fit_raises():
    with pytest.raises(NotFittedError):
        SummaryFeaturizer().transform(events_frame(base_rows(1)), labels_frame([1]))


def test_config_rejects_nonsense():
    with pytest.raises(ValueError, match="min_prevalence"):
        FeatureConfig(min_prevalence=1.5)
    with pytest.raises(ValueError, match="every feature family off"):
        FeatureConfig(counts=False, recency=False, last_values=False, static=False, demographics=False, summary=False)
