"""What a course wrote, as facts with tags: each tag names a row of the shard, so once the shard is sorted the ground
truth (`vista.shared.synth.ground_truth`) can cite the event ids that carry the fact."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from vista.shared.synth.cancers import CancerSite, Histology, StageOption


@dataclass(slots=True)
class ImagingTruth:
    """One imaging study: its day, procedure key, why it was done and its impression."""

    day: float
    procedure: str
    purpose: str
    finding: str
    tags: list[int]


@dataclass(slots=True)
class PathologyTruth:
    """One pathology result (biopsy, resection, surveillance biopsy) and its diagnosis line."""

    day: float
    procedure: str
    diagnosis: str
    tags: list[int]


@dataclass(slots=True)
class ComponentTruth:
    """One component of a treatment line as given (drugs or procedure, first and last day)."""

    kind: str
    label: str
    drugs: list[str]
    procedure: str | None
    start: float
    end: float


@dataclass(slots=True)
class LineTruth:
    """One line of treatment: its plan, intent, days and why it ended."""

    line: int
    plan: str
    intent: str
    start: float
    end: float | None = None
    end_reason: str = "ongoing"
    components: list[ComponentTruth] = field(default_factory=list)
    tags: list[int] = field(default_factory=list)


@dataclass(slots=True)
class CaseTruth:
    """What the course wrote for one case, with tags pointing at the rows that carry each fact."""

    subject: int
    cancer: str
    site: CancerSite
    histology: Histology
    stage_system: str
    stage: StageOption
    stage_day: float = math.nan
    stage_tags: list[int] = field(default_factory=list)
    biomarkers: list[tuple[str, str]] = field(default_factory=list)
    biomarker_day: float = math.nan
    biomarker_tags: list[int] = field(default_factory=list)
    ecog: list[tuple[float, int, int]] = field(default_factory=list)
    smoking_status: str = "unknown"
    pack_years: float | None = None
    quit_year: int | None = None
    smoking_tags: list[int] = field(default_factory=list)
    imaging: list[ImagingTruth] = field(default_factory=list)
    pathology: list[PathologyTruth] = field(default_factory=list)
    lines: list[LineTruth] = field(default_factory=list)
    progressions: list[tuple[float, int, list[int]]] = field(default_factory=list)
    metastases: list[str] = field(default_factory=list)
    hospice_day: float = math.nan
    hospice_tags: list[int] = field(default_factory=list)
    prior_code_day: float = math.nan
    prior_code_tags: list[int] = field(default_factory=list)
    clinical_diagnosis: float = math.nan
    workup_path: str = ""
    record_end: float = math.nan
    death: float = math.nan


@dataclass(slots=True)
class RuleOutTruth:
    """A non-case's rule-out work-up: the cancer coded once, on ``day``, and never confirmed."""

    subject: int
    cancer: str
    day: float
    tags: list[int]
