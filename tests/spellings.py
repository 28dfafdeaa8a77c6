"""Small, realistic MEDS 0.4 datasets spelled the way other projects write them, and what each one holds (`EXPECTED`).

The project's own generator writes ``ICD10CM//C34.90``, ``GENDER//F``, ``ENCOUNTER//AMB``. Real datasets do not:

- `write_omop_style`: MEDS made by ``meds_etl`` (``meds_etl_omop``) from an OMOP CDM database. Codes are
  ``vocabulary_id/concept_code`` with one slash: conditions ``SNOMED/254637007`` or, when the source concept is an
  ICD code, ``ICD10CM/C34.1``; ``LOINC/8480-6`` with numeric values, ``RxNorm/1049221``, ``CPT4/71260``,
  ``Visit/IP``/``Visit/OP``/``Visit/ER``, notes as their note-class concept (``LOINC/18748-4``) with the text in
  ``text_value``; the person table's rows (``MEDS_BIRTH``, ``Gender/F``, ``Race/5``, ``Ethnicity/Not Hispanic``)
  all timed at the birth; date-only facts (conditions, deaths) at 23:59:59 of their day. Extension columns
  ``visit_id`` (int64, the visit_occurrence_id), ``unit`` (string, unit_source_value), ``table`` (string, the OMOP
  table: person, visit, condition, measurement, observation, drug_exposure, procedure, note, death) and ``note_id``
  (int64). Two shards, ``data/0.parquet`` and ``data/1.parquet``.
- `write_synthea_style`: MEDS derived from Synthea's CSV export. SNOMED CT conditions only (no ICD at all: lung
  254637007 / 424132000 / 254626006, breast 254837009, colorectal 363406005 / 93761005), ``ENCOUNTER/<class>``
  visits (ambulatory, wellness, emergency, inpatient), LOINC observations with units, ``RXNORM/…`` medications,
  ``CVX/…`` immunizations, SNOMED procedures including imaging (399208008 chest X-ray, 418891003 CT chest,
  24623002 screening mammography); static ``GENDER/F``, ``RACE/white``, ``ETHNICITY/nonhispanic``; no notes (Synthea
  writes none). Extension columns ``visit_id`` (string, the encounter UUID), ``unit``, ``end`` (timestamp) and
  ``table`` (Synthea's CSV file). ``metadata/codes.parquet`` gives SNOMED ``parent_codes`` (a simplified hierarchy:
  424132000 and 254626006 under 254637007, under 363358000; 93761005 under 363406005), so a cohort reaches
  254626006 only through the parents.
- `write_mimic_style`: MIMIC-IV in MEDS as the MIMIC_IV_MEDS / MEDS-Extract ETL writes it: ``MEDS_BIRTH`` (1 January
  of the birth year), static ``GENDER//F``, ``RACE//WHITE`` at each admission, ``HOSPITAL_ADMISSION//<type>//
  <location>``, ``ED_REGISTRATION``/``ED_OUT``, ``HOSPITAL_DISCHARGE//<location>``, ``DIAGNOSIS//ICD//10//C3411``
  (no dot; ``DIAGNOSIS//ICD//9//1623`` before October 2015) timed at the discharge, ``PROCEDURE//ICD//10//…``,
  ``LAB//51222//g/dL`` (item id, unit in the code; ``text_value`` holds the raw value too), ``MEDICATION//START//
  <drug>`` and ``MEDICATION//<drug>//Administered``, the OMR table's ``Blood Pressure`` / ``Weight (Lbs)`` rows with
  text values, ``MEDS_DEATH``; MIMIC-IV-Note reports as ``NOTE//RADIOLOGY`` and ``NOTE//DISCHARGE`` with the text.
  Extension columns ``hadm_id`` (int64) and ``note_id`` (string, ``<subject>-RR-<n>``). One shard per split,
  ``data/<split>/0.parquet``. MIMIC-IV itself shifts every date into 2110–2210; ``date_shift_years`` reproduces that.

Each dataset has 57 subjects in sets of one case and two controls of the same sex, birth year (±7 months), split and
observation period (so matching on sex and 10-year age band always succeeds), for lung, breast and colorectal cancer,
six cases each; cases satisfy the cohort rules (two target codes on distinct days ≤60 days apart, ≥180 days after the
first visit, with ≥2 visits more than a year before the first code). Three more subjects must not become cases: a
prevalent one (its pair within the washout), one with a single rule-out code, and one with an isolated target code
a year after its first visit, long before its pair (its record holds the outcome before the prediction time).
Everything is seeded: the same call writes the same bytes of data.

`EXPECTED` (module level) says what each fixture holds, counted while the rows are written (from what each row *is*,
not from any coding profile): the cases per cancer, their index dates, the controls, the excluded subjects by reason,
row counts per category (the names of `vista.shared.coding.Category`), notes per kind, lab units, extension columns.
``EXPECTED["eventstream_demo"]`` describes ``tests/data/eventstream_demo.xml``.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from vista.shared.meds import schema

DATA_DIR = Path(__file__).parent / "data"
EVENTSTREAM_DEMO = DATA_DIR / "eventstream_demo.xml"
CANCERS = ("lung", "breast", "colorectal")
SEED = 20240611


# ================================================================================================ clinical vocabulary
@dataclass(frozen=True)
class Diagnosis:
    description: str
    icd10: str  # dotted, as ICD-10-CM writes it
    icd9: str
    snomed: str
    snomed_description: str
    cancer: str | None = None  # the target cancer it codes, if any


DIAGNOSES: Mapping[str, Diagnosis] = {
    "lung_cancer": Diagnosis("Malignant neoplasm of upper lobe, right bronchus or lung", "C34.11", "162.3",
                             "254637007", "Non-small cell lung cancer (disorder)", "lung"),
    "lung_cancer_stage1": Diagnosis("Malignant neoplasm of upper lobe, bronchus or lung", "C34.1", "162.3", "424132000",
                                    "Non-small cell carcinoma of lung, TNM stage 1 (disorder)", "lung"),
    "lung_adenocarcinoma": Diagnosis("Malignant neoplasm of unspecified part of right bronchus or lung", "C34.91", "162.9",
                                     "254626006", "Adenocarcinoma of lung (disorder)", "lung"),
    "breast_cancer": Diagnosis("Malignant neoplasm of unspecified site of right female breast", "C50.911", "174.9",
                               "254837009", "Malignant neoplasm of breast (disorder)", "breast"),
    "colon_cancer": Diagnosis("Malignant neoplasm of sigmoid colon", "C18.7", "153.3", "363406005",
                              "Malignant tumor of colon (disorder)", "colorectal"),
    "colon_cancer_primary": Diagnosis("Malignant neoplasm of colon, unspecified", "C18.9", "153.9", "93761005",
                                      "Primary malignant neoplasm of colon (disorder)", "colorectal"),
    "hypertension": Diagnosis("Essential (primary) hypertension", "I10", "401.9", "59621000",
                              "Essential hypertension (disorder)"),
    "diabetes": Diagnosis("Type 2 diabetes mellitus without complications", "E11.9", "250.00", "44054006",
                          "Diabetes mellitus type 2 (disorder)"),
    "hyperlipidemia": Diagnosis("Hyperlipidemia, unspecified", "E78.5", "272.4", "55822004", "Hyperlipidemia (disorder)"),
    "copd": Diagnosis("Chronic obstructive pulmonary disease, unspecified", "J44.9", "496", "13645005",
                      "Chronic obstructive lung disease (disorder)"),
    "osteoarthritis": Diagnosis("Unilateral primary osteoarthritis, unspecified knee", "M17.10", "715.96", "239873007",
                                "Osteoarthritis of knee (disorder)"),
    "cough": Diagnosis("Cough", "R05", "786.2", "49727002", "Cough (finding)"),
    "hemoptysis": Diagnosis("Hemoptysis", "R04.2", "786.30", "66857006", "Hemoptysis (finding)"),
    "bronchitis": Diagnosis("Acute bronchitis, unspecified", "J20.9", "466.0", "10509002", "Acute bronchitis (disorder)"),
    "breast_lump": Diagnosis("Unspecified lump in the right breast", "N63.10", "611.72", "89164003",
                             "Breast lump (finding)"),
    "iron_deficiency_anemia": Diagnosis("Iron deficiency anemia, unspecified", "D50.9", "280.9", "87522002",
                                        "Iron deficiency anemia (disorder)"),
    "rectal_bleeding": Diagnosis("Hemorrhage of anus and rectum", "K62.5", "569.3", "12063002",
                                 "Rectal hemorrhage (disorder)"),
}
TARGET_DIAGNOSES: Mapping[str, tuple[str, ...]] = {
    "lung": ("lung_cancer", "lung_cancer_stage1", "lung_adenocarcinoma"),
    "breast": ("breast_cancer",),
    "colorectal": ("colon_cancer", "colon_cancer_primary"),
}
SNOMED_PARENTS: Mapping[str, tuple[str, ...]] = {  # a simplified SNOMED CT hierarchy (Synthea's codes.parquet)
    "424132000": ("254637007",), "254626006": ("254637007",), "254637007": ("363358000",),
    "363358000": ("363346000",), "93761005": ("363406005",), "363406005": ("363346000",), "254837009": ("363346000",),
}
SNOMED_NAMES = {"363358000": "Malignant tumor of lung (disorder)", "363346000": "Malignant neoplastic disease (disorder)"}


@dataclass(frozen=True)
class Lab:
    loinc: str
    description: str
    unit: str  # UCUM, as OMOP/Synthea write it
    mean: float
    sd: float
    mimic_itemid: int | None = None
    mimic_unit: str | None = None  # d_labitems' valueuom
    vital: bool = False  # a vital sign: an observation, not a lab result


LABS: Mapping[str, Lab] = {
    "hemoglobin": Lab("718-7", "Hemoglobin [Mass/volume] in Blood", "g/dL", 13.6, 1.1, 51222, "g/dL"),
    "creatinine": Lab("2160-0", "Creatinine [Mass/volume] in Serum or Plasma", "mg/dL", 0.95, 0.2, 50912, "mg/dL"),
    "glucose": Lab("2345-7", "Glucose [Mass/volume] in Serum or Plasma", "mg/dL", 104.0, 18.0, 50931, "mg/dL"),
    "wbc": Lab("6690-2", "Leukocytes [#/volume] in Blood by Automated count", "10*3/uL", 7.2, 1.6, 51301, "K/uL"),
    "platelets": Lab("777-3", "Platelets [#/volume] in Blood by Automated count", "10*3/uL", 255.0, 50.0, 51265, "K/uL"),
    "cea": Lab("2039-6", "Carcinoembryonic Ag [Mass/volume] in Serum or Plasma", "ng/mL", 2.1, 0.8),
    "sbp": Lab("8480-6", "Systolic blood pressure", "mm[Hg]", 128.0, 12.0, vital=True),
    "dbp": Lab("8462-4", "Diastolic blood pressure", "mm[Hg]", 79.0, 8.0, vital=True),
    "weight": Lab("29463-7", "Body weight", "kg", 78.0, 13.0, vital=True),
}


@dataclass(frozen=True)
class Medication:
    rxnorm: str
    name: str
    mimic_name: str


MEDICATIONS: Mapping[str, Medication] = {
    "lisinopril": Medication("314076", "lisinopril 10 MG Oral Tablet", "Lisinopril"),
    "metformin": Medication("860975", "24 HR metformin hydrochloride 500 MG Extended Release Oral Tablet", "MetFORMIN (Glucophage)"),
    "atorvastatin": Medication("617312", "atorvastatin 20 MG Oral Tablet", "Atorvastatin"),
    "albuterol": Medication("745679", "albuterol 0.09 MG/ACTUAT Metered Dose Inhaler", "Albuterol Inhaler"),
    "oxycodone_apap": Medication("1049221", "acetaminophen 325 MG / oxycodone hydrochloride 5 MG Oral Tablet",
                                 "OxyCODONE-Acetaminophen (5mg-325mg)"),
    "carboplatin": Medication("40048", "carboplatin", "CARBOplatin"),
    "paclitaxel": Medication("56946", "paclitaxel", "PACLitaxel"),
    "tamoxifen": Medication("10324", "tamoxifen", "Tamoxifen Citrate"),
    "anastrozole": Medication("84857", "anastrozole", "Anastrozole"),
    "oxaliplatin": Medication("32592", "oxaliplatin", "Oxaliplatin"),
    "fluorouracil": Medication("4492", "fluorouracil", "Fluorouracil"),
}


@dataclass(frozen=True)
class Procedure:
    description: str
    cpt: str
    snomed: str
    icd10pcs: str | None
    icd9proc: str | None
    imaging: bool


PROCEDURES: Mapping[str, Procedure] = {
    "chest_xray": Procedure("Radiologic examination, chest; 2 views", "71046", "399208008", None, None, True),
    "ct_chest": Procedure("Computed tomography, thorax; with contrast material", "71260", "418891003", None, None, True),
    "bronchoscopy_biopsy": Procedure("Bronchoscopy with transbronchial lung biopsy", "31628", "10847001", "0BBC8ZX",
                                     "33.27", False),
    "mammogram": Procedure("Screening mammography, bilateral", "77067", "24623002", None, None, True),
    "breast_biopsy": Procedure("Biopsy, breast, with placement of localization device; percutaneous", "19083",
                               "122548005", "0HBT3ZX", "85.11", False),
    "colonoscopy_biopsy": Procedure("Colonoscopy, flexible; with biopsy", "45380", "73761001", "0DBN8ZX", "45.25", False),
    "ct_abdomen_pelvis": Procedure("Computed tomography, abdomen and pelvis; with contrast material", "74177",
                                   "433112001", None, None, True),
    "ecg": Procedure("Electrocardiogram, routine ECG with at least 12 leads", "93000", "29303009", None, None, False),
}


# ================================================================================================ the neutral cohort
@dataclass(frozen=True)
class Visit:
    start: datetime
    end: datetime
    kind: str  # OP, ER, IP
    number: int  # unique within the dataset (visit_occurrence_id, hadm_id, encounter UUID seed)


@dataclass(frozen=True)
class Fact:
    time: datetime
    kind: str  # dx, lab, med, proc, note
    key: str  # DIAGNOSES/LABS/MEDICATIONS/PROCEDURES key, or the note kind
    visit: int  # index into Person.visits
    value: float | None = None
    text: str | None = None


@dataclass
class Person:
    subject_id: int
    sex: str
    birth: date
    race: str  # White, Black or African American, Asian
    hispanic: bool
    split: str
    role: str  # case, control, prevalent, single_code, earlier_code
    cancer: str | None
    anchor: date  # a case's index date; a control's matched case's
    icd_coded: bool  # OMOP: conditions carry their ICD source concept (else SNOMED)
    visits: list[Visit] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    death: datetime | None = None


_RADIOLOGY = {
    "ct_chest": ("EXAM: CT chest with contrast.\nFindings: {finding}\nImpression: {impression}",
                 "2.6 cm spiculated mass in the right upper lobe with an enlarged right hilar node.",
                 "Right upper lobe mass suspicious for primary lung malignancy; tissue sampling recommended.",
                 "No pulmonary nodule or mass. Mild emphysematous change.", "No acute cardiopulmonary finding."),
    "chest_xray": ("EXAM: Chest radiograph, 2 views.\nFindings: {finding}\nImpression: {impression}",
                   "Ill-defined opacity in the right upper zone.", "Right upper zone opacity; CT recommended.",
                   "Lungs are clear. Heart size normal.", "No acute disease."),
    "mammogram": ("EXAM: Bilateral screening mammogram.\nFindings: {finding}\nImpression: {impression}",
                  "Irregular spiculated 1.8 cm mass at 10 o'clock in the right breast.",
                  "BI-RADS 4C: suspicious for malignancy; biopsy recommended.",
                  "Scattered fibroglandular densities. No suspicious mass.", "BI-RADS 1: negative."),
    "ct_abdomen_pelvis": ("EXAM: CT abdomen and pelvis with contrast.\nFindings: {finding}\nImpression: {impression}",
                          "Circumferential wall thickening of the sigmoid colon with pericolic nodes. No liver lesion.",
                          "Sigmoid colon mass with regional nodes; no distant metastasis.",
                          "No acute abdominal process.", "Unremarkable."),
}
_PATHOLOGY = {
    "lung": "SPECIMEN: Right upper lobe, transbronchial biopsy.\nDiagnosis: Adenocarcinoma, moderately differentiated, "
            "consistent with lung primary (TTF-1 positive).",
    "breast": "SPECIMEN: Right breast, core needle biopsy.\nDiagnosis: Invasive ductal carcinoma, grade 2. ER positive, "
              "PR positive, HER2 negative.",
    "colorectal": "SPECIMEN: Sigmoid colon, endoscopic biopsy.\nDiagnosis: Invasive adenocarcinoma, moderately "
                  "differentiated. Mismatch repair proteins retained.",
}


def _at(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime.combine(day, time(hour, minute))


class _Builder:
    """Builds one person's visits and facts (seeded per subject)."""

    def __init__(self, person: Person, rng: random.Random, next_visit: Callable[[], int]):
        self.p = person
        self.rng = rng
        self.next_visit = next_visit
        self.chronic = rng.sample(["hypertension", "diabetes", "hyperlipidemia", "copd", "osteoarthritis"], rng.randint(1, 3))

    def visit(self, day: date, kind: str) -> int:
        hour = self.rng.randint(8, 14)
        start = _at(day, hour, self.rng.choice((0, 15, 30, 45)))
        end = start + {"OP": timedelta(minutes=50), "ER": timedelta(hours=6), "IP": timedelta(days=3, hours=2)}[kind]
        self.p.visits.append(Visit(start, end, kind, self.next_visit()))
        return len(self.p.visits) - 1

    def add(self, v: int, kind: str, key: str, minutes: int, value: float | None = None, text: str | None = None) -> None:
        self.p.facts.append(Fact(self.p.visits[v].start + timedelta(minutes=minutes), kind, key, v, value, text))

    def lab(self, v: int, key: str, minutes: int, shift: float = 0.0) -> None:
        lab = LABS[key]
        self.add(v, "lab", key, minutes, round(self.rng.gauss(lab.mean + shift, lab.sd), 1))

    def routine(self, v: int) -> None:
        """What an ordinary visit records: vitals, sometimes labs, chronic codes and drugs, a progress note."""
        rng = self.rng
        for key in ("sbp", "dbp", "weight"):
            self.lab(v, key, 10)
        if rng.random() < 0.5:
            for key in ("hemoglobin", "creatinine", "glucose"):
                self.lab(v, key, 35)
        for condition in self.chronic:
            if rng.random() < 0.4:
                self.add(v, "dx", condition, 20)
        drugs = {"hypertension": "lisinopril", "diabetes": "metformin", "hyperlipidemia": "atorvastatin", "copd": "albuterol"}
        for condition in self.chronic:
            if condition in drugs and rng.random() < 0.3:
                self.add(v, "med", drugs[condition], 40)
        if rng.random() < 0.1:  # background rates of what cancers also show
            self.add(v, "dx", rng.choice(("cough", "bronchitis", "iron_deficiency_anemia")), 25)
        if rng.random() < 0.25:
            self.add(v, "note", "PROGRESS", 45, text=f"Subjective: routine follow-up.\nAssessment: {', '.join(self.chronic)} "
                                                     "stable.\nPlan: continue current medications.")

    def imaging(self, v: int, key: str, *, positive: bool) -> None:
        template, finding, impression, normal_finding, normal_impression = _RADIOLOGY[key]
        self.add(v, "proc", key, 60)
        self.add(v, "note", "RADIOLOGY", 120, text=template.format(finding=finding if positive else normal_finding,
                                                                  impression=impression if positive else normal_impression))

    def schedule(self, first: date, last: date, avoid: set[date]) -> None:
        """Regular visits from ``first`` to ``last`` (every 80–150 days), skipping ±10 days around ``avoid``."""
        day = first
        while day <= last:
            if all(abs((day - a).days) > 10 for a in avoid):
                kind = "ER" if self.rng.random() < 0.12 else "OP"
                v = self.visit(day, kind)
                self.routine(v)
                if kind == "ER":
                    self.add(v, "dx", "bronchitis", 30)
                    self.imaging(v, "chest_xray", positive=False)
            day += timedelta(days=self.rng.randint(80, 150))


