"""Lines of treatment, one after another: each runs its plan's components until it completes, the disease
progresses (palliative) or recurs (curative), or the record ends; progression is imaged and seen in clinic, and the
next line is chosen among the plans still eligible."""

from __future__ import annotations

from vista.shared.synth import notes
from vista.shared.synth.catalog import DX, MEDS
from vista.shared.synth.course.case import RESTAGING_IMAGING, CaseCourse
from vista.shared.synth.course.components import write_component
from vista.shared.synth.course.disease import Disease
from vista.shared.synth.course.draws import calendar_year, iso_date
from vista.shared.synth.course.follow_up import write_surveillance
from vista.shared.synth.course.truth import ComponentTruth, LineTruth
from vista.shared.synth.regimens import LATER_LINES, METASTATIC_FIRST_LINE, SURGERY, TRANSPLANT, Plan, choose_plan
from vista.shared.synth.visits import AMB, K_ONC

MAX_LINES = 4


def write_treatment_lines(course: CaseCourse, disease: Disease, plan_day: float) -> None:
    """Every line from the first plan, starting 1–3 weeks after the plan visit."""
    rng = course.rng
    line_start = plan_day + rng.uniform(7, 21)
    line_no = 1
    plan: Plan | None = disease.plan
    while plan is not None and line_start < course.record_end and line_no <= MAX_LINES:
        curative = plan.intent == "curative"
        if curative:
            line_stop = min(course.record_end, disease.recurrence_day)
        else:
            remaining = course.death - line_start
            line_stop = min(course.record_end, line_start + remaining * rng.uniform(0.35, 0.65) if line_no < MAX_LINES else course.death)
        line = _write_line(course, line_no, plan, line_start, line_stop)
        course.truth.lines.append(line)
        progressed_at = _progression_day(course, disease, curative, line_stop)
        if progressed_at is None:
            if curative and line.end is not None:
                write_surveillance(course, line.end + rng.uniform(30, 90))
            return
        line.end = min(line.end if line.end is not None else progressed_at, progressed_at)
        line.end_reason = "recurrence" if curative else "progression"
        course.ecog = min(4, course.ecog + (1 if rng.random() < 0.6 else 0))
        next_plan = _next_plan(course, line_no, plan, disease.flags, progressed_at)
        _write_progression(course, progressed_at, line_no, curative, next_plan)
        if next_plan is None or course.ecog >= 3 or course.death - progressed_at < 60:
            return
        line_no += 1
        line_start = progressed_at + rng.uniform(14, 35)
        plan = next_plan


def _progression_day(course: CaseCourse, disease: Disease, curative: bool, line_stop: float) -> float | None:
    """When the line ends in recurrence or progression inside the record (None: it does not)."""
    if curative:
        return disease.recurrence_day if disease.recurrence_day < course.record_end else None
    if line_stop < course.record_end and line_stop < course.death:
        return line_stop
    return None


def _write_line(course: CaseCourse, line_no: int, plan: Plan, start: float, stop: float) -> LineTruth:
    """The plan's components one after another (a recovery gap between them) until ``stop``."""
    rng = course.rng
    line = LineTruth(line_no, plan.name, plan.intent, start)
    cursor = start
    for component in plan.components:
        if cursor >= stop:
            break
        end, tags = write_component(course, component, cursor, stop, plan.intent)
        if end is None:
            break
        line.components.append(ComponentTruth(component.kind, component.label, [MEDS[d].name for d in component.drugs],
                                              component.procedure, cursor, end))
        line.tags.extend(tags)
        line.end = end
        gap = rng.uniform(21, 42) if component.kind in (SURGERY, TRANSPLANT) else rng.uniform(14, 35)
        cursor = end + gap
    if plan.intent == "curative" and line.end is not None and line.end < stop:
        line.end_reason = "completed"
        course.restage(line.end + rng.uniform(21, 45), "NED" if rng.random() < 0.8 else "CR")
    elif line.end is not None and stop >= course.record_end and course.record_end < course.death:
        line.end_reason = "ongoing"
    elif stop >= course.death:
        line.end_reason = "death"
    return line


def _next_plan(course: CaseCourse, line_no: int, current: Plan, flags: frozenset[str], day: float) -> Plan | None:
    """After a curative first line the metastatic first lines, else the later lines; never the plan just given."""
    if current.intent == "curative" and line_no == 1:
        pool = METASTATIC_FIRST_LINE[course.cancer]
    else:
        pool = LATER_LINES[course.cancer]
    pool = tuple(p for p in pool if p.name != current.name)
    return choose_plan(pool, flags, calendar_year(day), course.age(day), course.rng.random())


def _write_progression(course: CaseCourse, day: float, line_no: int, recurrence: bool, next_plan: Plan | None) -> None:
    """Restaging that shows it (perhaps a new metastatic site) and the clinic visit that says what comes next."""
    rng, profile, truth = course.rng, course.profile, course.truth
    new_sites: list[str] = []
    candidates = [m for m in profile.metastasis_dx if m not in truth.metastases]
    if candidates and (recurrence or rng.random() < 0.5):
        new_sites = [rng.choice(candidates)]
        truth.metastases.extend(new_sites)
        course.metastatic = True
    tags: list[int] = []
    procedure = RESTAGING_IMAGING[course.cancer]
    if procedure is not None:
        findings = [notes.METASTASIS_FINDINGS[m].capitalize() + "." for m in new_sites] or ["Interval enlargement of known disease."]
        tags.extend(course.imaging(day, procedure, "response assessment", findings, notes.RESPONSE_IMPRESSION["REC" if recurrence else "PD"],
                                   f"restaging of {profile.name.lower()}"))
    visit_day = day + rng.uniform(2, 8)
    if visit_day < course.record_end:
        visit_id, time = course.visit(visit_day, AMB, K_ONC, panels=("cbc", "cmp") + profile.markers)
        course.row(visit_id, time, course.ids.proc["office_high"], 2, tagged=False)
        course.cancer_code_row(visit_id, time)
        for site in new_sites:
            course.row(visit_id, time, course.ids.dx[site], 14, tagged=False)
        course.ecog_row(visit_id, time, visit_day)
        text = notes.progression_note(rng, iso_date(visit_day), profile.name, line_no, [DX[m].phrase for m in new_sites],
                                      next_plan.name if next_plan else None, course.ecog)
        tags.append(course.note(visit_id, time, "PROGRESS", text))
    truth.progressions.append((day, line_no, tags))
