"""The canonical vocabularies, the spellings real datasets use for them, and how each writes its values.

Aliases are matched case-insensitively with ``-``, ``_`` and spaces ignored, so ``ICD-10-CM``, ``icd10cm`` and
``ICD10CM`` are one vocabulary.

>>> canonical_vocabulary("ICD10"), canonical_vocabulary("SNOMED CT"), canonical_vocabulary("Visit")
('ICD10CM', 'SNOMED', 'ENCOUNTER')
>>> canonical_vocabulary("FOO") is None
True
>>> normalise_value("ICD10CM", "c3411"), normalise_value("ICD9CM", "1625"), normalise_value("ICD9CM", "E8889")
('C34.11', '162.5', 'E888.9')
>>> normalise_value("GENDER", "female"), normalise_value("ICD10CM", "C34")
('F', 'C34')
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from vista.shared.coding.model import Category
from vista.shared.meds import schema

ICD10PCS = "ICD10PCS"
ICD9PROC = "ICD9PROC"
NDC = "NDC"
CVX = "CVX"
ATC = "ATC"
LAB = "LAB"  # a site's own lab item ids (MIMIC's d_labitems)
MEDICATION = "MEDICATION"  # a site's own drug names/ids
PROCEDURE = "PROCEDURE"  # a site's own procedure ids
OBSERVATION = "OBSERVATION"  # a site's own charted observations (vitals, flowsheets)
DISCHARGE = "DISCHARGE"  # end of a hospital stay: a visit fact, but not the start of an encounter
DEATH_VOCABULARY = "DEATH"
ADMIN = "ADMIN"  # administrative facts (insurance, marital status, language, DRG): observations about the stay
TRANSFER = "TRANSFER"  # moves between units during a stay (MIMIC's TRANSFER_TO//…): a visit fact, not a new encounter

VOCABULARY_CATEGORY: Mapping[str, Category] = MappingProxyType({
    schema.ICD10CM: Category.DIAGNOSIS,
    schema.ICD9CM: Category.DIAGNOSIS,
    schema.SNOMED: Category.DIAGNOSIS,  # refined by the source's table/type when it says "procedure", "observation"…
    schema.LOINC: Category.LAB,
    LAB: Category.LAB,
    schema.RXNORM: Category.MEDICATION,
    NDC: Category.MEDICATION,
    CVX: Category.MEDICATION,
    ATC: Category.MEDICATION,
    MEDICATION: Category.MEDICATION,
    schema.CPT: Category.PROCEDURE,
    schema.HCPCS: Category.PROCEDURE,
    ICD10PCS: Category.PROCEDURE,
    ICD9PROC: Category.PROCEDURE,
    PROCEDURE: Category.PROCEDURE,
    OBSERVATION: Category.OBSERVATION,
    schema.ENCOUNTER_PREFIX: Category.VISIT,
    DISCHARGE: Category.VISIT,
    TRANSFER: Category.VISIT,
    ADMIN: Category.OBSERVATION,
    schema.GENDER_PREFIX: Category.SEX,
    schema.RACE_PREFIX: Category.RACE,
    schema.ETHNICITY_PREFIX: Category.ETHNICITY,
    schema.NOTE_PREFIX: Category.NOTE,
    DEATH_VOCABULARY: Category.DEATH,
})
"""The category each canonical vocabulary records."""

_ALIASES: dict[str, tuple[str, ...]] = {
    schema.ICD10CM: ("ICD10CM", "ICD10", "ICD10CMCODE"),
    schema.ICD9CM: ("ICD9CM", "ICD9", "ICD9DX"),
    ICD10PCS: ("ICD10PCS",),
    ICD9PROC: ("ICD9PROC", "ICD9PCS", "ICD9CMPROC"),
    schema.SNOMED: ("SNOMED", "SNOMEDCT", "SNOMEDCTUS", "SCT"),
    schema.LOINC: ("LOINC", "LNC"),
    schema.RXNORM: ("RXNORM", "RXNORMEXTENSION", "RXNORMEXT"),
    NDC: ("NDC",),
    CVX: ("CVX",),
    ATC: ("ATC",),
    schema.CPT: ("CPT", "CPT4"),
    schema.HCPCS: ("HCPCS",),
    schema.ENCOUNTER_PREFIX: ("ENCOUNTER", "VISIT", "VISITOCCURRENCE"),
    schema.GENDER_PREFIX: ("GENDER", "SEX"),
    schema.RACE_PREFIX: ("RACE",),
    schema.ETHNICITY_PREFIX: ("ETHNICITY",),
    schema.NOTE_PREFIX: ("NOTE", "NOTES", "NOTEEVENT"),
    LAB: ("LAB",),
    MEDICATION: ("MEDICATION", "MEDICATIONS", "DRUG"),
    PROCEDURE: ("PROCEDURE",),
    OBSERVATION: ("OBSERVATION", "VITALS", "VITAL"),
    DISCHARGE: ("DISCHARGE",),
    DEATH_VOCABULARY: ("DEATH",),
}


def alias_key(name: str) -> str:
    """The form aliases are compared in: upper case without ``-``, ``_``, spaces or dots."""
    return "".join(ch for ch in name.upper() if ch not in "-_ .")


_BY_ALIAS: Mapping[str, str] = MappingProxyType({alias_key(a): vocab for vocab, names in _ALIASES.items() for a in names})


def canonical_vocabulary(name: str, extra: Mapping[str, str] | None = None) -> str | None:
    """The canonical vocabulary spelled ``name`` (``extra`` aliases first), or None when unknown."""
    key = alias_key(name)
    if extra:
        found = extra.get(key)
        if found is not None:
            return found
    return _BY_ALIAS.get(key)


_SEX = {"F": "F", "FEMALE": "F", "W": "F", "WOMAN": "F", "M": "M", "MALE": "M", "MAN": "M"}


def _dotted(value: str, after: int) -> str:
    return value if "." in value or len(value) <= after else f"{value[:after]}.{value[after:]}"


def normalise_value(vocabulary: str, value: str) -> str:
    """A value written the way the canonical vocabulary writes it (ICD codes dotted, sex as F/M)."""
    value = value.strip()
    if vocabulary == schema.ICD10CM:
        return _dotted(value.upper(), 3)
    if vocabulary == schema.ICD9CM:
        upper = value.upper()
        return _dotted(upper, 4 if upper.startswith("E") else 3)
    if vocabulary == ICD9PROC:
        return _dotted(value, 2)
    if vocabulary == schema.GENDER_PREFIX:
        return _SEX.get(value.upper(), value)
    if vocabulary == schema.NOTE_PREFIX:
        return note_kind(value)
    return value


_NOTE_KINDS = (
    ("RADIOLOG", "RADIOLOGY"), ("IMAGING", "RADIOLOGY"), ("RAD", "RADIOLOGY"),
    ("PATHOLOG", "PATHOLOGY"), ("PATH", "PATHOLOGY"), ("SURGICAL_PATH", "PATHOLOGY"), ("DISCHARGE", "DISCHARGE"), ("DS", "DISCHARGE"),
    ("PROGRESS", "PROGRESS"), ("CONSULT", "CONSULT"), ("OPERATIVE", "OPERATIVE"), ("ONCOLOG", "ONCOLOGY"),
    ("HISTORY_AND_PHYSICAL", "HISTORY_AND_PHYSICAL"), ("H&P", "HISTORY_AND_PHYSICAL"), ("ECHO", "ECHO"), ("ECG", "ECG"), ("NURS", "NURSING"),
)


def note_kind(name: str) -> str:
    """The kind of a note from its type name: ``note_kind("Radiology Report") == "RADIOLOGY"``; unknown kinds keep
    their own name, upper-cased (``"Social work"`` → ``"SOCIAL_WORK"``)."""
    upper = name.strip().upper().replace(" ", "_").replace("-", "_")
    for key, kind in _NOTE_KINDS:
        if upper == key or (len(key) > 4 and upper.startswith(key)):
            return kind
    return upper or "OTHER"
