"""One case's course in the making: who the patient is, what has been written so far (`CaseTruth`), and the
visit and row helpers every step of the story uses (the cancer code, ECOG, metastases, imaging, response
assessment)."""

from __future__ import annotations

import math
import random

from vista.shared.synth import notes
from vista.shared.synth.cancers import CANCER_KEYS, CANCERS, CancerProfile
from vista.shared.synth.catalog import PROCEDURES
from vista.shared.synth.course.draws import iso_date, sentence_case
from vista.shared.synth.course.truth import CaseTruth, ImagingTruth
from vista.shared.synth.course.writer import CourseWriter
from vista.shared.synth.population import CURRENT, DAYS_PER_YEAR, FORMER, NEVER, Population
from vista.shared.synth.visits import AMB, K_ONC, K_PROC

RESTAGING_IMAGING = {
    "lung": "ct_chest_contrast", "breast": "ct_chest_contrast", "prostate": "bone_scan", "colorectal": "ct_abd_pelvis", "bladder": "ct_abd_pelvis",
    "cervical": "ct_abd_pelvis", "esophageal": "ct_chest_contrast", "endometrial": "ct_abd_pelvis", "gastric": "ct_abd_pelvis",
    "ovarian": "ct_abd_pelvis", "pancreatic": "ct_abd_pelvis", "liver": "mri_abdomen", "leukemia": None, "myeloma": "skeletal_survey",
    "lymphoma": "pet_ct",
}
"""Imaging used for response assessment and surveillance, per cancer (leukemia is followed with blood counts)."""


class CaseCourse:
    """The state of one case's course while its steps write it: the patient, the rows' writer, the case's own random
    stream, and what has happened so far (ECOG now, metastatic or not, the truth written)."""

    truth: CaseTruth
    """Set when the disease is drawn (`vista.shared.synth.course.disease.draw_disease`)."""

    def __init__(self, writer: CourseWriter, population: Population, subject: int, rng: random.Random, window_end: float):
        self.writer = writer
        self.ids = writer.ids
        self.population = population
        self.subject = subject
        self.rng = rng
        self.profile: CancerProfile = CANCERS[CANCER_KEYS[int(population.cancer[subject])]]
        self.cancer = self.profile.key
        self.female = bool(population.female[subject])
        self.diagnosis_day = float(population.diagnosis[subject])
        self.record_start = float(population.record_start[subject])
        self.record_end = min(float(population.follow_end[subject]), window_end)
        """The last day of the record: end of follow-up or of the data window, and death once it is drawn."""
        self.death = math.inf
        self.ecog = 0
        self.metastatic = False
        self.tumor_size_cm = 0.0

    # ------------------------------------------------------------------ the patient
    def age(self, day: float) -> float:
        return (day - float(self.population.birth[self.subject])) / DAYS_PER_YEAR

    def smoking_status(self, day: float) -> int:
        """NEVER, FORMER or CURRENT on ``day`` (a former smoker smoked before quitting, a smoker had not started)."""
        status = int(self.population.smoking[self.subject])
        if status == FORMER and day < self.population.smoking_quit[self.subject]:
            return CURRENT
        if status == CURRENT and day < self.population.smoking_start[self.subject]:
            return NEVER
        return status

    # ------------------------------------------------------------------ rows every step writes
    def visit(self, day: float, encounter: int, kind: int, panels=(), chemo: bool = False) -> tuple[int, int]:
        return self.writer.visit(self.subject, day, encounter, kind, panels=panels, chemo=chemo)

    def row(self, visit_id: int, time: int, code: int, offset_min: int = 10, **kwargs) -> int:
        return self.writer.row(self.subject, visit_id, time, code, offset_min, **kwargs)

    def note(self, visit_id: int, time: int, kind: str, text: str, offset_min: int = 90) -> int:
        return self.writer.note(self.subject, visit_id, time, kind, text, offset_min)

    def cancer_code_row(self, visit_id: int, time: int, tagged: bool = True) -> int:
        """The ICD-10-CM code of the case's cancer site at this visit."""
        return self.row(visit_id, time, self.ids.site[self.truth.site.icd10], 12, tagged=tagged)

    def ecog_row(self, visit_id: int, time: int, day: float) -> None:
        tag = self.row(visit_id, time, self.ids.lab["ecog"], 6, numeric=float(self.ecog))
        self.truth.ecog.append((day, self.ecog, tag))

    def metastasis_rows(self, visit_id: int, time: int, share: float = 0.6) -> None:
        """Codes of the known metastatic sites, each coded at about ``share`` of visits."""
        for site in self.truth.metastases:
            if self.rng.random() < share:
                self.row(visit_id, time, self.ids.dx[site], 14, tagged=False)

    def oncology_visit(self, day: float, panels=("cbc", "cmp"), chemo: bool = False, encounter: int = AMB,
                       kind: int = K_ONC) -> tuple[int, int]:
        """A visit of the treating team; a metastatic patient's also codes metastases and, at times, cancer pain."""
        visit_id, time = self.visit(day, encounter, kind, panels=panels, chemo=chemo)
        if self.metastatic:
            self.metastasis_rows(visit_id, time)
            if self.rng.random() < 0.25:
                self.row(visit_id, time, self.ids.dx["cancer_pain"], 15, tagged=False)
                self.row(visit_id, time, self.ids.med["oxycodone"], 20, tagged=False)
        return visit_id, time

    def imaging(self, day: float, procedure: str, purpose: str, findings: list[str], impression: str, indication: str,
                code: bool = True, kind: int = K_PROC) -> list[int]:
        """An imaging visit with its radiology report; returns the tags of the procedure and the report."""
        visit_id, time = self.visit(day, AMB, kind)
        tags = [self.row(visit_id, time, self.ids.proc[procedure], 20)]
        if code:
            self.cancer_code_row(visit_id, time)
        exam = sentence_case(PROCEDURES[procedure].phrase)
        text = notes.radiology_report(self.rng, iso_date(day), exam, indication, findings, impression)
        tags.append(self.note(visit_id, time, "RADIOLOGY", text, 120))
        self.truth.imaging.append(ImagingTruth(day, procedure, purpose, impression, tags))
        return tags

    def restage(self, day: float, response: str) -> None:
        """A response assessment (``NED``, ``CR``, ``PR``, ``SD``) before the record ends, where the cancer is imaged."""
        procedure = RESTAGING_IMAGING[self.cancer]
        if procedure is None or day >= self.record_end:
            return
        self.imaging(day, procedure, "response assessment", ["Known disease re-measured against baseline."],
                     notes.RESPONSE_IMPRESSION[response], f"response assessment of {self.profile.name.lower()}")
