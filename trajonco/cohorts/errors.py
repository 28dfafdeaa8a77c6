"""The errors a cohort build raises: each message names the file, subject or field the user has to fix."""

from __future__ import annotations

from vista.shared.errors import UserError


class CohortError(UserError):
    """Base class: something about the definition or the dataset keeps the cohort from being built."""


class CohortDefinitionError(CohortError):
    """A cohort definition (TOML file or overrides) is missing, malformed or inconsistent."""


class CohortDataError(CohortError):
    """The MEDS dataset cannot feed a cohort: missing files, wrong column types, contradictory subject facts."""


class EmptyCohortError(CohortError):
    """A cohort came out empty; the message says which step emptied it (no cases / all excluded / no controls)."""

    def __init__(self, cohort: str, step: str, detail: str):
        self.cohort = cohort
        self.step = step
        self.explanation: object | None = None
        """set by `build_cohort`: the `trajonco.cohorts.explain.CohortExplanation` gathered before the build stopped"""
        super().__init__(f"{cohort} cohort is empty: {step} — {detail}")
