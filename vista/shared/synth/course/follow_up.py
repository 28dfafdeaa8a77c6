"""After treatment: surveillance visits with periodic imaging, and the end of the record — hospice and death, or the
last day of follow-up."""

from __future__ import annotations

import math

from vista.shared.synth import notes
from vista.shared.synth.course.case import CaseCourse
from vista.shared.synth.course.draws import iso_date
from vista.shared.synth.course.truth import CaseTruth
from vista.shared.synth.population import DAYS_PER_YEAR
from vista.shared.synth.visits import AMB, K_ONC

FOLLOWED_BY_CODE = ("myeloma", "leukemia")
"""Cancers still coded as active at surveillance visits after two years (the others as a personal history)."""


def write_surveillance(course: CaseCourse, day: float) -> None:
    """Visits every 3–4 months for two years, then every 6–12, with imaging at every other visit for five years."""
    rng, profile, diagnosis_day = course.rng, course.profile, course.diagnosis_day
    use_history = course.cancer not in FOLLOWED_BY_CODE
    visit_no = 0
    while day < course.record_end:
        visit_no += 1
        visit_id, time = course.oncology_visit(day, panels=("cbc", "cmp") + profile.markers if rng.random() < 0.4 else profile.markers)
        if use_history and day - diagnosis_day > 2 * DAYS_PER_YEAR:
            course.row(visit_id, time, course.ids.dx[profile.history_dx], 12, tagged=False)
        else:
            course.cancer_code_row(visit_id, time, tagged=False)
        if rng.random() < 0.5:
            months = int((day - diagnosis_day) / 30.44)
            course.note(visit_id, time, "PROGRESS", notes.surveillance_note(rng, iso_date(day), profile.name, months))
        if visit_no % 2 == 0 and day - diagnosis_day < 5 * DAYS_PER_YEAR:
            imaging_day = day - rng.uniform(2, 10)
            if imaging_day > course.record_start:
                course.restage(imaging_day, "NED")
        day += rng.uniform(90, 130) if day - diagnosis_day < 2 * DAYS_PER_YEAR else rng.uniform(170, 380)


def finish_record(course: CaseCourse) -> CaseTruth:
    """Hospice (for most) and death when the case dies inside the record; the truth's record end either way."""
    rng, truth = course.rng, course.truth
    if course.death <= course.record_end and math.isfinite(course.death):
        hospice_day = course.death - rng.uniform(7, 60)
        last_line = truth.lines[-1] if truth.lines else None
        if rng.random() < 0.65 and hospice_day > truth.clinical_diagnosis + 30:
            _write_hospice(course, hospice_day)
            if last_line is not None and (last_line.end is None or last_line.end > hospice_day):
                last_line.end = hospice_day
        if last_line is not None and last_line.end_reason == "ongoing":
            last_line.end_reason = "death"
        truth.death = course.death
    truth.record_end = course.record_end
    return truth


def _write_hospice(course: CaseCourse, day: float) -> None:
    visit_id, time = course.visit(day, AMB, K_ONC)
    ids, truth = course.ids, course.truth
    tags = [course.row(visit_id, time, ids.proc["hospice_home"], 20), course.row(visit_id, time, ids.dx["palliative_care"], 15)]
    course.row(visit_id, time, ids.proc["advance_care_planning"], 21, tagged=False)
    course.cancer_code_row(visit_id, time, tagged=False)
    tags.append(course.note(visit_id, time, "PROGRESS", notes.hospice_note(course.rng, iso_date(day), course.profile.name)))
    truth.hospice_day = day
    truth.hospice_tags = tags
