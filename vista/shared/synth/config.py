"""The generator's configuration: one validated, immutable object that fully determines the output bytes."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, ConfigDict, Field, model_validator


class SplitFractions(BaseModel):
    """Shares of subjects in each MEDS split (they must add up to 1)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    train: float = Field(0.7, ge=0.0, le=1.0, description="Share of subjects in the train split.")
    tuning: float = Field(0.1, ge=0.0, le=1.0, description="Share of subjects in the tuning split.")
    held_out: float = Field(0.2, ge=0.0, le=1.0, description="Share of subjects in the held_out split.")

    @model_validator(mode="after")
    def _sums_to_one(self) -> SplitFractions:
        total = self.train + self.tuning + self.held_out
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"split fractions must add up to 1, got {total}")
        return self


class SynthConfig(BaseModel):
    """Everything that decides a synthetic dataset. The same config gives the same bytes, whatever ``workers`` is.

    >>> SynthConfig(n_subjects=10, seed=1).shard_size
    10000
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    n_subjects: int = Field(..., gt=0, description="Number of subjects to generate.")
    seed: int = Field(..., ge=0, description="Master seed; shard k draws from numpy.random.default_rng([seed, k]).")
    shard_size: int = Field(10_000, gt=0, le=16_000, description="Subjects per generation shard (bounds memory; one data file per split and shard).")
    workers: int = Field(2, ge=1, description="Worker processes generating shards in parallel (does not change the output).")
    window_start: date = Field(date(2008, 1, 1), description="First day any event may fall on (fixed, so output never depends on today).")
    window_end: date = Field(date(2025, 12, 31), description="Last day any event may fall on.")
    case_fraction: float = Field(0.25, ge=0.0, le=1.0, description="Share of subjects who develop one of the 15 cancers during their record.")
    cancer_weights: dict[str, float] = Field(default_factory=dict, description="Optional relative weights per cancer key overriding the profiles' case mix.")
    splits: SplitFractions = Field(default_factory=SplitFractions, description="train / tuning / held_out shares.")
    note_rate: float = Field(0.2, ge=0.0, le=1.0, description="Share of ambulatory background visits with a free-text progress note.")
    rule_out_rate: float = Field(0.03, ge=0.0, le=1.0, description="Share of non-cases with one rule-out cancer code that is never confirmed.")
    prevalent_rate: float = Field(0.05, ge=0.0, le=1.0, description="Share of cases with an earlier cancer code inside the 180-day washout (prevalent).")
    late_confirmation_rate: float = Field(0.05, ge=0.0, le=1.0, description="Share of cases whose first two cancer codes are more than 60 days apart.")
    prior_code_rate: float = Field(0.03, ge=0.0, le=1.0, description="Share of cases with one isolated earlier code of their cancer outside the 180-day washout (an incident case whose record leaks the answer unless the cohort excludes it).")
    short_history_rate: float = Field(0.06, ge=0.0, le=1.0, description="Share of cases whose record starts less than 180 days before diagnosis.")
    visit_rate_mean: float = Field(1.3, gt=0.0, description="Mean background visits per year (per-subject rates are gamma distributed).")
    case_history_median_years: float = Field(4.8, gt=0.0, description="Median years of record before a case's diagnosis.")
    control_record_median_years: float = Field(6.5, gt=0.0, description="Median length of a non-case's record in years.")
    control_female_share: float = Field(0.56, ge=0.0, le=1.0, description="Share of women among non-cases.")
    dataset_name: str = Field("trajonco-synth", min_length=1, description="dataset_name written to metadata/dataset.json.")
    compression: str = Field("zstd", pattern="^(zstd|snappy|gzip|none)$", description="Parquet compression codec of the data shards.")

    @model_validator(mode="after")
    def _check(self) -> SynthConfig:
        from vista.shared.synth.cancers import CANCER_KEYS

        if self.window_end <= self.window_start or (self.window_end - self.window_start).days < 3 * 365:
            raise ValueError("the data window must span at least 3 years")
        unknown = set(self.cancer_weights) - set(CANCER_KEYS)
        if unknown:
            raise ValueError(f"cancer_weights has unknown cancers: {sorted(unknown)}")
        if any(w < 0 for w in self.cancer_weights.values()):
            raise ValueError("cancer_weights must be non-negative")
        if self.short_history_rate + self.prevalent_rate + self.late_confirmation_rate + self.prior_code_rate > 0.5:
            raise ValueError("trap rates among cases must add up to at most 0.5")
        return self

    @property
    def n_shards(self) -> int:
        return -(-self.n_subjects // self.shard_size)
