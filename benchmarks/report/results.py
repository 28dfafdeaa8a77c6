"""The typed results a reproduction report is made of (all serialised to ``results.json``; the HTML renders them).

>>> Quantiles.of([1.0, 2.0, 3.0, 4.0, 5.0]).text()
'3.0 [2.0, 4.0]'
>>> Quantiles.of([]).text()
'–'
>>> Quantiles.of([1200, 5400, 30100]).text(thousands=True)
'5.4k [3.3k, 17.8k]'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from baselines import Evaluation, Interval, StratumResult, TuningReport
from baselines.metrics import too_few


class Quantiles(BaseModel):
    """Median and interquartile range of a set of values (numpy's linear percentiles)."""

    n: int = Field(description="values summarised")
    median: float | None = None
    q1: float | None = Field(None, description="25th percentile")
    q3: float | None = Field(None, description="75th percentile")
    mean: float | None = None

    @classmethod
    def of(cls, values: Sequence[float] | np.ndarray) -> Quantiles:
        array = np.asarray(values, dtype=np.float64)
        array = array[np.isfinite(array)]
        if array.size == 0:
            return cls(n=0)
        q1, median, q3 = np.percentile(array, [25, 50, 75])
        return cls(n=int(array.size), median=float(median), q1=float(q1), q3=float(q3), mean=float(array.mean()))

    def text(self, digits: int = 1, *, thousands: bool = False) -> str:
        """``median [q1, q3]`` as the paper's Table 1 prints it ('–' when there is nothing)."""
        if self.median is None or self.q1 is None or self.q3 is None:
            return "–"
        if thousands:
            return f"{self.median / 1000:.1f}k [{self.q1 / 1000:.1f}k, {self.q3 / 1000:.1f}k]"
        return f"{self.median:.{digits}f} [{self.q1:.{digits}f}, {self.q3:.{digits}f}]"


# ------------------------------------------------------------------------------------------------ cohorts
class GroupCharacteristics(BaseModel):
    """Table 1 column: one role (cases or controls) of one cohort."""

    n: int
    age_years: Quantiles = Field(description="age at the index date")
    sex: dict[str, int] = Field(description="patients per sex code (F, M)")
    race: dict[str, int] = Field(description="patients per RACE// code (Unknown when the patient has none)")
    ethnicity: dict[str, int] = Field(description="patients per ETHNICITY// code (Unknown when none)")
    ehr_span_years: Quantiles = Field(description="first to last clinical event before the prediction time")
    xml_tokens: Quantiles = Field(description="cl100k tokens of the rendered XML timeline (sampled patients; n says "
                                  "how many)")


class CohortCharacteristics(BaseModel):
    """Table 1 for one cohort: cases and matched controls of its test cohort."""

    cohort: str
    cases: GroupCharacteristics
    controls: GroupCharacteristics
    token_sample_per_role: int = Field(description="patients per role whose timeline was rendered for xml_tokens")


class CohortInfo(BaseModel):
    """What one built cohort contained and what its processing cost."""

    cohort: str
    gap_days: int
    test_cases: int
    test_controls: int
    train_rows: int
    n_features: int = Field(description="summary features kept (present in ≥ 1% of training rows)")
    labels_dir: str
    build_seconds: float
    describe_seconds: float = Field(0.0, description="Table 1 (demographics and sampled timelines)")
    feature_seconds: float
    model_seconds: float = Field(description="fitting, scoring, evaluating and stratifying")

    @property
    def total_seconds(self) -> float:
        return self.build_seconds + self.describe_seconds + self.feature_seconds + self.model_seconds


class CohortSkip(BaseModel):
    """A cohort (or a rebuilt gap cohort) that could not be built or scored, and why — never left out silently."""

    cohort: str
    gap_days: int
    reason: str


# ------------------------------------------------------------------------------------------------ models
ModelKind = Literal["baseline", "prediction_file", "record_length"]
"""baseline: a fitted LR/KNN/XGBoost; prediction_file: the agents or any MEDS-DEV file; record_length: the
timeline's token count or the visit count used alone as the score (how much signal is utilisation)."""


class ModelResult(BaseModel):
    """One model on one cohort's test labels."""

    cohort: str
    gap_days: int
    model: str = Field(description="display name: the baseline's name, or '<variant> · <LLM>' for prediction files")
    kind: ModelKind
    llm_model: str | None = Field(None, description="the LLM behind a prediction file's scores (its model column)")
    llm_backend: str | None = Field(None, description="the backend that answered (the file's backend column: "
                                    "embedded, openai, ...); None: not recorded (older files)")
    served_model: str | None = Field(None, description="the model as the server named it (served_model column)")
    variant: str | None = Field(None, description="one_stage, two_stage or single_agent (prediction files)")
    source: str | None = Field(None, description="the prediction file")
    evaluation: Evaluation
    seconds: float = Field(0.0, description="fit + scoring time of a baseline (0 for prediction files)")
    tuning: TuningReport | None = None

    @property
    def too_few(self) -> bool:
        """Too few cases or controls (`baselines.metrics.MIN_CASES`) to rank this result against others."""
        return too_few(self.evaluation.n_positive, self.evaluation.n_negative)


class PairedComparison(BaseModel):
    """An agent run against a comparator (baseline or record length) on exactly the patients the agent scored."""

    cohort: str
    agent: str = Field(description="the prediction file's display name")
    comparator: str
    comparator_kind: ModelKind
    n_cases: int
    n_controls: int
    agent_auroc: float
    comparator_auroc: float | None = Field(description="the comparator re-scored on the agent's patients (None: it "
                                           "lacks some of them)")
    comparator_auroc_whole: float | None = Field(None, description="the comparator on its whole test cohort")
    difference: Interval | None = Field(None, description="agent − comparator; paired bootstrap CI (None: not "
                                        "computable, see note)")
    note: str | None = None

    @property
    def too_few(self) -> bool:
        return too_few(self.n_cases, self.n_controls)


class UnscoredRun(BaseModel):
    """A prediction file whose scored rows cannot give an AUROC with a CI (too few cases or controls), and why."""

    cohort: str
    model: str
    llm_model: str | None
    variant: str | None
    source: str
    n_scored: int
    reason: str
    llm_backend: str | None = None
    served_model: str | None = None


class TruncationPoint(BaseModel):
    """One baseline refitted and scored with every patient's input left-truncated to a token budget."""

    budget_tokens: int | None = Field(description="None: the whole record (no truncation)")
    model: str
    auroc: Interval
    auprc: Interval
    n_test: int
    share_truncated: float = Field(description="share of test patients whose timeline exceeded the budget")
    median_history_years: float = Field(description="test patients: prediction time − first kept event (median)")
    mean_history_years: float
    median_kept_tokens: float = Field(description="test patients: XML tokens kept (median)")


class GapPoint(BaseModel):
    """One baseline on one cohort rebuilt with one prediction gap."""

    cohort: str
    gap_years: float
    gap_days: int
    model: str
    n_cases: int
    n_controls: int
    auroc: Interval


class AgentSensitivityPoint(BaseModel):
    """One agent run (the first variant, on a few focus-cohort patients) at one truncation budget or one gap.

    Drawn beside the baselines' `TruncationPoint`/`GapPoint` with its n: a handful of patients, so the AUROC is a
    machinery check, flagged ``too_few`` (and without a CI below 2 cases and 2 controls)."""

    analysis: Literal["truncation", "gap"]
    cohort: str
    model: str = Field(description="the agent run's display name ('<variant> · <LLM>'), as in the other tables")
    budget_tokens: int | None = Field(None, description="truncation: the budget (None: the whole record)")
    gap_years: float | None = Field(None, description="gap: the gap in years")
    gap_days: int = Field(description="the horizon the agents were given (--horizon-days)")
    n_cases: int = Field(description="cases with a score")
    n_controls: int = Field(description="controls with a score")
    n_unscored: int = Field(0, description="patients of the subset without a score (failed or not yet run)")
    auroc: float | None = Field(None, description="None: the scored patients hold one class only")
    auroc_ci: Interval | None = Field(None, description="stratified bootstrap CI; None below 2 cases and 2 controls")
    longest_timeline_tokens: int = Field(description="cl100k tokens of the longest timeline of these patients")
    reused_full_run: bool = Field(False, description="identical to the whole-record run at the cohort's gap (budget "
                                  "at or above every timeline, or the cohort's own gap on the same patients), whose "
                                  "file is reused instead of running the agents again")
    source: str = Field(description="the prediction file")
    note: str | None = None

    @property
    def too_few(self) -> bool:
        return too_few(self.n_cases, self.n_controls)

    def text(self) -> str:
        """``AUROC (CI) n=cases/controls too few`` as the tables print it.

        >>> AgentSensitivityPoint(analysis="gap", cohort="lung", model="m", gap_days=365, n_cases=1, n_controls=1,
        ...                       auroc=1.0, longest_timeline_tokens=900, source="p").text()
        '1.000 n=1/1 too few'
        """
        value = "–" if self.auroc is None else f"{self.auroc:.3f}"
        if self.auroc_ci is not None:
            value += f" ({self.auroc_ci.lower:.3f}–{self.auroc_ci.upper:.3f})"
        return f"{value} n={self.n_cases}/{self.n_controls}" + (" too few" if self.too_few else "")


class CohortStrata(BaseModel):
    """Stratified results of every model run on one cohort."""

    cohort: str
    results: list[StratumResult]


class RealismVerdict(BaseModel):
    """Whether the baselines' AUROCs look like real-world early detection (computed, worded in plain language)."""

    low: float
    high: float
    model: str = Field(description="the baseline judged (the best per cohort)")
    per_cohort: dict[str, float] = Field(description="cohort -> best baseline AUROC")
    below: list[str]
    above: list[str]
    paragraph: str
