"""The diagnosis visit: the new-patient oncology consult with the cancer code, ECOG, the smoking history and the
consult note that summarises the work-up."""

from __future__ import annotations

from vista.shared.synth import notes
from vista.shared.synth.course.case import CaseCourse
from vista.shared.synth.course.draws import calendar_year, iso_date
from vista.shared.synth.population import CURRENT, FORMER, NEVER
from vista.shared.synth.visits import AMB, K_ONC

SMOKING_WORDS = {NEVER: "never", FORMER: "former", CURRENT: "current"}
SMOKING_CODES = {NEVER: "never_smoker", FORMER: "former_smoker", CURRENT: "current_daily_smoker"}


def write_diagnosis_visit(course: CaseCourse, workup_summary: list[str]) -> None:
    day, profile, truth = course.diagnosis_day, course.profile, course.truth
    visit_id, time = course.visit(day, AMB, K_ONC, panels=("cbc", "cmp") + profile.markers)
    course.row(visit_id, time, course.ids.proc["office_new"], 2)
    course.cancer_code_row(visit_id, time)
    course.ecog_row(visit_id, time, day)
    smoking = write_smoking_history(course, visit_id, time, day)
    text = notes.oncology_consult(course.rng, iso_date(day), int(course.age(day)), course.female, profile.name, truth.histology.name,
                                  truth.site.site, workup_summary, smoking, course.ecog)
    course.note(visit_id, time, "PROGRESS", text)


def write_smoking_history(course: CaseCourse, visit_id: int, time: int, day: float) -> str | None:
    """Smoking status (and pack-years) rows when the history is documented; returns the consult note's phrase."""
    population, subject, truth = course.population, course.subject, course.truth
    status = course.smoking_status(day)
    pack_years = population.pack_years_at(subject, day)
    quit_year = int(calendar_year(float(population.smoking_quit[subject]))) if status == FORMER else None
    truth.smoking_status = SMOKING_WORDS[status]
    truth.pack_years = round(pack_years, 1) if status != NEVER else 0.0
    truth.quit_year = quit_year
    if not population.smoking_documented[subject]:
        truth.smoking_status = "not documented"
        truth.pack_years = None
        truth.quit_year = None
        return None
    tags = [course.row(visit_id, time, course.ids.obs[SMOKING_CODES[status]], 5)]
    if status != NEVER:
        tags.append(course.row(visit_id, time, course.ids.obs["pack_years"], 5, numeric=round(pack_years, 1)))
    truth.smoking_tags = tags
    return notes.smoking_phrase(status, pack_years, quit_year)
