"""The patients the graph benchmarks build: a Synthea-shaped record of 7,287 MEDS rows and a ~10,000-node one.

`synthea_patient` is generated here (seeded), shaped as Synthea's CSV export converted to MEDS reads through the
``synthea`` coding profile: a long life of wellness, ambulatory, emergency and inpatient encounters, each row
carrying its visit's UUID (``visit_id``), its Synthea spelling (``source_code``: ``LOINC/8480-6``), its unit and its
source table (``kind``); vital signs and a pain score at every visit, lab panels (CBC, metabolic, lipids), survey
scores, conditions, medications, procedures and immunizations; no notes (Synthea writes none). The Synthea patient
of the issue that named the 7,287-row bound is not in the repository, so this is a patient of the same size and
shape, not that patient.
"""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timedelta

from vista.shared.meds import schema
from vista.shared.records import CodeCatalog, CodeInfo, Event, PatientRecord

SYNTHEA_ROWS = 7_287

# (LOINC code, description, unit, low, high)
_VITALS = (("8302-2", "Body Height", "cm", 150, 190), ("29463-7", "Body Weight", "kg", 55, 110),
           ("39156-5", "Body mass index (BMI) [Ratio]", "kg/m2", 18, 38),
           ("8462-4", "Diastolic Blood Pressure", "mm[Hg]", 60, 95), ("8480-6", "Systolic Blood Pressure", "mm[Hg]", 100, 160),
           ("8867-4", "Heart rate", "/min", 55, 100), ("9279-1", "Respiratory rate", "/min", 12, 20),
           ("72514-3", "Pain severity - 0-10 verbal numeric rating [Score] - Reported", "{score}", 0, 6))
_CBC = (("6690-2", "Leukocytes [#/volume] in Blood by Automated count", "10*3/uL", 3.5, 11),
        ("789-8", "Erythrocytes [#/volume] in Blood by Automated count", "10*6/uL", 3.8, 5.8),
        ("718-7", "Hemoglobin [Mass/volume] in Blood", "g/dL", 11, 17), ("4544-3", "Hematocrit [Volume Fraction] of Blood", "%", 34, 50),
        ("787-2", "MCV [Entitic volume]", "fL", 80, 100), ("785-6", "MCH [Entitic mass]", "pg", 27, 33),
        ("786-4", "MCHC [Mass/volume]", "g/dL", 32, 36), ("777-3", "Platelets [#/volume] in Blood", "10*3/uL", 150, 400))
_METABOLIC = (("2339-0", "Glucose [Mass/volume] in Blood", "mg/dL", 70, 140), ("6299-2", "Urea nitrogen [Mass/volume] in Blood", "mg/dL", 7, 25),
              ("38483-4", "Creatinine [Mass/volume] in Blood", "mg/dL", 0.6, 1.4), ("49765-1", "Calcium [Mass/volume] in Blood", "mg/dL", 8.5, 10.5),
              ("2947-0", "Sodium [Moles/volume] in Blood", "mmol/L", 134, 146), ("6298-4", "Potassium [Moles/volume] in Blood", "mmol/L", 3.4, 5.2),
              ("2069-3", "Chloride [Moles/volume] in Blood", "mmol/L", 97, 108), ("20565-8", "Carbon dioxide, total [Moles/volume] in Blood", "mmol/L", 21, 31),
              ("33914-3", "Glomerular filtration rate/1.73 sq M.predicted", "mL/min/{1.73_m2}", 55, 110))
_LIPIDS = (("2093-3", "Cholesterol [Mass/volume] in Serum or Plasma", "mg/dL", 150, 260),
           ("2571-8", "Triglycerides", "mg/dL", 80, 250), ("18262-6", "Low Density Lipoprotein Cholesterol", "mg/dL", 70, 180),
           ("2085-9", "High Density Lipoprotein Cholesterol", "mg/dL", 35, 80))
_SURVEYS = (("72166-2", "Tobacco smoking status", None, 0, 0), ("55277-8", "HIV status", None, 0, 0),
            ("44249-1", "PHQ-9 quick depression assessment panel", "{score}", 0, 12),
            ("69453-9", "Cause of Death [US Standard Certificate of Death]", None, 0, 0))
_CONDITIONS = (("44054006", "Diabetes mellitus type 2 (disorder)", "73211009"), ("38341003", "Hypertensive disorder (disorder)", "118234003"),
               ("55822004", "Hyperlipidemia (disorder)", "3457005"), ("195662009", "Acute viral pharyngitis (disorder)", "363171009"),
               ("10509002", "Acute bronchitis (disorder)", "32398004"), ("444814009", "Viral sinusitis (disorder)", "363171009"),
               ("254837009", "Malignant neoplasm of breast (disorder)", "363346000"), ("162864005", "Body mass index 30+ - obesity (finding)", "414916001"),
               ("15777000", "Prediabetes (finding)", "73211009"), ("40055000", "Chronic sinusitis (disorder)", "363171009"))
_PARENTS = (("73211009", "Diabetes mellitus (disorder)"), ("118234003", "Finding by site (finding)"),
            ("3457005", "Patient referral (procedure)"), ("363171009", "Inflammation of specific body systems (disorder)"),
            ("32398004", "Bronchitis (disorder)"), ("363346000", "Malignant neoplastic disease (disorder)"),
            ("414916001", "Obesity (disorder)"))
