"""Discrimination, calibration and threshold metrics of one model's scores, as typed results a report can render.

The point estimates come from scikit-learn (`roc_auc_score`, `average_precision_score`, `roc_curve`,
`precision_recall_curve`, `brier_score_loss`, `confusion_matrix`). Confidence intervals come from
`scipy.stats.bootstrap` resampling cases and controls separately (stratified, so every resample keeps the cohort's
case count), with the statistics computed for all resamples at once by the vectorized `auroc_statistic` and
`auprc_statistic` below (each equals scikit-learn's value on every resample; the tests check it).

AUPRC is scikit-learn's average precision. Under 1:1 matching its chance level is 0.5, not the real-world
prevalence — read it accordingly.

>>> import numpy as np
>>> y = np.array([0, 0, 1, 1, 0, 1, 1, 0]); s = np.array([.1, .4, .35, .8, .2, .9, .7, .6])
>>> auroc(y, s), round(auprc(y, s), 4)
(0.875, 0.9167)
>>> ci = bootstrap_interval(y, s, "auroc", n_resamples=200, seed=1)
>>> ci.lower <= ci.value <= ci.upper
True
"""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_serializer
from scipy import stats
from sklearn.metrics import (
    average_precision_score,
    brier_score_loss,
    confusion_matrix,
    precision_recall_curve,
    roc_auc_score,
    roc_curve,
)

from baselines.errors import MetricInputError
from baselines.predictions import ModelScores

MetricName = Literal["auroc", "auprc"]
IntervalMethod = Literal["percentile", "BCa", "basic"]

MIN_CASES = 10
"""The one small-sample threshold: with fewer cases (or controls) than this an AUROC, AUPRC, CI or paired difference
is never shown as a number — tables, text and figures say `too_few_text` instead, results.json moves the raw value
under ``too_few_raw`` — and it is kept out of "best", off every plot and off the Pareto front: with 2 cases a
bootstrap CI such as 1.000 (1.000–1.000) is an artefact, not a finding."""


def too_few(n_positive: int, n_negative: int, minimum: int = MIN_CASES) -> bool:
    """Whether a group is too small for its AUROC to be compared with others.

    >>> too_few(2, 2), too_few(43, 43), too_few(43, 9)
    (True, False, True)
    """
    return min(n_positive, n_negative) < minimum


def too_few_text(n_positive: int, n_negative: int) -> str:
    """What every table, figure caption and sentence shows *instead of* an AUROC/AUPRC/CI on too few patients.

    >>> too_few_text(2, 2)
    'too few (n=2 cases, 2 controls)'
    """
    return f"too few (n={n_positive} cases, {n_negative} controls)"


# ------------------------------------------------------------------------------------------------ result models
class Interval(BaseModel):
    """A point estimate with its bootstrap confidence interval."""

    value: float = Field(description="the metric on the data itself")
    lower: float = Field(description="lower bound of the confidence interval")
    upper: float = Field(description="upper bound of the confidence interval")
    level: float = Field(description="confidence level, e.g. 0.95")
    n_resamples: int = Field(description="bootstrap resamples (cases and controls resampled separately)")
    method: str = Field(description="interval method of scipy.stats.bootstrap")
    seed: int = Field(description="seed of the resampling")

    def __str__(self) -> str:
        return f"{self.value:.3f} ({self.level:.0%} CI {self.lower:.3f}–{self.upper:.3f})"


class RocCurve(BaseModel):
    """ROC curve points (scikit-learn's `roc_curve`, intermediate collinear points dropped)."""

    model_config = ConfigDict(ser_json_inf_nan="strings")  # the first threshold is +inf: JSON "Infinity" round-trips

    false_positive_rate: list[float]
    true_positive_rate: list[float]
    thresholds: list[float] = Field(description="score at or above which a row is called positive (first is +inf)")

    @field_serializer("thresholds", when_used="json")
    def _infinite_as_text(self, values: list[float]) -> list[float | str]:
        """+inf as "Infinity" even when an enclosing model's serializer turns the model into JSON values first."""
        return [v if np.isfinite(v) else ("Infinity" if v > 0 else "-Infinity" if v < 0 else "NaN") for v in values]


class PrecisionRecallCurve(BaseModel):
    """Precision–recall curve points (scikit-learn's `precision_recall_curve`, recall decreasing)."""

    recall: list[float]
    precision: list[float]
    thresholds: list[float] = Field(description="one fewer than the points: the last point (recall 0) has none")


class CalibrationBin(BaseModel):
    """One reliability bin: predicted probabilities in [lower, upper) (the last bin includes 1.0)."""

    lower: float
    upper: float
    n: int = Field(description="rows whose score falls in the bin")
    mean_predicted: float | None = Field(description="mean score in the bin (None when empty)")
    fraction_positive: float | None = Field(description="share of cases in the bin (None when empty)")


