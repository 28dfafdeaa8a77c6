"""The oncology course of each case, written into the MEDS data: work-up, diagnosis, staging, biomarkers, treatment
lines, response assessments, progression, surveillance, hospice and death -- plus rule-out work-ups of non-cases.

This is the only per-subject Python loop of the generator (cases are a minority and have rich, structured stories).
Every fact the ground truth states is written as rows here and the rows are tagged, so the truth can name the
event ids that carry it once the shard is sorted. Bulk content of these visits (vitals, labs, chronic codes) is
added later by the vectorized visit engine.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np

from vista.synth import notes
from vista.synth.biomarkers import sample_biomarkers
from vista.synth.cancers import CANCERS, CancerProfile, CancerSite, Histology, StageOption, Step
from vista.synth.catalog import DX, MEDS, PROCEDURES
from vista.synth.conditions import CONDITION_INDEX
from vista.synth.population import (
    CURRENT, DAYS_PER_YEAR, FORMER, NEVER, TRAP_LATE_CONFIRMATION, TRAP_NONE, TRAP_PREVALENT, TRAP_PRIOR_CODE, Population,
)
from vista.synth.regimens import (
    CHEMORADIATION,
    FIRST_LINE,
    INFUSION,
    INJECTION,
    INTRAVESICAL,
    LATER_LINES,
    METASTATIC_FIRST_LINE,
    OBSERVATION,
    ORAL,
    PROCEDURE,
    RADIATION,
    SURGERY,
    TRANSPLANT,
    Component,
    Plan,
    choose_plan,
)
from vista.synth.rows import US_PER_MINUTE, RowBuffer
from vista.synth.visits import AMB, ED, IMP, K_ONC, K_PROC, K_WORKUP, VisitBuffer, panel_mask
from vista.synth.vocabulary import CodeIds

ORDER_FIRST, ORDER_DEFAULT, ORDER_NOTE = 0, 1, 2

RESTAGING = {
    "lung": "ct_chest_contrast", "breast": "ct_chest_contrast", "prostate": "bone_scan", "colorectal": "ct_abd_pelvis", "bladder": "ct_abd_pelvis",
    "cervical": "ct_abd_pelvis", "esophageal": "ct_chest_contrast", "endometrial": "ct_abd_pelvis", "gastric": "ct_abd_pelvis",
    "ovarian": "ct_abd_pelvis", "pancreatic": "ct_abd_pelvis", "liver": "mri_abdomen", "leukemia": None, "myeloma": "skeletal_survey",
    "lymphoma": "pet_ct",
}
"""Imaging used for response assessment and surveillance, per cancer (leukemia is followed with blood counts)."""

MAX_LINES = 4


@dataclass(slots=True)
class ImagingTruth:
    day: float
    procedure: str
    purpose: str
    finding: str
    tags: list[int]


@dataclass(slots=True)
class PathologyTruth:
    day: float
    procedure: str
    diagnosis: str
    tags: list[int]


@dataclass(slots=True)
class ComponentTruth:
    kind: str
    label: str
    drugs: list[str]
    procedure: str | None
    start: float
    end: float


@dataclass(slots=True)
class LineTruth:
    line: int
    plan: str
    intent: str
    start: float
    end: float | None = None
    end_reason: str = "ongoing"
    components: list[ComponentTruth] = field(default_factory=list)
    tags: list[int] = field(default_factory=list)


@dataclass(slots=True)
class CaseTruth:
    """What the course wrote for one case, with tags pointing at the rows that carry each fact."""

    subject: int
    cancer: str
    site: CancerSite
    histology: Histology
    stage_system: str
    stage: StageOption
    stage_day: float = math.nan
    stage_tags: list[int] = field(default_factory=list)
    biomarkers: list[tuple[str, str]] = field(default_factory=list)
    biomarker_day: float = math.nan
    biomarker_tags: list[int] = field(default_factory=list)
    ecog: list[tuple[float, int, int]] = field(default_factory=list)
    smoking_status: str = "unknown"
    pack_years: float | None = None
    quit_year: int | None = None
    smoking_tags: list[int] = field(default_factory=list)
    imaging: list[ImagingTruth] = field(default_factory=list)
    pathology: list[PathologyTruth] = field(default_factory=list)
    lines: list[LineTruth] = field(default_factory=list)
    progressions: list[tuple[float, int, list[int]]] = field(default_factory=list)
    metastases: list[str] = field(default_factory=list)
    hospice_day: float = math.nan
    hospice_tags: list[int] = field(default_factory=list)
    prior_code_day: float = math.nan
    prior_code_tags: list[int] = field(default_factory=list)
    clinical_diagnosis: float = math.nan
    workup_path: str = ""
    record_end: float = math.nan
    death: float = math.nan


@dataclass(slots=True)
class RuleOutTruth:
    subject: int
    cancer: str
    day: float
    tags: list[int]


class CourseWriter:
    """Appends course visits and rows (Python scalars) to the shard's buffers and hands out row tags."""

    def __init__(self, ids: CodeIds, visits: VisitBuffer, rows: RowBuffer, texts: list[str]):
        self.ids = ids
        self.visits = visits
        self.rows = rows
        self.texts = texts
        self.n_tags = 0

    def visit(self, subject: int, day: float, enc: int, kind: int, panels=(), chemo: bool = False) -> tuple[int, int]:
        frac = {AMB: 8.5, ED: 14.0, IMP: 11.0}[enc] / 24.0
        whole = math.floor(day)
        vday = whole + frac + ((subject * 7919 + whole * 31 + kind * 7) % 90) * 5 / 1440.0
        vid = self.visits.add_one(subject, vday, enc, kind, panels=panel_mask(panels), chemo=chemo)
        return vid, int(round(vday * 1440.0)) * US_PER_MINUTE

    def row(self, subject: int, vid: int, time: int, code: int, offset_min: int = 10, numeric: float = math.nan, text: int = -1,
            tagged: bool = True, order: int = ORDER_DEFAULT) -> int:
        tag = -1
        if tagged:
            tag = self.n_tags
            self.n_tags += 1
        self.rows.add_one(subject, time + offset_min * US_PER_MINUTE, code, numeric, text, order, tag, vid)
        return tag

    def note(self, subject: int, vid: int, time: int, kind: str, text: str, offset_min: int = 90) -> int:
        self.texts.append(text)
        return self.row(subject, vid, time, self.ids.note[kind], offset_min, text=len(self.texts) - 1, order=ORDER_NOTE)


