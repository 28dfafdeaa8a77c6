"""Rates with patient-bootstrap confidence intervals, and Cohen's kappa between two raters.

A rate over patients is Σ numerator_p / Σ denominator_p (e.g. wins over the two candidate orders of each patient);
the interval resamples patients, not single verdicts, so the two orders of one patient move together. With fewer than
two patients there is no interval (bounds None), and a table says "n/a" rather than a made-up range.

>>> ci = rate_interval([2, 1, 0, 2, 2], [2, 2, 2, 2, 2], n_resamples=500, seed=0)
>>> ci.value, ci.lower <= ci.value <= ci.upper, ci.n
(0.7, True, 5)
>>> str(rate_interval([1], [2]))
'0.50 (n/a, n=1)'

Cohen's kappa from the two raters' labels of the same items (the same number as scikit-learn's
``cohen_kappa_score``; None when chance agreement is already 1, i.e. both raters used a single, identical label):

>>> k = cohen_kappa(["yes"] * 20 + ["no"] * 15 + ["yes"] * 5 + ["no"] * 10,
...                 ["yes"] * 20 + ["no"] * 15 + ["no"] * 5 + ["yes"] * 10)
>>> round(k.kappa, 4), k.observed, k.n
(0.4, 0.7, 50)
>>> cohen_kappa(["a", "a"], ["a", "a"]).kappa is None
True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from vista.shared.bootstrap import patient_interval


class Rate(BaseModel):
    """A rate with its percentile bootstrap CI over patients (bounds None with fewer than 2 patients)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float
    lower: float | None
    upper: float | None
    n: int = Field(description="patients")
    level: float = 0.95

    def __str__(self) -> str:
        if self.lower is None or self.upper is None:
            return f"{self.value:.2f} (n/a, n={self.n})"
        return f"{self.value:.2f} ({self.lower:.2f}–{self.upper:.2f})"


def rate_interval(numerators: Sequence[float], denominators: Sequence[float], *, level: float = 0.95,
                  n_resamples: int = 2000, seed: int = 0) -> Rate:
    """Σ numerators / Σ denominators with a patient-bootstrap percentile CI (seeded, so reruns agree): the same
    bootstrap as VISTA's evaluation (`vista.shared.bootstrap.patient_interval`)."""
    num, den = np.asarray(numerators, float), np.asarray(denominators, float)
    if num.shape != den.shape or num.ndim != 1 or num.size == 0 or (den <= 0).any():
        raise ValueError("need equal-length, non-empty numerators and positive denominators (one per patient)")
    interval = patient_interval(num, den, level=level, n_resamples=n_resamples, seed=seed)
    return Rate(value=interval.value, lower=interval.lower, upper=interval.upper, n=interval.n_patients, level=level)


class Kappa(BaseModel):
    """Agreement of two raters on the same items: Cohen's kappa, observed and chance agreement."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int = Field(description="items both raters labelled")
    observed: float | None = Field(description="share of items with the same label")
    expected: float | None = Field(description="agreement expected by chance from each rater's label frequencies")
    kappa: float | None = Field(description="(observed - expected) / (1 - expected); None when undefined")

    def __str__(self) -> str:
        if self.kappa is None:
            return f"n/a (n={self.n})"
        return f"{self.kappa:.2f} (n={self.n}, agreement {self.observed:.0%})"


def cohen_kappa(first: Sequence[str], second: Sequence[str]) -> Kappa:
    """Cohen's kappa of two raters' labels (position i is the same item for both)."""
    if len(first) != len(second):
        raise ValueError(f"the raters labelled different numbers of items ({len(first)} vs {len(second)})")
    n = len(first)
    if n == 0:
        return Kappa(n=0, observed=None, expected=None, kappa=None)
    labels = sorted(set(first) | set(second))
    index = {label: i for i, label in enumerate(labels)}
    table = np.zeros((len(labels), len(labels)))
    for x, y in zip(first, second):
        table[index[x], index[y]] += 1
    observed = float(np.trace(table) / n)
    expected = float((table.sum(axis=1) @ table.sum(axis=0)) / n**2)
    kappa = None if np.isclose(expected, 1.0) else (observed - expected) / (1 - expected)
    return Kappa(n=n, observed=observed, expected=expected, kappa=kappa)