class Calibration(BaseModel):
    """Reliability diagram bins and the Brier score."""

    bins: list[CalibrationBin]
    brier_score: float = Field(description="mean squared difference between score and outcome")


class ThresholdMetrics(BaseModel):
    """The confusion matrix and the rates derived from it when rows scoring ≥ threshold are called positive."""

    threshold: float
    true_positives: int
    false_positives: int
    true_negatives: int
    false_negatives: int
    sensitivity: float | None = Field(description="TP / (TP + FN); None without cases")
    specificity: float | None = Field(description="TN / (TN + FP); None without controls")
    ppv: float | None = Field(description="TP / (TP + FP); None when nothing is called positive")
    npv: float | None = Field(description="TN / (TN + FN); None when nothing is called negative")


class Evaluation(BaseModel):
    """Everything the report shows about one model on one cohort."""

    model: str
    n: int = Field(description="rows evaluated")
    n_positive: int
    n_negative: int
    n_missing: int = Field(0, description="cohort rows the model had no score for (prediction-file models)")
    n_failed: int = Field(0, description="cohort rows whose score was null because the run failed")
    auroc: Interval
    auprc: Interval
    roc: RocCurve
    precision_recall: PrecisionRecallCurve
    calibration: Calibration | None = Field(description="None when the scores are not probabilities in [0, 1]")
    at_threshold: ThresholdMetrics
    at_youden: ThresholdMetrics = Field(description="at the threshold maximizing sensitivity + specificity − 1")
    notes: list[str] = Field(default_factory=list, description="caveats the report should show next to the numbers")


# ------------------------------------------------------------------------------------------------ point metrics
def _check(labels, scores) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(labels)
    s = np.asarray(scores, dtype=np.float64)
    if y.ndim != 1 or s.shape != y.shape:
        raise MetricInputError(f"labels and scores must be 1-D arrays of one length, got shapes {y.shape} and {s.shape}")
    if not np.all(np.isfinite(s)):
        raise MetricInputError(f"{int((~np.isfinite(s)).sum())} scores are NaN or infinite")
    if not set(np.unique(y).tolist()) <= {0, 1}:
        raise MetricInputError(f"labels must be boolean or 0/1, found {np.unique(y)[:5].tolist()}")
    y = y.astype(bool)
    if y.all() or not y.any():
        raise MetricInputError(f"{y.size} rows of one class only ({int(y.sum())} cases): AUROC/AUPRC need both classes")
    return y, s


def auroc(labels, scores) -> float:
    """Area under the ROC curve (scikit-learn)."""
    y, s = _check(labels, scores)
    return float(roc_auc_score(y, s))


def auprc(labels, scores) -> float:
    """Area under the precision–recall curve as average precision (scikit-learn)."""
    y, s = _check(labels, scores)
    return float(average_precision_score(y, s))


