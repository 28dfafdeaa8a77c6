"""What a code *is*, whatever the dataset's spelling: the canonical form and the category of every code.

The project speaks one spelling inside (``VOCAB//value``, the one our generator writes, e.g. ``ICD10CM//C34.11``,
``GENDER//F``, ``ENCOUNTER//IP``, ``NOTE//RADIOLOGY``); a `vista.shared.coding.CodingProfile` translates each dataset's
own spelling into it once, when rows are read, so no layer above has to know how OMOP or MIMIC-IV write codes.

>>> Canonical("ICD10CM//C34.11", "ICD10CM", "C34.11", Category.DIAGNOSIS).recognised
True
>>> Canonical("XYZ//1", "XYZ", "1", Category.OTHER).recognised
False
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Category(StrEnum):
    """What kind of clinical fact a code records (the rows of a coverage report)."""

    VISIT = "visit"
    SEX = "sex"
    RACE = "race"
    ETHNICITY = "ethnicity"
    BIRTH = "birth"
    DEATH = "death"
    DIAGNOSIS = "diagnosis"
    LAB = "lab"
    OBSERVATION = "observation"
    MEDICATION = "medication"
    PROCEDURE = "procedure"
    IMAGING = "imaging"
    NOTE = "note"
    OTHER = "other"

    @property
    def demographic(self) -> bool:
        return self in (Category.SEX, Category.RACE, Category.ETHNICITY, Category.BIRTH, Category.DEATH)


@dataclass(frozen=True, slots=True)
class Canonical:
    """One code in the project's spelling: ``code`` = ``vocabulary//value`` (or a bare MEDS code like MEDS_BIRTH).

    ``unit`` is set when the source code embeds one (MIMIC's ``LAB//50912//mg/dL``); ``note_kind`` for notes
    (RADIOLOGY, PATHOLOGY, PROGRESS, DISCHARGE…).
    """

    code: str
    vocabulary: str
    value: str
    category: Category
    unit: str | None = None
    note_kind: str | None = None

    @property
    def recognised(self) -> bool:
        """False when no rule placed the code (it renders as ``<other>`` and counts as unplaced)."""
        return self.category is not Category.OTHER