def _cancer_course(b: _Builder, cancer: str, index: date, code: str, pair_gap: int) -> list[date]:
    """Work-up before ``index``, the diagnosis on ``index`` and ``index + pair_gap``, treatment after; the dates used."""
    rng = b.rng
    v = b.visit(index - timedelta(days=60), "OP")
    b.routine(v)
    if cancer == "lung":
        b.add(v, "dx", "cough", 20)
        w = b.visit(index - timedelta(days=14), "OP")
        b.add(w, "dx", "hemoptysis", 20)
        b.imaging(w, "ct_chest", positive=True)
        d = b.visit(index, "IP")
        b.add(d, "proc", "bronchoscopy_biopsy", 90)
        drugs = ("carboplatin", "paclitaxel")
    elif cancer == "breast":
        b.add(v, "dx", "breast_lump", 20)
        w = b.visit(index - timedelta(days=14), "OP")
        b.imaging(w, "mammogram", positive=True)
        d = b.visit(index, "OP")
        b.add(d, "proc", "breast_biopsy", 20)
        drugs = ("tamoxifen", "anastrozole")
    else:
        b.add(v, "dx", "iron_deficiency_anemia", 20)
        b.lab(v, "hemoglobin", 35, shift=-3.0)
        b.lab(v, "cea", 35, shift=4.0)
        w = b.visit(index - timedelta(days=14), "OP")
        b.add(w, "dx", "rectal_bleeding", 20)
        d = b.visit(index, "IP")
        b.add(d, "proc", "colonoscopy_biopsy", 90)
        drugs = ("oxaliplatin", "fluorouracil")
    b.lab(d, "hemoglobin", 30)
    b.add(d, "note", "PATHOLOGY", 300, text=_PATHOLOGY[cancer])
    b.add(d, "dx", code, 320)
    second = b.visit(index + timedelta(days=pair_gap), "OP")
    b.routine(second)
    b.add(second, "dx", code, 20)
    if cancer == "colorectal":
        b.imaging(second, "ct_abdomen_pelvis", positive=True)
    if b.p.visits[d].kind == "IP":
        b.add(d, "note", "DISCHARGE", int((b.p.visits[d].end - b.p.visits[d].start).total_seconds() // 60) - 30,
              text=f"Discharge summary.\nHospital course: work-up of suspected {cancer} cancer; biopsy performed.\n"
                   "Discharge condition: stable.")
        b.add(d, "med", "oxycodone_apap", 600)
    dates = [index - timedelta(days=60), index - timedelta(days=14), index, index + timedelta(days=pair_gap)]
    for k, offset in enumerate((70, 130, 200, 270)):
        day = index + timedelta(days=pair_gap + offset)
        t = b.visit(day, "OP")
        b.routine(t)
        b.add(t, "med", drugs[k % 2], 30)
        if rng.random() < 0.6:
            b.add(t, "dx", code, 25)
        dates.append(day)
    return dates


def _people(base_id: int, id_step: int, seed: int) -> list[Person]:
    """The 57 subjects of one dataset (see the module docstring), in subject id order."""
    rng = random.Random(seed)
    counter = iter(range(1, 10**6))
    next_visit = lambda: next(counter)  # noqa: E731
    people: list[Person] = []
    ids = iter(range(base_id, base_id + 1000 * id_step, id_step))
    split_of_set = ("train", "train", "train", "tuning", "held_out", "held_out")
    races = ("White", "White", "White", "Black or African American", "Asian")
    anchors = [date(2014, 3, 10) + timedelta(days=int(k * 2520 / 17)) for k in range(18)]  # 2014-03 … 2021-02
    rng.shuffle(anchors)
    set_number = 0
    for cancer in CANCERS:
        codes = TARGET_DIAGNOSES[cancer]
        for k in range(6):
            anchor = anchors[set_number]
            set_number += 1
            sex = "F" if cancer == "breast" or k % 2 == 0 else "M"
            band = rng.choice((50, 60, 70))
            age = band + 5 + rng.uniform(-1.5, 1.5)
            birth = anchor - timedelta(days=int(age * 365.25))
            split = split_of_set[k]
            race, hispanic = rng.choice(races), rng.random() < 0.15
            for role in ("case", "control", "control"):
                sid = next(ids)
                p_rng = random.Random(seed * 7919 + sid)
                shift = timedelta(days=p_rng.randint(-200, 200)) if role == "control" else timedelta(0)
                p_anchor = anchor + (timedelta(days=p_rng.randint(-30, 30)) if role == "control" else timedelta(0))
                code = codes[k % len(codes)]
                # OMOP: every other set coded through its ICD source concept; the adenocarcinoma always (OMOP's
                # codes.parquet carries no SNOMED parents, so 254626006 would be in no cohort's list)
                person = Person(sid, sex, birth + shift, race if role == "case" else p_rng.choice(races),
                                hispanic, split, role, cancer if role == "case" else None, p_anchor,
                                icd_coded=(k % 2 == 0 or code == "lung_adenocarcinoma"))
                b = _Builder(person, p_rng, next_visit)
                first = p_anchor - timedelta(days=3 * 365 + p_rng.randint(0, 60))
                if role == "case":
                    course = _cancer_course(b, cancer, p_anchor, code, p_rng.randint(21, 40))
                    b.schedule(first, p_anchor - timedelta(days=75), set(course))
                else:
                    b.schedule(first, p_anchor + timedelta(days=300), set())
                people.append(person)
    # the three subjects that must not become cases (held_out, so a test cohort sees them)
    specials = (("prevalent", "lung", "lung_cancer"), ("single_code", "lung", "lung_cancer"),
                ("earlier_code", "colorectal", "colon_cancer"))
    for role, cancer, code in specials:
        sid = next(ids)
        p_rng = random.Random(seed * 7919 + sid)
        anchor = date(2018, 5, 1) + timedelta(days=p_rng.randint(0, 300))
        person = Person(sid, "M", anchor - timedelta(days=int(66 * 365.25)), "White", False, "held_out", role, cancer,
                        anchor, icd_coded=True)
        b = _Builder(person, p_rng, next_visit)
        first = anchor - timedelta(days=3 * 365)
        if role == "prevalent":  # the pair inside the washout after the first visit
            b.schedule(first + timedelta(days=130), anchor + timedelta(days=300), set())
            for offset in (0, 40, 100):
                v = b.visit(first + timedelta(days=offset), "OP")
                b.routine(v)
                b.add(v, "dx", code, 20)
        elif role == "single_code":  # one rule-out code, a negative CT, never coded again
            b.schedule(first, anchor + timedelta(days=300), {anchor})
            v = b.visit(anchor, "OP")
            b.add(v, "dx", code, 20)
            b.imaging(v, "ct_chest", positive=False)
        else:  # an isolated code a year after the first visit, then a proper pair three years in
            isolated = first + timedelta(days=365)
            course = _cancer_course(b, cancer, anchor, code, 28)
            b.schedule(first, anchor - timedelta(days=75), set(course) | {isolated})
            v = b.visit(isolated, "OP")
            b.routine(v)
            b.add(v, "dx", code, 22)
        people.append(person)
    for person in people:
        p_rng = random.Random(seed * 104729 + person.subject_id)
        if p_rng.random() < (0.3 if person.role == "case" else 0.08):
            last = max([v.end for v in person.visits] + [f.time for f in person.facts])
            person.death = last + timedelta(days=p_rng.randint(5, 40), hours=p_rng.randint(0, 20))
    return people


# ================================================================================================ rows
@dataclass(frozen=True)
class Row:
    subject_id: int
    time: datetime | None
    code: str
    value: float | None
    text: str | None
    category: str  # what the row is (vista.shared.coding.Category names)
    extra: Mapping[str, object]
    target: str | None = None  # the cancer this row codes, if any
    note_kind: str | None = None


def _vital_or_lab(key: str) -> str:
    return "observation" if LABS[key].vital else "lab"


def _omop_rows(p: Person) -> Iterator[Row]:
    sid, birth = p.subject_id, _at(p.birth, 0)
    person = {"table": "person"}
    yield Row(sid, birth, schema.BIRTH_CODE, None, None, "birth", person)
    yield Row(sid, birth, f"Gender/{p.sex}", None, None, "sex", person)
    race_code = {"White": "5", "Black or African American": "3", "Asian": "2"}[p.race]
    yield Row(sid, birth, f"Race/{race_code}", None, None, "race", person)
    yield Row(sid, birth, "Ethnicity/Hispanic" if p.hispanic else "Ethnicity/Not Hispanic", None, None, "ethnicity", person)
    for v in p.visits:
        yield Row(sid, v.start, f"Visit/{v.kind}", None, None, "visit", {"table": "visit", "visit_id": v.number})
    note_classes = {"RADIOLOGY": "18748-4", "PATHOLOGY": "11526-1", "PROGRESS": "11506-3", "DISCHARGE": "18842-5"}
    for n, f in enumerate(p.facts):
        visit_id = p.visits[f.visit].number
        if f.kind == "dx":
            d = DIAGNOSES[f.key]
            code = f"ICD10CM/{d.icd10}" if p.icd_coded else f"SNOMED/{d.snomed}"
            end_of_day = datetime.combine(f.time.date(), time(23, 59, 59))  # condition_start_date only
            yield Row(sid, end_of_day, code, None, None, "diagnosis", {"table": "condition", "visit_id": visit_id},
                      d.cancer)
        elif f.kind == "lab":
            lab = LABS[f.key]
            yield Row(sid, f.time, f"LOINC/{lab.loinc}", f.value, None, _vital_or_lab(f.key),
                      {"table": "observation" if lab.vital else "measurement", "visit_id": visit_id, "unit": lab.unit})
        elif f.kind == "med":
            yield Row(sid, f.time, f"RxNorm/{MEDICATIONS[f.key].rxnorm}", None, None, "medication",
                      {"table": "drug_exposure", "visit_id": visit_id})
        elif f.kind == "proc":
            proc = PROCEDURES[f.key]
            yield Row(sid, f.time, f"CPT4/{proc.cpt}", None, None, "imaging" if proc.imaging else "procedure",
                      {"table": "procedure", "visit_id": visit_id})
        elif f.kind == "note":
            yield Row(sid, f.time, f"LOINC/{note_classes[f.key]}", None, f.text, "note",
                      {"table": "note", "visit_id": visit_id, "note_id": sid * 1000 + n}, note_kind=f.key)
    if p.death is not None:
        yield Row(sid, datetime.combine(p.death.date(), time(23, 59, 59)), schema.DEATH_CODE, None, None, "death",
                  {"table": "death"})


def _synthea_uuid(number: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"synthea-encounter-{number}"))