def _weighted(rng: random.Random, items, weights):
    total = sum(weights)
    u = rng.random() * total
    acc = 0.0
    for item, w in zip(items, weights):
        acc += w
        if u < acc:
            return item
    return items[-1]


def _date(day: float) -> str:
    return str(np.datetime64(int(math.floor(day)), "D"))


def _year(day: float) -> float:
    return 1970.0 + day / DAYS_PER_YEAR


def _gamma_days(rng: random.Random, median_months: float, shape: float = 1.6) -> float:
    """A survival time (days) from a gamma distribution with the given median."""
    median_unit = {1.0: 0.693, 1.5: 1.18, 1.6: 1.28, 2.0: 1.68}.get(shape, shape - 0.33)
    return rng.gammavariate(shape, median_months / median_unit) * 30.44


def stage_text(system: str, opt: StageOption) -> str:
    if opt.t:
        return f"{system} stage {opt.group} ({opt.t} {opt.n} {opt.m})"
    return f"{system} {opt.group}"


class CaseCourse:
    """Simulates one case's course from work-up to death or end of record."""

    def __init__(self, w: CourseWriter, pop: Population, i: int, rng: random.Random, window_end: float):
        self.w = w
        self.ids = w.ids
        self.pop = pop
        self.i = i
        self.rng = rng
        self.profile: CancerProfile = CANCERS[_cancer_key(int(pop.cancer[i]))]
        self.key = self.profile.key
        self.window_end = window_end
        self.female = bool(pop.female[i])
        self.end = min(float(pop.follow_end[i]), window_end)
        self.ecog = 0
        self.metastatic = False

    # ---------------------------------------------------------------- helpers
    def age(self, day: float) -> float:
        return (day - float(self.pop.birth[self.i])) / DAYS_PER_YEAR

    def cancer_code(self) -> int:
        return self.ids.site[self.truth.site.icd10]

    def code_row(self, vid: int, time: int, tagged: bool = True) -> int:
        return self.w.row(self.i, vid, time, self.cancer_code(), 12, tagged=tagged)

    def rows(self, vid: int, time: int, codes, offset: int = 15) -> list[int]:
        return [self.w.row(self.i, vid, time, c, offset) for c in codes]

    def ecog_row(self, vid: int, time: int, day: float) -> None:
        tag = self.w.row(self.i, vid, time, self.ids.lab["ecog"], 6, numeric=float(self.ecog))
        self.truth.ecog.append((day, self.ecog, tag))

    def mets_rows(self, vid: int, time: int, p: float = 0.6) -> None:
        for m in self.truth.metastases:
            if self.rng.random() < p:
                self.w.row(self.i, vid, time, self.ids.dx[m], 14, tagged=False)

    def imaging(self, day: float, proc: str, purpose: str, findings: list[str], impression: str, indication: str, code: bool = True,
                kind: int = K_PROC) -> tuple[int, int, list[int]]:
        vid, t = self.w.visit(self.i, day, AMB, kind)
        tags = [self.w.row(self.i, vid, t, self.ids.proc[proc], 20)]
        if code:
            self.code_row(vid, t)
        exam = PROCEDURES[proc].phrase
        text = notes.radiology_report(self.rng, _date(day), exam[0].upper() + exam[1:], indication, findings, impression)
        tags.append(self.w.note(self.i, vid, t, "RADIOLOGY", text, 120))
        self.truth.imaging.append(ImagingTruth(day, proc, purpose, impression, tags))
        return vid, t, tags

    # ---------------------------------------------------------------- the story
    def run(self) -> CaseTruth:
        pop, i, rng, prof = self.pop, self.i, self.rng, self.profile
        d0 = float(pop.diagnosis[i])
        start = float(pop.record_start[i])
        sites = [s for s in prof.sites if self.key != "breast" or ((s.icd10 in ("C50.921", "C50.922")) != self.female)]
        site = _weighted(rng, sites, [s.weight for s in sites])
        hists = [h for h in prof.histologies if not site.histologies or h.name in site.histologies]
        hist = _weighted(rng, hists, [h.weight for h in hists])
        bucket = _weighted(rng, [0, 1, 2, 3], prof.stage_weights)
        opt = _weighted(rng, prof.stage_options[bucket], [o.weight for o in prof.stage_options[bucket]])
        self.truth = CaseTruth(i, self.key, site, hist, prof.stage_system, opt, clinical_diagnosis=d0)
        flags = set(hist.flags)
        if site.icd10 in ("C20", "C19"):
            flags.add("rectal")
        status_at_dx = self.smoking_status(d0)
        brca = bool(pop.onset[i, CONDITION_INDEX["brca"]] < d0)
        markers, extra = sample_biomarkers(rng, self.key, flags, bucket, smoker=status_at_dx != NEVER, asian=int(pop.race[i]) == 2, brca=brca)
        flags |= extra
        self.truth.biomarkers = markers
        self.ecog = _weighted(rng, [0, 1, 2, 3], [0.38, 0.4, 0.16, 0.06] if bucket < 3 else [0.2, 0.42, 0.26, 0.12])
        if bucket == 3 and prof.metastasis_dx:
            k = 1 if rng.random() < 0.6 else 2
            self.truth.metastases = rng.sample(list(prof.metastasis_dx), min(k, len(prof.metastasis_dx)))
            self.metastatic = True

        plan = choose_plan(FIRST_LINE[self.key][bucket], flags, _year(d0), self.age(d0), rng.random())
        if plan is None:
            plan = choose_plan(METASTATIC_FIRST_LINE[self.key], flags, _year(d0), self.age(d0), rng.random())
        if plan is None:
            raise RuntimeError(f"no eligible first-line plan for {self.key} stage bucket {bucket} flags {sorted(flags)}")

        # survival: curative plans may recur; palliative plans follow the metastatic survival curve
        treat_start_guess = d0 + 45.0
        recur_day = math.inf
        if plan.intent == "curative":
            if rng.random() < prof.p_recurrence[min(bucket, 2)]:
                recur_day = treat_start_guess + max(120.0, math.exp(rng.gauss(math.log(540.0), 0.6)))
                death = recur_day + _gamma_days(rng, prof.metastatic_os_months * 0.9)
            else:
                hazard = math.exp(-10.5 + 0.095 * self.age(d0))
                death = d0 + rng.expovariate(hazard) * DAYS_PER_YEAR
        else:
            death = d0 + max(45.0, _gamma_days(rng, plan.os_months or prof.metastatic_os_months))
        self.death = death
        self.end = min(self.end, death)
        self.stop = self.end

        trap = int(pop.trap[i])
        delay = 0.0
        if trap == TRAP_LATE_CONFIRMATION:
            # keep clear of the 60- and 180-day boundaries so day- and time-based phenotypes agree
            delay = rng.uniform(61.5, 178.5) if rng.random() < 0.5 else rng.uniform(181.5, 300.0)

        # --- work-up before diagnosis
        paths = [p for p in prof.workup if self.screening_ok(p.screening, d0)]
        path = _weighted(rng, paths, [p.weight for p in paths])
        self.truth.workup_path = path.name
        steps = path.steps
        days = []
        prev = d0
        for step in reversed(steps):
            day = min(prev - 1.0, d0 - rng.uniform(step.lo, step.hi))
            days.append(day)
            prev = day
        days.reverse()
        floor_day = start + 0.01
        for k in range(len(days)):
            days[k] = max(days[k], floor_day + k * 0.5)
        days = [min(d, d0 - 0.5 * (len(days) - k)) for k, d in enumerate(days)]
        size = notes.tumor_size_cm(opt.t, rng)
        self.size = size
        workup_summary: list[str] = []
        for step, day in zip(steps, days):
            workup_summary.extend(self.workup_step(step, day, size, opt, last=step is steps[-1], bucket=bucket))

        if trap == TRAP_PREVALENT:
            # an earlier code of the cancer inside the washout (a suspicion coded as the disease, work-up declined at the time)
            lo = max(start + 1.0, d0 - 178.0)
            if d0 - 62.0 > lo:
                t1 = rng.uniform(lo, d0 - 62.0)
                vid, t = self.w.visit(i, t1, AMB, K_ONC)
                self.code_row(vid, t)
                self.w.note(i, vid, t, "PROGRESS", notes.suspicion_note(rng, _date(t1), prof.name))
        elif trap == TRAP_PRIOR_CODE:
            # one isolated earlier code of the cancer, well outside the washout on both sides (185 days after the
            # record starts, 185 before the diagnosis): a suspicion coded as the disease and never followed up. The
            # later pair is still incident, but this code sits in the case's history — often before the prediction
            # time — where no control can have one.
            lo, hi = start + 185.0, d0 - 185.0
            if hi > lo:
                t1 = rng.uniform(lo, hi)
                vid, t = self.w.visit(i, t1, AMB, K_WORKUP)
                self.truth.prior_code_tags = [self.code_row(vid, t)]
                self.truth.prior_code_day = t1
                self.w.note(i, vid, t, "PROGRESS", notes.suspicion_note(rng, _date(t1), prof.name))
            else:  # history too short to place it outside the washout: an ordinary case after all
                pop.trap[i] = TRAP_NONE

        # --- diagnosis visit
        vid, t = self.w.visit(i, d0, AMB, K_ONC, panels=("cbc", "cmp") + prof.markers)
        self.w.row(i, vid, t, self.ids.proc["office_new"], 2)
        self.code_row(vid, t)
        self.ecog_row(vid, t, d0)
        smoking = self.smoking_rows(vid, t, d0)
        text = notes.oncology_consult(rng, _date(d0), int(self.age(d0)), self.female, prof.name, hist.name, site.site, workup_summary, smoking, self.ecog)
        self.w.note(i, vid, t, "PROGRESS", text)

        # --- staging, molecular testing and the treatment plan (after the delay of a late-confirmation trap)
        t_stage = d0 + delay
        stage_days = [t_stage + rng.uniform(s.lo, s.hi) for s in prof.staging]
        findings = notes.staging_findings(self.key, site.site, size, opt.n, self.truth.metastases, site.laterality, rng)
        for s, day in zip(prof.staging, stage_days):
            if day >= self.stop:
                continue
            proc = s.procedures[0]
            self.imaging(day, proc, "staging", findings, self.staging_impression(opt), f"staging of newly diagnosed {prof.name.lower()}")
        last = max(stage_days, default=t_stage + rng.uniform(3, 10))
        if markers and self.key != "breast":
            mday = t_stage + rng.uniform(7, 21)
            if mday < self.stop:
                vid, t = self.w.visit(i, mday, AMB, K_PROC)
                code = "molecular_panel" if self.key in ("lung", "colorectal", "pancreatic", "ovarian", "bladder") else "ihc"
                tags = [self.w.row(i, vid, t, self.ids.proc[code], 20)]
                self.code_row(vid, t)
                text = notes.pathology_report(rng, _date(mday), "Tumor tissue from the diagnostic biopsy, ancillary studies",
                                              f"{hist.name}; biomarker results below.", [f"{n}: {r}." for n, r in markers])
                tags.append(self.w.note(i, vid, t, "PATHOLOGY", text, 150))
                self.truth.biomarker_day = mday
                self.truth.biomarker_tags = tags
                last = max(last, mday)
        plan_day = max(last, t_stage) + rng.uniform(2, 10)
        if plan_day >= self.stop:
            return self.finish()
        vid, t = self.w.visit(i, plan_day, AMB, K_ONC, panels=("cbc", "cmp"))
        self.w.row(i, vid, t, self.ids.proc["office_high"], 2, tagged=False)
        self.code_row(vid, t)
        sys = prof.stage_system
        stags = [self.w.row(i, vid, t, self.ids.obs["stage_group"], 8, text=self._text(f"{opt.group}"))]
        if opt.t:
            stags.append(self.w.row(i, vid, t, self.ids.obs["stage_t"], 8, text=self._text(opt.t)))
            stags.append(self.w.row(i, vid, t, self.ids.obs["stage_n"], 8, text=self._text(opt.n or "")))
            stags.append(self.w.row(i, vid, t, self.ids.obs["stage_m"], 8, text=self._text(opt.m or "")))
        self.mets_rows(vid, t, 1.0)
        self.ecog_row(vid, t, plan_day)
        mets_phr = [DX[m].phrase for m in self.truth.metastases]
        text = notes.treatment_plan_note(rng, _date(plan_day), prof.name, hist.name, stage_text(sys, opt), markers, plan.name, plan.intent, self.ecog, mets_phr)
        stags.append(self.w.note(i, vid, t, "PROGRESS", text))
        self.truth.stage_day = plan_day
        self.truth.stage_tags = stags

        # --- treatment lines
        line_start = plan_day + rng.uniform(7, 21)
        line_no = 1
        current = plan
        while current is not None and line_start < self.stop and line_no <= MAX_LINES:
            if current.intent == "curative":
                line_stop = min(self.stop, recur_day)
            else:
                remaining = self.death - line_start
                line_stop = min(self.stop, line_start + remaining * rng.uniform(0.35, 0.65) if line_no < MAX_LINES else self.death)
            lt = self.run_line(line_no, current, line_start, line_stop)
            self.truth.lines.append(lt)
            progressed_at = None
            if current.intent == "curative":
                if recur_day < self.stop:
                    progressed_at = recur_day
            elif line_stop < self.stop and line_stop < self.death:
                progressed_at = line_stop
            if progressed_at is None:
                if current.intent == "curative" and lt.end is not None:
                    self.surveillance(lt.end + rng.uniform(30, 90), d0)
                break
            lt.end = min(lt.end if lt.end is not None else progressed_at, progressed_at)
            lt.end_reason = "recurrence" if current.intent == "curative" else "progression"
            self.ecog = min(4, self.ecog + (1 if rng.random() < 0.6 else 0))
            nxt = self.next_plan(line_no, current, flags, progressed_at)
            self.progression(progressed_at, line_no, current.intent == "curative", nxt)
            if nxt is None or self.ecog >= 3 or self.death - progressed_at < 60:
                break
            line_no += 1
            line_start = progressed_at + rng.uniform(14, 35)
            current = nxt
        return self.finish()

    # ---------------------------------------------------------------- pieces
    def _text(self, s: str) -> int:
        self.w.texts.append(s)
        return len(self.w.texts) - 1

    def screening_ok(self, screening: str | None, day: float) -> bool:
        age = self.age(day)
        if screening is None:
            return True
        if screening == "lung":
            return self.pop.smoking[self.i] != NEVER and 50 <= age <= 80 and _year(day) >= 2015.2
        if screening == "breast":
            return 40 <= age <= 80
        if screening == "colon":
            return 45 <= age <= 80
        if screening == "cervix":
            return 21 <= age <= 66
        if screening == "prostate":
            return True
        return True

    def smoking_status(self, day: float) -> int:
        s = int(self.pop.smoking[self.i])
        if s == FORMER and day < self.pop.smoking_quit[self.i]:
            return CURRENT
        if s == CURRENT and day < self.pop.smoking_start[self.i]:
            return NEVER
        return s

    def smoking_rows(self, vid: int, t: int, day: float) -> str | None:
        status = self.smoking_status(day)
        py = self.pop.pack_years_at(self.i, day)
        quit_year = int(_year(float(self.pop.smoking_quit[self.i]))) if status == FORMER else None
        self.truth.smoking_status = {NEVER: "never", FORMER: "former", CURRENT: "current"}[status]
        self.truth.pack_years = round(py, 1) if status != NEVER else 0.0
        self.truth.quit_year = quit_year
        if not self.pop.smoking_documented[self.i]:
            self.truth.smoking_status = "not documented"
            self.truth.pack_years = None
            self.truth.quit_year = None
            return None
        obs = {NEVER: "never_smoker", FORMER: "former_smoker", CURRENT: "current_daily_smoker"}[status]
        tags = [self.w.row(self.i, vid, t, self.ids.obs[obs], 5)]
        if status != NEVER:
            tags.append(self.w.row(self.i, vid, t, self.ids.obs["pack_years"], 5, numeric=round(py, 1)))
        self.truth.smoking_tags = tags
        return notes.smoking_phrase(status, py, quit_year)

    def staging_impression(self, opt: StageOption) -> str:
        if self.truth.metastases:
            return f"Findings consistent with metastatic {self.profile.name.lower()} ({', '.join(DX[m].phrase for m in self.truth.metastases)})."
        if opt.n and opt.n not in ("N0",):
            return "Primary tumor with regional nodal involvement; no distant metastases."
        return "Localized disease without nodal or distant metastases."

    def workup_step(self, step: Step, day: float, size: float, opt: StageOption, last: bool, bucket: int) -> list[str]:
        """One work-up visit; returns phrases for the consult note's work-up summary."""
        i, rng = self.i, self.rng
        enc = ED if step.encounter == "ED" else AMB
        vid, t = self.w.visit(i, day, enc, K_WORKUP, panels=step.labs)
        for dx in step.dx:
            self.w.row(i, vid, t, self.ids.dx[dx], 15, tagged=False)
        procs = list(step.procedures)
        if step.choice:
            procs.insert(0, rng.choice(step.choice))
        tags = [self.w.row(i, vid, t, self.ids.proc[p], 25) for p in procs]
        summary = []
        site = self.truth.site.site
        if step.note == "RADIOLOGY" and procs:
            exam = PROCEDURES[procs[0]].phrase
            finding = notes.primary_finding(self.key, site, size, rng) or "abnormal findings"
            if procs[0] == "ldct":
                impression = "Lung-RADS category 4B: suspicious; tissue sampling recommended."
            elif procs[0] == "mammo_screen":
                impression = "BI-RADS 0: incomplete; diagnostic evaluation recommended."
            elif procs[0] in ("mammo_diag", "us_breast"):
                impression = "BI-RADS 5: highly suggestive of malignancy; biopsy recommended."
            else:
                impression = f"Findings suspicious for malignancy ({finding}); tissue sampling recommended."
            text = notes.radiology_report(rng, _date(day), exam[0].upper() + exam[1:], DX[step.dx[0]].phrase if step.dx else None,
                                          [finding[0].upper() + finding[1:] + "."], impression)
            tags.append(self.w.note(i, vid, t, "RADIOLOGY", text, 120))
            self.truth.imaging.append(ImagingTruth(day, procs[0], "diagnostic work-up", impression, tags))
            summary.append(f"{exam} on {_date(day)} showing {finding}")
        elif step.note == "PATHOLOGY" and procs:
            hist = self.truth.histology
            details = []
            if self.key == "breast":
                details = [f"{n}: {r}." for n, r in self.truth.biomarkers]
                self.truth.biomarker_day = day
            elif self.key == "prostate":
                details = [f"{n}: {r}." for n, r in self.truth.biomarkers] + [f"Carcinoma present in {rng.randint(2, 9)} of 12 cores."]
            elif self.key in ("leukemia", "myeloma"):
                details = [f"Marrow involvement approximately {rng.choice([30, 40, 60, 80])}% of cellularity."]
            else:
                details = [rng.choice(("Moderately differentiated.", "Poorly differentiated.", "Well to moderately differentiated."))]
            diagnosis = f"{hist.name[0].upper() + hist.name[1:]} (ICD-O-3 {hist.icdo3}) involving the {site}."
            text = notes.pathology_report(rng, _date(day), f"{site[0].upper() + site[1:]}, {PROCEDURES[procs[0]].phrase}", diagnosis, details)
            tags.append(self.w.note(i, vid, t, "PATHOLOGY", text, 240))
            if self.key == "breast":
                self.truth.biomarker_tags = tags[-1:]
            self.truth.pathology.append(PathologyTruth(day, procs[0], diagnosis, tags))
            summary.append(f"{PROCEDURES[procs[0]].phrase} on {_date(day)} showing {hist.name}")
        elif step.dx:
            summary.append(f"evaluated on {_date(day)} for {DX[step.dx[0]].phrase}")
        return summary

    def next_plan(self, line_no: int, current: Plan, flags: set[str], day: float) -> Plan | None:
        if current.intent == "curative" and line_no == 1:
            pool = METASTATIC_FIRST_LINE[self.key]
        else:
            pool = LATER_LINES[self.key]
        pool = tuple(p for p in pool if p.name != current.name)
        return choose_plan(pool, flags, _year(day), self.age(day), self.rng.random())

    def progression(self, day: float, line_no: int, recurrence: bool, nxt: Plan | None) -> None:
        i, rng, prof = self.i, self.rng, self.profile
        new_sites: list[str] = []
        candidates = [m for m in prof.metastasis_dx if m not in self.truth.metastases]
        if candidates and (recurrence or rng.random() < 0.5):
            new_sites = [rng.choice(candidates)]
            self.truth.metastases.extend(new_sites)
            self.metastatic = True
        tags: list[int] = []
        proc = RESTAGING[self.key]
        if proc is not None:
            finds = [notes.METASTASIS_FINDINGS[m].capitalize() + "." for m in new_sites] or ["Interval enlargement of known disease."]
            _, _, itags = self.imaging(day, proc, "response assessment", finds, notes.RESPONSE_IMPRESSION["REC" if recurrence else "PD"],
                                       f"restaging of {prof.name.lower()}")
            tags.extend(itags)
        vday = day + rng.uniform(2, 8)
        if vday < self.stop:
            vid, t = self.w.visit(i, vday, AMB, K_ONC, panels=("cbc", "cmp") + prof.markers)
            self.w.row(i, vid, t, self.ids.proc["office_high"], 2, tagged=False)
            self.code_row(vid, t)
            for m in new_sites:
                self.w.row(i, vid, t, self.ids.dx[m], 14, tagged=False)
            self.ecog_row(vid, t, vday)
            text = notes.progression_note(rng, _date(vday), prof.name, line_no, [DX[m].phrase for m in new_sites], nxt.name if nxt else None, self.ecog)
            tags.append(self.w.note(i, vid, t, "PROGRESS", text))
        self.truth.progressions.append((day, line_no, tags))

    def restage(self, day: float, response: str) -> None:
        proc = RESTAGING[self.key]
        if proc is None or day >= self.stop:
            return
        self.imaging(day, proc, "response assessment", ["Known disease re-measured against baseline."], notes.RESPONSE_IMPRESSION[response],
                     f"response assessment of {self.profile.name.lower()}")

    def onc_visit(self, day: float, panels=("cbc", "cmp"), chemo: bool = False, enc: int = AMB, kind: int = K_ONC) -> tuple[int, int]:
        vid, t = self.w.visit(self.i, day, enc, kind, panels=panels, chemo=chemo)
        if self.metastatic:
            self.mets_rows(vid, t)
            if self.rng.random() < 0.25:
                self.w.row(self.i, vid, t, self.ids.dx["cancer_pain"], 15, tagged=False)
                self.w.row(self.i, vid, t, self.ids.med["oxycodone"], 20, tagged=False)
        return vid, t

    def run_line(self, line_no: int, plan: Plan, start: float, stop: float) -> LineTruth:
        lt = LineTruth(line_no, plan.name, plan.intent, start)
        cursor = start
        for comp in plan.components:
            if cursor >= stop:
                break
            c_end, tags = self.run_component(comp, cursor, stop, plan.intent)
            if c_end is None:
                break
            lt.components.append(ComponentTruth(comp.kind, comp.label, [MEDS[d].name for d in comp.drugs], comp.procedure, cursor, c_end))
            lt.tags.extend(tags)
            lt.end = c_end
            gap = self.rng.uniform(21, 42) if comp.kind in (SURGERY, TRANSPLANT) else self.rng.uniform(14, 35)
            cursor = c_end + gap
        if plan.intent == "curative" and lt.end is not None and lt.end < stop:
            lt.end_reason = "completed"
            self.restage(lt.end + self.rng.uniform(21, 45), "NED" if self.rng.random() < 0.8 else "CR")
        elif lt.end is not None and stop >= self.stop and self.stop < self.death:
            lt.end_reason = "ongoing"
        elif stop >= self.death:
            lt.end_reason = "death"
        return lt

    def run_component(self, comp: Component, start: float, stop: float, intent: str) -> tuple[float | None, list[int]]:
        """Write one component's visits; returns (end day or None if nothing happened, tags of its drug/procedure rows)."""
        i, rng, ids, w = self.i, self.rng, self.ids, self.w
        tags: list[int] = []
        last = None
        if comp.kind == SURGERY:
            day = start
            enc = IMP if comp.inpatient else AMB
            vid, t = self.onc_visit(day, panels=("cbc", "bmp"), enc=enc)
            tags.append(w.row(i, vid, t, ids.proc[comp.procedure], 30))
            self.code_row(vid, t)
            w.row(i, vid, t, ids.proc["surgical_path_resection"], 35, tagged=False)
            w.note(i, vid, t, "PROGRESS", notes.surgery_note(_date(day), comp.label, self.profile.name))
            opt = self.truth.stage
            pt = f"p{opt.t}" if opt.t else None
            margins = "Margins negative for carcinoma." if rng.random() < 0.88 else "Tumor present at the margin."
            details = [f"Tumor size {self.size} cm.", margins]
            if pt:
                details.append(f"Pathologic stage: {pt} p{opt.n}.")
            diagnosis = f"{self.truth.histology.name[0].upper() + self.truth.histology.name[1:]}, resected."
            ptag = w.note(i, vid, t, "PATHOLOGY", notes.pathology_report(rng, _date(day), f"{self.truth.site.site}, {comp.label}", diagnosis, details), 240)
            tags.append(ptag)
            self.truth.pathology.append(PathologyTruth(day, comp.procedure or "", diagnosis, [tags[0], ptag]))
            last = day + (rng.uniform(1, 5) if comp.inpatient else 0.0)
            post = last + 14
            if post < stop:
                pv, pt_ = self.onc_visit(post, panels=())
                self.code_row(pv, pt_, tagged=False)
                w.note(i, pv, pt_, "PROGRESS", notes.treatment_visit_note(rng, _date(post), f"recovery after {comp.label}", None, self.ecog,
                                                                         "Incision healing well; pain controlled."))
            return last, tags
        if comp.kind in (INFUSION, ORAL, INJECTION, INTRAVESICAL, OBSERVATION, PROCEDURE):
            if comp.kind == INFUSION and rng.random() < 0.45 and start - 5 > float(self.pop.record_start[i]):
                pv, pt_ = self.w.visit(i, start - rng.uniform(3, 8), AMB, K_PROC)
                w.row(i, pv, pt_, ids.proc["port_placement"], 20, tagged=False)
                self.code_row(pv, pt_, tagged=False)
            if comp.kind in (ORAL, OBSERVATION):
                months = rng.randint(*comp.count)
                horizon = start + months * 30.44 if not comp.continuous else math.inf
                every = (56, 110) if comp.kind == ORAL else (90, 180)
            elif comp.kind == INJECTION:
                horizon = start + comp.count[1] * 30.44 if not comp.continuous else math.inf
                every = (84, 84)
            elif comp.kind == INTRAVESICAL:
                horizon = math.inf
                every = (7, 7)
            else:
                n = rng.randint(*comp.count)
                horizon = start + (n - 1) * comp.every_days + 0.5 if not comp.continuous else start + rng.uniform(9, 18) * 30.44
                every = (comp.every_days, comp.every_days)
            day = start
            k = 0
            next_restage = start + rng.uniform(56, 84)
            bcg_days = [start + 7 * j for j in range(6)] + [start + 91 + 7 * j for j in range(3)] + [start + 182 + 7 * j for j in range(3)]
            while day < stop and day <= horizon:
                k += 1
                if comp.kind == INTRAVESICAL:
                    if k > len(bcg_days):
                        break
                    day = bcg_days[k - 1]
                    if day >= stop:
                        break
                chemo_visit = comp.kind == INFUSION
                if chemo_visit:
                    panels = (("cbc",) if rng.random() < 0.7 else ()) + (("cmp",) if rng.random() < 0.3 else ())
                else:
                    panels = ("cbc",) if rng.random() < 0.35 else ()
                if self.key == "prostate" and comp.kind in (INJECTION, OBSERVATION, ORAL):
                    panels = panels + ("psa",)
                inpatient = comp.inpatient and k == 1
                vid, t = self.onc_visit(day, panels=panels, chemo=chemo_visit, enc=IMP if inpatient else AMB,
                                        kind=K_PROC if comp.kind in (INTRAVESICAL, PROCEDURE) else K_ONC)
                row_tags = []
                if comp.kind == INFUSION:
                    w.row(i, vid, t, ids.dx["chemo_encounter"], 15, tagged=False)
                    w.row(i, vid, t, ids.proc["chemo_infusion"], 30, tagged=False)
                    if len(comp.drugs) > 1:
                        w.row(i, vid, t, ids.proc["chemo_infusion_seq"], 31, tagged=False)
                    if rng.random() < 0.8:
                        w.row(i, vid, t, ids.med["ondansetron"], 25, tagged=False)
                elif comp.kind == INJECTION:
                    w.row(i, vid, t, ids.proc["leuprolide_inj"], 25, tagged=False)
                    w.row(i, vid, t, ids.proc["chemo_injection_hormonal"], 26, tagged=False)
                elif comp.kind == INTRAVESICAL:
                    row_tags.append(w.row(i, vid, t, ids.proc["bcg"], 25))
                    w.row(i, vid, t, ids.proc["bladder_instillation"], 26, tagged=False)
                elif comp.kind == PROCEDURE:
                    row_tags.append(w.row(i, vid, t, ids.proc[comp.procedure], 25))
                for d in comp.drugs:
                    row_tags.append(w.row(i, vid, t, ids.med[d], 32))
                if k == 1 or rng.random() < 0.85:
                    self.code_row(vid, t, tagged=False)
                if comp.kind == INFUSION and rng.random() < 0.06:
                    w.row(i, vid, t, ids.dx["chemo_neutropenia"], 16, tagged=False)
                    w.row(i, vid, t, ids.med["filgrastim"], 33, tagged=False)
                if k == 1:
                    tags.extend(row_tags)
                    self.ecog_row(vid, t, day)
                if k == 1 or rng.random() < 0.3:
                    cycle = k if comp.kind == INFUSION else None
                    w.note(i, vid, t, "PROGRESS", notes.treatment_visit_note(rng, _date(day), comp.label, cycle, self.ecog, None))
                last = day
                if intent == "palliative" and day >= next_restage and comp.kind != OBSERVATION:
                    self.restage(day + rng.uniform(1, 6), "PR" if rng.random() < 0.4 else "SD")
                    next_restage = day + rng.uniform(56, 90)
                if comp.kind != INTRAVESICAL:
                    day = day + rng.uniform(*every) + (rng.uniform(0, 2) if comp.kind == INFUSION else 0)
            if last is not None and comp.kind == OBSERVATION and self.key == "prostate" and last - start > 300 and start + 365 < stop:
                bday = start + 365 + rng.uniform(0, 30)
                if bday < stop:
                    vid, t = self.w.visit(i, bday, AMB, K_PROC)
                    btag = w.row(i, vid, t, ids.proc["prostate_biopsy"], 25)
                    self.code_row(vid, t, tagged=False)
                    ptag = w.note(i, vid, t, "PATHOLOGY", notes.pathology_report(rng, _date(bday), "Prostate, 12-core surveillance biopsy",
                                                                                  "Prostatic adenocarcinoma, Gleason score 3+3=6 (Grade Group 1), low volume.",
                                                                                  ["Unchanged from the diagnostic biopsy."]), 240)
                    self.truth.pathology.append(PathologyTruth(bday, "prostate_biopsy", "Gleason 3+3=6, stable", [btag, ptag]))
            return last, tags
        if comp.kind in (RADIATION, CHEMORADIATION):
            weeks = rng.randint(*comp.count)
            sim, st = self.w.visit(i, start, AMB, K_PROC)
            tags.append(w.row(i, sim, st, ids.proc["rt_simulation"], 20))
            w.row(i, sim, st, ids.proc["rt_planning"], 21, tagged=False)
            self.code_row(sim, st, tagged=False)
            day = start + rng.uniform(7, 12)
            last = start
            for wk in range(1, weeks + 1):
                if day >= stop:
                    break
                chemo_visit = comp.kind == CHEMORADIATION
                vid, t = self.onc_visit(day, panels=("cbc",) if chemo_visit else (), chemo=chemo_visit, kind=K_PROC)
                w.row(i, vid, t, ids.dx["radiotherapy_encounter"], 15, tagged=False)
                w.row(i, vid, t, ids.proc[comp.procedure or "rt_delivery"], 25, tagged=False)
                w.row(i, vid, t, ids.proc["rt_management"], 26, tagged=False)
                self.code_row(vid, t, tagged=False)
                if chemo_visit:
                    w.row(i, vid, t, ids.proc["chemo_infusion"], 30, tagged=False)
                    for d in comp.drugs:
                        dt = w.row(i, vid, t, ids.med[d], 32)
                        if wk == 1:
                            tags.append(dt)
                if wk == 1 or wk == weeks:
                    w.note(i, vid, t, "PROGRESS", notes.radiation_note(rng, _date(day), comp.label, wk, weeks))
                last = day
                day += 7
            return last, tags
        if comp.kind == TRANSPLANT:
            vid, t = self.onc_visit(start, panels=("cbc", "cmp"), enc=IMP)
            tags.append(w.row(i, vid, t, ids.proc[comp.procedure], 30))
            self.code_row(vid, t)
            w.note(i, vid, t, "PROGRESS", notes.treatment_visit_note(rng, _date(start), comp.label, None, self.ecog, "Admitted for high-dose melphalan and stem cell infusion."))
            return start + rng.uniform(14, 21), tags
        raise ValueError(f"unknown component kind {comp.kind!r}")

    def surveillance(self, day: float, d0: float) -> None:
        i, rng, prof = self.i, self.rng, self.profile
        use_history = self.key not in ("myeloma", "leukemia")
        k = 0
        while day < self.stop:
            k += 1
            vid, t = self.onc_visit(day, panels=("cbc", "cmp") + prof.markers if rng.random() < 0.4 else prof.markers)
            if use_history and day - d0 > 2 * DAYS_PER_YEAR:
                self.w.row(i, vid, t, self.ids.dx[prof.history_dx], 12, tagged=False)
            else:
                self.code_row(vid, t, tagged=False)
            if rng.random() < 0.5:
                self.w.note(i, vid, t, "PROGRESS", notes.surveillance_note(rng, _date(day), prof.name, int((day - d0) / 30.44)))
            if k % 2 == 0 and day - d0 < 5 * DAYS_PER_YEAR:
                iday = day - rng.uniform(2, 10)
                if iday > float(self.pop.record_start[i]):
                    self.restage(iday, "NED")
            day += rng.uniform(90, 130) if day - d0 < 2 * DAYS_PER_YEAR else rng.uniform(170, 380)

    def finish(self) -> CaseTruth:
        i, rng = self.i, self.rng
        if self.death <= self.end and math.isfinite(self.death):
            hday = self.death - rng.uniform(7, 60)
            last_line = self.truth.lines[-1] if self.truth.lines else None
            if rng.random() < 0.65 and hday > self.truth.clinical_diagnosis + 30:
                vid, t = self.w.visit(i, hday, AMB, K_ONC)
                tags = [self.w.row(i, vid, t, self.ids.proc["hospice_home"], 20), self.w.row(i, vid, t, self.ids.dx["palliative_care"], 15)]
                self.w.row(i, vid, t, self.ids.proc["advance_care_planning"], 21, tagged=False)
                self.code_row(vid, t, tagged=False)
                tags.append(self.w.note(i, vid, t, "PROGRESS", notes.hospice_note(rng, _date(hday), self.profile.name)))
                self.truth.hospice_day = hday
                self.truth.hospice_tags = tags
                if last_line is not None and (last_line.end is None or last_line.end > hday):
                    last_line.end = hday
            if last_line is not None and last_line.end_reason == "ongoing":
                last_line.end_reason = "death"
            self.truth.death = self.death
        self.truth.record_end = self.end
        return self.truth


