"""One component of a treatment line written as visits: surgery with its pathology, repeated treatment visits
(infusions, oral drugs, injections, intravesical BCG, observation, procedures), a course of radiation, or a stem
cell transplant. Each returns the last day of the component (None when nothing happened) and the tags of the rows
that show it was given."""

from __future__ import annotations

import math

from vista.shared.synth import notes
from vista.shared.synth.course.case import CaseCourse
from vista.shared.synth.course.draws import iso_date, sentence_case
from vista.shared.synth.course.truth import PathologyTruth
from vista.shared.synth.regimens import (
    CHEMORADIATION, INFUSION, INJECTION, INTRAVESICAL, OBSERVATION, ORAL, PROCEDURE, RADIATION, SURGERY, TRANSPLANT,
    Component,
)
from vista.shared.synth.visits import AMB, IMP, K_ONC, K_PROC

REPEATED_VISITS = (INFUSION, ORAL, INJECTION, INTRAVESICAL, OBSERVATION, PROCEDURE)
"""Component kinds given as a series of treatment visits."""

MONTH_DAYS = 30.44


def write_component(course: CaseCourse, component: Component, start: float, stop: float, intent: str) -> tuple[float | None, list[int]]:
    """Write one component's visits from ``start`` until it ends or ``stop``; returns (its last day or None if
    nothing happened, tags of its drug/procedure rows)."""
    if component.kind == SURGERY:
        return _surgery(course, component, start, stop)
    if component.kind in REPEATED_VISITS:
        return _repeated_visits(course, component, start, stop, intent)
    if component.kind in (RADIATION, CHEMORADIATION):
        return _radiation(course, component, start, stop)
    if component.kind == TRANSPLANT:
        return _transplant(course, component, start)
    raise ValueError(f"unknown component kind {component.kind!r}")


def _surgery(course: CaseCourse, component: Component, day: float, stop: float) -> tuple[float, list[int]]:
    """The operation with its pathology report (margins, pathologic stage) and, when in the record, the recovery visit."""
    rng, ids, truth = course.rng, course.ids, course.truth
    visit_id, time = course.oncology_visit(day, panels=("cbc", "bmp"), encounter=IMP if component.inpatient else AMB)
    tags = [course.row(visit_id, time, ids.proc[component.procedure], 30)]
    course.cancer_code_row(visit_id, time)
    course.row(visit_id, time, ids.proc["surgical_path_resection"], 35, tagged=False)
    course.note(visit_id, time, "PROGRESS", notes.surgery_note(iso_date(day), component.label, course.profile.name))
    stage = truth.stage
    margins = "Margins negative for carcinoma." if rng.random() < 0.88 else "Tumor present at the margin."
    details = [f"Tumor size {course.tumor_size_cm} cm.", margins]
    if stage.t:
        details.append(f"Pathologic stage: p{stage.t} p{stage.n}.")
    diagnosis = f"{sentence_case(truth.histology.name)}, resected."
    report = notes.pathology_report(rng, iso_date(day), f"{truth.site.site}, {component.label}", diagnosis, details)
    pathology_tag = course.note(visit_id, time, "PATHOLOGY", report, 240)
    tags.append(pathology_tag)
    truth.pathology.append(PathologyTruth(day, component.procedure or "", diagnosis, [tags[0], pathology_tag]))
    last = day + (rng.uniform(1, 5) if component.inpatient else 0.0)
    recovery = last + 14
    if recovery < stop:
        visit_id, time = course.oncology_visit(recovery, panels=())
        course.cancer_code_row(visit_id, time, tagged=False)
        course.note(visit_id, time, "PROGRESS", notes.treatment_visit_note(rng, iso_date(recovery), f"recovery after {component.label}",
                                                                           None, course.ecog, "Incision healing well; pain controlled."))
    return last, tags


def _schedule(course: CaseCourse, component: Component, start: float) -> tuple[float, tuple[float, float]]:
    """The last day a series of visits may start a visit on, and the range of days between its visits."""
    rng = course.rng
    if component.kind in (ORAL, OBSERVATION):
        months = rng.randint(*component.count)
        horizon = start + months * MONTH_DAYS if not component.continuous else math.inf
        return horizon, ((56, 110) if component.kind == ORAL else (90, 180))
    if component.kind == INJECTION:
        return (start + component.count[1] * MONTH_DAYS if not component.continuous else math.inf), (84, 84)
    if component.kind == INTRAVESICAL:
        return math.inf, (7, 7)
    cycles = rng.randint(*component.count)
    if not component.continuous:
        horizon = start + (cycles - 1) * component.every_days + 0.5
    else:
        horizon = start + rng.uniform(9, 18) * MONTH_DAYS
    return horizon, (component.every_days, component.every_days)


