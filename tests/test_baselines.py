"""Baselines: tuning on an 8:2 split of the training rows only, no train/test overlap, prediction-file models, strata."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from meds_evaluation.schema import PredictionSchema

from baselines.errors import FeatureMismatchError, NotFittedError, PredictionFileError, TrainTestOverlapError
from baselines.evaluation import check_no_overlap, fit_and_score
from baselines.features import FeatureMatrix
from baselines.metrics import evaluate
from baselines.models import KNNBaseline, LogisticRegressionBaseline, XGBoostBaseline, make_baselines
from baselines.predictions import ModelScores, PredictionFileModel, write_predictions
from baselines.stratify import cohort_strata, quartile_labels, stratified_results

T0 = np.datetime64("2020-01-01T00:00:00", "us")


def synthetic_matrix(subject_ids: np.ndarray, seed: int, names: tuple[str, ...] | None = None) -> FeatureMatrix:
    """Sparse count features where two columns carry signal and the rest is noise."""
    rng = np.random.default_rng(seed)
    n, p = subject_ids.size, 12
    y = rng.random(n) < 0.5
    dense = rng.poisson(0.3, (n, p)).astype(np.float32)
    dense[:, 0] += rng.poisson(np.where(y, 1.5, 0.4))
    dense[:, 1] += rng.poisson(np.where(y, 0.2, 0.9))
    return FeatureMatrix(X=sp.csr_matrix(dense), subject_ids=subject_ids.astype(np.int64),
                         prediction_times=np.full(n, T0), feature_names=names or tuple(f"count:C{j}" for j in range(p)),
                         labels=y)


@pytest.fixture(scope="module")
def cohorts() -> tuple[FeatureMatrix, FeatureMatrix]:
    return synthetic_matrix(np.arange(0, 600), seed=1), synthetic_matrix(np.arange(1000, 1300), seed=2)


# --------------------------------------------------------------------------------------------- models
@pytest.mark.parametrize("model_type", [LogisticRegressionBaseline, KNNBaseline, XGBoostBaseline])
def test_each_baseline_tunes_on_an_8_2_split_and_learns_the_signal(cohorts, model_type):
    train, test = cohorts
    model = model_type(seed=0)
    model.fit(train.X, train.y)
    report = model.tuning_
    assert (report.n_train, report.n_validation) == (480, 120)
    assert len(report.candidates) == len(model.param_grid(480)) >= 2
    assert report.chosen == max(report.candidates, key=lambda c: c.validation_auroc).params
    proba = model.predict_proba(test.X)
    assert proba.shape == (300, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert evaluate(ModelScores(model.name, test.subject_ids, test.prediction_times, test.y, proba[:, 1]),
                    n_resamples=100).auroc.value > 0.75


def test_xgboost_refits_with_the_early_stopped_number_of_rounds(cohorts):
    train, _ = cohorts
    model = XGBoostBaseline(seed=0).fit(train.X, train.y)
    assert model.estimator_.get_params()["n_estimators"] == model.tuning_.chosen["n_estimators"]
    assert 1 <= int(model.tuning_.chosen["n_estimators"]) <= XGBoostBaseline.MAX_ROUNDS


def test_tuning_is_reproducible_for_a_seed(cohorts):
    train, test = cohorts
    a = LogisticRegressionBaseline(seed=3).fit(train.X, train.y)
    b = LogisticRegressionBaseline(seed=3).fit(train.X, train.y)
    assert a.tuning_ == b.tuning_ and np.array_equal(a.predict_proba(test.X), b.predict_proba(test.X))


def test_unfitted_models_and_one_class_training_labels_are_refused(cohorts):
    train, _ = cohorts
    with pytest.raises(NotFittedError):
        KNNBaseline().predict_proba(train.X)
    with pytest.raises(ValueError, match="one class only"):
        LogisticRegressionBaseline().fit(train.X, np.ones(train.n_rows, bool))
    with pytest.raises(ValueError, match="unknown baseline"):
        make_baselines(["random_forest"])


# --------------------------------------------------------------------------------------------- no leakage
def test_fit_and_score_refuses_a_subject_in_both_cohorts(cohorts):
    train, _ = cohorts
    leaky_test = synthetic_matrix(np.r_[np.arange(1000, 1099), [17]], seed=4)
    with pytest.raises(TrainTestOverlapError, match=r"1 subject\(s\) .* \(first: \[17\]\)"):
        fit_and_score(make_baselines(["logistic_regression"]), train, leaky_test)
    with pytest.raises(TrainTestOverlapError):
        check_no_overlap(train.subject_ids, train.subject_ids)


def test_fit_and_score_refuses_matrices_with_different_features(cohorts):
    train, _ = cohorts
    other = synthetic_matrix(np.arange(2000, 2100), seed=5, names=tuple(f"count:D{j}" for j in range(12)))
    with pytest.raises(FeatureMismatchError):
        fit_and_score(make_baselines(["logistic_regression"]), train, other)


def test_models_never_see_test_rows_during_fit(cohorts, monkeypatch):
    train, test = cohorts
    seen: list[int] = []
    original = LogisticRegressionBaseline.fit

    def spying_fit(self, X, y):
        seen.append(X.shape[0])
        return original(self, X, y)

    monkeypatch.setattr(LogisticRegressionBaseline, "fit", spying_fit)
    [scores] = fit_and_score([LogisticRegressionBaseline(seed=0)], train, test)
    assert seen == [train.n_rows]
    assert np.array_equal(scores.subject_ids, test.subject_ids) and scores.n == test.n_rows


# --------------------------------------------------------------------------------------------- prediction files
def _prediction_file(path, subject_ids, scores, *, with_time=True):
    columns = {"subject_id": subject_ids, "predicted_boolean_probability": scores}
    if with_time:
        columns["prediction_time"] = [datetime(2020, 1, 1)] * len(subject_ids)
    pl.DataFrame(columns, schema_overrides={"predicted_boolean_probability": pl.Float64}).write_parquet(path)
    return path


def test_a_prediction_file_model_scores_the_cohort_in_its_row_order(cohorts, tmp_path):
    _, test = cohorts
    ids = test.subject_ids[::-1]
    path = _prediction_file(tmp_path / "trajonco.parquet", ids.tolist(), (ids % 7 / 7).tolist())
    [scores] = fit_and_score([PredictionFileModel(path)], None, test)
    assert scores.model == "trajonco" and np.array_equal(scores.subject_ids, test.subject_ids)
    assert np.allclose(scores.scores, test.subject_ids % 7 / 7)
    labels = pl.DataFrame({"subject_id": test.subject_ids, "prediction_time": test.prediction_times,
                           "boolean_value": test.y})  # a label table works as well as a feature matrix
    from_labels = PredictionFileModel(path).scores_for(labels)
    assert np.array_equal(from_labels.scores, scores.scores) and np.array_equal(from_labels.labels, test.y)


def test_missing_and_failed_predictions_raise_or_are_counted(cohorts, tmp_path):
    _, test = cohorts
    ids = test.subject_ids[:-5].tolist()  # 5 cohort rows absent
    values = [None if i < 3 else 0.5 for i in range(len(ids))]  # 3 failed runs
    path = _prediction_file(tmp_path / "agents.parquet", ids, values, with_time=False)
    with pytest.raises(PredictionFileError, match=r"agents\.parquet: subject 1000: .*8 of 300 .*5 absent.*3 null"):
        PredictionFileModel(path).scores_for(test)
    scores = PredictionFileModel(path, on_missing="subset").scores_for(test)
    assert (scores.n, scores.n_missing, scores.n_failed) == (292, 5, 3)
    result = evaluate(scores, n_resamples=50)
    assert result.n == 292 and result.n_missing == 5 and "5 cohort rows had no prediction" in result.notes[0]


def test_bad_prediction_files_name_the_problem(tmp_path):
    dup = _prediction_file(tmp_path / "dup.parquet", [1, 1], [0.1, 0.2])
    with pytest.raises(PredictionFileError, match="dup.parquet: subject 1: .*repeat the key"):
        PredictionFileModel(dup)
    pl.DataFrame({"subject_id": [1], "risk": [3]}).write_parquet(tmp_path / "nocol.parquet")
    with pytest.raises(PredictionFileError, match="field 'predicted_boolean_probability': column is missing"):
        PredictionFileModel(tmp_path / "nocol.parquet")
    assert PredictionFileModel(tmp_path / "nocol.parquet", probability_column="risk").name == "nocol"
    nan = _prediction_file(tmp_path / "nan.parquet", [1, 2], [float("nan"), 0.2])
    with pytest.raises(PredictionFileError, match="NaN/inf"):
        PredictionFileModel(nan)
    with pytest.raises(PredictionFileError, match="not found"):
        PredictionFileModel(tmp_path / "absent.parquet")


def test_written_predictions_read_back_as_a_model(cohorts, tmp_path):
    train, test = cohorts
    [scores] = fit_and_score([LogisticRegressionBaseline(seed=0)], train, test)
    path = write_predictions(scores, tmp_path / "preds" / "lr.parquet")
    frame = pl.read_parquet(path)
    assert frame.columns == ["subject_id", "prediction_time", "boolean_value", "predicted_boolean_value",
                             "predicted_boolean_probability"]
    PredictionSchema.validate(pq.read_table(path))  # MEDS-DEV's evaluator takes the file as it is
    again = PredictionFileModel(path, name="lr").scores_for(test)
    assert np.allclose(again.scores, scores.scores) and np.array_equal(again.labels, scores.labels)


# --------------------------------------------------------------------------------------------- strata
def _cohort_labels() -> pl.DataFrame:
    """Three matched pairs: a young female lung pair, an older male lung pair, a female liver pair."""
    t = datetime(2020, 1, 1)
    return pl.DataFrame({
        "subject_id": [1, 2, 3, 4, 5, 6], "prediction_time": [t] * 6,
        "boolean_value": [True, False, True, False, True, False],
        "cancer": ["lung", None, "lung", None, "liver", None], "role": ["case", "control"] * 3,
        "matched_to": [None, 1, None, 3, None, 5], "age_at_index": [45.2, 47.9, 71.0, 70.1, 66.0, 69.9],
        "sex": ["F", "F", "M", "M", "F", "F"],
    }, schema_overrides={"prediction_time": pl.Datetime("us"), "matched_to": pl.Int64})


def test_cohort_strata_give_controls_their_matched_case_cancer_and_count_recent_visits():
    labels = _cohort_labels()
    day = timedelta(days=1)
    t = datetime(2020, 1, 1)
    rows = []
    for sid, n_visits in zip(range(1, 7), [1, 2, 3, 4, 6, 8]):
        rows += [(sid, t - (k + 1) * 30 * day, "ENCOUNTER//AMB") for k in range(n_visits)]
    rows += [(1, t - 6 * 365 * day, "ENCOUNTER//AMB"), (1, t, "ENCOUNTER//AMB")]  # >5 years ago and at t: not counted
    events = pl.LazyFrame({"subject_id": [r[0] for r in rows], "time": [r[1] for r in rows], "code": [r[2] for r in rows],
                           "numeric_value": [None] * len(rows)}, schema_overrides={"numeric_value": pl.Float32,
                                                                                   "time": pl.Datetime("us")})
    strata = cohort_strata(labels, events)
    assert strata["cancer"].to_list() == ["lung", "lung", "lung", "lung", "liver", "liver"]
    assert strata["screening"].to_list() == ["screening"] * 4 + ["non-screening"] * 2
    assert strata["age_group"].to_list() == ["40–49", "40–49", "70–79", "70–79", "60–69", "60–69"]
    assert strata["visit_frequency"].to_list() == ["Q1 (1–2 visits)", "Q1 (1–2 visits)", "Q2 (3 visits)",
                                                   "Q3 (4–6 visits)", "Q3 (4–6 visits)", "Q4 (8 visits)"]


def test_quartiles_keep_ties_together():
    labels = quartile_labels(np.array([0, 0, 0, 0, 0, 1, 2, 3]))
    assert labels.tolist() == ["Q1 (0 visits)"] * 5 + ["Q3 (1 visits)", "Q4 (2–3 visits)", "Q4 (2–3 visits)"]


def test_stratified_results_report_every_stratum_and_say_why_one_has_no_auroc():
    six = _cohort_labels()
    labels = pl.concat([six, six.with_columns(pl.col("subject_id") + 10, pl.col("matched_to") + 10)])
    scores = ModelScores("m", labels["subject_id"].to_numpy(), labels["prediction_time"].to_numpy(),
                         labels["boolean_value"].to_numpy(), np.tile([0.9, 0.2, 0.6, 0.7, 0.8, 0.1], 2))
    strata = cohort_strata(labels).with_columns(
        pl.when(pl.col("subject_id").is_in([2, 12])).then(pl.lit("controls-only")).otherwise(pl.col("sex")).alias("sex"),
        pl.when(pl.col("subject_id") != 15).then(pl.col("cancer")).alias("cancer"))
    results = {(r.stratifier, r.stratum): r for r in stratified_results(scores, strata, n_resamples=50, min_cases=2)}
    assert results[("screening", "screening")].auroc.value == 0.75
    assert results[("screening", "non-screening")].auroc.value == 1.0
    assert results[("sex", "controls-only")].auroc is None
    assert results[("sex", "controls-only")].note == "only controls in this stratum"
    assert [k[1] for k in results if k[0] == "age_group"] == ["40–49", "60–69", "70–79"]
    assert not any(k[0] == "visit_frequency" for k in results)  # no events given: stratifier left out
    one_case = results[("cancer", "liver")]  # case 15 lost its cancer: one liver case left
    assert one_case.auroc is None and one_case.note == "1 case only (a CI needs 2) in this stratum"
    assert results[("cancer", "lung")].note == "1 rows had no cancer and are in no stratum"