def _synthea_rows(p: Person) -> Iterator[Row]:
    sid = p.subject_id
    patients = {"table": "patients"}
    yield Row(sid, None, f"GENDER/{p.sex}", None, None, "sex", patients)
    race = {"White": "white", "Black or African American": "black", "Asian": "asian"}[p.race]
    yield Row(sid, None, f"RACE/{race}", None, None, "race", patients)
    yield Row(sid, None, "ETHNICITY/hispanic" if p.hispanic else "ETHNICITY/nonhispanic", None, None, "ethnicity", patients)
    yield Row(sid, _at(p.birth, 6, 12), schema.BIRTH_CODE, None, None, "birth", patients)
    classes = {"OP": "ambulatory", "ER": "emergency", "IP": "inpatient"}
    for k, v in enumerate(p.visits):
        kind = "wellness" if v.kind == "OP" and k % 4 == 0 else classes[v.kind]
        yield Row(sid, v.start, f"ENCOUNTER/{kind}", None, None, "visit",
                  {"table": "encounters", "visit_id": _synthea_uuid(v.number), "end": v.end})
    smoking_done: set[int] = set()
    for f in p.facts:
        visit = {"visit_id": _synthea_uuid(p.visits[f.visit].number)}
        if f.kind == "dx":
            d = DIAGNOSES[f.key]
            yield Row(sid, f.time, f"SNOMED/{d.snomed}", None, None, "diagnosis", {**visit, "table": "conditions"},
                      d.cancer)
        elif f.kind == "lab":
            lab = LABS[f.key]
            yield Row(sid, f.time, f"LOINC/{lab.loinc}", f.value, None, _vital_or_lab(f.key),
                      {**visit, "table": "observations", "unit": lab.unit})
            if f.key == "sbp" and f.visit not in smoking_done:
                smoking_done.add(f.visit)
                yield Row(sid, f.time, "LOINC/72166-2", None, "Never smoked tobacco (finding)", "observation",
                          {**visit, "table": "observations"})
        elif f.kind == "med":
            yield Row(sid, f.time, f"RXNORM/{MEDICATIONS[f.key].rxnorm}", None, None, "medication",
                      {**visit, "table": "medications", "end": f.time + timedelta(days=30)})
        elif f.kind == "proc":
            proc = PROCEDURES[f.key]
            yield Row(sid, f.time, f"SNOMED/{proc.snomed}", None, None, "imaging" if proc.imaging else "procedure",
                      {**visit, "table": "procedures", "end": f.time + timedelta(minutes=30)})
        # Synthea's CSV export has no clinical notes
    for v in p.visits[::5]:  # yearly-ish influenza vaccination
        yield Row(sid, v.start + timedelta(minutes=50), "CVX/140", None, None, "medication",
                  {"table": "immunizations", "visit_id": _synthea_uuid(v.number)})
    if p.death is not None:
        yield Row(sid, p.death, schema.DEATH_CODE, None, None, "death", patients)


