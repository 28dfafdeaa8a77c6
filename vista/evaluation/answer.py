"""`Expected`: the reference answer of one variable for one patient, whatever the truth's source.

The generator's records (`vista.evaluation.expected`) and clinician reference files (`vista.evaluation.references`)
both produce it; the scorers and the judge read only this, so the evaluation does not depend on where truth comes from.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from vista.display import Comparison, VariableSpec


class Expected(BaseModel):
    """The reference answer of one variable for one patient, or why there is none."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    comparison: Comparison
    scorable: bool
    reference: str = Field(default="", description="The reference answer in words ('Not documented' when the truth "
                           "has nothing up to as_of); empty when unscorable.")
    rubric_hint: str = Field(default="", description="What matters when comparing an answer with the reference.")
    reason: str | None = Field(default=None, description="Why the variable is unscorable.")
    documented: bool = Field(default=True, description="False when the right answer is that the record is silent.")
    accepted_dates: tuple[dt.date, ...] = Field(default=(), description="date comparison: any of these is right.")
    items: tuple[str, ...] | None = Field(default=None, description="set comparison: the normalized items (() = none).")
    truth_refs: tuple[str, ...] = Field(default=(), description="Event ids the ground truth ties the facts to.")


class TruthSource(Protocol):
    """One patient's truth as `vista.evaluation.evaluate` reads it: who, and every variable's `Expected` answer
    (`vista.evaluation.truth.TruthCase` for the generator's records, `vista.evaluation.references.ClinicianCase`
    for a clinician's reference answers)."""

    @property
    def subject_id(self) -> int: ...

    def expected(self, specs: Sequence[VariableSpec]) -> dict[str, Expected]: ...
