"""Per-subject facts every cohort needs — split, sex, birth, visits — computed shard by shard, then joined to the splits.

Codes are canonical (`trajonco.cohorts.source.scan_events` respells them through the dataset's coding profile), so
``Gender/F`` (OMOP), ``GENDER//F`` (MIMIC-IV) and ``Visit/OP`` / ``HOSPITAL_ADMISSION//…`` all arrive as the
``GENDER//`` and ``ENCOUNTER//`` leads read here. A *visit* is a distinct date with an ``ENCOUNTER//`` row, timed at
its earliest encounter row (a ``visit_id`` column is not needed: one date, one visit, however many stays it
holds). A subject without any encounter row falls back to the distinct dates of its clinical rows, exactly like
`PatientRecord.visit_dates`, so the cohort and the per-patient pipeline count visits the same way. A subject's observed period runs from its first
to its last visit (never from ``MEDS_BIRTH``). Of the visits themselves only those a control's index date may be
drawn from are kept (``control_visits``), so the whole population is a few columns per subject.
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
    """Subject-level facts, one row per subject in the data or the splits, sorted by subject_id.

    ``subjects``: subject_id, split (null if the subject is missing from the splits file), sex, birth_time,
    n_visits, first_visit_time, last_visit_time, ready_time (time of the ``min_visits``-th visit: an input window
    ending at prediction time p holds at least ``min_visits`` visits exactly when ready_time < p) and
    control_visits: a control candidate's visits that may serve as its index date (sorted; see `subject_facts`).
    """

    subjects: pl.DataFrame
    subjects_in_data: int
    subjects_without_split: int


FACT_COLUMNS = ("sex", "sex_values", "birth_time", "birth_values", "n_visits", "first_visit_time", "last_visit_time",
                "ready_time", "control_visits")
"""What `subject_facts` gives per subject, after subject_id (``*_values``: the disagreeing values, else null)."""


def subject_facts(events: pl.DataFrame, *, min_visits: int, gap_days: int) -> pl.DataFrame:
    """Demographics and visits of every subject of ``events`` (subject_id, time, canonical code), which must hold
    all rows of its subjects (a shard, or the rows of some subjects gathered from every shard).

    One row per subject, columns subject_id then `FACT_COLUMNS`. ``control_visits`` lists the visits whose
    prediction time (visit - ``gap_days``) still has ``ready_time`` strictly before it — the dates a control's index
    may be drawn from (`trajonco.cohorts.matching.draw_control_index`); `assemble_population` checks the
    ``*_values`` columns (several sexes or birth times of one subject are an error).
    """
    code = pl.col(schema.CODE)
    facts = events.filter(
        code.str.starts_with(GENDER_LEAD) | code.str.starts_with(ENCOUNTER_LEAD) | (code == schema.BIRTH_CODE)
    )
    ids = events.select(SID).unique()
    sex = _one_per_subject(
        facts.filter(code.str.starts_with(GENDER_LEAD)).select(SID, sex=code.str.slice(len(GENDER_LEAD))), "sex"
    )
    birth = _one_per_subject(
        facts.filter((code == schema.BIRTH_CODE) & pl.col(schema.TIME).is_not_null()).select(
            SID, birth_time=pl.col(schema.TIME)
        ),
        "birth_time",
    )
    visits = _first_row_per_day(facts.filter(code.str.starts_with(ENCOUNTER_LEAD) & pl.col(schema.TIME).is_not_null()))
    without_encounters = ids.join(visits, on=SID, how="anti")
    if without_encounters.height:  # only the subjects that need the fallback: the dates of their clinical rows
        clinical = events.filter(
            pl.col(SID).is_in(without_encounters[SID].implode())
            & pl.col(schema.TIME).is_not_null()
            & ~code.is_in([schema.BIRTH_CODE, schema.DEATH_CODE])
        )
        visits = pl.concat([visits, _first_row_per_day(clinical)]).sort(SID, "visit_time")
    per_subject = visits.group_by(SID, maintain_order=True).agg(
        n_visits=pl.len(),
        first_visit_time=pl.col("visit_time").first(),
        last_visit_time=pl.col("visit_time").last(),
        ready_time=pl.col("visit_time").get(min_visits - 1, null_on_oob=True),
        control_visits=pl.col("visit_time").filter(
            pl.col("visit_time").get(min_visits - 1, null_on_oob=True)
            < pl.col("visit_time") - pl.duration(days=gap_days)
        ),
    )
    return (
        ids.join(sex, on=SID, how="left")
        .join(birth, on=SID, how="left")
        .join(per_subject, on=SID, how="left")
        .with_columns(pl.col("n_visits").fill_null(0).cast(pl.Int64))
        .select(SID, *FACT_COLUMNS)
        .sort(SID)
    )


def assemble_population(facts: pl.DataFrame, splits: pl.DataFrame, *, source: str) -> Population:
    """The `Population` of every subject in ``facts`` (`subject_facts` of every shard, one row per subject) or in
    ``splits``; ``source`` names the dataset in errors."""
    _check_one_value(facts, "sex", "GENDER//<sex> rows disagree", source)
    _check_one_value(facts, "birth_time", "several MEDS_BIRTH times", source)
    facts = facts.drop("sex_values", "birth_values")
    everyone = pl.concat([facts.select(SID), splits.select(SID)]).unique()
    subjects = (
        everyone.join(splits, on=SID, how="left")
        .join(facts, on=SID, how="left")
        .with_columns(pl.col("n_visits").fill_null(0).cast(pl.Int64))
        .sort(SID)
    )
    return Population(
        subjects=subjects,
        subjects_in_data=facts.height,
        subjects_without_split=int(subjects[SPLIT].null_count()),
    )


def load_population(
    events: pl.LazyFrame, splits: pl.DataFrame, *, min_visits: int, source: str, gap_days: int = 0
) -> Population:
    """`assemble_population` of the whole of ``events`` at once (small data; the cohort builder goes shard by
    shard, `trajonco.cohorts.shards`)."""
    try:
        rows = events.collect()
    except pl.exceptions.PolarsError as exc:
        raise CohortDataError(f"{source}: cannot read the MEDS data ({exc})") from None
    return assemble_population(subject_facts(rows, min_visits=min_visits, gap_days=gap_days), splits, source=source)


def _first_row_per_day(rows: pl.DataFrame) -> pl.DataFrame:
    """subject_id and visit_time (earliest time) for each distinct (subject, date) of ``rows``.

    Sorting and comparing with the previous row beats a hash group-by several times over on MEDS data, which
    arrives sorted by subject and time already.
    """
    ordered = rows.select(SID, visit_time=pl.col(schema.TIME)).sort(SID, "visit_time")
    date = pl.col("visit_time").dt.date()
    new_day = (pl.col(SID) != pl.col(SID).shift(1)) | (date != date.shift(1))
    return ordered.filter(new_day.fill_null(True))


def _one_per_subject(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """subject_id, ``column`` (the subject's value) and ``<column>_values`` (its distinct values, sorted, when they
    disagree; else null) from rows of subject_id and ``column``."""
    values = f"{column.removesuffix('_time')}_values"
    found = frame.unique().group_by(SID).agg(pl.col(column).sort().alias(values))
    return found.select(
        SID,
        pl.col(values).list.first().alias(column),
        pl.when(pl.col(values).list.len() > 1).then(pl.col(values)).alias(values),
    )


def _check_one_value(facts: pl.DataFrame, column: str, problem: str, source: str) -> None:
    values = f"{column.removesuffix('_time')}_values"
    conflicts = facts.filter(pl.col(values).is_not_null())
    if conflicts.height:
        first = conflicts.sort(SID).row(0, named=True)
        raise CohortDataError(
            f"{source}: subject {first[SID]}: field {column}: {problem} ({', '.join(map(str, first[values]))});"
            f" {conflicts.height} subject(s) affected"
        )
