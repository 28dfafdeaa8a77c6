"""Deterministic scorers for the ``exact``, ``date`` and ``set`` comparisons: 10 when right, 0 when wrong.

They read an answer the way the variable's comparison says and give a one-line rationale, on the same 0–10 scale as
the LLM judge so the two can be pooled. A variable whose truth is "Not documented" is right only when the answer
says so too.

>>> from vista.display import Comparison
>>> e = Expected(key="diagnosis_date", comparison=Comparison.DATE, scorable=True, reference="2012-11-21",
...              accepted_dates=(dt.date(2012, 11, 21), dt.date(2012, 11, 15)))
>>> score_date(e, "Diagnosed Nov 15, 2012 by EBUS").score, score_date(e, "2012-11").score, score_date(e, "2012-12-01").score
(10, 10, 0)
>>> s = Expected(key="metastatic_sites", comparison=Comparison.SET, scorable=True, reference="bone", items=("bone",))
>>> score_set(s, "Osseous metastases").score, score_set(s, "bone, liver").rationale
(10, 'items differ: missing none, extra liver')
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from vista.display import Comparison
from vista.evaluation.answer import Expected
from vista.evaluation.normalize import find_dates, normalize_text, says_nothing, split_sites

RIGHT, WRONG = 10, 0


class RuleScore(BaseModel):
    """A deterministic score (10 right, 0 wrong) and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    score: int = Field(ge=0, le=10)
    rationale: str


def _silent_truth(expected: Expected, value: str) -> RuleScore:
    if says_nothing(value):
        return RuleScore(score=RIGHT, rationale="both say the record is silent")
    return RuleScore(score=WRONG, rationale="the truth is that nothing is documented, the answer states something")


def score_exact(expected: Expected, value: str) -> RuleScore:
    """Right when the normalized texts are equal."""
    if not expected.documented:
        return _silent_truth(expected, value)
    if normalize_text(value) == normalize_text(expected.reference):
        return RuleScore(score=RIGHT, rationale="same text after normalization")
    return RuleScore(score=WRONG, rationale="text differs from the reference after normalization")


def _same(candidate: dt.date, precision: str, accepted: dt.date) -> bool:
    if precision == "month":
        return (candidate.year, candidate.month) == (accepted.year, accepted.month)
    return candidate == accepted


def score_date(expected: Expected, value: str) -> RuleScore:
    """Right when the first date the answer writes is an accepted date (same day, or same month if only a month)."""
    if not expected.documented:
        return _silent_truth(expected, value) if not find_dates(value) else RuleScore(
            score=WRONG, rationale="the truth is that nothing is documented, the answer gives a date")
    dates = find_dates(value)
    if not dates:
        return RuleScore(score=WRONG, rationale="no date found in the answer")
    day, precision = dates[0]
    written = day.isoformat() if precision == "day" else day.strftime("%Y-%m")
    if any(_same(day, precision, accepted) for accepted in expected.accepted_dates):
        return RuleScore(score=RIGHT, rationale=f"{written} matches an accepted date")
    return RuleScore(score=WRONG, rationale=f"{written} is none of {', '.join(d.isoformat() for d in expected.accepted_dates)}")


def score_set(expected: Expected, value: str) -> RuleScore:
    """Right when the answer's normalized items are exactly the reference's (order and wording ignored)."""
    if expected.items is None:
        raise ValueError(f"variable {expected.key!r}: a set comparison needs Expected.items")
    got, want = set(split_sites(value)), set(expected.items)
    if got == want:
        return RuleScore(score=RIGHT, rationale="same items" if want else "both name none")
    missing = ", ".join(sorted(want - got)) or "none"
    extra = ", ".join(sorted(got - want)) or "none"
    return RuleScore(score=WRONG, rationale=f"items differ: missing {missing}, extra {extra}")


SCORERS: dict[Comparison, Callable[[Expected, str], RuleScore]] = {
    Comparison.EXACT: score_exact, Comparison.DATE: score_date, Comparison.SET: score_set,
}
"""The deterministic scorer of each comparison (``judge`` goes to the LLM judge)."""
