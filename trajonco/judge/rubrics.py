"""The five rubrics a pairwise judge scores (TrajOnco's LLM-as-judge dimensions, described in our own words).

Each rubric has a stable ``key`` (a field of the judge's JSON answer and of every result), a short ``title`` for
tables and a ``question`` that tells both the judge model and a human reviewer what to compare.

>>> [r.key for r in RUBRICS]
['clinical_correctness', 'completeness', 'clinical_reasoning', 'temporal_reasoning', 'clarity_actionability']
>>> rubric("temporal_reasoning").title
'Temporal reasoning'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RunVerdict = Literal["a", "b", "tie"]
"""A verdict in terms of the two runs compared (run A, run B), whatever order they were shown in."""

ShownVerdict = Literal["first", "second", "tie"]
"""A verdict in terms of the position the candidates were shown in."""


@dataclass(frozen=True, slots=True)
class Rubric:
    """One dimension of comparison."""

    key: str
    title: str
    question: str


RUBRICS: tuple[Rubric, ...] = (
    Rubric("clinical_correctness", "Clinical correctness",
           "Is the risk estimate, and what the output says about the findings, medically sound and consistent with "
           "what actually happened to the patient?"),
    Rubric("completeness", "Completeness and detail",
           "Does the output use the relevant findings of the record without leaving out important ones or padding "
           "with irrelevant ones, and how deep is its analysis?"),
    Rubric("clinical_reasoning", "Clinical reasoning",
           "Beyond naming findings, how well does the output connect them into a convincing argument for its risk "
           "level?"),
    Rubric("temporal_reasoning", "Temporal reasoning",
           "Does the output follow how the patient's state changed over time (onset, sequence, progression, how "
           "recent) and relate it to the prediction horizon?"),
    Rubric("clarity_actionability", "Clarity and actionability",
           "Is the output clear and to the point, and would it help a clinician decide what to do next for early "
           "detection?"),
)
"""The five rubrics, in the order tables and figures show them."""

RUBRIC_KEYS: tuple[str, ...] = tuple(r.key for r in RUBRICS)


def rubric(key: str) -> Rubric:
    """The rubric called ``key`` (KeyError naming the known keys otherwise)."""
    for item in RUBRICS:
        if item.key == key:
            return item
    raise KeyError(f"unknown rubric {key!r}; known: {', '.join(RUBRIC_KEYS)}")
