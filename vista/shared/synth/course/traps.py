"""The phenotype traps a case can carry (`vista.shared.synth.population.TRAP_*`): a late confirmation delays staging, a
prevalent case has an earlier code inside the washout, a prior-code case one isolated code far before."""

from __future__ import annotations

from vista.shared.synth import notes
from vista.shared.synth.course.case import CaseCourse
from vista.shared.synth.course.draws import iso_date
from vista.shared.synth.population import TRAP_LATE_CONFIRMATION, TRAP_NONE, TRAP_PREVALENT, TRAP_PRIOR_CODE
from vista.shared.synth.visits import AMB, K_ONC, K_WORKUP


def confirmation_delay(course: CaseCourse) -> float:
    """Days between diagnosis and staging: 0, or for a late-confirmation trap a delay clear of the 60- and 180-day
    boundaries, so day- and time-based phenotypes agree."""
    if int(course.population.trap[course.subject]) != TRAP_LATE_CONFIRMATION:
        return 0.0
    rng = course.rng
    return rng.uniform(61.5, 178.5) if rng.random() < 0.5 else rng.uniform(181.5, 300.0)


def write_trap_codes(course: CaseCourse) -> None:
    """The earlier cancer code of a prevalent or prior-code trap (a suspicion coded as the disease)."""
    trap = int(course.population.trap[course.subject])
    if trap == TRAP_PREVALENT:
        _prevalent_code(course)
    elif trap == TRAP_PRIOR_CODE:
        _prior_code(course)


def _prevalent_code(course: CaseCourse) -> None:
    """An earlier code of the cancer inside the washout (work-up declined at the time)."""
    start, diagnosis_day, rng = course.record_start, course.diagnosis_day, course.rng
    lo = max(start + 1.0, diagnosis_day - 178.0)
    if diagnosis_day - 62.0 > lo:
        day = rng.uniform(lo, diagnosis_day - 62.0)
        visit_id, time = course.visit(day, AMB, K_ONC)
        course.cancer_code_row(visit_id, time)
        course.note(visit_id, time, "PROGRESS", notes.suspicion_note(rng, iso_date(day), course.profile.name))


def _prior_code(course: CaseCourse) -> None:
    """One isolated earlier code of the cancer, well outside the washout on both sides (185 days after the record
    starts, 185 before the diagnosis), never followed up. The later pair is still incident, but this code sits in
    the case's history — often before the prediction time — where no control can have one. A history too short to
    place it makes an ordinary case after all."""
    start, diagnosis_day, rng = course.record_start, course.diagnosis_day, course.rng
    lo, hi = start + 185.0, diagnosis_day - 185.0
    if hi <= lo:
        course.population.trap[course.subject] = TRAP_NONE
        return
    day = rng.uniform(lo, hi)
    visit_id, time = course.visit(day, AMB, K_WORKUP)
    course.truth.prior_code_tags = [course.cancer_code_row(visit_id, time)]
    course.truth.prior_code_day = day
    course.note(visit_id, time, "PROGRESS", notes.suspicion_note(rng, iso_date(day), course.profile.name))
