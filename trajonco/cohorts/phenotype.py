"""The incident-cancer phenotype: who is a case, with which cancer and index date, and who is prevalent.

Rules (days are calendar-day differences between dates; codes of one cancer on the same day count once):

- a *pair* (``min_codes`` = 2; more generally ``min_codes`` consecutive code dates) is two consecutive distinct code
  dates of one cancer at most ``max_days_between_codes`` days apart; only the subject's **first** pair counts
  (with several cancers: the earliest first pair, ties going to the cancer listed first in the definition);
- *case*: that first pair follows at least ``washout_days`` of cancer-free observed history — its first code comes
  ``washout_days`` or more after the subject's first visit and after the previous code of any target cancer — and
  the subject's earliest target code does not fall inside the washout after the first visit. The index is the
  first code of the pair;
- *prevalent*: a pair exists but one of those two conditions fails (a later pair is never tried: codes after a
  gap are follow-up of the same cancer, not a new incident one);
- *no_qualifying_pair*: target codes but no pair at all (single rule-out codes, codes too far apart).

No subject with a target code, ever, may serve as a control. With several cancers (any-cancer) the washout must be
free of all of them. This agrees with `vista.shared.synth.ground_truth.phenotype_index` except that an early single code
inside the washout after the first visit also makes the subject prevalent here.
"""

from __future__ import annotations

from enum import StrEnum

import polars as pl

from trajonco.cohorts.codesets import CodeHierarchy, CodeSets
from trajonco.cohorts.definition import CohortDefinition
from vista.shared.meds import schema

SID = schema.SUBJECT_ID


class PhenotypeStatus(StrEnum):
    """What the phenotype says about a subject with at least one target code."""

    CASE = "case"
    PREVALENT = "prevalent"
    NO_QUALIFYING_PAIR = "no_qualifying_pair"


def cancer_of_code(definition: CohortDefinition, hierarchy: CodeHierarchy | None = None) -> pl.Expr:
    """Expression giving the target cancer of a canonical ``code`` (null when the code belongs to none).

    >>> from trajonco.cohorts.definition import load_definition
    >>> codes = pl.DataFrame({"code": ["ICD10CM//C34.11", "ICD9CM//162.3", "ICD9CM//162.0", "ICD10CM//C3490",
    ...                                "LOINC//C34", "SNOMED//254637007"]})
    >>> codes.select(cancer_of_code(load_definition("lung")))["cancer"].to_list()
    ['lung', 'lung', None, 'lung', None, 'lung']
    """
    return CodeSets.build(definition, hierarchy).cancer_expr()


def target_code_rows(
    events: pl.LazyFrame, definition: CohortDefinition, code_sets: CodeSets | None = None
) -> pl.LazyFrame:
    """``subject_id``, ``time``, ``code``, ``cancer`` of every row whose canonical code belongs to a target cancer."""
    sets = code_sets if code_sets is not None else CodeSets.build(definition)
    return (
        events.select(SID, schema.TIME, schema.CODE, sets.cancer_expr())
        .filter(pl.col("cancer").is_not_null())
    )


def classify_subjects(
    code_rows: pl.DataFrame, first_visits: pl.DataFrame, definition: CohortDefinition
) -> pl.DataFrame:
    """One row per subject with a target code: subject_id, status, cancer and index_time (both null unless a case).

    ``code_rows`` comes from `target_code_rows`; ``first_visits`` has subject_id and first_visit_time.
    """
    order = {c.name: i for i, c in enumerate(definition.cancers)}
    dated = code_rows.filter(pl.col(schema.TIME).is_not_null()).with_columns(date=pl.col(schema.TIME).dt.date())
    per_cancer = (
        dated.group_by(SID, "cancer", "date")
        .agg(first_time=pl.col(schema.TIME).min())
        .sort(SID, "cancer", "date")
        .with_columns(closing_date=pl.col("date").shift(-(definition.min_codes - 1)).over(SID, "cancer"))
    )
    any_cancer_days = (
        dated.select(SID, "date")
        .unique()
        .sort(SID, "date")
        .with_columns(previous_code_date=pl.col("date").shift(1).over(SID))
    )
    start = first_visits.select(SID, first_visit_date=pl.col("first_visit_time").dt.date())
    days_between = lambda late, early: (pl.col(late) - pl.col(early)).dt.total_days()  # noqa: E731
    first_pair = (
        per_cancer.filter(
            pl.col("closing_date").is_not_null()
            & (days_between("closing_date", "date") <= definition.max_days_between_codes)
        )
        .with_columns(cancer_order=pl.col("cancer").replace_strict(order, return_dtype=pl.Int32))
        .sort(SID, "date", "cancer_order")
        .group_by(SID, maintain_order=True)
        .first()
        .join(any_cancer_days, on=[SID, "date"], how="left")
    )
    earliest = dated.group_by(SID).agg(earliest_code_date=pl.col("date").min())
    judged = (
        first_pair.join(earliest, on=SID, how="left")
        .join(start, on=SID, how="left")
        .with_columns(
            clean=pl.col("first_visit_date").is_not_null()
            & (days_between("earliest_code_date", "first_visit_date") >= definition.washout_days)
            & (
                pl.col("previous_code_date").is_null()
                | (days_between("date", "previous_code_date") >= definition.washout_days)
            )
        )
        .select(SID, "cancer", "clean", index_time=pl.col("first_time"))
    )
    everyone = code_rows.select(SID).unique()
    is_case = pl.col("clean").fill_null(False)
    return (
        everyone.join(judged, on=SID, how="left")
        .with_columns(
            status=pl.when(pl.col("clean").is_null())
            .then(pl.lit(PhenotypeStatus.NO_QUALIFYING_PAIR.value))
            .when(is_case)
            .then(pl.lit(PhenotypeStatus.CASE.value))
            .otherwise(pl.lit(PhenotypeStatus.PREVALENT.value)),
            cancer=pl.when(is_case).then("cancer"),
            index_time=pl.when(is_case).then("index_time"),
        )
        .select(SID, "status", "cancer", "index_time")
        .sort(SID)
    )
