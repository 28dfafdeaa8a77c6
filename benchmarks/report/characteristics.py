"""Cohort characteristics like the paper's Table 1: age, sex, race, ethnicity, EHR span, XML tokens, cases vs controls.

Age and sex come from the cohort's label table (``age_at_index``, ``sex``); race and ethnicity from the subjects'
static ``RACE//`` and ``ETHNICITY//`` rows; the EHR span is the time from the first to the last clinical event
(birth excluded) before the prediction time — what the patient's timeline covers. XML token counts come from
rendered timelines of a sample of each role (`benchmarks.report.timelines.token_counts`).

>>> from datetime import datetime
>>> events = pl.LazyFrame({"subject_id": [1, 1, 1, 1, 2, 2], "time": [None, None, datetime(2018, 1, 1),
...     datetime(2020, 1, 1), None, datetime(2019, 1, 1)], "code": ["RACE//White", "ETHNICITY//Hispanic or Latino",
...     "A", "B", "RACE//Asian", "A"]})
>>> labels = pl.DataFrame({"subject_id": [1, 2], "prediction_time": [datetime(2021, 1, 1)] * 2})
>>> demographics(events, labels).select("race", "ethnicity", pl.col("span_years").round(3)).rows()
[('White', 'Hispanic or Latino', 1.999), ('Asian', 'Unknown', 0.0)]
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl

from benchmarks.report.results import CohortCharacteristics, GroupCharacteristics, Quantiles
from vista.shared.meds import schema

SID, PT = "subject_id", "prediction_time"
UNKNOWN = "Unknown"
DAYS_PER_YEAR = 365.25


def _static_value(prefix: str, name: str) -> pl.Expr:
    code = pl.col(schema.CODE).cast(pl.String)
    head = prefix + schema.SEP
    return code.filter(code.str.starts_with(head)).str.strip_prefix(head).sort().first().alias(name)


def demographics(events: pl.LazyFrame, labels: pl.DataFrame) -> pl.DataFrame:
    """``subject_id``, ``prediction_time``, ``race``, ``ethnicity``, ``span_years`` of every label row (label order)."""
    targets = labels.lazy().select(pl.col(SID).cast(pl.Int64), pl.col(PT).dt.cast_time_unit("us"))
    time = pl.col(schema.TIME)
    rows = (events.select(pl.col(SID).cast(pl.Int64), time, pl.col(schema.CODE).cast(pl.String))
            .join(targets, on=SID, how="inner")
            .filter(time.is_null() | (time < pl.col(PT))))
    static = rows.filter(time.is_null()).group_by(SID, PT).agg(
        _static_value(schema.RACE_PREFIX, "race"), _static_value(schema.ETHNICITY_PREFIX, "ethnicity"))
    clinical = rows.filter(time.is_not_null() & (pl.col(schema.CODE) != schema.BIRTH_CODE)).group_by(SID, PT).agg(
        span_years=(time.max() - time.min()).dt.total_seconds() / (86_400 * DAYS_PER_YEAR))
    return (targets.join(static, on=[SID, PT], how="left", maintain_order="left")
            .join(clinical, on=[SID, PT], how="left", maintain_order="left")
            .with_columns(pl.col("race").fill_null(UNKNOWN), pl.col("ethnicity").fill_null(UNKNOWN),
                          pl.col("span_years").fill_null(0.0))
            .collect())


def _counts(values: list[str | None]) -> dict[str, int]:
    counts = Counter(UNKNOWN if v is None else str(v) for v in values)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def group_characteristics(rows: pl.DataFrame, tokens: np.ndarray) -> GroupCharacteristics:
    """One Table 1 column from the label rows of one role joined with their demographics."""
    return GroupCharacteristics(
        n=rows.height,
        age_years=Quantiles.of(rows["age_at_index"].to_numpy()) if "age_at_index" in rows.columns else Quantiles(n=0),
        sex=_counts(rows["sex"].to_list()) if "sex" in rows.columns else {},
        race=_counts(rows["race"].to_list()),
        ethnicity=_counts(rows["ethnicity"].to_list()),
        ehr_span_years=Quantiles.of(rows["span_years"].to_numpy()),
        xml_tokens=Quantiles.of(tokens),
    )


def cohort_characteristics(cohort: str, events: pl.LazyFrame, labels: pl.DataFrame, tokens: pl.DataFrame | None,
                           token_sample_per_role: int | None) -> CohortCharacteristics:
    """Table 1 of one test cohort; ``tokens`` (subject_id, prediction_time, xml_tokens) covers all of it
    (``token_sample_per_role`` None) or a sample of at most that many per role."""
    rows = labels.join(demographics(events, labels), on=[SID, PT], how="left", maintain_order="left")
    if tokens is not None:
        rows = rows.join(tokens.select(SID, PT, "xml_tokens"), on=[SID, PT], how="left", maintain_order="left")
    else:
        rows = rows.with_columns(xml_tokens=pl.lit(None, pl.Int64))
    groups = {}
    for role, outcome in (("cases", True), ("controls", False)):
        part = rows.filter(pl.col("boolean_value") == outcome)
        groups[role] = group_characteristics(part, part["xml_tokens"].drop_nulls().to_numpy())
    return CohortCharacteristics(cohort=cohort, cases=groups["cases"], controls=groups["controls"],
                                 token_sample_per_role=token_sample_per_role)
