"""The cohort manifest: what was built from which data with which rules, every exclusion counted, matching quality.

Written as ``manifest.json`` next to ``labels/``; contains counts and summary figures only, never patient text.
"""

from __future__ import annotations

import json
import logging
from enum import StrEnum
from pathlib import Path

import polars as pl
from pydantic import BaseModel, Field

from vista.shared.atomic import atomic_write_text
from trajonco.cohorts.coding import CodingChoice
from trajonco.cohorts.definition import CohortDefinition
from trajonco.cohorts.source import DatasetInfo

INPUT_WINDOW = "static rows plus every row with time strictly before prediction_time"


class CaseExclusion(StrEnum):
    """Why a subject with a target code is not a case of the cohort (first failing rule wins)."""

    PREVALENT = "prevalent"
    NO_QUALIFYING_PAIR = "no_qualifying_pair"
    MISSING_BIRTH_OR_SEX = "missing_birth_or_sex"
    SEX_RESTRICTION = "sex_restriction"
    INDEX_BEFORE_BIRTH = "index_before_birth"
    TOO_FEW_VISITS_BEFORE_PREDICTION = "too_few_visits_before_prediction"
    PRIOR_TARGET_CODE = "prior_target_code"
    """a code of a target cancer before the prediction time (an isolated earlier code outside the washout, or a static
    one): controls never carry one, so the case would hand a model the answer (``exclude_prior_target_codes``)"""
    NO_MATCHING_CONTROL = "no_matching_control"


class ControlExclusion(StrEnum):
    """Why a subject without any target code cannot serve as a control (first failing rule wins)."""

    MISSING_BIRTH_OR_SEX = "missing_birth_or_sex"
    SEX_RESTRICTION = "sex_restriction"
    TOO_FEW_VISITS = "too_few_visits"
    NO_ELIGIBLE_INDEX_DATE = "no_eligible_index_date"
    INDEX_BEFORE_BIRTH = "index_before_birth"


class Distribution(BaseModel):
    """Summary of a numeric distribution (all None when it is empty)."""

    n: int
    mean: float | None = None
    min: float | None = None
    p05: float | None = None
    p25: float | None = None
    median: float | None = None
    p75: float | None = None
    p95: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values: pl.Series) -> Distribution:
        values = values.drop_nulls().cast(pl.Float64)
        if values.is_empty():
            return cls(n=0)
        q = lambda p: round(float(values.quantile(p, "linear")), 4)  # noqa: E731
        return cls(
            n=values.len(),
            mean=round(float(values.mean()), 4),  # type: ignore[arg-type]
            min=round(float(values.min()), 4),  # type: ignore[arg-type]
            p05=q(0.05),
            p25=q(0.25),
            median=q(0.5),
            p75=q(0.75),
            p95=q(0.95),
            max=round(float(values.max()), 4),  # type: ignore[arg-type]
        )


class MatchingQuality(BaseModel):
    """How well controls resemble their cases."""

    cases_considered: int = Field(description="cases tried, in random order, until the target number was matched")
    cases_matched: int = Field(description="cases kept, each with at least one control")
    share_matched: float = Field(description="cases_matched / cases_considered")
    controls_per_case: dict[str, int] = Field(description="number of cases by how many controls they received")
    age_difference_years: Distribution = Field(description="case age at index - control age at index, per pair")
    sex_agreement: float | None = Field(description="share of pairs with the same sex (None without pairs)")
    age_band_agreement: float | None = Field(description="share of pairs in the same age band (None without pairs)")


class SplitCohortReport(BaseModel):
    """One cohort (test or train): where its subjects came from and what happened to them."""

    splits: tuple[str, ...] = Field(description="MEDS splits the cohort was drawn from")
    labels_file: str = Field(description="label parquet, relative to the cohort folder")
    subjects_in_splits: int
    target_cases: int | None = Field(description="cases asked for (None: all eligible)")
    cases: int
    controls: int
    cases_by_cancer: dict[str, int]
    phenotype_cases: int = Field(description="subjects meeting the phenotype before any exclusion")
    eligible_cases: int = Field(description="phenotype cases left after the case exclusions, before matching")
    control_candidates: int = Field(description="subjects in the splits without any target code")
    eligible_controls: int = Field(description="control candidates left after the control exclusions")
    case_exclusions: dict[str, int] = Field(description="subjects with target codes not made cases, by first reason")
    control_exclusions: dict[str, int] = Field(description="control candidates excluded, by first reason")
    cases_with_prior_target_code: int = Field(
        default=0,
        description="cases kept although their record holds a target-cancer code before the prediction time (0"
        " unless exclude_prior_target_codes is false; excluded ones are counted in case_exclusions)",
    )
    cases_not_sampled: int = Field(description="eligible cases not tried because the target was already reached")
    controls_unused: int = Field(description="eligible controls not drawn by the matching")
    matching: MatchingQuality


class VocabularyRows(BaseModel):
    """One vocabulary of the data (canonical spelling): its rows and distinct codes."""

    vocabulary: str
    rows: int
    codes: int


