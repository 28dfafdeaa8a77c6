"""The work-up before diagnosis: a path of visits (screening, imaging, biopsy…) chosen among those the patient is
eligible for, dated backwards from the diagnosis, each with its codes and its radiology or pathology report."""

from __future__ import annotations

from vista.shared.synth import notes
from vista.shared.synth.cancers import Step
from vista.shared.synth.catalog import DX, PROCEDURES
from vista.shared.synth.course.case import CaseCourse
from vista.shared.synth.course.draws import calendar_year, iso_date, sentence_case, weighted_choice
from vista.shared.synth.course.truth import PathologyTruth, ImagingTruth
from vista.shared.synth.population import NEVER
from vista.shared.synth.visits import AMB, ED, K_WORKUP

SCREENING_AGES = {"breast": (40, 80), "colon": (45, 80), "cervix": (21, 66)}
"""Ages at which a screening work-up path is open (lung screening has its own rule, `screening_eligible`)."""

SCREENING_IMPRESSIONS = {
    "ldct": "Lung-RADS category 4B: suspicious; tissue sampling recommended.",
    "mammo_screen": "BI-RADS 0: incomplete; diagnostic evaluation recommended.",
    "mammo_diag": "BI-RADS 5: highly suggestive of malignancy; biopsy recommended.",
    "us_breast": "BI-RADS 5: highly suggestive of malignancy; biopsy recommended.",
}
"""The impression of a work-up study that has a reporting scale of its own."""

DIFFERENTIATION = ("Moderately differentiated.", "Poorly differentiated.", "Well to moderately differentiated.")


def screening_eligible(course: CaseCourse, screening: str | None, day: float) -> bool:
    """Whether a work-up path that starts with ``screening`` is open to the patient on ``day``."""
    age = course.age(day)
    if screening == "lung":
        return course.population.smoking[course.subject] != NEVER and 50 <= age <= 80 and calendar_year(day) >= 2015.2
    if screening in SCREENING_AGES:
        low, high = SCREENING_AGES[screening]
        return low <= age <= high
    return True


def write_workup(course: CaseCourse) -> list[str]:
    """Choose the path, date its steps and write them; returns the consult note's phrases summarising the work-up."""
    rng, profile, diagnosis_day = course.rng, course.profile, course.diagnosis_day
    paths = [p for p in profile.workup if screening_eligible(course, p.screening, diagnosis_day)]
    path = weighted_choice(rng, paths, [p.weight for p in paths])
    course.truth.workup_path = path.name
    days = _step_days(course, path.steps)
    course.tumor_size_cm = notes.tumor_size_cm(course.truth.stage.t, rng)
    summary: list[str] = []
    for step, day in zip(path.steps, days):
        summary.extend(_write_step(course, step, day))
    return summary


def _step_days(course: CaseCourse, steps: tuple[Step, ...]) -> list[float]:
    """Days of the steps: each its drawn lead time before the diagnosis (at least a day after the step before it,
    counting backwards), kept inside the record and at least half a day apart before the diagnosis."""
    diagnosis_day = course.diagnosis_day
    days = []
    later = diagnosis_day
    for step in reversed(steps):
        day = min(later - 1.0, diagnosis_day - course.rng.uniform(step.lo, step.hi))
        days.append(day)
        later = day
    days.reverse()
    first_day = course.record_start + 0.01
    days = [max(day, first_day + k * 0.5) for k, day in enumerate(days)]
    return [min(day, diagnosis_day - 0.5 * (len(days) - k)) for k, day in enumerate(days)]


def _write_step(course: CaseCourse, step: Step, day: float) -> list[str]:
    """One work-up visit; returns its phrases for the consult note's work-up summary."""
    rng = course.rng
    visit_id, time = course.visit(day, ED if step.encounter == "ED" else AMB, K_WORKUP, panels=step.labs)
    for dx in step.dx:
        course.row(visit_id, time, course.ids.dx[dx], 15, tagged=False)
    procedures = list(step.procedures)
    if step.choice:
        procedures.insert(0, rng.choice(step.choice))
    tags = [course.row(visit_id, time, course.ids.proc[p], 25) for p in procedures]
    if step.note == "RADIOLOGY" and procedures:
        return [_radiology(course, step, day, procedures[0], visit_id, time, tags)]
    if step.note == "PATHOLOGY" and procedures:
        return [_pathology(course, day, procedures[0], visit_id, time, tags)]
    if step.dx:
        return [f"evaluated on {iso_date(day)} for {DX[step.dx[0]].phrase}"]
    return []


def _radiology(course: CaseCourse, step: Step, day: float, procedure: str, visit_id: int, time: int, tags: list[int]) -> str:
    site = course.truth.site.site
    exam = PROCEDURES[procedure].phrase
    finding = notes.primary_finding(course.cancer, site, course.tumor_size_cm, course.rng) or "abnormal findings"
    impression = SCREENING_IMPRESSIONS.get(procedure, f"Findings suspicious for malignancy ({finding}); tissue sampling recommended.")
    text = notes.radiology_report(course.rng, iso_date(day), sentence_case(exam), DX[step.dx[0]].phrase if step.dx else None,
                                  [sentence_case(finding) + "."], impression)
    tags.append(course.note(visit_id, time, "RADIOLOGY", text, 120))
    course.truth.imaging.append(ImagingTruth(day, procedure, "diagnostic work-up", impression, tags))
    return f"{exam} on {iso_date(day)} showing {finding}"


def _pathology(course: CaseCourse, day: float, procedure: str, visit_id: int, time: int, tags: list[int]) -> str:
    rng, truth, site = course.rng, course.truth, course.truth.site.site
    if course.cancer == "breast":
        details = [f"{n}: {r}." for n, r in truth.biomarkers]
        truth.biomarker_day = day
    elif course.cancer == "prostate":
        details = [f"{n}: {r}." for n, r in truth.biomarkers] + [f"Carcinoma present in {rng.randint(2, 9)} of 12 cores."]
    elif course.cancer in ("leukemia", "myeloma"):
        details = [f"Marrow involvement approximately {rng.choice([30, 40, 60, 80])}% of cellularity."]
    else:
        details = [rng.choice(DIFFERENTIATION)]
    diagnosis = f"{sentence_case(truth.histology.name)} (ICD-O-3 {truth.histology.icdo3}) involving the {site}."
    text = notes.pathology_report(rng, iso_date(day), f"{sentence_case(site)}, {PROCEDURES[procedure].phrase}", diagnosis, details)
    tags.append(course.note(visit_id, time, "PATHOLOGY", text, 240))
    if course.cancer == "breast":
        truth.biomarker_tags = tags[-1:]
    truth.pathology.append(PathologyTruth(day, procedure, diagnosis, tags))
    return f"{PROCEDURES[procedure].phrase} on {iso_date(day)} showing {truth.histology.name}"
