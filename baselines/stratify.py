"""Results within subgroups of a cohort: age groups, sex, visit-frequency quartiles, screening vs non-screening cancers.

`cohort_strata` derives each label row's strata from the cohort's label table (``age_at_index``, ``sex``,
``cancer``, ``matched_to``, as `trajonco.cohorts` writes them) and, for visit frequency, from the MEDS
events: distinct visit days in the 5 years before the prediction time (as the paper's utilization check), split
into quartiles over the cohort. A control belongs to the cancer (and screening group) of the case it was matched
to. `stratified_results` then gives, per stratum, AUROC and AUPRC with bootstrap CIs — or a note saying why not
(fewer than ``min_cases`` cases or controls: "too few"), never a silent gap.

>>> from datetime import datetime
>>> cohort = pl.DataFrame({"subject_id": [1, 2], "prediction_time": [datetime(2020, 1, 1)] * 2,
...                        "cancer": ["lung", None], "matched_to": [None, 1], "age_at_index": [67.9, 61.0],
...                        "sex": ["F", "F"]})
>>> cohort_strata(cohort).rows()
[(1, datetime.datetime(2020, 1, 1, 0, 0), '60–69', 'F', 'lung', 'screening'), (2, datetime.datetime(2020, 1, 1, 0, 0), '60–69', 'F', 'lung', 'screening')]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
from pydantic import BaseModel, Field

from baselines.errors import LabelDataError
from baselines.features import CODE, DAYS_PER_YEAR, ENCOUNTER_PREFIX, TIME, check_events
from baselines.labels import PREDICTION_TIME, SUBJECT_ID, check_labels
from baselines.metrics import MIN_CASES, Interval, bootstrap_interval
from baselines.predictions import ModelScores
from vista.shared.meds import schema

SCREENING_CANCERS = ("breast", "cervical", "colorectal", "lung", "prostate")
"""Cancers with an established routine screening recommendation (the paper's Appendix B.2 grouping)."""

AGE_GROUP, SEX, VISIT_QUARTILE, CANCER, SCREENING = "age_group", "sex", "visit_frequency", "cancer", "screening"
STRATIFIERS = (AGE_GROUP, SEX, VISIT_QUARTILE, SCREENING, CANCER)
VISIT_YEARS = 5
MIN_STRATUM_CASES = MIN_CASES
"""Strata with fewer cases or controls than this get no AUROC/CI, only a "too few" note."""


class StratumResult(BaseModel):
    """One model's discrimination inside one stratum."""

    model: str
    stratifier: str = Field(description="what the cohort was split by: age_group, sex, visit_frequency, screening, cancer")
    stratum: str = Field(description="the subgroup, e.g. '60–69', 'F', 'Q1 (0–3 visits)', 'screening', 'lung'")
    n: int
    n_positive: int
    n_negative: int
    auroc: Interval | None = Field(description="None when the stratum lacks cases or controls")
    auprc: Interval | None = Field(description="None when the stratum lacks cases or controls")
    note: str | None = Field(default=None, description="why the metrics are missing, or another caveat")


def _stratum_order(stratum: str) -> tuple[int, str]:
    """Sort key putting numeric-led strata ('0–9' before '10–19' before '100–109') before the others."""
    digits = stratum[: len(stratum) - len(stratum.lstrip("0123456789"))]
    return (int(digits), stratum) if digits else (1 << 30, stratum)


def visit_counts(events: pl.LazyFrame, labels: pl.DataFrame, *, years: int | None = VISIT_YEARS) -> pl.DataFrame:
    """``subject_id``, ``prediction_time``, ``visits``: distinct encounter days in [prediction − years, prediction)
    (``years=None``: the whole record before the prediction time).

    Subjects without encounter codes count distinct days with any clinical event instead (as
    `PatientRecord.visit_dates`).
    """
    labels = check_labels(labels, "labels", require_outcome=False)
    events = check_events(events, "MEDS events")
    targets = labels.lazy().select(SUBJECT_ID, PREDICTION_TIME).unique()
    inside = pl.col(TIME) < pl.col(PREDICTION_TIME)
    if years is not None:
        inside &= pl.col(TIME) >= pl.col(PREDICTION_TIME) - pl.duration(days=round(years * DAYS_PER_YEAR))
    rows = (events.filter(pl.col(TIME).is_not_null() & (pl.col(CODE) != schema.BIRTH_CODE))
            .join(targets, on=SUBJECT_ID, how="inner").filter(inside))
    day = pl.col(TIME).dt.date()
    per = rows.group_by(SUBJECT_ID, PREDICTION_TIME).agg(
        visit_days=day.filter(pl.col(CODE).cat.starts_with(ENCOUNTER_PREFIX)).n_unique(),
        event_days=day.n_unique(),
    ).select(SUBJECT_ID, PREDICTION_TIME,
             visits=pl.when(pl.col("visit_days") > 0).then("visit_days").otherwise("event_days"))
    return (targets.join(per, on=[SUBJECT_ID, PREDICTION_TIME], how="left")
            .with_columns(pl.col("visits").fill_null(0).cast(pl.Int64)).collect())


def quartile_labels(values: np.ndarray, unit: str = "visits") -> np.ndarray:
    """Quartile of each value by rank (ties share a quartile), labelled with the range it covers: 'Q2 (4–7 visits)'."""
    n = values.size
    if n == 0:
        return np.array([], dtype=object)
    ranks = pl.Series(values).rank("min").to_numpy()
    quarter = ((ranks - 1) * 4 // n).astype(int) + 1
    out = np.empty(n, dtype=object)
    for q in np.unique(quarter):
        inside = values[quarter == q]
        low, high = inside.min(), inside.max()
        span = f"{low:g}" if low == high else f"{low:g}–{high:g}"
        out[quarter == q] = f"Q{q} ({span} {unit})"
    return out


def cohort_strata(cohort: pl.DataFrame, events: pl.LazyFrame | None = None, *, source: str = "cohort labels",
                  age_width: int = 10) -> pl.DataFrame:
    """One row per label row: ``subject_id``, ``prediction_time`` and a String column per available stratifier.

    ``age_group`` needs ``age_at_index``; ``sex`` needs ``sex``; ``cancer``/``screening`` need ``cancer`` (controls
    take it from ``matched_to``); ``visit_frequency`` needs ``events``. Missing inputs leave the stratifier out.
    """
    cohort = check_labels(cohort, source, require_outcome=False)
    out = cohort.select(SUBJECT_ID, PREDICTION_TIME)
    if "age_at_index" in cohort.columns:
        nulls = cohort.filter(pl.col("age_at_index").is_null())
        if nulls.height:
            raise LabelDataError(source, f"{nulls.height} null ages", field="age_at_index",
                                 subject_id=int(nulls[SUBJECT_ID][0]))
        low = (pl.col("age_at_index").cast(pl.Float64) // age_width * age_width).cast(pl.Int64)
        out = out.with_columns(cohort.select(pl.format("{}–{}", low, low + age_width - 1).alias(AGE_GROUP)))
    if "sex" in cohort.columns:
        out = out.with_columns(cohort["sex"].cast(pl.String).alias(SEX))
    if "cancer" in cohort.columns:
        cancer = pl.col("cancer").cast(pl.String)
        if "matched_to" in cohort.columns:  # a control takes the cancer of the case it was matched to
            cases = (cohort.filter(pl.col("cancer").is_not_null())
                     .select(pl.col(SUBJECT_ID).alias("matched_to"), cancer.alias("case_cancer"))
                     .unique("matched_to", keep="first", maintain_order=True))
            with_case = cohort.join(cases, on="matched_to", how="left", maintain_order="left")
            cancer = pl.coalesce(cancer, pl.col("case_cancer"))
        else:
            with_case = cohort
        out = out.with_columns(with_case.select(cancer.alias(CANCER))).with_columns(
            pl.when(pl.col(CANCER).is_null()).then(None)
            .when(pl.col(CANCER).is_in(SCREENING_CANCERS)).then(pl.lit("screening"))
            .otherwise(pl.lit("non-screening")).alias(SCREENING))
    if events is not None:
        visits = visit_counts(events, cohort)
        out = out.join(visits, on=[SUBJECT_ID, PREDICTION_TIME], how="left", maintain_order="left")
        out = out.with_columns(pl.Series(VISIT_QUARTILE, quartile_labels(out["visits"].to_numpy()), dtype=pl.String))
        out = out.drop("visits")
    return out


def _too_few(n_pos: int, n_neg: int, min_cases: int) -> str:
    """Why a stratum has no AUROC.

    >>> _too_few(0, 5, 10), _too_few(1, 5, 2), _too_few(3, 40, 10)
    ('only controls in this stratum', '1 case only (a CI needs 2) in this stratum', 'too few: 3 cases (< 10)')
    """
    if n_pos == 0 or n_neg == 0:
        return f"only {'controls' if n_pos == 0 else 'cases'} in this stratum"
    if min(n_pos, n_neg) < 2:
        return f"{min(n_pos, n_neg)} {'case' if n_pos < 2 else 'control'} only (a CI needs 2) in this stratum"
    smaller, role = (n_pos, "cases") if n_pos <= n_neg else (n_neg, "controls")
    return f"too few: {smaller} {role} (< {min_cases})"


def stratified_results(scores: ModelScores, strata: pl.DataFrame, stratifiers: Sequence[str] = STRATIFIERS, *,
                       n_resamples: int = 1000, seed: int = 0,
                       min_cases: int = MIN_STRATUM_CASES) -> list[StratumResult]:
    """AUROC/AUPRC with CIs of ``scores`` within each stratum of each stratifier present in ``strata``.

    A stratum with fewer than ``min_cases`` cases or controls (at least 2: a CI needs them) gets no metrics and a
    note saying "too few".
    """
    min_cases = max(2, min_cases)
    keyed = pl.DataFrame({SUBJECT_ID: scores.subject_ids, PREDICTION_TIME: scores.prediction_times},
                         schema={SUBJECT_ID: pl.Int64, PREDICTION_TIME: pl.Datetime("us")})
    aligned = keyed.join(strata, on=[SUBJECT_ID, PREDICTION_TIME], how="left", maintain_order="left")
    results: list[StratumResult] = []
    for stratifier in stratifiers:
        if stratifier not in aligned.columns:
            continue
        column = aligned[stratifier].to_numpy()
        unassigned = int(aligned[stratifier].null_count())
        for stratum in sorted({v for v in column.tolist() if v is not None}, key=_stratum_order):
            mask = column == stratum
            part = scores.subset(mask)
            n_pos, n_neg = part.n_positive, part.n - part.n_positive
            note = f"{unassigned} rows had no {stratifier} and are in no stratum" if unassigned else None
            if min(n_pos, n_neg) < min_cases:
                results.append(StratumResult(model=scores.model, stratifier=stratifier, stratum=stratum, n=part.n,
                                             n_positive=n_pos, n_negative=n_neg, auroc=None, auprc=None,
                                             note=_too_few(n_pos, n_neg, min_cases)))
                continue
            results.append(StratumResult(
                model=scores.model, stratifier=stratifier, stratum=stratum, n=part.n, n_positive=n_pos, n_negative=n_neg,
                auroc=bootstrap_interval(part.labels, part.scores, "auroc", n_resamples=n_resamples, seed=seed),
                auprc=bootstrap_interval(part.labels, part.scores, "auprc", n_resamples=n_resamples, seed=seed),
                note=note))
    return results
