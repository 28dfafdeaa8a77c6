"""Coding profiles: how a dataset spells codes, translated once into the project's canonical spelling.

Real MEDS datasets spell the same fact many ways (``ICD10CM/C34.1`` from OMOP, ``DIAGNOSIS//ICD//10//C3411`` from
MIMIC-IV, ``SNOMED/254637007`` from Synthea). A `CodingProfile` maps each to one canonical code and a `Category`;
`detect_profile` picks the built-in profile that fits a dataset and reports what it recognises and what it cannot
place. `vista.shared.meds.MedsDataset` applies the profile as it reads, so timelines, graphs, cohorts and displays all see
one spelling.
"""

from vista.shared.coding.detect import CategoryShare, ProfileReport, detect_profile, profile_report
from vista.shared.coding.errors import CodingProfileError
from vista.shared.coding.model import Canonical, Category
from vista.shared.coding.profile import CodingProfile, PatternRule, builtin_profiles, load_profile

__all__ = [
    "Canonical", "Category", "CategoryShare", "CodingProfile", "CodingProfileError", "PatternRule", "ProfileReport",
    "builtin_profiles", "detect_profile", "load_profile", "profile_report",
]