def _icd_plain(code: str) -> str:
    return code.replace(".", "")


def _mimic_rows(p: Person, shift: timedelta) -> Iterator[Row]:
    sid = p.subject_id

    def t(when: datetime) -> datetime:
        return when + shift

    yield Row(sid, None, f"GENDER//{p.sex}", None, None, "sex", {})
    yield Row(sid, t(datetime(p.birth.year, 1, 1)), schema.BIRTH_CODE, None, None, "birth", {})
    race = {"White": "WHITE", "Black or African American": "BLACK/AFRICAN AMERICAN", "Asian": "ASIAN"}[p.race]
    admissions = {"OP": "AMBULATORY OBSERVATION//PHYSICIAN REFERRAL", "ER": "EW EMER.//EMERGENCY ROOM",
                  "IP": "URGENT//TRANSFER FROM HOSPITAL"}
    for v in p.visits:
        hadm = {"hadm_id": 20_000_000 + v.number}
        if v.kind == "ER":
            yield Row(sid, t(v.start - timedelta(hours=2)), "ED_REGISTRATION", None, None, "visit", {})
            yield Row(sid, t(v.start), "ED_OUT", None, None, "visit", {})
        yield Row(sid, t(v.start), f"HOSPITAL_ADMISSION//{admissions[v.kind]}", None, None, "visit", hadm)
        yield Row(sid, t(v.start), f"RACE//{race}", None, None, "race", hadm)
        yield Row(sid, t(v.end), "HOSPITAL_DISCHARGE//HOME", None, None, "visit", hadm)
    rr = ds = 0
    for f in p.facts:
        v = p.visits[f.visit]
        hadm = {"hadm_id": 20_000_000 + v.number}
        if f.kind == "dx":
            d = DIAGNOSES[f.key]
            version, value = ("10", d.icd10) if v.end >= datetime(2015, 10, 1) else ("9", d.icd9)
            yield Row(sid, t(v.end), f"DIAGNOSIS//ICD//{version}//{_icd_plain(value)}", None, None, "diagnosis", hadm,
                      d.cancer)
        elif f.kind == "lab":
            lab = LABS[f.key]
            if lab.vital:  # the OMR table: one row per measurement, no admission, text values
                if f.key == "sbp":
                    dbp = next((g.value for g in p.facts if g.visit == f.visit and g.key == "dbp"), 80.0)
                    yield Row(sid, t(_at(f.time.date(), 0)), "Blood Pressure", None, f"{f.value:.0f}/{dbp:.0f}",
                              "observation", {})
                elif f.key == "weight":
                    yield Row(sid, t(_at(f.time.date(), 0)), "Weight (Lbs)", None, f"{f.value * 2.20462:.1f}",
                              "observation", {})
                continue
            if lab.mimic_itemid is None:
                continue  # not a MIMIC lab item here
            yield Row(sid, t(f.time), f"LAB//{lab.mimic_itemid}//{lab.mimic_unit}", f.value, f"{f.value}", "lab", hadm)
        elif f.kind == "med":
            med = MEDICATIONS[f.key]
            yield Row(sid, t(f.time), f"MEDICATION//START//{med.mimic_name}", None, None, "medication", hadm)
            yield Row(sid, t(f.time + timedelta(minutes=20)), f"MEDICATION//{med.mimic_name}//Administered", None, None,
                      "medication", hadm)
        elif f.kind == "proc":
            proc = PROCEDURES[f.key]
            if proc.icd10pcs is None:
                continue  # imaging is reported in MIMIC-IV-Note, not in procedures_icd
            version, value = ("10", proc.icd10pcs) if v.end >= datetime(2015, 10, 1) else ("9", proc.icd9proc)
            yield Row(sid, t(v.end), f"PROCEDURE//ICD//{version}//{_icd_plain(value)}", None, None, "procedure", hadm)
        elif f.kind == "note" and f.key in ("RADIOLOGY", "DISCHARGE"):  # MIMIC-IV-Note: radiology and discharge
            if f.key == "RADIOLOGY":
                rr += 1
                note_id = f"{sid}-RR-{rr}"
            else:
                ds += 1
                note_id = f"{sid}-DS-{ds}"
            yield Row(sid, t(f.time), f"NOTE//{f.key}", None, f.text, "note", {**hadm, "note_id": note_id},
                      note_kind=f.key)
    if p.death is not None:
        yield Row(sid, t(p.death), schema.DEATH_CODE, None, None, "death", {})


