"""Confidence intervals by bootstrap over patients (a cluster bootstrap: a patient's evaluations move together).

An accuracy (or mean score) is a ratio of sums over patients: Σ numerator_p / Σ denominator_p. Resampling patients,
not single evaluations, keeps the correlation between one patient's variables, so the interval is not too narrow.
The resampling is `scipy.stats.bootstrap` over patient indices (percentile interval, seeded).

>>> ci = patient_interval([1, 1, 0, 1, 0, 1], [1, 1, 1, 1, 1, 1], n_resamples=500, seed=0)
>>> round(ci.value, 3), ci.lower < ci.value < ci.upper
(0.667, True)
>>> patient_interval([3], [4]).lower is None
True
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats


class Interval(BaseModel):
    """A point estimate with its bootstrap confidence interval (bounds None when fewer than 2 patients)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float
    lower: float | None
    upper: float | None
    level: float = Field(description="confidence level, e.g. 0.95")
    n_patients: int = Field(description="patients resampled")
    n_resamples: int
    seed: int

    def __str__(self) -> str:
        if self.lower is None or self.upper is None:
            return f"{self.value:.2f} (CI n/a, {self.n_patients} patient)"
        return f"{self.value:.2f} [{self.lower:.2f}, {self.upper:.2f}]"


def _ratio_statistic(numerators: np.ndarray, denominators: np.ndarray):
    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        rows = idx.astype(np.int64)
        return numerators[rows].sum(axis=axis) / denominators[rows].sum(axis=axis)
    return statistic


def _interval(statistic, n: int, value: float, *, level: float, n_resamples: int, seed: int) -> Interval:
    """The percentile CI of ``statistic`` over ``n`` resampled patient indices (no bounds when n < 2)."""
    low = high = None
    if n >= 2:
        with warnings.catch_warnings():  # identical patients give a degenerate distribution: the interval collapses
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            result = stats.bootstrap((np.arange(n),), statistic, n_resamples=n_resamples, vectorized=True,
                                     confidence_level=level, method="percentile", rng=np.random.default_rng(seed))
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        if np.isnan(low) or np.isnan(high):
            low = high = value
    return Interval(value=value, lower=low, upper=high, level=level, n_patients=n, n_resamples=n_resamples, seed=seed)


def patient_interval(numerators: Sequence[float], denominators: Sequence[float], *, level: float = 0.95,
                     n_resamples: int = 2000, seed: int = 0) -> Interval:
    """Σ numerators / Σ denominators over patients with a patient-bootstrap percentile CI.

    Every denominator must be positive (leave out patients with nothing evaluated).
    """
    num, den = np.asarray(numerators, float), np.asarray(denominators, float)
    if num.shape != den.shape or num.ndim != 1 or num.size == 0:
        raise ValueError(f"need equal-length, non-empty 1-d numerators and denominators, got {num.shape} and {den.shape}")
    if (den <= 0).any():
        raise ValueError("every patient needs a positive denominator")
    return _interval(_ratio_statistic(num, den), num.size, float(num.sum() / den.sum()), level=level,
                     n_resamples=n_resamples, seed=seed)


def paired_difference(num_a: Sequence[float], den_a: Sequence[float], num_b: Sequence[float], den_b: Sequence[float],
                      *, level: float = 0.95, n_resamples: int = 2000, seed: int = 0) -> Interval:
    """(Σa / Σa') − (Σb / Σb') over the same patients (position p is one patient in all four), resampled together."""
    arrays = [np.asarray(x, float) for x in (num_a, den_a, num_b, den_b)]
    if len({a.shape for a in arrays}) != 1 or arrays[0].ndim != 1 or arrays[0].size == 0:
        raise ValueError("need four equal-length, non-empty 1-d arrays (one entry per patient)")
    na, da, nb, db = arrays
    if (da <= 0).any() or (db <= 0).any():
        raise ValueError("every patient needs positive denominators for both methods")
    first, second = _ratio_statistic(na, da), _ratio_statistic(nb, db)

    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        return first(idx, axis) - second(idx, axis)

    return _interval(statistic, na.size, float(na.sum() / da.sum() - nb.sum() / db.sum()), level=level,
                     n_resamples=n_resamples, seed=seed)