def _bcg_days(start: float) -> list[float]:
    """Induction (six weekly instillations) and two three-week maintenance courses, at 3 and 6 months."""
    return [start + 7 * j for j in range(6)] + [start + 91 + 7 * j for j in range(3)] + [start + 182 + 7 * j for j in range(3)]


def _repeated_visits(course: CaseCourse, component: Component, start: float, stop: float, intent: str) -> tuple[float | None, list[int]]:
    """A series of treatment visits (the first one's rows tagged), with response assessments on palliative lines."""
    rng, kind = course.rng, component.kind
    if kind == INFUSION and rng.random() < 0.45 and start - 5 > course.record_start:
        visit_id, time = course.visit(start - rng.uniform(3, 8), AMB, K_PROC)
        course.row(visit_id, time, course.ids.proc["port_placement"], 20, tagged=False)
        course.cancer_code_row(visit_id, time, tagged=False)
    horizon, every = _schedule(course, component, start)
    tags: list[int] = []
    last = None
    day = start
    visit_no = 0
    next_restage = start + rng.uniform(56, 84)
    bcg_days = _bcg_days(start)
    while day < stop and day <= horizon:
        visit_no += 1
        if kind == INTRAVESICAL:
            if visit_no > len(bcg_days):
                break
            day = bcg_days[visit_no - 1]
            if day >= stop:
                break
        _treatment_visit(course, component, day, visit_no, tags)
        last = day
        if intent == "palliative" and day >= next_restage and kind != OBSERVATION:
            course.restage(day + rng.uniform(1, 6), "PR" if rng.random() < 0.4 else "SD")
            next_restage = day + rng.uniform(56, 90)
        if kind != INTRAVESICAL:
            day = day + rng.uniform(*every) + (rng.uniform(0, 2) if kind == INFUSION else 0)
    if last is not None and kind == OBSERVATION and course.cancer == "prostate" and last - start > 300 and start + 365 < stop:
        _prostate_surveillance_biopsy(course, start, stop)
    return last, tags


def _treatment_visit(course: CaseCourse, component: Component, day: float, visit_no: int, tags: list[int]) -> None:
    """One visit of a series; the first visit's drug and procedure rows go into ``tags``."""
    rng, ids, kind = course.rng, course.ids, component.kind
    chemo_visit = kind == INFUSION
    if chemo_visit:
        panels = (("cbc",) if rng.random() < 0.7 else ()) + (("cmp",) if rng.random() < 0.3 else ())
    else:
        panels = ("cbc",) if rng.random() < 0.35 else ()
    if course.cancer == "prostate" and kind in (INJECTION, OBSERVATION, ORAL):
        panels = panels + ("psa",)
    inpatient = component.inpatient and visit_no == 1
    visit_id, time = course.oncology_visit(day, panels=panels, chemo=chemo_visit, encounter=IMP if inpatient else AMB,
                                           kind=K_PROC if kind in (INTRAVESICAL, PROCEDURE) else K_ONC)
    given: list[int] = []
    if kind == INFUSION:
        course.row(visit_id, time, ids.dx["chemo_encounter"], 15, tagged=False)
        course.row(visit_id, time, ids.proc["chemo_infusion"], 30, tagged=False)
        if len(component.drugs) > 1:
            course.row(visit_id, time, ids.proc["chemo_infusion_seq"], 31, tagged=False)
        if rng.random() < 0.8:
            course.row(visit_id, time, ids.med["ondansetron"], 25, tagged=False)
    elif kind == INJECTION:
        course.row(visit_id, time, ids.proc["leuprolide_inj"], 25, tagged=False)
        course.row(visit_id, time, ids.proc["chemo_injection_hormonal"], 26, tagged=False)
    elif kind == INTRAVESICAL:
        given.append(course.row(visit_id, time, ids.proc["bcg"], 25))
        course.row(visit_id, time, ids.proc["bladder_instillation"], 26, tagged=False)
    elif kind == PROCEDURE:
        given.append(course.row(visit_id, time, ids.proc[component.procedure], 25))
    for drug in component.drugs:
        given.append(course.row(visit_id, time, ids.med[drug], 32))
    if visit_no == 1 or rng.random() < 0.85:
        course.cancer_code_row(visit_id, time, tagged=False)
    if kind == INFUSION and rng.random() < 0.06:
        course.row(visit_id, time, ids.dx["chemo_neutropenia"], 16, tagged=False)
        course.row(visit_id, time, ids.med["filgrastim"], 33, tagged=False)
    if visit_no == 1:
        tags.extend(given)
        course.ecog_row(visit_id, time, day)
    if visit_no == 1 or rng.random() < 0.3:
        cycle = visit_no if kind == INFUSION else None
        course.note(visit_id, time, "PROGRESS", notes.treatment_visit_note(rng, iso_date(day), component.label, cycle, course.ecog, None))


