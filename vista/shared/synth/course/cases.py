"""Every case's course, step by step: the disease, the work-up before diagnosis, the traps, the diagnosis visit,
staging and the plan, the lines of treatment, and the end of the record."""

from __future__ import annotations

import math
import random

import numpy as np

from vista.shared.synth.course.case import CaseCourse
from vista.shared.synth.course.diagnosis import write_diagnosis_visit
from vista.shared.synth.course.disease import draw_disease
from vista.shared.synth.course.follow_up import finish_record
from vista.shared.synth.course.staging import write_staging
from vista.shared.synth.course.traps import confirmation_delay, write_trap_codes
from vista.shared.synth.course.treatment import write_treatment_lines
from vista.shared.synth.course.truth import CaseTruth
from vista.shared.synth.course.workup import write_workup
from vista.shared.synth.course.writer import CourseWriter
from vista.shared.synth.population import Population


def write_case_course(course: CaseCourse) -> CaseTruth:
    """Write one case's course from work-up to death or the end of its record; returns what it wrote."""
    disease = draw_disease(course)
    delay = confirmation_delay(course)
    workup_summary = write_workup(course)
    write_trap_codes(course)
    write_diagnosis_visit(course, workup_summary)
    plan_day = write_staging(course, delay, disease.plan)
    if plan_day is not None:
        write_treatment_lines(course, disease, plan_day)
    return finish_record(course)


def write_case_courses(writer: CourseWriter, population: Population, np_rng: np.random.Generator,
                       window_end: float) -> list[CaseTruth]:
    """Every case of the shard (each with its own random stream, seeded from ``np_rng``); sets ``population.death``
    and ``population.record_end`` to the course's outcome."""
    cases = np.flatnonzero(population.cancer >= 0)
    seeds = np_rng.integers(0, 2**63 - 1, size=len(cases), dtype=np.int64)
    out = []
    for subject, seed in zip(cases.tolist(), seeds.tolist()):
        truth = write_case_course(CaseCourse(writer, population, subject, random.Random(seed), window_end))
        population.record_end[subject] = truth.record_end
        population.death[subject] = truth.death if math.isfinite(truth.death) else np.nan
        out.append(truth)
    return out