_MEDICATIONS = (("314076", "lisinopril 10 MG Oral Tablet"), ("860975", "24 HR Metformin hydrochloride 500 MG Extended Release Oral Tablet"),
                ("316672", "Simvastatin 10 MG Oral Tablet"), ("308136", "amLODIPine 2.5 MG Oral Tablet"),
                ("313782", "Acetaminophen 325 MG Oral Tablet"), ("562251", "Amoxicillin 250 MG / Clavulanate 125 MG Oral Tablet"))
_PROCEDURES = (("430193006", "Medication Reconciliation (procedure)"), ("710824005", "Assessment of health and social care needs (procedure)"),
               ("171207006", "Depression screening (procedure)"), ("428211000124100", "Assessment of substance use (procedure)"),
               ("24623002", "Screening mammography (procedure)"), ("73761001", "Colonoscopy (procedure)"))
_VACCINES = (("140", "Influenza, seasonal, injectable, preservative free"), ("113", "Td (adult) preservative free"),
             ("133", "Pneumococcal conjugate PCV 13"))


def _code(system: str, code: str) -> tuple[str, str]:
    """(canonical code, Synthea's spelling)."""
    return f"{system}//{code}", f"{system}/{code}"


def synthea_catalog() -> CodeCatalog:
    """Descriptions, units and SNOMED parents of the codes `synthea_patient` uses (as Synthea's codes.parquet)."""
    infos = [CodeInfo(f"LOINC//{c}", d, unit=u) for c, d, u, _, _ in (*_VITALS, *_CBC, *_METABOLIC, *_LIPIDS, *_SURVEYS)]
    infos += [CodeInfo(f"SNOMED//{c}", d, parent_codes=(f"SNOMED//{p}",)) for c, d, p in _CONDITIONS]
    infos += [CodeInfo(f"SNOMED//{c}", d) for c, d in (*_PARENTS, *_PROCEDURES)]
    infos += [CodeInfo(f"RXNORM//{c}", d) for c, d in _MEDICATIONS]
    infos += [CodeInfo(f"CVX//{c}", d) for c, d in _VACCINES]
    return CodeCatalog(infos)


def synthea_patient(rows: int = SYNTHEA_ROWS, seed: int = 0) -> tuple[PatientRecord, CodeCatalog]:
    """A seeded Synthea-shaped patient of exactly ``rows`` MEDS rows (see the module docstring) and its catalog."""
    rng = random.Random(seed)
    out: list[tuple] = []  # (time, code, value, text, source_code, unit, visit_id, kind)
    patients = "patients"
    for code, source in (("GENDER//F", "GENDER/F"), ("RACE//white", "RACE/white"), ("ETHNICITY//nonhispanic", "ETHNICITY/nonhispanic")):
        out.append((None, code, None, None, source, None, None, patients))
    birth = datetime(1941, 6, 2, 6, 12)
    out.append((birth, schema.BIRTH_CODE, None, None, None, None, None, patients))
    chronic = rng.sample(_CONDITIONS[:3], 2)
    day = datetime(1960, 1, 4, 9, 0)
    number = 0
    while len(out) < rows:
        number += 1
        visit = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        kind = rng.choices(("wellness", "ambulatory", "emergency", "inpatient"), (0.35, 0.5, 0.1, 0.05))[0]
        code, source = _code("ENCOUNTER", kind)
        out.append((day, code, None, None, source, None, visit, "visit"))
        t = day + timedelta(minutes=10)

        def observe(items, when, table="observations"):
            for c, _, unit, low, high in items:
                code, source = _code("LOINC", c)
                value = round(rng.uniform(low, high), 1) if high else None
                text = None if high else rng.choice(("Never smoker", "Former smoker", "Negative"))
                out.append((when, code, value, text, source, unit if value is not None else None, visit, table))

        observe(_VITALS, t)
        if kind == "wellness":
            observe(_CBC, t + timedelta(minutes=30))
            observe(_METABOLIC, t + timedelta(minutes=30))
            observe(_LIPIDS, t + timedelta(minutes=30))
            observe(_SURVEYS[:3], t + timedelta(minutes=40))
            for c, _ in rng.sample(_PROCEDURES[:4], 3):
                code, source = _code("SNOMED", c)
                out.append((t + timedelta(minutes=45), code, None, None, source, None, visit, "procedures"))
            if number % 3 == 0:
                c, _ = rng.choice(_VACCINES)
                code, source = _code("CVX", c)
                out.append((t + timedelta(minutes=50), code, None, None, source, None, visit, "immunizations"))
        else:
            c, _, _ = rng.choice(_CONDITIONS[3:])
            code, source = _code("SNOMED", c)
            out.append((t + timedelta(minutes=20), code, None, None, source, None, visit, "conditions"))
            if kind == "inpatient":
                observe(_CBC, t + timedelta(hours=4))
                observe(_METABOLIC, t + timedelta(hours=4))
        for c, _, _ in chronic:
            code, source = _code("SNOMED", c)
            out.append((t + timedelta(minutes=25), code, None, None, source, None, visit, "conditions"))
        for c, _ in rng.sample(_MEDICATIONS, 2):
            code, source = _code("RXNORM", c)
            out.append((t + timedelta(minutes=55), code, None, None, source, None, visit, "medications"))
        day += timedelta(days=rng.randint(20, 90), minutes=rng.choice((0, 15, 30, -15)))
    out = out[:rows]
    events = [Event(f"e{k}", time, code, value, text, source_code=source, unit=unit, visit_id=visit, kind=kind)
              for k, (time, code, value, text, source, unit, visit, kind) in enumerate(out)]
    return PatientRecord(1, "data/0.parquet", 0, events), synthea_catalog()
