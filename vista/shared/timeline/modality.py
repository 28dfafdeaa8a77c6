"""Which timeline modality (condition, lab, note…) a MEDS code belongs to: a small, replaceable table.

Rules are looked up by exact code first, then by vocabulary (the part before ``//``), so a vocabulary can
be sent to one modality with a few codes sent elsewhere (LOINC vitals are observations, not labs).

>>> DEFAULT_MODALITIES.modality_of("ICD10CM//C34.11")
<Modality.CONDITION: 'condition'>
>>> DEFAULT_MODALITIES.modality_of("LOINC//8867-4"), DEFAULT_MODALITIES.modality_of("LOINC//718-7")
(<Modality.OBSERVATION: 'observation'>, <Modality.LAB: 'lab'>)
>>> ModalityTable.from_rules({"FOO": "lab"}, default=None).modality_of("BAR//1") is None
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from vista.shared.coding.model import Category
from vista.shared.coding.terminology import COMMON_CATEGORIES
from vista.shared.coding.vocabularies import TRANSFER, VOCABULARY_CATEGORY
from vista.shared.meds import schema


class Modality(StrEnum):
    """Kinds of timeline events; the declaration order is the order of the groups inside a timestamp."""

    VISIT = "visit"
    CONDITION = "condition"
    OBSERVATION = "observation"
    LAB = "lab"
    MEDICATION = "medication"
    PROCEDURE = "procedure"
    NOTE = "note"
    OTHER = "other"

    @property
    def tag(self) -> str:
        """XML element name of one event."""
        return self.value

    @property
    def group_tag(self) -> str:
        """XML element name of the group holding this modality's events at one timestamp."""
        return self.value + "s"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {m: i for i, m in enumerate(Modality)}
MODALITY_BY_TAG: Mapping[str, Modality] = MappingProxyType({m.tag: m for m in Modality})
MODALITY_BY_GROUP_TAG: Mapping[str, Modality] = MappingProxyType({m.group_tag: m for m in Modality})


@dataclass(frozen=True)
class ModalityTable:
    """Code → modality rules: ``codes`` (exact codes) win over ``vocabularies``; else ``default`` (None = error)."""

    vocabularies: Mapping[str, Modality]
    codes: Mapping[str, Modality] = field(default_factory=dict)
    default: Modality | None = Modality.OTHER

    @classmethod
    def from_rules(cls, rules: Mapping[str, Modality | str], default: Modality | str | None = Modality.OTHER) -> ModalityTable:
        """One mapping for both kinds of rule: keys with ``//`` are exact codes, others are vocabularies."""
        vocabularies: dict[str, Modality] = {}
        codes: dict[str, Modality] = {}
        for key, value in rules.items():
            try:
                modality = Modality(value)
            except ValueError:
                raise ValueError(f"modality rule {key!r}: unknown modality {value!r}; choose from {[m.value for m in Modality]}") from None
            (codes if schema.SEP in key else vocabularies)[key] = modality
        return cls(vocabularies, codes, None if default is None else Modality(default))

    def modality_of(self, code: str) -> Modality | None:
        """The modality of ``code``, or None when no rule matches and there is no default."""
        found = self.codes.get(code)
        if found is None:
            found = self.vocabularies.get(schema.vocabulary(code), self.default)
        return found


MODALITY_OF_CATEGORY: Mapping[Category, Modality] = MappingProxyType({
    Category.VISIT: Modality.VISIT,
    Category.DIAGNOSIS: Modality.CONDITION,
    Category.LAB: Modality.LAB,
    Category.OBSERVATION: Modality.OBSERVATION,
    Category.DEATH: Modality.OBSERVATION,
    Category.MEDICATION: Modality.MEDICATION,
    Category.PROCEDURE: Modality.PROCEDURE,
    Category.IMAGING: Modality.PROCEDURE,
    Category.NOTE: Modality.NOTE,
})
"""How each coding category renders in a timeline (demographics live on the root element, not in the events)."""


def modality_of_kind(kind: str | None) -> Modality | None:
    """The modality an event's source-stated kind (`vista.shared.records.Event.kind`) asks for, or None."""
    if kind is None:
        return None
    try:
        return MODALITY_OF_CATEGORY.get(Category(kind))
    except ValueError:
        return None


DEFAULT_MODALITIES = ModalityTable(
    vocabularies=MappingProxyType(
        {vocab: MODALITY_OF_CATEGORY[cat] for vocab, cat in VOCABULARY_CATEGORY.items() if cat in MODALITY_OF_CATEGORY}
        | {TRANSFER: Modality.VISIT, schema.DEATH_CODE: Modality.OBSERVATION}
    ),
    codes=MappingProxyType(
        {code: MODALITY_OF_CATEGORY[cat] for code, cat in COMMON_CATEGORIES.items()}
    ),
)
"""The canonical vocabularies (`vista.shared.coding`): diagnoses are conditions, vitals and smoking status observations."""
