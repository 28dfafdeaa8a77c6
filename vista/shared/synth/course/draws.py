"""Small seeded draws and day arithmetic the course steps share (days are float days since 1970-01-01).

>>> iso_date(18262.7), round(calendar_year(18262.0), 2)
('2020-01-01', 2020.0)
>>> weighted_choice(random.Random(0), ["a", "b"], [0.0, 1.0])
'b'
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from vista.shared.synth.population import DAYS_PER_YEAR

T = TypeVar("T")

_GAMMA_MEDIAN_UNIT = {1.0: 0.693, 1.5: 1.18, 1.6: 1.28, 2.0: 1.68}
"""Median of a unit-scale gamma distribution for the shapes the course uses."""


def weighted_choice(rng: random.Random, items: Sequence[T], weights: Sequence[float]) -> T:
    """One item, drawn with probability proportional to its weight (one ``rng.random()``)."""
    u = rng.random() * sum(weights)
    cumulative = 0.0
    for item, weight in zip(items, weights):
        cumulative += weight
        if u < cumulative:
            return item
    return items[-1]


def iso_date(day: float) -> str:
    """The calendar date of a day, ``YYYY-MM-DD``."""
    return str(np.datetime64(int(math.floor(day)), "D"))


def calendar_year(day: float) -> float:
    """The (fractional) calendar year of a day."""
    return 1970.0 + day / DAYS_PER_YEAR


def gamma_days(rng: random.Random, median_months: float, shape: float = 1.6) -> float:
    """A survival time (days) from a gamma distribution with the given median."""
    median_unit = _GAMMA_MEDIAN_UNIT.get(shape, shape - 0.33)
    return rng.gammavariate(shape, median_months / median_unit) * 30.44


def sentence_case(text: str) -> str:
    """``text`` with its first letter capitalised (the rest unchanged)."""
    return text[0].upper() + text[1:]
