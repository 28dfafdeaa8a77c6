"""Metrics equal scikit-learn's reference values; bootstrap CIs cover a known AUROC about 95 % of the time."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm
from sklearn.calibration import calibration_curve
from sklearn.metrics import (
    average_precision_score,
    brier_score_loss,
    precision_recall_curve,
    roc_auc_score,
    roc_curve,
)

from baselines.errors import MetricInputError
from baselines.metrics import (
    auprc,
    auprc_statistic,
    auroc,
    auroc_statistic,
    bootstrap_interval,
    Evaluation,
    calibration,
    evaluate,
    threshold_metrics,
    youden_threshold,
)
from baselines.predictions import ModelScores

# Scores drawn from a small grid, so ties (between and within classes) are common.
tied_scores = st.lists(st.integers(0, 6).map(lambda v: v / 6), min_size=1, max_size=40)


@settings(max_examples=100, deadline=None)
@given(cases=tied_scores, controls=tied_scores)
def test_vectorized_statistics_equal_scikit_learn_with_ties(cases, controls):
    c, d = np.array(cases), np.array(controls)
    y = np.r_[np.ones(c.size, bool), np.zeros(d.size, bool)]
    s = np.r_[c, d]
    assert auroc_statistic(c, d) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert auprc_statistic(c, d) == pytest.approx(average_precision_score(y, s), abs=1e-12)
    assert auroc(y, s) == pytest.approx(roc_auc_score(y, s)) and auprc(y, s) == pytest.approx(average_precision_score(y, s))


def test_vectorized_statistics_equal_scikit_learn_on_every_row_of_a_batch():
    rng = np.random.default_rng(0)
    cases, controls = rng.integers(0, 10, (50, 30)) / 10, rng.integers(0, 10, (50, 45)) / 10
    y = np.r_[np.ones(30, bool), np.zeros(45, bool)]
    batch_auroc, batch_auprc = auroc_statistic(cases, controls), auprc_statistic(cases, controls)
    for b in range(50):
        s = np.r_[cases[b], controls[b]]
        assert batch_auroc[b] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        assert batch_auprc[b] == pytest.approx(average_precision_score(y, s), abs=1e-12)


def test_bootstrap_ci_covers_the_true_auroc_of_binormal_scores_about_95_percent_of_the_time():
    separation = 1.0  # cases ~ N(1, 1), controls ~ N(0, 1): AUROC = Φ(1 / √2)
    true_auroc = norm.cdf(separation / np.sqrt(2))
    rng = np.random.default_rng(20240501)
    repetitions, n, covered, widths = 200, 60, 0, []
    for rep in range(repetitions):
        cases, controls = rng.normal(separation, 1, n), rng.normal(0, 1, n)
        y = np.r_[np.ones(n, bool), np.zeros(n, bool)]
        ci = bootstrap_interval(y, np.r_[cases, controls], "auroc", n_resamples=300, seed=rep)
        covered += ci.lower <= true_auroc <= ci.upper
        widths.append(ci.upper - ci.lower)
    coverage = covered / repetitions
    assert 0.91 <= coverage <= 0.985, coverage  # binomial sd ≈ 1.5 points at 95 %
    # the width matches the normal-theory (Hanley–McNeil) standard error, not something much wider or narrower
    q1, q2 = true_auroc / (2 - true_auroc), 2 * true_auroc**2 / (1 + true_auroc)
    se = np.sqrt((true_auroc * (1 - true_auroc) + (n - 1) * (q1 - true_auroc**2 + q2 - true_auroc**2)) / n**2)
    assert np.mean(widths) == pytest.approx(2 * 1.96 * se, rel=0.15)


def test_bootstrap_resampling_is_stratified_and_seeded():
    rng = np.random.default_rng(1)
    y = np.r_[np.ones(5, bool), np.zeros(200, bool)]  # few cases: unstratified resamples would often have none
    s = np.r_[rng.normal(1, 1, 5), rng.normal(0, 1, 200)]
    a = bootstrap_interval(y, s, "auprc", n_resamples=300, seed=7)
    b = bootstrap_interval(y, s, "auprc", n_resamples=300, seed=7)
    assert a == b and 0.0 < a.lower <= a.upper <= 1.0
    assert bootstrap_interval(y, s, "auprc", n_resamples=300, seed=8) != a


def test_curves_equal_scikit_learn():
    rng = np.random.default_rng(2)
    y = rng.random(300) < 0.4
    s = np.round(rng.normal(y * 0.8, 1), 1)
    result = evaluate(ModelScores("m", np.arange(300), np.zeros(300, "datetime64[us]"), y, 1 / (1 + np.exp(-s))),
                      n_resamples=200)
    p = 1 / (1 + np.exp(-s))
    fpr, tpr, thr = roc_curve(y, p)
    assert result.roc.false_positive_rate == fpr.tolist() and result.roc.true_positive_rate == tpr.tolist()
    assert result.roc.thresholds[1:] == thr[1:].tolist()
    precision, recall, thr = precision_recall_curve(y, p)
    assert result.precision_recall.precision == precision.tolist() and result.precision_recall.recall == recall.tolist()
    assert result.auroc.value == pytest.approx(roc_auc_score(y, p)) and result.auprc.value == pytest.approx(average_precision_score(y, p))
    assert result.n == 300 and result.n_positive == int(y.sum())
    assert Evaluation.model_validate_json(result.model_dump_json()) == result  # JSON round trip (+inf threshold)


def test_calibration_bins_equal_scikit_learn_and_brier_score():
    rng = np.random.default_rng(3)
    p = rng.random(500)
    y = rng.random(500) < p
    result = calibration(y, p, n_bins=10)
    prob_true, prob_pred = calibration_curve(y, p, n_bins=10, strategy="uniform")
    filled = [b for b in result.bins if b.n]
    assert [b.fraction_positive for b in filled] == pytest.approx(prob_true.tolist())
    assert [b.mean_predicted for b in filled] == pytest.approx(prob_pred.tolist())
    assert sum(b.n for b in result.bins) == 500
    assert result.brier_score == pytest.approx(brier_score_loss(y, p))
    assert calibration(np.array([0, 1, 1]), np.array([0.0, 1.0, 1.0]), n_bins=4).bins[-1].n == 2  # 1.0 in the last bin


def test_threshold_metrics_and_youden_point():
    y = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0], bool)
    s = np.array([0.9, 0.8, 0.6, 0.3, 0.7, 0.4, 0.2, 0.2, 0.1, 0.0])
    m = threshold_metrics(y, s, 0.5)
    assert (m.true_positives, m.false_negatives, m.false_positives, m.true_negatives) == (3, 1, 1, 5)
    assert (m.sensitivity, m.specificity, m.ppv, m.npv) == pytest.approx((0.75, 5 / 6, 0.75, 5 / 6))
    fpr, tpr, thr = roc_curve(y, s)
    assert youden_threshold(y, s) == thr[np.argmax(tpr - fpr)]
    nothing = threshold_metrics(y, s, 2.0)
    assert nothing.ppv is None and nothing.sensitivity == 0.0 and nothing.npv == pytest.approx(0.6)


def test_scores_outside_zero_one_get_no_calibration_and_a_note():
    y = np.array([True, False, True, False])
    result = evaluate(ModelScores("risk", np.arange(4), np.zeros(4, "datetime64[us]"), y, np.array([8.0, 2.0, 6.0, 3.0])),
                      n_resamples=50)
    assert result.calibration is None and any("calibration" in n for n in result.notes)
    assert result.auroc.value == 1.0


def test_metric_input_errors():
    with pytest.raises(MetricInputError, match="one class only"):
        auroc(np.array([1, 1]), np.array([0.2, 0.4]))
    with pytest.raises(MetricInputError, match="NaN"):
        auroc(np.array([1, 0]), np.array([np.nan, 0.4]))
    with pytest.raises(MetricInputError, match="same length|one length"):
        auprc(np.array([1, 0, 1]), np.array([0.1, 0.4]))
    with pytest.raises(MetricInputError, match=r"probabilities in \[0, 1\]"):
        calibration(np.array([1, 0]), np.array([1.5, 0.4]))
