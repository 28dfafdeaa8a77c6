"""How cohort building reads a dataset's codes: which coding profile, chosen how, and the canonical spelling of each.

Cohorts match codes in the project's canonical spelling (`vista.shared.coding`): the profile that fits the dataset is
detected unless one is given, and each *distinct* source code is translated once (a small mapping applied as one
``replace``, never a Python call per row). The choice is recorded in the cohort manifest.

>>> choose_profile(Path("."), "mimic_iv")[1]
'given'
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from trajonco.cohorts.errors import CohortDataError
from vista.shared.coding import CodingProfile, CodingProfileError, detect_profile, load_profile

ProfileSpec = str | Path | CodingProfile
"""A built-in profile name ('omop', 'mimic_iv'…), the path of a profile TOML, or a loaded profile."""


class CodingChoice(BaseModel):
    """Which coding profile read the dataset's codes, and what it changed (recorded in the manifest)."""

    profile: str = Field(description="name of the coding profile (vista.shared.coding) the codes were read with")
    chosen_by: Literal["given", "detected"] = Field(description="'given' by the caller or 'detected' from the data")
    recognised_share: float | None = Field(
        default=None, description="detected only: share of sampled rows the chosen profile places in a category"
    )
    distinct_source_codes: int = Field(description="distinct codes as spelled in the data")
    respelled_codes: int = Field(
        description="distinct source codes whose canonical spelling differs (0: the data is already canonical)"
    )

    def line(self) -> str:
        """One line for the terminal."""
        how = "detected" if self.chosen_by == "detected" else "given"
        fit = f", recognises {self.recognised_share:.0%} of sampled rows" if self.recognised_share is not None else ""
        return (f"coding profile {self.profile!r} ({how}{fit}); {self.respelled_codes:,} of"
                f" {self.distinct_source_codes:,} distinct codes respelled canonically")


def choose_profile(dataset_root: Path, profile: ProfileSpec | None) -> tuple[CodingProfile, str, float | None]:
    """The profile to read ``dataset_root`` with, how it was chosen, and (detected) the share of rows it places."""
    if profile is not None:
        return load_profile(profile), "given", None
    try:
        chosen, scores = detect_profile(dataset_root)
    except CodingProfileError as exc:
        raise CohortDataError(f"{dataset_root}: cannot detect its coding profile ({exc})") from None
    best = next((s for s in scores if s.profile == chosen.name), None)
    return chosen, "detected", None if best is None else round(best.recognised_share, 4)