# ================================================================================================ writing
@dataclass(frozen=True)
class _Spelling:
    name: str
    profile: str
    base_id: int
    id_step: int
    columns: Mapping[str, pa.DataType]
    rows: Callable[[Person], Iterator[Row]]
    shard: Callable[[Person], str]
    dataset: Mapping[str, object]


def _spellings(date_shift_years: int = 0) -> dict[str, _Spelling]:
    shift = timedelta(days=round(date_shift_years * 365.2425))
    return {
        "omop": _Spelling("omop", "omop", 1001, 1, {"visit_id": pa.int64(), "unit": pa.string(), "table": pa.string(),
                                                    "note_id": pa.int64()},
                          _omop_rows, lambda p: f"data/{p.subject_id % 2}.parquet",
                          {"dataset_name": "Synthetic OMOP CDM (trajonco tests)", "dataset_version": "2024-06-11",
                           "etl_name": "meds_etl.omop", "etl_version": "0.3.11", "meds_version": "0.4.1"}),
        "synthea": _Spelling("synthea", "synthea", 7001, 3, {"visit_id": pa.string(), "unit": pa.string(),
                                                            "end": pa.timestamp("us"), "table": pa.string()},
                             _synthea_rows, lambda p: "data/0.parquet",
                             {"dataset_name": "Synthea (trajonco tests)", "dataset_version": "3.3.0",
                              "etl_name": "synthea-csv-to-meds (tests)", "etl_version": "1", "meds_version": "0.4.1"}),
        "mimic": _Spelling("mimic", "mimic_iv", 10_000_032, 1_117, {"hadm_id": pa.int64(), "note_id": pa.string()},
                           lambda p: _mimic_rows(p, shift), lambda p: f"data/{p.split}/0.parquet",
                           {"dataset_name": "MIMIC-IV", "dataset_version": "2.2 (trajonco tests)",
                            "etl_name": "MIMIC_IV_MEDS", "etl_version": "0.0.7", "meds_version": "0.4.1"}),
    }


