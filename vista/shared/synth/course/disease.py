"""The case's disease at diagnosis and how it will go: site, histology, stage, biomarkers, performance status and
metastases; the first-line plan; the day of recurrence (curative plans) and of death."""

from __future__ import annotations

import math
from dataclasses import dataclass

from vista.shared.synth.biomarkers import sample_biomarkers
from vista.shared.synth.conditions import CONDITION_INDEX
from vista.shared.synth.course.case import CaseCourse
from vista.shared.synth.course.draws import calendar_year, gamma_days, weighted_choice
from vista.shared.synth.course.truth import CaseTruth
from vista.shared.synth.population import DAYS_PER_YEAR, NEVER
from vista.shared.synth.regimens import FIRST_LINE, METASTATIC_FIRST_LINE, Plan, choose_plan

BREAST_MALE_SITES = ("C50.921", "C50.922")
"""The breast sites of men (the others are women's)."""

ECOG_WEIGHTS = ([0.38, 0.4, 0.16, 0.06], [0.2, 0.42, 0.26, 0.12])
"""ECOG 0–3 at diagnosis: stages I–III, stage IV."""


@dataclass(frozen=True, slots=True)
class Disease:
    """What the rest of the story needs of the drawn disease."""

    stage_bucket: int  # 0–3: stage I–IV
    flags: frozenset[str]  # histology, site and biomarker flags the regimens are chosen by
    plan: Plan  # the first line of treatment
    recurrence_day: float  # a curative plan's recurrence (inf: none)


def sites_for_sex(profile, female: bool):
    """The cancer's sites this patient can have (breast: men's and women's sites differ)."""
    return [s for s in profile.sites if profile.key != "breast" or ((s.icd10 in BREAST_MALE_SITES) != female)]


def draw_disease(course: CaseCourse) -> Disease:
    """Draw the disease into ``course.truth``, its first-line plan, and the days of recurrence and death."""
    rng, profile, day = course.rng, course.profile, course.diagnosis_day
    sites = sites_for_sex(profile, course.female)
    site = weighted_choice(rng, sites, [s.weight for s in sites])
    histologies = [h for h in profile.histologies if not site.histologies or h.name in site.histologies]
    histology = weighted_choice(rng, histologies, [h.weight for h in histologies])
    bucket = weighted_choice(rng, [0, 1, 2, 3], profile.stage_weights)
    options = profile.stage_options[bucket]
    stage = weighted_choice(rng, options, [o.weight for o in options])
    course.truth = CaseTruth(course.subject, course.cancer, site, histology, profile.stage_system, stage, clinical_diagnosis=day)
    flags = set(histology.flags)
    if site.icd10 in ("C20", "C19"):
        flags.add("rectal")
    population, subject = course.population, course.subject
    brca = bool(population.onset[subject, CONDITION_INDEX["brca"]] < day)
    markers, extra = sample_biomarkers(rng, course.cancer, flags, bucket, smoker=course.smoking_status(day) != NEVER,
                                       asian=int(population.race[subject]) == 2, brca=brca)
    flags |= extra
    course.truth.biomarkers = markers
    course.ecog = weighted_choice(rng, [0, 1, 2, 3], ECOG_WEIGHTS[bucket == 3])
    if bucket == 3 and profile.metastasis_dx:
        k = 1 if rng.random() < 0.6 else 2
        course.truth.metastases = rng.sample(list(profile.metastasis_dx), min(k, len(profile.metastasis_dx)))
        course.metastatic = True
    plan = _first_line(course, bucket, flags)
    recurrence_day = _draw_survival(course, plan, bucket)
    return Disease(bucket, frozenset(flags), plan, recurrence_day)


def _first_line(course: CaseCourse, bucket: int, flags: set[str]) -> Plan:
    day, rng = course.diagnosis_day, course.rng
    plan = choose_plan(FIRST_LINE[course.cancer][bucket], flags, calendar_year(day), course.age(day), rng.random())
    if plan is None:
        plan = choose_plan(METASTATIC_FIRST_LINE[course.cancer], flags, calendar_year(day), course.age(day), rng.random())
    if plan is None:
        raise RuntimeError(f"no eligible first-line plan for {course.cancer} stage bucket {bucket} flags {sorted(flags)}")
    return plan


def _draw_survival(course: CaseCourse, plan: Plan, bucket: int) -> float:
    """Set ``course.death`` (and end the record there); returns the recurrence day of a curative plan (inf: none).

    Curative plans may recur, then follow the metastatic survival curve; palliative plans follow it from diagnosis.
    """
    rng, profile, day = course.rng, course.profile, course.diagnosis_day
    treatment_start_guess = day + 45.0
    recurrence_day = math.inf
    if plan.intent == "curative":
        if rng.random() < profile.p_recurrence[min(bucket, 2)]:
            recurrence_day = treatment_start_guess + max(120.0, math.exp(rng.gauss(math.log(540.0), 0.6)))
            death = recurrence_day + gamma_days(rng, profile.metastatic_os_months * 0.9)
        else:
            hazard = math.exp(-10.5 + 0.095 * course.age(day))
            death = day + rng.expovariate(hazard) * DAYS_PER_YEAR
    else:
        death = day + max(45.0, gamma_days(rng, plan.os_months or profile.metastatic_os_months))
    course.death = death
    course.record_end = min(course.record_end, death)
    return recurrence_day
