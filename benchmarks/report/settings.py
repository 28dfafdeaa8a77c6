"""What a reproduction report covers: one validated, immutable settings object (defaults = the full synthetic run).

>>> s = ReportSettings(out="out/report")
>>> len(s.cohorts), s.focus_cohort, s.gap_days
(16, 'lung', (183, 365, 730, 1096, 1461, 1826))
>>> q = ReportSettings.quick_defaults(out="out/quick")
>>> q.quick, q.synth_subjects < s.synth_subjects
(True, True)
>>> c = ReportSettings(out="x", cohorts=("breast", "any_cancer"))  # cohort-dependent defaults follow the cohorts
>>> c.focus_cohort, c.stratify_cohorts, c.gap_cohorts
('breast', ('any_cancer',), ('breast',))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from baselines import BASELINES
from trajonco.cancers import CANCERS

CANCER_COHORTS: tuple[str, ...] = tuple(CANCERS)
"""The 15 cancer-specific cohorts (built-in definitions named like the cancers)."""
DEFAULT_COHORTS: tuple[str, ...] = (*CANCER_COHORTS, "any_cancer")
TRUNCATION_BUDGETS: tuple[int, ...] = (2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000)
GAP_YEARS: tuple[float, ...] = (0.5, 1.0, 2.0, 3.0, 4.0, 5.0)
DAYS_PER_YEAR = 365.25


def gap_days_of(years: float) -> int:
    """A gap in years as whole days, as cohort definitions take it (1 year = 365 days, 5 years = 1826).

    >>> [gap_days_of(y) for y in (0.5, 1, 2, 5)]
    [183, 365, 730, 1826]
    """
    return int(round(years * DAYS_PER_YEAR))


class PredictionSource(BaseModel):
    """A prediction file (``jobs.predict``'s ``predictions.parquet`` or any MEDS-DEV file) and the cohort it scores."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: Path = Field(description="parquet with subject_id, prediction_time, predicted_boolean_probability "
                       "(from jobs.predict: its predictions.parquet, whose prediction_details.parquet beside it gives "
                       "the model, variant, usage and latency columns)")
    cohort: str = Field("lung", description="the cohort (definition name) whose test labels the file scores")
    name: str | None = Field(None, description="how tables name it (default: '<variant> · <model>' from the file, "
                             "else the file name)")


