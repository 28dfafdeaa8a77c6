"""The typed results a reproduction report is made of (all serialised to ``results.json``; the HTML renders them).

>>> Quantiles.of([1.0, 2.0, 3.0, 4.0, 5.0]).text()
'3.0 [2.0, 4.0]'
>>> Quantiles.of([]).text()
'–'
>>> Quantiles.of([1200, 5400, 30100]).text(thousands=True)
'5.4k [3.3k, 17.8k]'
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, Field, model_serializer, model_validator

from baselines import Evaluation, Interval, StratumResult, TuningReport
from baselines.metrics import MIN_CASES, too_few, too_few_text


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


# ------------------------------------------------------------------------------------------------ small samples
class SmallSampleGuarded(BaseModel):
    """A result whose numbers stand on some cases and controls; on too few (`baselines.metrics.MIN_CASES`) they are
    not given as numbers in ``results.json`` either.

    In memory the numbers stay (the tables print `baselines.metrics.too_few_text` in their place). Serialised, every
    such result carries ``too_few``; when it is true the numbers named by ``_guarded`` (dotted paths) are null and
    their raw values move under ``too_few_raw`` with the counts: ``{"n_cases", "n_controls", "minimum", "values":
    {path: raw}}``. Reading the JSON back restores them.
    """

    _guarded: ClassVar[tuple[str, ...]] = ()

    def counts(self) -> tuple[int, int]:
        """(cases, controls) the numbers stand on."""
        raise NotImplementedError

    @property
    def too_few(self) -> bool:
        return too_few(*self.counts())

    @model_serializer(mode="wrap")
    def _hide_small_numbers(self, handler) -> dict[str, Any]:
        data = handler(self)
        data["too_few"] = self.too_few
        if not self.too_few:
            return data
        raw = {}
        for path in self._guarded:
            *parents, leaf = path.split(".")
            holder: Any = data
            for part in parents:
                holder = holder.get(part) if isinstance(holder, dict) else None
            if isinstance(holder, dict) and holder.get(leaf) is not None:
                raw[path], holder[leaf] = holder[leaf], None
        n_cases, n_controls = self.counts()
        data["too_few_raw"] = {"n_cases": n_cases, "n_controls": n_controls, "minimum": MIN_CASES, "values": raw}
        return data

    @model_validator(mode="before")
    @classmethod
    def _restore_small_numbers(cls, data: Any) -> Any:
        if not isinstance(data, dict) or ("too_few" not in data and "too_few_raw" not in data):
            return data
        data = copy.deepcopy(data)
        data.pop("too_few", None)
        raw = data.pop("too_few_raw", None) or {}
        for path, value in raw.get("values", {}).items():
            *parents, leaf = path.split(".")
            holder = data
            for part in parents:
                holder = holder[part]
            holder[leaf] = value
        return data


# ------------------------------------------------------------------------------------------------ cohorts
class GroupCharacteristics(BaseModel):
    """Table 1 column: one role (cases or controls) of one cohort."""

    n: int
    age_years: Quantiles = Field(description="age at the index date")
    sex: dict[str, int] = Field(description="patients per sex code (F, M)")
    race: dict[str, int] = Field(description="patients per RACE// code (Unknown when the patient has none)")
    ethnicity: dict[str, int] = Field(description="patients per ETHNICITY// code (Unknown when none)")
    ehr_span_years: Quantiles = Field(description="first to last clinical event before the prediction time")
    xml_tokens: Quantiles = Field(description="cl100k tokens of the rendered XML timeline (every patient of the "
                                  "role unless the report sampled; n says how many)")


class CohortCharacteristics(BaseModel):
    """Table 1 for one cohort: cases and matched controls of its test cohort."""

    cohort: str
    cases: GroupCharacteristics
    controls: GroupCharacteristics
    token_sample_per_role: int | None = Field(None, description="None: every test patient's timeline was rendered "
                                              "for xml_tokens; N: a seeded sample of at most N per role")


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


class ModelResult(SmallSampleGuarded):
    """One model on one cohort's test labels (results.json: AUROC/AUPRC under ``too_few_raw`` when too few)."""

    _guarded: ClassVar[tuple[str, ...]] = ("evaluation.auroc", "evaluation.auprc")

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

    def counts(self) -> tuple[int, int]:
        return self.evaluation.n_positive, self.evaluation.n_negative


