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
    ending at prediction time p holds at least ``min_visits`` visits exactly when ready_time < p).
    ``control_visits``: subject_id and control_visits, the visits a control candidate's index date may be drawn
    from (sorted; null or empty for a subject that is no candidate or has none; by subject_id; see
    `subject_facts`) — kept apart, as the one column that is a list.
    """

    subjects: pl.DataFrame
    control_visits: pl.DataFrame
    subjects_in_data: int
    subjects_without_split: int


FACT_COLUMNS = ("sex", "sex_values", "birth_time", "birth_values", "n_visits", "first_visit_time", "last_visit_time",
                "ready_time", "control_visits")
"""What `subject_facts` gives per subject, after subject_id (``*_values``: the disagreeing values, else null)."""


@dataclass(frozen=True)
class CodeKinds:
    """The source codes (as the data spells them) that population facts read, by what they mean canonically:
    each ``GENDER//`` code with its sex, the ``ENCOUNTER//`` codes, ``MEDS_BIRTH`` and ``MEDS_DEATH``. Built from a
    dataset's (or shard's) distinct codes, so rows are selected by code membership and never respelled one by one.

    >>> kinds = CodeKinds.of(["Gender/F", "Visit/OP", "MEDS_BIRTH", "LOINC//1"], {"Gender/F": "GENDER//F",
    ...                       "Visit/OP": "ENCOUNTER//OP"})
    >>> kinds.sex, kinds.encounter, kinds.birth, kinds.death
    ({'Gender/F': 'F'}, ('Visit/OP',), ('MEDS_BIRTH',), ())
    """

    sex: dict[str, str]
    encounter: tuple[str, ...]
    birth: tuple[str, ...]
    death: tuple[str, ...]

    @classmethod
    def of(cls, codes: list[str], respelled: dict[str, str]) -> CodeKinds:
        """From the distinct source ``codes`` and their canonical spellings where they differ (``respelled``)."""
        canonical = {code: respelled.get(code, code) for code in codes}
        return cls(
            sex={c: k[len(GENDER_LEAD):] for c, k in canonical.items() if k.startswith(GENDER_LEAD)},
            encounter=tuple(c for c, k in canonical.items() if k.startswith(ENCOUNTER_LEAD)),
            birth=tuple(c for c, k in canonical.items() if k == schema.BIRTH_CODE),
            death=tuple(c for c, k in canonical.items() if k == schema.DEATH_CODE),
        )


def subject_facts(events: pl.DataFrame, kinds: CodeKinds, *, min_visits: int, gap_days: int) -> pl.DataFrame:
    """Demographics and visits of every subject of ``events`` (subject_id, time, code as the data spells it, read
    through ``kinds``), which must hold all rows of its subjects (a shard, or the rows of some subjects gathered
    from every shard).

    One row per subject, columns subject_id then `FACT_COLUMNS`. ``control_visits`` lists the visits whose
    prediction time (visit - ``gap_days``) still has ``ready_time`` strictly before it — the dates a control's index
    may be drawn from (`trajonco.cohorts.matching.draw_control_index`); `assemble_population` checks the
    ``*_values`` columns (several sexes or birth times of one subject are an error).
    """
    code, timed = pl.col(schema.CODE), pl.col(schema.TIME).is_not_null()
    facts = events.filter(code.is_in([*kinds.sex, *kinds.encounter, *kinds.birth])).with_columns(code.cast(pl.String))
    ids = events.select(pl.col(SID).unique(maintain_order=True))
    sex = _one_per_subject(
        facts.filter(code.is_in(list(kinds.sex))).select(SID, sex=code.replace_strict(kinds.sex)), "sex"
    )
    birth = _one_per_subject(
        facts.filter(code.is_in(list(kinds.birth)) & timed).select(SID, birth_time=pl.col(schema.TIME)), "birth_time"
    )
    visits = _first_row_per_day(facts.filter(code.is_in(list(kinds.encounter)) & timed))
    without_encounters = ids.join(visits, on=SID, how="anti")
    if without_encounters.height:  # only the subjects that need the fallback: the dates of their clinical rows
        clinical = events.filter(
            pl.col(SID).is_in(without_encounters[SID].implode()) & timed & ~code.is_in([*kinds.birth, *kinds.death])
        )
        visits = pl.concat([visits, _first_row_per_day(clinical)]).sort(SID, "visit_time")
    ready = pl.col("visit_time").get(min_visits - 1, null_on_oob=True)
    per_subject = visits.group_by(SID, maintain_order=True).agg(
        n_visits=pl.len(),
        first_visit_time=pl.col("visit_time").first(),
        last_visit_time=pl.col("visit_time").last(),
        ready_time=ready,
        control_visits=pl.col("visit_time").filter(ready < pl.col("visit_time") - pl.duration(days=gap_days)),
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
    control_visits = facts.select(SID, "control_visits")  # the same buffers: no copy of the lists
    facts = facts.drop("sex_values", "birth_values", "control_visits")
    subjects = splits.join(facts, on=SID, how="full", coalesce=True).with_columns(
        pl.col("n_visits").fill_null(0).cast(pl.Int64)
    )
    return Population(
        subjects=subjects if subjects[SID].is_sorted() else subjects.sort(SID),
        control_visits=control_visits if control_visits[SID].is_sorted() else control_visits.sort(SID),
        subjects_in_data=facts.height,
        subjects_without_split=int(subjects[SPLIT].null_count()),
    )


def load_population(
    events: pl.LazyFrame, splits: pl.DataFrame, *, min_visits: int, source: str, gap_days: int = 0
) -> Population:
    """`assemble_population` of the whole of ``events`` (canonical codes) at once (small data; the cohort builder
    goes shard by shard, `trajonco.cohorts.shards`)."""
    try:
        rows = events.collect()
    except pl.exceptions.PolarsError as exc:
        raise CohortDataError(f"{source}: cannot read the MEDS data ({exc})") from None
    kinds = CodeKinds.of(rows[schema.CODE].drop_nulls().unique().to_list(), {})
    return assemble_population(
        subject_facts(rows, kinds, min_visits=min_visits, gap_days=gap_days), splits, source=source
    )


def _first_row_per_day(rows: pl.DataFrame) -> pl.DataFrame:
    """subject_id and visit_time (earliest time) for each distinct (subject, date) of ``rows``.

    Sorting and comparing with the previous row beats a hash group-by several times over on MEDS data, which
    arrives sorted by subject and time already.
    """
    ordered = rows.select(SID, visit_time=pl.col(schema.TIME))
    if not _is_sorted(ordered):
        ordered = ordered.sort(SID, "visit_time")
    date = pl.col("visit_time").dt.date()
    new_day = (pl.col(SID) != pl.col(SID).shift(1)) | (date != date.shift(1))
    return ordered.filter(new_day.fill_null(True))


def _is_sorted(rows: pl.DataFrame) -> bool:
    """Whether ``rows`` (subject_id, visit_time) are sorted by subject, then time — as MEDS shards come."""
    sid, when = pl.col(SID), pl.col("visit_time")
    step_ok = (sid > sid.shift(1)) | ((sid == sid.shift(1)) & (when >= when.shift(1)))
    return bool(rows.select(step_ok.fill_null(True).all()).item())


def _one_per_subject(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """subject_id, ``column`` (the subject's value) and ``<column>_values`` (its distinct values, sorted, when they
    disagree; else null) from rows of subject_id and ``column``."""
    values = f"{column.removesuffix('_time')}_values"
    found = frame.unique()
    if found[SID].n_unique() == found.height:  # the usual case: one value each, nothing to list
        return found.with_columns(pl.lit(None, pl.List(found.schema[column])).alias(values))
    found = found.group_by(SID).agg(pl.col(column).sort().alias(values))
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