def _sorted_rows(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r.subject_id, r.time is not None, r.time or datetime.min))


def _table(rows: list[Row], columns: Mapping[str, pa.DataType]) -> pa.Table:
    arrays = [
        pa.array([r.subject_id for r in rows], pa.int64()),
        pa.array([r.time for r in rows], pa.timestamp("us")),
        pa.array([r.code for r in rows], pa.string()),
        pa.array([r.value for r in rows], pa.float32()),
        pa.array([r.text for r in rows], pa.large_string()),
    ]
    fields = list(schema.DATA_SCHEMA)
    for name, kind in columns.items():
        arrays.append(pa.array([r.extra.get(name) for r in rows], kind))
        fields.append(pa.field(name, kind))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _codes_table(rows: list[Row], spelling: str) -> pa.Table:
    """metadata/codes.parquet: a description for every code, parent codes where the source ETL writes them."""
    described: dict[str, tuple[str | None, list[str]]] = {}
    by_code: dict[str, str] = {}
    for d in DIAGNOSES.values():
        by_code[f"ICD10CM/{d.icd10}"] = by_code[f"DIAGNOSIS//ICD//10//{_icd_plain(d.icd10)}"] = d.description
        by_code[f"DIAGNOSIS//ICD//9//{_icd_plain(d.icd9)}"] = d.description
        by_code[f"SNOMED/{d.snomed}"] = d.snomed_description
    for lab in LABS.values():
        by_code[f"LOINC/{lab.loinc}"] = lab.description
        if lab.mimic_itemid is not None:
            by_code[f"LAB//{lab.mimic_itemid}//{lab.mimic_unit}"] = lab.description.split(" [")[0]
    for med in MEDICATIONS.values():
        by_code[f"RxNorm/{med.rxnorm}"] = by_code[f"RXNORM/{med.rxnorm}"] = med.name
    for proc in PROCEDURES.values():
        by_code[f"CPT4/{proc.cpt}"] = by_code[f"SNOMED/{proc.snomed}"] = proc.description
        for version, value in (("10", proc.icd10pcs), ("9", proc.icd9proc)):
            if value:
                by_code[f"PROCEDURE//ICD//{version}//{_icd_plain(value)}"] = proc.description
    by_code.update({"Visit/OP": "Outpatient Visit", "Visit/IP": "Inpatient Visit", "Visit/ER": "Emergency Room Visit",
                    "Gender/F": "FEMALE", "Gender/M": "MALE", "Race/5": "White", "Race/3": "Black or African American",
                    "Race/2": "Asian", "Ethnicity/Hispanic": "Hispanic or Latino",
                    "Ethnicity/Not Hispanic": "Not Hispanic or Latino", "LOINC/18748-4": "Diagnostic imaging study",
                    "LOINC/11526-1": "Pathology study", "LOINC/11506-3": "Progress note",
                    "LOINC/18842-5": "Discharge summary", "LOINC/72166-2": "Tobacco smoking status",
                    "CVX/140": "Influenza, seasonal, injectable, preservative free",
                    schema.BIRTH_CODE: "Birth", schema.DEATH_CODE: "Death"})
    for code in dict.fromkeys(r.code for r in rows):
        parents: list[str] = []
        if spelling == "synthea" and code.startswith("SNOMED/"):
            parents = [f"SNOMED/{c}" for c in SNOMED_PARENTS.get(code.removeprefix("SNOMED/"), ())]
        elif spelling == "mimic" and code.startswith("DIAGNOSIS//ICD//"):
            _, _, version, value = code.split("//")
            dotted = next((d.icd10 if version == "10" else d.icd9 for d in DIAGNOSES.values()
                           if _icd_plain(d.icd10 if version == "10" else d.icd9) == value), value)
            parents = [f"ICD{version}CM/{dotted}"]
        elif spelling == "mimic" and code.startswith("LAB//"):
            itemid = int(code.split("//")[1])
            parents = [f"LOINC/{lab.loinc}" for lab in LABS.values() if lab.mimic_itemid == itemid]
        described[code] = (by_code.get(code), parents)
    if spelling == "synthea":  # the ancestors the parents name
        for child, parents in SNOMED_PARENTS.items():
            for parent in parents:
                key = f"SNOMED/{parent}"
                if key not in described:
                    grand = [f"SNOMED/{c}" for c in SNOMED_PARENTS.get(parent, ())]
                    described[key] = (SNOMED_NAMES.get(parent), grand)
    codes = list(described)
    return pa.Table.from_pydict({"code": codes, "description": [described[c][0] for c in codes],
                                 "parent_codes": [described[c][1] for c in codes]}, schema=schema.CODE_METADATA_SCHEMA)


