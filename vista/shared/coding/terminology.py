"""Terminology facts that hold for every dataset: vital-sign LOINCs, imaging procedure codes, source-table names.

Kept apart from the profiles (which are about spelling) because a LOINC vital sign is an observation whoever wrote it.

>>> is_imaging("CPT", "71260"), is_imaging("CPT", "77427"), is_imaging("SNOMED", "418891003")
(True, False, True)
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType

from vista.shared.coding.model import Category
from vista.shared.meds import schema

# LOINC vital signs and the smoking-status question: observations rather than lab results.
VITAL_LOINC = ("8867-4", "8480-6", "8462-4", "85354-9", "8310-5", "9279-1", "2708-6", "59408-5", "29463-7", "8302-2",
               "39156-5", "72166-2", "8287-5", "3141-9", "72514-3")
# SNOMED CT smoking-status findings (never/ex/current/daily/occasional/light/heavy smoker, unknown).
SMOKING_SNOMED = ("266919005", "8517006", "77176002", "449868002", "428041000124106", "428061000124105",
                  "428071000124103", "266927001", "65568007")

COMMON_CATEGORIES: Mapping[str, Category] = MappingProxyType(
    {f"{schema.LOINC}{schema.SEP}{c}": Category.OBSERVATION for c in VITAL_LOINC}
    | {f"{schema.SNOMED}{schema.SEP}{c}": Category.OBSERVATION for c in SMOKING_SNOMED}
)
"""Canonical codes whose category is not their vocabulary's."""

# Diagnostic imaging CPT ranges (radiology 70010–76999, 77001–77099 guidance/breast/bone density, 78000–78999
# nuclear medicine incl. PET); radiation oncology 77261–77799 is treatment, not imaging.
IMAGING_CPT_RANGES: tuple[tuple[int, int], ...] = ((70010, 76999), (77001, 77099), (78000, 78999))
# SNOMED CT imaging procedures common in EHR extracts (Synthea's imaging and procedure tables among them):
# plain X-ray, CT, MRI, PET, ultrasound, mammography and bone scans of the sites oncology follows.
IMAGING_SNOMED = frozenset({
    "363680008",  # radiographic imaging procedure
    "399208008",  # plain chest X-ray
    "168731009",  # chest X-ray
    "77477000",  # computed tomography
    "418891003",  # CT of chest
    "169069000",  # CT of chest (alternative concept)
    "241541005",  # high-resolution CT of chest
    "433112001",  # CT of chest, abdomen and pelvis
    "113091000",  # magnetic resonance imaging
    "816077007",  # MRI of brain
    "82918005",  # positron emission tomography
    "450436003",  # PET-CT
    "16310003",  # ultrasonography
    "71651007",  # mammography
    "24623002",  # screening mammography
    "43204002",  # bilateral mammography
    "241615005",  # magnetic resonance imaging of breast
    "41747008",  # bone scan
    "431981000124105",  # low-dose CT of chest (lung cancer screening)
})


def is_imaging(vocabulary: str, value: str) -> bool:
    """True for diagnostic imaging procedure codes (CPT ranges above, the SNOMED CT list above)."""
    if vocabulary == schema.CPT and value.isdigit():
        number = int(value)
        return any(lo <= number <= hi for lo, hi in IMAGING_CPT_RANGES)
    return vocabulary == schema.SNOMED and value in IMAGING_SNOMED


COMMON_TABLES: Mapping[str, Category] = MappingProxyType({
    # OMOP CDM tables (meds_etl writes their names, with or without the _occurrence suffix)
    "condition_occurrence": Category.DIAGNOSIS, "condition": Category.DIAGNOSIS,
    "procedure_occurrence": Category.PROCEDURE, "procedure": Category.PROCEDURE,
    "measurement": Category.LAB, "observation": Category.OBSERVATION,
    "drug_exposure": Category.MEDICATION, "drug": Category.MEDICATION,
    "device_exposure": Category.PROCEDURE, "visit_occurrence": Category.VISIT, "visit": Category.VISIT,
    "visit_detail": Category.VISIT, "note": Category.NOTE, "death": Category.DEATH,
    "image_occurrence": Category.IMAGING, "specimen": Category.PROCEDURE,
    # Synthea CSV tables
    "conditions": Category.DIAGNOSIS, "procedures": Category.PROCEDURE, "observations": Category.OBSERVATION,
    "medications": Category.MEDICATION, "immunizations": Category.MEDICATION, "imaging_studies": Category.IMAGING,
    "image": Category.IMAGING, "images": Category.IMAGING, "imaging": Category.IMAGING,  # Synthea-derived MEDS
    "encounters": Category.VISIT, "devices": Category.PROCEDURE, "allergies": Category.DIAGNOSIS,
    # the VISTA team's XML event types
    "drug_exposure_era": Category.MEDICATION,
})
"""Source-table (or XML event type) names → the category their rows record."""


@lru_cache(maxsize=65_536)
def standard_description(code: str) -> str | None:
    """The official title of a canonical ICD-10-CM code (offline, from `simple_icd_10_cm`), else None.

    >>> standard_description("ICD10CM//R05.9"), standard_description("LOINC//718-7")
    ('Cough, unspecified', None)
    """
    vocabulary, _, value = code.partition(schema.SEP)
    if vocabulary != schema.ICD10CM or not value:
        return None
    import simple_icd_10_cm as icd  # imported on first use: loading its tables takes a moment

    try:
        return icd.get_description(value) if icd.is_valid_item(value) else None
    except (ValueError, KeyError):
        return None


# LOINC document-ontology note classes OMOP's note table uses as note_class_concept_id (meds_etl writes them as the
# note's code): the kind of note each names.
LOINC_NOTE_KINDS: Mapping[str, str] = MappingProxyType({
    "11526-1": "PATHOLOGY", "60568-3": "PATHOLOGY", "11529-5": "PATHOLOGY",
    "18748-4": "RADIOLOGY", "18726-0": "RADIOLOGY", "18782-3": "RADIOLOGY", "24627-2": "RADIOLOGY",
    "11506-3": "PROGRESS", "18842-5": "DISCHARGE", "34117-2": "HISTORY_AND_PHYSICAL", "11488-4": "CONSULT",
    "11504-8": "OPERATIVE", "28570-0": "PROCEDURE", "34746-8": "NURSING", "34133-9": "SUMMARY",
})


def table_category(table: str | None) -> Category | None:
    """The category a source-table name (or XML event type) states, whatever the dataset: ``procedure_occurrence``,
    ``procedures`` and ``procedure`` are all procedures; None when unknown."""
    if not table:
        return None
    return COMMON_TABLES.get(table.strip().lower().replace(" ", "_"))