def _cancer_key(index: int) -> str:
    from vista.synth.cancers import CANCER_KEYS

    return CANCER_KEYS[index]


def run_cases(w: CourseWriter, pop: Population, np_rng: np.random.Generator, window_end: float) -> list[CaseTruth]:
    """Simulate every case of the shard; updates ``pop.death`` and ``pop.record_end`` to the course's outcome."""
    cases = np.flatnonzero(pop.cancer >= 0)
    seeds = np_rng.integers(0, 2**63 - 1, size=len(cases), dtype=np.int64)
    out = []
    for i, seed in zip(cases.tolist(), seeds.tolist()):
        course = CaseCourse(w, pop, i, random.Random(seed), window_end)
        truth = course.run()
        end = truth.record_end
        pop.record_end[i] = end
        pop.death[i] = truth.death if math.isfinite(truth.death) else np.nan
        out.append(truth)
    return out


def run_rule_outs(w: CourseWriter, pop: Population, np_rng: np.random.Generator) -> list[RuleOutTruth]:
    """Rule-out work-ups of non-cases: one cancer code at an imaging or biopsy visit with a benign result, never repeated."""
    subjects = np.flatnonzero(pop.rule_out_cancer >= 0)
    seeds = np_rng.integers(0, 2**63 - 1, size=len(subjects), dtype=np.int64)
    out = []
    for i, seed in zip(subjects.tolist(), seeds.tolist()):
        rng = random.Random(seed)
        prof = CANCERS[_cancer_key(int(pop.rule_out_cancer[i]))]
        s, e = float(pop.record_start[i]), float(pop.record_end[i])
        if e - s < 60:
            continue
        day = s + 30 + rng.random() * (e - s - 60)
        steps = [st for path in prof.workup for st in path.steps if st.note]
        step = rng.choice(steps)
        procs = list(step.procedures) + ([rng.choice(step.choice)] if step.choice else [])
        vid, t = w.visit(i, day, AMB, K_WORKUP, panels=step.labs)
        for dx in step.dx:
            w.row(i, vid, t, w.ids.dx[dx], 15, tagged=False)
        for p in procs:
            w.row(i, vid, t, w.ids.proc[p], 25, tagged=False)
        sites = [x for x in prof.sites if prof.key != "breast" or ((x.icd10 in ("C50.921", "C50.922")) != bool(pop.female[i]))]
        code_tag = w.row(i, vid, t, w.ids.site[sites[0].icd10], 12)
        if step.note == "RADIOLOGY":
            exam = PROCEDURES[procs[0]].phrase
            text = notes.radiology_report(rng, _date(day), exam[0].upper() + exam[1:], f"rule out {prof.name.lower()}",
                                          ["Small indeterminate finding without suspicious features."],
                                          "Indeterminate, likely benign; short-interval follow-up suggested.")
        else:
            specimen, diagnosis, details = notes.background_pathology(rng, procs[0])
            text = notes.pathology_report(rng, _date(day), specimen, diagnosis + " Negative for malignancy.", details)
        note_tag = w.note(i, vid, t, step.note, text, 180)
        out.append(RuleOutTruth(i, prof.key, day, [code_tag, note_tag]))
    return out


__all__ = ["CaseCourse", "CaseTruth", "CourseWriter", "RuleOutTruth", "run_cases", "run_rule_outs"]