def _prostate_surveillance_biopsy(course: CaseCourse, start: float, stop: float) -> None:
    """Active surveillance of prostate cancer: the biopsy about a year in, unchanged."""
    rng = course.rng
    day = start + 365 + rng.uniform(0, 30)
    if day >= stop:
        return
    visit_id, time = course.visit(day, AMB, K_PROC)
    biopsy_tag = course.row(visit_id, time, course.ids.proc["prostate_biopsy"], 25)
    course.cancer_code_row(visit_id, time, tagged=False)
    report = notes.pathology_report(rng, iso_date(day), "Prostate, 12-core surveillance biopsy",
                                    "Prostatic adenocarcinoma, Gleason score 3+3=6 (Grade Group 1), low volume.",
                                    ["Unchanged from the diagnostic biopsy."])
    report_tag = course.note(visit_id, time, "PATHOLOGY", report, 240)
    course.truth.pathology.append(PathologyTruth(day, "prostate_biopsy", "Gleason 3+3=6, stable", [biopsy_tag, report_tag]))


def _radiation(course: CaseCourse, component: Component, start: float, stop: float) -> tuple[float, list[int]]:
    """Simulation and planning, then one visit a week (with the drugs of chemoradiation)."""
    rng, ids = course.rng, course.ids
    weeks = rng.randint(*component.count)
    visit_id, time = course.visit(start, AMB, K_PROC)
    tags = [course.row(visit_id, time, ids.proc["rt_simulation"], 20)]
    course.row(visit_id, time, ids.proc["rt_planning"], 21, tagged=False)
    course.cancer_code_row(visit_id, time, tagged=False)
    day = start + rng.uniform(7, 12)
    last = start
    chemo_visit = component.kind == CHEMORADIATION
    for week in range(1, weeks + 1):
        if day >= stop:
            break
        visit_id, time = course.oncology_visit(day, panels=("cbc",) if chemo_visit else (), chemo=chemo_visit, kind=K_PROC)
        course.row(visit_id, time, ids.dx["radiotherapy_encounter"], 15, tagged=False)
        course.row(visit_id, time, ids.proc[component.procedure or "rt_delivery"], 25, tagged=False)
        course.row(visit_id, time, ids.proc["rt_management"], 26, tagged=False)
        course.cancer_code_row(visit_id, time, tagged=False)
        if chemo_visit:
            course.row(visit_id, time, ids.proc["chemo_infusion"], 30, tagged=False)
            for drug in component.drugs:
                drug_tag = course.row(visit_id, time, ids.med[drug], 32)
                if week == 1:
                    tags.append(drug_tag)
        if week == 1 or week == weeks:
            course.note(visit_id, time, "PROGRESS", notes.radiation_note(rng, iso_date(day), component.label, week, weeks))
        last = day
        day += 7
    return last, tags


def _transplant(course: CaseCourse, component: Component, start: float) -> tuple[float, list[int]]:
    """The admission for high-dose chemotherapy and stem cell infusion; ends with the engraftment stay."""
    visit_id, time = course.oncology_visit(start, panels=("cbc", "cmp"), encounter=IMP)
    tags = [course.row(visit_id, time, course.ids.proc[component.procedure], 30)]
    course.cancer_code_row(visit_id, time)
    course.note(visit_id, time, "PROGRESS", notes.treatment_visit_note(course.rng, iso_date(start), component.label, None, course.ecog,
                                                                       "Admitted for high-dose melphalan and stem cell infusion."))
    return start + course.rng.uniform(14, 21), tags
