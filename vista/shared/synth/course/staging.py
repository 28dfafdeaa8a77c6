"""After the diagnosis: staging imaging, molecular testing of the tumour, and the treatment-plan visit that records
the stage (group, T, N, M) and the plan."""

from __future__ import annotations

from vista.shared.synth import notes
from vista.shared.synth.cancers import StageOption
from vista.shared.synth.catalog import DX
from vista.shared.synth.course.case import CaseCourse
from vista.shared.synth.course.draws import iso_date
from vista.shared.synth.regimens import Plan
from vista.shared.synth.visits import AMB, K_ONC, K_PROC

MOLECULAR_PANEL_CANCERS = ("lung", "colorectal", "pancreatic", "ovarian", "bladder")
"""Cancers whose biomarkers come from a molecular panel (the others' from immunohistochemistry)."""


def stage_text(system: str, stage: StageOption) -> str:
    """How notes write a stage.

    >>> stage_text("AJCC", StageOption("T2", "N2", "M0", "IIIA"))
    'AJCC stage IIIA (T2 N2 M0)'
    """
    if stage.t:
        return f"{system} stage {stage.group} ({stage.t} {stage.n} {stage.m})"
    return f"{system} {stage.group}"


def write_staging(course: CaseCourse, delay: float, plan: Plan) -> float | None:
    """Staging, molecular testing and the treatment-plan visit, ``delay`` days after the diagnosis; returns the day
    of the plan, or None when the record ends first."""
    rng, profile, truth = course.rng, course.profile, course.truth
    staging_start = course.diagnosis_day + delay
    days = [staging_start + rng.uniform(s.lo, s.hi) for s in profile.staging]
    findings = notes.staging_findings(course.cancer, truth.site.site, course.tumor_size_cm, truth.stage.n, truth.metastases,
                                      truth.site.laterality, rng)
    for study, day in zip(profile.staging, days):
        if day >= course.record_end:
            continue
        course.imaging(day, study.procedures[0], "staging", findings, _staging_impression(course),
                       f"staging of newly diagnosed {profile.name.lower()}")
    no_staging_day = staging_start + rng.uniform(3, 10)  # drawn whether or not the cancer has staging studies
    last = max(days, default=no_staging_day)
    tested = _molecular_testing(course, staging_start) if truth.biomarkers and course.cancer != "breast" else None
    if tested is not None:
        last = max(last, tested)
    plan_day = max(last, staging_start) + rng.uniform(2, 10)
    if plan_day >= course.record_end:
        return None
    _treatment_plan_visit(course, plan_day, plan)
    return plan_day


def _staging_impression(course: CaseCourse) -> str:
    truth = course.truth
    if truth.metastases:
        sites = ", ".join(DX[m].phrase for m in truth.metastases)
        return f"Findings consistent with metastatic {course.profile.name.lower()} ({sites})."
    if truth.stage.n and truth.stage.n not in ("N0",):
        return "Primary tumor with regional nodal involvement; no distant metastases."
    return "Localized disease without nodal or distant metastases."


def _molecular_testing(course: CaseCourse, staging_start: float) -> float | None:
    """Biomarkers tested on the diagnostic tissue; returns the day, or None when the record ends first."""
    rng, truth = course.rng, course.truth
    day = staging_start + rng.uniform(7, 21)
    if day >= course.record_end:
        return None
    visit_id, time = course.visit(day, AMB, K_PROC)
    code = "molecular_panel" if course.cancer in MOLECULAR_PANEL_CANCERS else "ihc"
    tags = [course.row(visit_id, time, course.ids.proc[code], 20)]
    course.cancer_code_row(visit_id, time)
    text = notes.pathology_report(rng, iso_date(day), "Tumor tissue from the diagnostic biopsy, ancillary studies",
                                  f"{truth.histology.name}; biomarker results below.", [f"{n}: {r}." for n, r in truth.biomarkers])
    tags.append(course.note(visit_id, time, "PATHOLOGY", text, 150))
    truth.biomarker_day = day
    truth.biomarker_tags = tags
    return day


def _treatment_plan_visit(course: CaseCourse, day: float, plan: Plan) -> None:
    """The visit that records the stage (tagged rows: group, T, N, M, and the plan note)."""
    truth, ids, stage, text = course.truth, course.ids, course.truth.stage, course.writer.text
    visit_id, time = course.visit(day, AMB, K_ONC, panels=("cbc", "cmp"))
    course.row(visit_id, time, ids.proc["office_high"], 2, tagged=False)
    course.cancer_code_row(visit_id, time)
    tags = [course.row(visit_id, time, ids.obs["stage_group"], 8, text=text(f"{stage.group}"))]
    if stage.t:
        tags.append(course.row(visit_id, time, ids.obs["stage_t"], 8, text=text(stage.t)))
        tags.append(course.row(visit_id, time, ids.obs["stage_n"], 8, text=text(stage.n or "")))
        tags.append(course.row(visit_id, time, ids.obs["stage_m"], 8, text=text(stage.m or "")))
    course.metastasis_rows(visit_id, time, 1.0)
    course.ecog_row(visit_id, time, day)
    metastases = [DX[m].phrase for m in truth.metastases]
    note = notes.treatment_plan_note(course.rng, iso_date(day), course.profile.name, truth.histology.name,
                                     stage_text(truth.stage_system, stage), truth.biomarkers, plan.name, plan.intent, course.ecog,
                                     metastases)
    tags.append(course.note(visit_id, time, "PROGRESS", note))
    truth.stage_day = day
    truth.stage_tags = tags