class ReportSettings(BaseModel):
    """Everything that decides a reproduction report's numbers (the command line maps onto these fields)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    out: Path = Field(description="report folder: report.html, results.json, figures/, cohorts/, dataset/")
    dataset: Path | None = Field(None, description="a MEDS dataset to use; None: generate (or reuse) the synthetic one")
    synth_dir: Path | None = Field(None, description="where to generate (or reuse) the synthetic dataset; None: "
                                   "OUT/dataset")
    synth_subjects: int = Field(50_000, ge=500, description="subjects of the synthetic dataset (50,000 gives ≥ ~100 "
                                "test cases for most cancers with the split below; measured in the report)")
    synth_seed: int = Field(0, ge=0, description="seed of the synthetic dataset")
    synth_held_out: float = Field(0.4, gt=0.0, lt=1.0, description="share of synthetic subjects in the held_out split "
                                  "(test cohorts); the rest is split 5:1 into train and tuning (training cohorts)")
    cohorts: tuple[str, ...] = Field(DEFAULT_COHORTS, min_length=1, description="cohort definitions (built-in names "
                                     "or TOML paths) to build and score")
    focus_cohort: str = Field("lung", description="cohort of the ROC/PR figure, the trajectory-length analysis and "
                              "the agents' subset")
    stratify_cohorts: tuple[str, ...] = Field(("lung", "any_cancer"), description="cohorts with stratified results")
    baselines: tuple[str, ...] = Field(tuple(BASELINES), min_length=1, description="supervised baselines to fit")
    train_cases_cap: int | None = Field(2_000, ge=10, description="at most this many training cases per cohort "
                                        "(matched controls come with them); None keeps every eligible case")
    test_cases: int | None = Field(None, ge=2, description="test cases per cohort; None: the definition's (500)")
    token_sample: int | None = Field(None, ge=1, description="None (default): Table 1 and the token-count baseline "
                                     "render every test patient's timeline; N: a seeded sample of at most N per role, "
                                     "said in Table 1 ("
                              "the token column of the characteristics table (all of them when fewer)")
    truncation_budgets: tuple[int, ...] = Field(TRUNCATION_BUDGETS, description="left-truncation budgets in "
                                                "cl100k tokens (empty: no trajectory-length analysis)")
    truncation_models: tuple[str, ...] = Field(tuple(BASELINES), description="baselines refitted per budget")
    gap_years: tuple[float, ...] = Field(GAP_YEARS, description="prediction gaps (years) of the time-gap analysis "
                                         "(empty: none)")
    gap_cohorts: tuple[str, ...] = Field(CANCER_COHORTS, description="cohorts rebuilt with each gap")
    gap_models: tuple[str, ...] = Field(("xgboost",), description="baselines refitted per gap and cohort")
    gap_train_cases_cap: int | None = Field(400, ge=10, description="training-case cap of the rebuilt gap cohorts "
                                            "(smaller than the main one: 90 cohorts are rebuilt)")
    n_resamples: int = Field(1_000, ge=50, description="bootstrap resamples of every confidence interval")
    seed: int = Field(0, ge=0, description="seed of models, bootstraps and samples")
    workers: int = Field(2, ge=1, description="worker processes for the cohort tasks (1: all in this process)")
    agent_patients: int = Field(4, ge=0, description="focus-cohort test patients (half cases, half controls) the "
                                "agents assess when the job runs them (0: none)")
    agent_max_tokens: int | None = Field(2_500, ge=500, description="only patients whose XML timeline has at most "
                                         "this many tokens join the agents' subset (bounds the embedded model's run)")
    agent_variants: tuple[str, ...] = Field(("one_stage", "two_stage", "single_agent"), description="agent variants "
                                            "run on the subset")
    agent_sensitivity: Literal["all", "truncation", "gap", "none"] = Field(
        "all", description="run the agents (the first variant) over the truncation budgets and/or the time gaps")
    agent_sensitivity_patients: int | None = Field(None, ge=0, description="patients of the agents' subset (half "
                                                   "cases) the sensitivity runs assess; None: the whole subset; 0: "
                                                   "no agent sensitivity runs")
    agent_gap_years: tuple[float, ...] | None = Field(None, description="gaps (among gap_years) at which the agents "
                                                      "run; None: every gap")
    predictions: tuple[PredictionSource, ...] = Field((), description="prediction files of the agents or others")
    usage_ledgers: tuple[Path, ...] = Field((), description="vista.shared.llm usage ledgers (parquet or JSON) for the "
                                            "per-agent call profile")
    realistic_range: tuple[float, float] = Field((0.6, 0.9), description="AUROC range called realistic in the report")
    quick: bool = Field(False, description="the small CI configuration (see quick_defaults)")
    command: str = Field("", description="the command line that produced the report (printed in it)")

    @model_validator(mode="before")
    @classmethod
    def _defaults_within_cohorts(cls, data: Any) -> Any:
        """Cohort-dependent defaults follow the cohorts given: focus, strata and gap cohorts among them."""
        if not isinstance(data, dict) or "cohorts" not in data:
            return data
        cohorts = tuple(data["cohorts"])
        data = dict(data)
        data.setdefault("focus_cohort", "lung" if "lung" in cohorts else cohorts[0] if cohorts else "lung")
        data.setdefault("stratify_cohorts", tuple(c for c in ("lung", "any_cancer") if c in cohorts))
        data.setdefault("gap_cohorts", tuple(c for c in CANCER_COHORTS if c in cohorts))
        return data

    @model_validator(mode="after")
    def _check(self) -> ReportSettings:
        for field in ("baselines", "truncation_models", "gap_models"):
            unknown = [m for m in getattr(self, field) if m not in BASELINES]
            if unknown:
                raise ValueError(f"{field}: unknown baseline(s) {unknown}; expected some of {list(BASELINES)}")
        for field in ("stratify_cohorts", "gap_cohorts"):
            outside = [c for c in getattr(self, field) if c not in self.cohorts]
            if outside:
                raise ValueError(f"{field}: {outside} are not among the cohorts {list(self.cohorts)}")
        if self.focus_cohort not in self.cohorts:
            raise ValueError(f"focus_cohort {self.focus_cohort!r} is not among the cohorts {list(self.cohorts)}")
        unknown_variants = set(self.agent_variants) - {"one_stage", "two_stage", "single_agent"}
        if unknown_variants:
            raise ValueError(f"agent_variants: unknown {sorted(unknown_variants)}; expected one_stage, two_stage, "
                             "single_agent")
        if any(b < 256 for b in self.truncation_budgets):
            raise ValueError(f"truncation budgets must be at least 256 tokens, got {list(self.truncation_budgets)}")
        if any(not 0.0 < y <= 5.0 for y in self.gap_years):
            raise ValueError(f"gap_years must be in (0, 5], got {list(self.gap_years)}")
        if self.agent_gap_years is not None and not set(self.agent_gap_years) <= set(self.gap_years):
            raise ValueError(f"agent_gap_years: {sorted(set(self.agent_gap_years) - set(self.gap_years))} are not "
                             f"among the gap_years {list(self.gap_years)}")
        low, high = self.realistic_range
        if not 0.5 <= low < high <= 1.0:
            raise ValueError(f"realistic_range must satisfy 0.5 <= low < high <= 1, got {self.realistic_range}")
        return self

    @property
    def gap_days(self) -> tuple[int, ...]:
        return tuple(gap_days_of(y) for y in self.gap_years)

    @property
    def dataset_root(self) -> Path:
        """The MEDS dataset the report reads: the given one, or the synthetic one under ``out``."""
        if self.dataset is not None:
            return self.dataset
        return self.synth_dir if self.synth_dir is not None else self.out / "dataset"

    @classmethod
    def quick_defaults(cls, **changes: Any) -> ReportSettings:
        """The CI configuration: a few thousand subjects, lung and any-cancer, 3 budgets and gaps, fewer resamples."""
        quick: dict[str, Any] = {
            "synth_subjects": 4_000, "cohorts": ("lung", "any_cancer"),
            "stratify_cohorts": ("lung", "any_cancer"), "train_cases_cap": 300,
            "truncation_budgets": (2_000, 8_000, 32_000), "gap_years": (0.5, 1.0, 2.0),
            "gap_cohorts": ("lung",), "gap_models": ("logistic_regression",), "gap_train_cases_cap": 200,
            "n_resamples": 200, "quick": True,
        }
        if "cohorts" in changes:  # cohort-dependent defaults follow the cohorts given (see _defaults_within_cohorts)
            quick = {k: v for k, v in quick.items() if k not in ("stratify_cohorts", "gap_cohorts")}
            quick.pop("cohorts")
        return cls(**(quick | changes))