def _build(name: str, date_shift_years: int = 0) -> tuple[_Spelling, list[Person], list[Row]]:
    spelling = _spellings(date_shift_years)[name]
    people = _people(spelling.base_id, spelling.id_step, SEED + spelling.base_id)
    rows = _sorted_rows([row for p in people for row in spelling.rows(p)])
    return spelling, people, rows


def _write(root: str | Path, name: str, date_shift_years: int = 0) -> Path:
    root = Path(root)
    spelling, people, rows = _build(name, date_shift_years)
    shard_of = {p.subject_id: spelling.shard(p) for p in people}
    shards: dict[str, list[Row]] = {}
    for row in rows:
        shards.setdefault(shard_of[row.subject_id], []).append(row)
    for shard, members in sorted(shards.items()):
        path = root / shard
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(_table(members, spelling.columns), path)
    (root / "metadata").mkdir(parents=True, exist_ok=True)
    pq.write_table(_codes_table(rows, name), root / schema.CODES_FILE)
    pq.write_table(pa.Table.from_pydict({"subject_id": [p.subject_id for p in people], "split": [p.split for p in people]},
                                        schema=schema.SUBJECT_SPLIT_SCHEMA), root / schema.SPLITS_FILE)
    (root / schema.DATASET_FILE).write_text(json.dumps({**spelling.dataset, "created_at": "2024-06-11T00:00:00"}, indent=2))
    return root


