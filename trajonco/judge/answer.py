"""The judge's JSON answer: one bounded verdict per rubric, so even the embedded 135M model answers valid JSON.

Every string has a ``maxLength``, the winner is an enum and objects forbid extra keys (measured here: a small model
only emits valid JSON under a fully bounded schema). The reason comes before the winner so that a model writing
left to right argues first and decides second. `answer_model` sizes the reasons to the answer budget: at worst a
small model spends one token per character, so five reasons and the JSON around them must fit ``max_tokens``.

>>> model = answer_model(120)
>>> schema = model.model_json_schema()
>>> schema["required"]
['clinical_correctness', 'completeness', 'clinical_reasoning', 'temporal_reasoning', 'clarity_actionability']
>>> verdict = schema["$defs"]["RubricVerdict120"]
>>> props = verdict["properties"]
>>> props["reason"]["maxLength"], props["winner"]["enum"], verdict["additionalProperties"]
(120, ['A', 'B', 'tie'], False)
>>> reason_chars_for(1024), reason_chars_for(100000), reason_chars_for(200)
(132, 400, 20)
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from trajonco.judge.rubrics import RUBRICS

Winner = Literal["A", "B", "tie"]
"""The candidate the judge prefers, by the label it was shown under (A is shown first)."""

MIN_REASON_CHARS = 20
MAX_REASON_CHARS = 400
JSON_OVERHEAD_CHARS = 360
"""Characters of the answer outside the reasons: keys, braces, quotes and the winners (measured: 274 compact,
346 indented)."""


class RubricVerdict(BaseModel):
    """The judge's reason and winner for one rubric (the base of the sized classes `answer_model` builds)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str = Field(min_length=1, max_length=MAX_REASON_CHARS,
                        description="one or two sentences comparing A and B")
    winner: Winner = Field(description="A, B or tie")


class JudgeAnswer(BaseModel):
    """The judge's answer: a `RubricVerdict` per rubric (fields named by the rubric keys)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def verdicts(self) -> dict[str, RubricVerdict]:
        return {r.key: getattr(self, r.key) for r in RUBRICS}


def reason_chars_for(max_tokens: int) -> int:
    """The longest reason that keeps the worst-case answer (one token per character) within ``max_tokens``."""
    per_rubric = (max_tokens - JSON_OVERHEAD_CHARS) // len(RUBRICS)
    return max(MIN_REASON_CHARS, min(MAX_REASON_CHARS, per_rubric))


@lru_cache(maxsize=None)
def answer_model(reason_chars: int) -> type[JudgeAnswer]:
    """The `JudgeAnswer` class whose reasons hold at most ``reason_chars`` characters (the same class per size)."""
    if not MIN_REASON_CHARS <= reason_chars <= MAX_REASON_CHARS:
        raise ValueError(f"reason_chars must be within {MIN_REASON_CHARS}..{MAX_REASON_CHARS}, got {reason_chars}")
    verdict = create_model(
        f"RubricVerdict{reason_chars}", __base__=RubricVerdict, __doc__=RubricVerdict.__doc__,
        reason=(str, Field(min_length=1, max_length=reason_chars,
                           description="one or two sentences comparing A and B")),
    )
    fields = {r.key: (verdict, Field(description=r.title)) for r in RUBRICS}
    return create_model(f"JudgeAnswer{reason_chars}", __base__=JudgeAnswer, __doc__=JudgeAnswer.__doc__, **fields)