# ------------------------------------------------------------------------------------------------ vectorized statistics
def _rank_cases(cases: np.ndarray, controls: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Case and control scores pooled and sorted by decreasing score along the last axis (batched).

    Returns which sorted rows are cases, and for each sorted row the first and last index of the rows tied with it,
    plus the number of cases. One numpy sort per call: all bootstrap resamples are ranked at once.
    """
    cases, controls = np.moveaxis(cases, axis, -1), np.moveaxis(controls, axis, -1)
    n1 = cases.shape[-1]
    scores = np.concatenate([cases, controls], axis=-1)
    order = np.argsort(-scores, axis=-1, kind="stable")
    ranked = np.take_along_axis(scores, order, axis=-1)
    is_case = order < n1
    n = scores.shape[-1]
    positions = np.arange(n)
    differs = ranked[..., 1:] != ranked[..., :-1]
    first_of_tie = np.concatenate([np.ones(ranked.shape[:-1] + (1,), bool), differs], axis=-1)
    last_of_tie = np.concatenate([differs, np.ones(ranked.shape[:-1] + (1,), bool)], axis=-1)
    tie_start = np.maximum.accumulate(np.where(first_of_tie, positions, 0), axis=-1)
    tie_end = np.minimum.accumulate(np.where(last_of_tie, positions, n)[..., ::-1], axis=-1)[..., ::-1]
    return is_case, tie_start, tie_end, n1


def auroc_statistic(cases: np.ndarray, controls: np.ndarray, axis: int = -1) -> np.ndarray:
    """AUROC of case scores vs control scores along ``axis`` (Mann–Whitney U / (n₁n₀), ties count ½), batched.

    >>> float(auroc_statistic(np.array([.8, .35, .9, .7]), np.array([.1, .4, .2, .6])))
    0.875
    """
    is_case, tie_start, tie_end, n1 = _rank_cases(cases, controls, axis)
    n = is_case.shape[-1]
    mid_rank = n - (tie_start + tie_end) / 2.0  # ascending rank (1 = lowest), averaged over ties
    return ((mid_rank * is_case).sum(axis=-1) - n1 * (n1 + 1) / 2.0) / (n1 * (n - n1))


def auprc_statistic(cases: np.ndarray, controls: np.ndarray, axis: int = -1) -> np.ndarray:
    """Average precision of case vs control scores along ``axis``, batched, with scikit-learn's tie handling.

    Each case contributes the precision at its own score taken as threshold (all rows tied with it included);
    AP is the mean over cases.

    >>> round(float(auprc_statistic(np.array([.8, .35, .9, .7]), np.array([.1, .4, .2, .6]))), 4)
    0.9167
    """
    is_case, _, tie_end, n1 = _rank_cases(cases, controls, axis)
    cases_above = np.take_along_axis(np.cumsum(is_case, axis=-1), tie_end, axis=-1)
    precision = cases_above / (tie_end + 1.0)
    return (precision * is_case).sum(axis=-1) / n1


_STATISTICS = {"auroc": auroc_statistic, "auprc": auprc_statistic}


def bootstrap_interval(labels, scores, metric: MetricName, *, n_resamples: int = 2000, level: float = 0.95,
                       seed: int = 0, method: IntervalMethod = "percentile") -> Interval:
    """The metric with a stratified bootstrap CI: cases and controls are resampled separately, with replacement."""
    y, s = _check(labels, scores)
    if metric not in _STATISTICS:
        raise ValueError(f"metric must be one of {list(_STATISTICS)}, not {metric!r}")
    statistic = _STATISTICS[metric]
    if min(int(y.sum()), int((~y).sum())) < 2:
        raise MetricInputError(f"a bootstrap CI needs at least 2 cases and 2 controls, "
                               f"got {int(y.sum())} and {int((~y).sum())}")
    value = auroc(y, s) if metric == "auroc" else auprc(y, s)
    with warnings.catch_warnings():  # all-tied scores give a degenerate (zero-width) distribution: fine here
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap((s[y], s[~y]), statistic, n_resamples=n_resamples, vectorized=True, paired=False,
                                 confidence_level=level, method=method, rng=np.random.default_rng(seed),
                                 batch=max(1, 4_000_000 // max(1, y.size)))
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if np.isnan(low) or np.isnan(high):  # degenerate distribution: the interval collapses to the estimate
        low = high = value
    return Interval(value=value, lower=low, upper=high, level=level, n_resamples=n_resamples, method=method, seed=seed)


class PairedDifference(BaseModel):
    """AUROC of two models on the same rows and the difference ``a − b`` with a paired bootstrap CI."""

    n_positive: int
    n_negative: int
    auroc_a: float
    auroc_b: float
    difference: Interval = Field(description="AUROC(a) − AUROC(b); CI from resampling the same cases and controls "
                                 "for both models")


def paired_auroc_difference(labels, scores_a, scores_b, *, n_resamples: int = 2000, level: float = 0.95,
                            seed: int = 0) -> PairedDifference:
    """AUROC(a) − AUROC(b) on the same rows with a stratified, paired percentile bootstrap.

    Each resample draws cases and controls (separately, with replacement) once and scores *both* models on that
    draw, so the CI of the difference accounts for the two models being evaluated on the same patients.
    Point estimates are scikit-learn's `roc_auc_score`.

    >>> y = np.array([1, 1, 1, 0, 0, 0]); a = np.array([.9, .8, .7, .3, .2, .1]); b = np.array([.9, .2, .7, .3, .8, .1])
    >>> d = paired_auroc_difference(y, a, b, n_resamples=200, seed=0)
    >>> round(d.auroc_a, 3), round(d.auroc_b, 3), round(d.difference.value, 3), d.difference.lower >= 0.0
    (1.0, 0.667, 0.333, True)
    """
    y, a = _check(labels, scores_a)
    _, b = _check(labels, scores_b)
    n1, n0 = int(y.sum()), int((~y).sum())
    if min(n1, n0) < 2:
        raise MetricInputError(f"a paired bootstrap needs at least 2 cases and 2 controls, got {n1} and {n0}")
    auroc_a, auroc_b = auroc(y, a), auroc(y, b)
    rng = np.random.default_rng(seed)
    differences = []
    batch = max(1, 2_000_000 // (n1 + n0))
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        cases, controls = rng.integers(0, n1, (size, n1)), rng.integers(0, n0, (size, n0))
        per = [auroc_statistic(s[y][cases], s[~y][controls]) for s in (a, b)]
        differences.append(per[0] - per[1])
    values = np.concatenate(differences)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    difference = Interval(value=auroc_a - auroc_b, lower=float(low), upper=float(high), level=level,
                          n_resamples=n_resamples, method="paired percentile", seed=seed)
    return PairedDifference(n_positive=n1, n_negative=n0, auroc_a=auroc_a, auroc_b=auroc_b, difference=difference)


# ------------------------------------------------------------------------------------------------ curves + calibration
def roc_points(labels, scores) -> RocCurve:
    y, s = _check(labels, scores)
    fpr, tpr, thresholds = roc_curve(y, s, drop_intermediate=True)
    return RocCurve(false_positive_rate=fpr.tolist(), true_positive_rate=tpr.tolist(), thresholds=thresholds.tolist())


def pr_points(labels, scores) -> PrecisionRecallCurve:
    y, s = _check(labels, scores)
    precision, recall, thresholds = precision_recall_curve(y, s)
    return PrecisionRecallCurve(recall=recall.tolist(), precision=precision.tolist(), thresholds=thresholds.tolist())


def calibration(labels, probabilities, *, n_bins: int = 10) -> Calibration:
    """Equal-width reliability bins over [0, 1] (as `sklearn.calibration.calibration_curve`) and the Brier score."""
    y, p = _check(labels, probabilities)
    if p.min() < 0.0 or p.max() > 1.0:
        raise MetricInputError(f"calibration needs probabilities in [0, 1]; scores range {p.min():.3g}..{p.max():.3g}")
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    which = np.clip(np.searchsorted(edges[1:-1], p, side="right"), 0, n_bins - 1)
    counts = np.bincount(which, minlength=n_bins)
    sum_p = np.bincount(which, weights=p, minlength=n_bins)
    sum_y = np.bincount(which, weights=y.astype(np.float64), minlength=n_bins)
    bins = [
        CalibrationBin(lower=float(edges[b]), upper=float(edges[b + 1]), n=int(counts[b]),
                       mean_predicted=float(sum_p[b] / counts[b]) if counts[b] else None,
                       fraction_positive=float(sum_y[b] / counts[b]) if counts[b] else None)
        for b in range(n_bins)
    ]
    return Calibration(bins=bins, brier_score=float(brier_score_loss(y, p)))


# ------------------------------------------------------------------------------------------------ thresholds
def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def threshold_metrics(labels, scores, threshold: float) -> ThresholdMetrics:
    """Sensitivity, specificity, PPV and NPV when rows with score ≥ ``threshold`` are called positive."""
    y, s = _check(labels, scores)
    tn, fp, fn, tp = (int(v) for v in confusion_matrix(y, s >= threshold, labels=[False, True]).ravel())
    return ThresholdMetrics(threshold=float(threshold), true_positives=tp, false_positives=fp, true_negatives=tn,
                            false_negatives=fn, sensitivity=_ratio(tp, tp + fn), specificity=_ratio(tn, tn + fp),
                            ppv=_ratio(tp, tp + fp), npv=_ratio(tn, tn + fn))


def youden_threshold(labels, scores) -> float:
    """The finite ROC threshold maximizing sensitivity + specificity − 1 (the highest such score on ties)."""
    y, s = _check(labels, scores)
    fpr, tpr, thresholds = roc_curve(y, s, drop_intermediate=False)
    finite = np.isfinite(thresholds)
    j = np.flatnonzero(finite)[np.argmax((tpr - fpr)[finite])]
    return float(thresholds[j])


# ------------------------------------------------------------------------------------------------ everything at once
def evaluate(scores: ModelScores, *, threshold: float = 0.5, n_resamples: int = 2000, level: float = 0.95,
             seed: int = 0, n_bins: int = 10, method: IntervalMethod = "percentile") -> Evaluation:
    """Every metric of one model's scores: AUROC/AUPRC with CIs, curves, calibration, threshold and Youden metrics."""
    y, s = _check(scores.labels, scores.scores)
    notes: list[str] = []
    if scores.n_missing or scores.n_failed:
        notes.append(f"evaluated on the {scores.n} rows with a score: {scores.n_missing} cohort rows had no prediction "
                     f"and {scores.n_failed} a failed one")
    is_probability = s.min() >= 0.0 and s.max() <= 1.0
    if not is_probability:
        notes.append("scores are not probabilities in [0, 1]: no calibration")
    return Evaluation(
        model=scores.model, n=scores.n, n_positive=int(y.sum()), n_negative=int((~y).sum()),
        n_missing=scores.n_missing, n_failed=scores.n_failed,
        auroc=bootstrap_interval(y, s, "auroc", n_resamples=n_resamples, level=level, seed=seed, method=method),
        auprc=bootstrap_interval(y, s, "auprc", n_resamples=n_resamples, level=level, seed=seed, method=method),
        roc=roc_points(y, s), precision_recall=pr_points(y, s),
        calibration=calibration(y, s, n_bins=n_bins) if is_probability else None,
        at_threshold=threshold_metrics(y, s, threshold),
        at_youden=threshold_metrics(y, s, youden_threshold(y, s)),
        notes=notes,
    )
