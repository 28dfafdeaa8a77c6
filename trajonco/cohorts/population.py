"""Per-subject facts every cohort needs — split, sex, birth, visits — computed once over the whole dataset.

Codes are canonical (`trajonco.cohorts.source.scan_events` respells them through the dataset's coding profile), so
``Gender/F`` (OMOP), ``GENDER//F`` (MIMIC-IV) and ``Visit/OP`` / ``HOSPITAL_ADMISSION//…`` all arrive as the
``GENDER//`` and ``ENCOUNTER//`` leads read here. A *visit* is a distinct date with an ``ENCOUNTER//`` row, timed at
its earliest encounter row (a ``visit_id`` column is not needed: one date, one visit, however many stays it
holds). A subject without any encounter row falls back to the distinct dates of its clinical rows, exactly like
`PatientRecord.visit_dates`, so the cohort and the per-patient pipeline count visits the same way. A subject's observed period runs from its first
to its last visit (never from ``MEDS_BIRTH``).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from trajonco.cohorts.errors import CohortDataError
from trajonco.cohorts.source import SPLIT
from vista.shared.meds import schema

SID = schema.SUBJECT_ID
GENDER_LEAD = schema.GENDER_PREFIX + schema.SEP
ENCOUNTER_LEAD = schema.ENCOUNTER_PREFIX + schema.SEP


@dataclass(frozen=True)
class Population:
    """Subject-level facts (one row per subject) and visits (one row per subject and visit date).

    ``subjects``: subject_id, split (null if the subject is missing from the splits file), sex, birth_time,
    n_visits, first_visit_time, last_visit_time, ready_time (time of the ``min_visits``-th visit: an input window
    ending at prediction time p holds at least ``min_visits`` visits exactly when ready_time < p).
    ``visits``: subject_id, visit_time, sorted by subject and time.
    """

    subjects: pl.DataFrame
    visits: pl.DataFrame
    subjects_in_data: int
    subjects_without_split: int


def load_population(events: pl.LazyFrame, splits: pl.DataFrame, *, min_visits: int, source: str) -> Population:
    """Collect demographics and visits for every subject in the data or the splits (``source`` names the dataset)."""
    code = pl.col(schema.CODE)
    try:
        facts = events.filter(
            code.str.starts_with(GENDER_LEAD) | code.str.starts_with(ENCOUNTER_LEAD) | (code == schema.BIRTH_CODE)
        ).collect()
        ids = events.select(SID).unique().collect()
    except pl.exceptions.PolarsError as exc:
        raise CohortDataError(f"{source}: cannot read the MEDS data ({exc})") from None
    sex = facts.filter(code.str.starts_with(GENDER_LEAD)).select(SID, sex=code.str.slice(len(GENDER_LEAD))).unique()
    birth = (
        facts.filter((code == schema.BIRTH_CODE) & pl.col(schema.TIME).is_not_null())
        .select(SID, birth_time=pl.col(schema.TIME))
        .unique()
    )
    _one_value_per_subject(sex, "sex", "GENDER//<sex> rows disagree", source)
    _one_value_per_subject(birth, "birth_time", "several MEDS_BIRTH times", source)

    visits = _first_row_per_day(facts.filter(code.str.starts_with(ENCOUNTER_LEAD) & pl.col(schema.TIME).is_not_null()))
    without_encounters = ids.join(visits, on=SID, how="anti")
    if without_encounters.height:  # second pass, only over the subjects that need the fallback
        clinical = events.filter(
            pl.col(SID).is_in(without_encounters[SID].implode())
            & pl.col(schema.TIME).is_not_null()
            & ~code.is_in([schema.BIRTH_CODE, schema.DEATH_CODE])
        ).collect()
        visits = pl.concat([visits, _first_row_per_day(clinical)])
    visits = visits.sort(SID, "visit_time")
    per_subject = visits.group_by(SID).agg(
        n_visits=pl.len(),
        first_visit_time=pl.col("visit_time").first(),
        last_visit_time=pl.col("visit_time").last(),
        ready_time=pl.col("visit_time").get(min_visits - 1, null_on_oob=True),
    )
    everyone = pl.concat([ids, splits.select(SID)]).unique()
    subjects = (
        everyone.join(splits, on=SID, how="left")
        .join(sex, on=SID, how="left")
        .join(birth, on=SID, how="left")
        .join(per_subject, on=SID, how="left")
        .with_columns(pl.col("n_visits").fill_null(0).cast(pl.Int64))
        .sort(SID)
    )
    return Population(
        subjects=subjects,
        visits=visits,
        subjects_in_data=ids.height,
        subjects_without_split=int(subjects[SPLIT].null_count()),
    )


def _first_row_per_day(rows: pl.DataFrame) -> pl.DataFrame:
    """subject_id and visit_time (earliest time) for each distinct (subject, date) of ``rows``.

    Sorting and comparing with the previous row beats a hash group-by several times over on MEDS data, which
    arrives sorted by subject and time already.
    """
    ordered = rows.select(SID, visit_time=pl.col(schema.TIME)).sort(SID, "visit_time")
    date = pl.col("visit_time").dt.date()
    new_day = (pl.col(SID) != pl.col(SID).shift(1)) | (date != date.shift(1))
    return ordered.filter(new_day.fill_null(True))


def _one_value_per_subject(frame: pl.DataFrame, column: str, problem: str, source: str) -> None:
    if frame[SID].n_unique() == frame.height:
        return
    counts = frame.group_by(SID).agg(n=pl.len(), values=pl.col(column).sort()).filter(pl.col("n") > 1)
    if counts.height:
        first = counts.sort(SID).row(0, named=True)
        raise CohortDataError(
            f"{source}: subject {first[SID]}: field {column}: {problem} ({', '.join(map(str, first['values']))});"
            f" {counts.height} subject(s) affected"
        )