class CodeMatch(BaseModel):
    """One code of the data that a definition entry matched, with the subjects and rows carrying it."""

    cancer: str
    vocabulary: str = Field(description="vocabulary of the definition entry: ICD10CM, ICD9CM, SNOMED or patterns")
    entry: str = Field(description="the definition's entry: an ICD prefix, a SNOMED CT id or a pattern")
    how: str = Field(description="prefix, exact id, below it in codes.parquet, or pattern")
    code: str = Field(description="the canonical code found in the data")
    subjects: int
    events: int


class VocabularyMatch(BaseModel):
    """Subjects and rows one cancer's code set of one vocabulary matched."""

    cancer: str
    vocabulary: str
    subjects: int
    events: int
    codes: int


class CodeOverlapReport(BaseModel):
    """A code of the data claimed by several target cancers (descendants or patterns), and the one it counted for."""

    code: str
    cancers: tuple[str, ...]
    counted_as: str


class CodeMatchReport(BaseModel):
    """What the definition's code sets found in the whole dataset (all splits, before any rule of the phenotype)."""

    looked_for: dict[str, tuple[str, ...]] = Field(description="cancer → vocabularies its code sets search")
    vocabularies_in_data: list[VocabularyRows] = Field(description="every vocabulary of the data, most rows first")
    by_vocabulary: list[VocabularyMatch]
    codes: list[CodeMatch] = Field(description="every matched code of the data, most subjects first")
    overlaps: list[CodeOverlapReport] = Field(default_factory=list)
    hierarchy_codes: int = Field(
        description="codes with parent_codes in metadata/codes.parquet (0: SNOMED CT ids matched exactly only)"
    )
    subjects_with_target_codes: int
    target_rows: int


class CohortManifest(BaseModel):
    """Everything needed to trust, reproduce and compare a cohort build."""

    definition: CohortDefinition
    definition_hash: str = Field(description="SHA-256 of the canonical JSON of the definition")
    dataset: DatasetInfo
    coding: CodingChoice | None = Field(default=None, description="how the dataset's codes were read (profile)")
    code_matches: CodeMatchReport | None = Field(default=None, description="which definition codes the data holds")
    input_window: str = Field(default=INPUT_WINDOW, description="which rows a model may read for a label")
    subjects_in_dataset: int
    subjects_without_split: int = Field(description="subjects with data rows but no entry in the splits file")
    test: SplitCohortReport
    train: SplitCohortReport | None = Field(description="None when the definition lists no training splits")

    def write(self, path: Path) -> None:
        atomic_write_text(path, self.model_dump_json(indent=2) + "\n")

    @classmethod
    def read(cls, path: Path) -> CohortManifest:
        return cls.model_validate_json(path.read_text(encoding="utf-8"))

    def summary_text(self) -> str:
        """A few lines for the terminal."""
        d = self.definition
        lines = [
            f"cohort {d.name}: gap {d.gap_days} d, washout {d.washout_days} d, {d.min_codes} codes ≤ "
            f"{d.max_days_between_codes} d apart, 1:{d.controls_per_case} on {', '.join(d.matching_keys) or 'nothing'}"
            f" (definition {self.definition_hash[:12]}), dataset {self.dataset.path}",
        ]
        if self.coding is not None:
            lines.append(f"  {self.coding.line()}")
        for name, report in (("test", self.test), ("train", self.train)):
            if report is None:
                continue
            excluded = ", ".join(f"{k} {v}" for k, v in report.case_exclusions.items() if v) or "none"
            lines.append(
                f"  {name} ({'+'.join(report.splits)}): {report.cases} cases, {report.controls} controls;"
                f" matched {report.matching.share_matched:.1%} of cases tried; case exclusions: {excluded}"
            )
        return "\n".join(lines)


def cohort_gap_days(labels: str | Path) -> int | None:
    """The gap (days between prediction time and diagnosis) of the cohort whose label file ``labels`` is — read from
    ``COHORT/manifest.json`` when ``labels`` is ``COHORT/labels/<split>.parquet`` — or None for any other file (an
    ACES table, object storage, a hand-made file). A prediction job's horizon should equal it.

    >>> cohort_gap_days("s3://bucket/labels.parquet") is None
    True
    """
    text = str(labels)
    if "://" in text:
        return None
    manifest = Path(text).parent.parent / "manifest.json"
    if Path(text).parent.name != "labels" or not manifest.is_file():
        return None
    try:
        gap = json.loads(manifest.read_text(encoding="utf-8"))["definition"]["gap_days"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return int(gap) if isinstance(gap, int) else None


def label_horizon(labels: str | Path | None, asked: int | None) -> int | None:
    """The prediction horizon of an assessment of ``labels``: ``asked`` when given (a warning when it differs from
    the gap of the cohort the labels come from: the agents would be asked about another window), else that gap,
    else None (the pipeline's default)."""
    gap = cohort_gap_days(labels) if labels is not None else None
    if asked is None:
        return gap
    if gap is not None and gap != asked:
        logging.getLogger(__name__).warning(
            "--horizon-days %d differs from the gap of the cohort of %s (%d days): the agents are asked about another "
            "window than the labels describe", asked, labels, gap)
    return asked