class PairedComparison(SmallSampleGuarded):
    """An agent run against a comparator (baseline or record length) on exactly the patients the agent scored."""

    _guarded: ClassVar[tuple[str, ...]] = ("agent_auroc", "comparator_auroc", "difference")

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
    comparator_whole_cases: int | None = Field(None, description="cases of comparator_auroc_whole")
    comparator_whole_controls: int | None = Field(None, description="controls of comparator_auroc_whole")
    note: str | None = None

    def counts(self) -> tuple[int, int]:
        return self.n_cases, self.n_controls

    @property
    def whole_too_few(self) -> bool:
        """The comparator's whole-cohort AUROC stands on too few too (unknown counts: not flagged)."""
        if self.comparator_whole_cases is None or self.comparator_whole_controls is None:
            return False
        return too_few(self.comparator_whole_cases, self.comparator_whole_controls)


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


class TruncationPoint(SmallSampleGuarded):
    """One baseline refitted and scored with every patient's input left-truncated to a token budget."""

    _guarded: ClassVar[tuple[str, ...]] = ("auroc", "auprc")

    budget_tokens: int | None = Field(description="None: the whole record (no truncation)")
    model: str
    auroc: Interval
    auprc: Interval
    n_test: int
    n_cases: int = Field(description="test cases scored")
    n_controls: int = Field(description="test controls scored")
    same_input_as: int | None = Field(None, description="budget whose input windows are identical to this one's "
                                      "(every timeline fits both; 0: the whole record): its fit is reused, not a new "
                                      "measurement")
    share_truncated: float = Field(description="share of test patients whose timeline exceeded the budget")
    median_history_years: float = Field(description="test patients: prediction time − first kept event (median)")
    mean_history_years: float
    median_kept_tokens: float = Field(description="test patients: XML tokens kept (median)")

    def counts(self) -> tuple[int, int]:
        return self.n_cases, self.n_controls


class GapPoint(SmallSampleGuarded):
    """One baseline on one cohort rebuilt with one prediction gap."""

    _guarded: ClassVar[tuple[str, ...]] = ("auroc",)

    cohort: str
    gap_years: float
    gap_days: int
    model: str
    n_cases: int
    n_controls: int
    auroc: Interval

    def counts(self) -> tuple[int, int]:
        return self.n_cases, self.n_controls


class AgentSensitivityPoint(SmallSampleGuarded):
    """One agent run (the first variant, on a few focus-cohort patients) at one truncation budget or one gap.

    Drawn beside the baselines' `TruncationPoint`/`GapPoint` with its n: a handful of patients, so the AUROC is a
    machinery check, flagged ``too_few`` (and without a CI below 2 cases and 2 controls)."""

    _guarded: ClassVar[tuple[str, ...]] = ("auroc", "auroc_ci")

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

    def counts(self) -> tuple[int, int]:
        return self.n_cases, self.n_controls

    def text(self) -> str:
        """``AUROC (CI) n=cases/controls`` as the tables print it, or `baselines.metrics.too_few_text`.

        >>> AgentSensitivityPoint(analysis="gap", cohort="lung", model="m", gap_days=365, n_cases=1, n_controls=1,
        ...                       auroc=1.0, longest_timeline_tokens=900, source="p").text()
        'too few (n=1 cases, 1 controls)'
        """
        if self.too_few:
            return too_few_text(self.n_cases, self.n_controls)
        value = "–" if self.auroc is None else f"{self.auroc:.3f}"
        if self.auroc_ci is not None:
            value += f" ({self.auroc_ci.lower:.3f}–{self.auroc_ci.upper:.3f})"
        return f"{value} n={self.n_cases}/{self.n_controls}"


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