def write_omop_style(root: str | Path) -> Path:
    """A MEDS dataset at ``root`` spelled as ``meds_etl`` writes it from OMOP (see the module docstring)."""
    return _write(root, "omop")


def write_synthea_style(root: str | Path) -> Path:
    """A MEDS dataset at ``root`` spelled as Synthea-derived MEDS (SNOMED CT only; see the module docstring)."""
    return _write(root, "synthea")


def write_mimic_style(root: str | Path, *, date_shift_years: int = 0) -> Path:
    """A MEDS dataset at ``root`` spelled as MIMIC-IV MEDS (see the module docstring); ``date_shift_years=100``
    moves every time into MIMIC's shifted 2110s–2120s (the project's graph builder accepts dates before 2100 only)."""
    return _write(root, "mimic", date_shift_years)


WRITERS: Mapping[str, Callable[[str | Path], Path]] = {
    "omop": write_omop_style, "synthea": write_synthea_style, "mimic": write_mimic_style,
}


# ================================================================================================ what each one holds
@dataclass(frozen=True)
class DatasetFacts:
    """What one written fixture holds (see `EXPECTED`). Dates are those of the rows as written (``date_shift_years``
    0 for MIMIC)."""

    name: str
    profile: str  # the built-in coding profile that should be detected
    subjects: tuple[int, ...]
    splits: Mapping[int, str]
    sex: Mapping[int, str]
    cases: Mapping[str, tuple[int, ...]]  # cancer → subjects that are cases under the cohort rules
    index_dates: Mapping[int, date]  # case → date of its first target code (the index)
    controls: tuple[int, ...]  # subjects without any target code, ever
    excluded: Mapping[str, tuple[int, ...]]  # prevalent / no_qualifying_pair / earlier_target_code → subjects
    rows: int
    rows_by_category: Mapping[str, int]  # vista.shared.coding.Category name → rows
    notes_by_kind: Mapping[str, int]  # RADIOLOGY / PATHOLOGY / PROGRESS / DISCHARGE → rows
    lab_units: Mapping[str, str]  # source code of a lab or vital → its unit (from the unit column or the code)
    extension_columns: Mapping[str, str]  # column → arrow type
    shards: tuple[str, ...]
    subjects_with_death: tuple[int, ...]
    found_only_through_parents: tuple[int, ...]  # cases whose target codes are in no list, only below one (SNOMED)
    dataset_json: Mapping[str, object]


def _facts(name: str) -> DatasetFacts:
    spelling, people, rows = _build(name)
    by_subject: dict[int, list[Row]] = {}
    for row in rows:
        by_subject.setdefault(row.subject_id, []).append(row)
    cases: dict[str, list[int]] = {c: [] for c in CANCERS}
    index_dates: dict[int, date] = {}
    for p in people:
        if p.role == "case":
            cases[p.cancer].append(p.subject_id)
            index_dates[p.subject_id] = min(r.time.date() for r in by_subject[p.subject_id] if r.target)
    excluded = {"prevalent": (), "no_qualifying_pair": (), "earlier_target_code": ()}
    reasons = {"prevalent": "prevalent", "single_code": "no_qualifying_pair", "earlier_code": "earlier_target_code"}
    for p in people:
        if p.role in reasons:
            excluded[reasons[p.role]] += (p.subject_id,)
    units: dict[str, str] = {}
    for row in rows:
        if row.value is not None and row.category in ("lab", "observation"):
            unit = row.extra.get("unit") or (row.code.split("//", 2)[2] if row.code.startswith("LAB//") else None)
            if unit:
                units.setdefault(row.code, unit)
    parents_only = tuple(p.subject_id for p in people if p.role == "case" and name == "synthea"
                         and any(r.code == f"SNOMED/{DIAGNOSES['lung_adenocarcinoma'].snomed}" for r in by_subject[p.subject_id]))
    return DatasetFacts(
        name=name, profile=spelling.profile, subjects=tuple(p.subject_id for p in people),
        splits={p.subject_id: p.split for p in people}, sex={p.subject_id: p.sex for p in people},
        cases={c: tuple(ids) for c, ids in cases.items()}, index_dates=index_dates,
        controls=tuple(p.subject_id for p in people if p.role == "control"), excluded=excluded,
        rows=len(rows), rows_by_category=dict(Counter(r.category for r in rows)),
        notes_by_kind=dict(Counter(r.note_kind for r in rows if r.note_kind)), lab_units=units,
        extension_columns={k: str(v) for k, v in spelling.columns.items()},
        shards=tuple(sorted({spelling.shard(p) for p in people})),
        subjects_with_death=tuple(p.subject_id for p in people if p.death is not None),
        found_only_through_parents=parents_only, dataset_json=dict(spelling.dataset))


@dataclass(frozen=True)
class EventstreamFacts:
    """What ``tests/data/eventstream_demo.xml`` holds."""

    path: Path
    subject_id: int
    events: int
    events_by_type: Mapping[str, int]  # the <event type=…> values
    visits: Mapping[str, str]  # visit_id → encounter type, for the visits with their own row
    visit_only_ids: tuple[str, ...]  # visit ids no visit row carries
    notes_by_kind: Mapping[str, int]
    providers: tuple[str, ...]
    care_sites: tuple[str, ...]
    sex: str
    birth: date
    race: str
    ethnicity: str
    lung_cancer_events: int  # events coded ICD10/C34.11
    units: Mapping[str, str]  # canonical code → unit given in the file


EXPECTED: dict[str, DatasetFacts | EventstreamFacts] = {name: _facts(name) for name in WRITERS}
EXPECTED["eventstream_demo"] = EventstreamFacts(
    path=EVENTSTREAM_DEMO, subject_id=4242, events=21,
    events_by_type={"visit": 2, "condition": 4, "procedure": 3, "note": 3, "observation": 2, "measurement": 3,
                    "drug_exposure": 4},
    visits={"7001": "OP", "7002": "IP"}, visit_only_ids=("7003",), notes_by_kind={"RADIOLOGY": 2, "PATHOLOGY": 1},
    providers=("901", "902", "903"), care_sites=("31", "32"), sex="F", birth=date(1958, 4, 2), race="White",
    ethnicity="Not Hispanic or Latino", lung_cancer_events=2,
    units={"LOINC//8480-6": "mm[Hg]", "LOINC//718-7": "g/dL", "LOINC//2160-0": "mg/dL", "LOINC//2039-6": "ng/mL"},
)
