"""Ground truth written beside a synthetic dataset: the phenotype each record implies and the oncology timeline.

`phenotype_index` is the reference implementation of the TrajOnco case definition the cohort layer applies: a case
has two codes of the cancer within 60 days, the first of them after at least 180 days of observed history with no
code of that cancer in the 180 days before it; the index is the first code of the first pair of consecutive codes
at most 60 days apart. A first pair that fails the washout makes the patient a prevalent (excluded) case.

`OncologyRecord` (one JSON line per cancer patient in ``ground_truth/oncology.jsonl``) states every fact with the
event ids (``e<k>``, as in `vista.shared.records.PatientRecord`) of the rows that carry it in ``data_file``.

>>> day = 86_400_000_000
>>> phenotype_index([400 * day, 430 * day], record_start=0)
(0, None)
>>> phenotype_index([100 * day, 400 * day, 430 * day], record_start=0)
(1, None)
>>> phenotype_index([300 * day, 400 * day, 430 * day], record_start=0)
(None, 'prevalent')
>>> phenotype_index([400 * day, 470 * day], record_start=0)
(None, 'no_qualifying_pair')
>>> phenotype_index([100 * day, 120 * day], record_start=0)
(None, 'insufficient_history')
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

US_PER_DAY = 86_400_000_000
WASHOUT_DAYS = 180
PAIR_WINDOW_DAYS = 60


def phenotype_index(code_times: Sequence[int], record_start: int, washout_days: int = WASHOUT_DAYS,
                    pair_window_days: int = PAIR_WINDOW_DAYS) -> tuple[int | None, str | None]:
    """Position of the index code in the sorted microsecond ``code_times`` of one cancer, or (None, reason).

    Reasons: ``no_qualifying_pair``, ``insufficient_history`` (under ``washout_days`` of record before the first
    code of the pair) and ``prevalent`` (another code of the cancer inside the washout).
    """
    window = pair_window_days * US_PER_DAY
    washout = washout_days * US_PER_DAY
    for i in range(len(code_times) - 1):
        if 0 < code_times[i + 1] - code_times[i] <= window:
            if code_times[i] - record_start < washout:
                return None, "insufficient_history"
            if i > 0 and code_times[i] - code_times[i - 1] < washout:
                return None, "prevalent"
            return i, None
    return None, "no_qualifying_pair"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StageTruth(_Model):
    """Stage at diagnosis (TNM and group for solid tumours; the system's group for haematological cancers)."""

    system: str
    group: str
    t: str | None = None
    n: str | None = None
    m: str | None = None
    date: dt.date | None = None
    event_ids: list[str] = Field(default_factory=list)


class BiomarkerTruth(_Model):
    name: str
    result: str
    date: dt.date | None = None
    event_ids: list[str] = Field(default_factory=list)


class ImagingStudy(_Model):
    date: dt.date
    modality: str
    code: str
    purpose: str = Field(description="screening, diagnostic work-up, staging, response assessment or surveillance")
    impression: str
    event_ids: list[str]


class PathologyFinding(_Model):
    date: dt.date
    procedure: str
    code: str
    diagnosis: str
    event_ids: list[str]


class TreatmentComponentTruth(_Model):
    modality: str
    label: str
    drugs: list[str]
    procedure_code: str | None
    start_date: dt.date
    end_date: dt.date


class TreatmentLineTruth(_Model):
    line: int
    regimen: str
    intent: str
    start_date: dt.date
    end_date: dt.date | None
    end_reason: str = Field(description="completed, recurrence, progression, death or ongoing (at the end of the record)")
    components: list[TreatmentComponentTruth]
    event_ids: list[str]


class ProgressionTruth(_Model):
    date: dt.date
    line: int
    event_ids: list[str]


class PerformanceStatus(_Model):
    date: dt.date
    ecog: int
    event_ids: list[str]


class SmokingHistory(_Model):
    status: str = Field(description="never, former, current or 'not documented'")
    pack_years: float | None
    quit_year: int | None
    event_ids: list[str]


class OncologyRecord(_Model):
    """The oncology timeline of one cancer patient as written in the MEDS data."""

    subject_id: int
    data_file: str
    cancer: str
    cancer_name: str
    icd_code: str = Field(description="The cancer code at the phenotype index (or the first cancer code if not a case).")
    diagnosis_date: dt.date | None = Field(description="Phenotype index date the data implies (None if the record is not an incident case).")
    diagnosis_time: dt.datetime | None
    diagnosis_event_ids: list[str] = Field(description="The two rows of the qualifying pair.")
    clinical_diagnosis_date: dt.date
    is_incident_case: bool
    exclusion_reason: str | None
    trap: str | None
    workup_path: str
    site: str
    laterality: str | None
    histology: str
    icdo3_morphology: str
    stage: StageTruth
    biomarkers: list[BiomarkerTruth]
    treatment_lines: list[TreatmentLineTruth]
    progressions: list[ProgressionTruth]
    imaging: list[ImagingStudy]
    pathology: list[PathologyFinding]
    performance_status: list[PerformanceStatus]
    smoking: SmokingHistory
    metastatic_sites: list[str]
    hospice_date: dt.date | None
    hospice_event_ids: list[str]
    death_date: dt.date | None
    death_event_ids: list[str]
    record_start_date: dt.date
    record_end_date: dt.date


SUBJECT_COLUMNS = (
    "subject_id", "split", "sex", "birth_date", "record_start", "record_end", "death_date", "cancer", "clinical_diagnosis_date",
    "diagnosis_date", "is_incident_case", "exclusion_reason", "trap_prevalent", "trap_late_confirmation", "trap_short_history",
    "trap_prior_code", "prior_code_date", "trap_rule_out", "rule_out_cancer", "rule_out_date", "icd9_cancer_codes",
)
"""Columns of ``ground_truth/subjects.parquet`` (one row per subject; cancer columns null for non-cases)."""
