"""Free-text clinical notes written from the structured content of a visit, so text and codes agree.

Three kinds, as in the MEDS data: progress notes (``NOTE//PROGRESS``), radiology reports (``NOTE//RADIOLOGY``)
and pathology reports (``NOTE//PATHOLOGY``). Templates vary their wording with a per-note `random.Random`,
never mention a finding the structured rows do not carry, and contain no identifiers.

>>> import random
>>> text = radiology_report(random.Random(0), "2020-03-01", "CT chest with contrast", "cough", ["No suspicious pulmonary nodule."], "No acute findings.")
>>> text.splitlines()[0]
'RADIOLOGY REPORT'
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# ---------------------------------------------------------------- shared helpers


def _join(items: list[str]) -> str:
    items = [i for i in items if i]
    if not items:
        return ""
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


def sex_word(female: bool) -> str:
    return "woman" if female else "man"


def smoking_phrase(status: int, pack_years: float, quit_year: int | None) -> str:
    """Smoking history as a clinician would write it (status codes: 0 never, 1 former, 2 current)."""
    if status == 0:
        return "never smoker"
    py = f"{pack_years:.0f} pack-years"
    if status == 1:
        return f"former smoker, {py}, quit {quit_year}" if quit_year else f"former smoker, {py}"
    return f"current smoker, {py}"


@dataclass(slots=True)
class VisitContext:
    """What a background progress note may say: all of it comes from the visit's rows."""

    date: str
    setting: str
    age: int
    female: bool
    reason: str | None
    kind: str
    problems: list[str] = field(default_factory=list)
    medications: list[str] = field(default_factory=list)
    vitals: dict[str, str] = field(default_factory=dict)
    labs: list[str] = field(default_factory=list)
    procedures: list[str] = field(default_factory=list)
    smoking: str | None = None


_HEADERS = {"AMB": ("Office visit", "Clinic note", "Outpatient progress note"), "ED": ("Emergency department note", "ED provider note"),
            "IMP": ("Admission history and physical", "Hospital admission note")}


def progress_note(rng: random.Random, ctx: VisitContext) -> str:
    """A background progress note (office, ED or admission) built from the visit's coded content."""
    lines = [rng.choice(_HEADERS[ctx.setting]), f"Date: {ctx.date}"]
    who = f"{ctx.age}-year-old {sex_word(ctx.female)}"
    if ctx.kind == "wellness":
        lines.append(f"{who} here for an annual preventive examination.")
    elif ctx.kind == "chronic":
        lines.append(f"{who} seen for follow-up of chronic medical problems.")
    elif ctx.reason:
        opener = rng.choice(("presents with", "seen today for", "reports", "comes in with"))
        dur = rng.choice(("for the past few days", "for about a week", "for several weeks", "since last month", ""))
        lines.append(f"{who} {opener} {ctx.reason} {dur}".rstrip() + ".")
    else:
        lines.append(f"{who} seen today.")
    if ctx.problems:
        lines.append("Active problems: " + "; ".join(ctx.problems) + ".")
    if ctx.medications:
        lines.append("Medications: " + ", ".join(ctx.medications) + ".")
    if ctx.smoking:
        lines.append(f"Social history: {ctx.smoking}.")
    if ctx.vitals:
        lines.append("Vitals: " + ", ".join(f"{k} {v}" for k, v in ctx.vitals.items()) + ".")
    if ctx.labs:
        lines.append("Results: " + "; ".join(ctx.labs) + ".")
    plan = []
    if ctx.reason:
        plan.append(f"{ctx.reason}: {rng.choice(('supportive care discussed', 'treatment as below', 'return precautions given', 'will reassess at follow-up'))}")
    if ctx.procedures:
        plan.append("ordered/performed: " + _join(ctx.procedures))
    if ctx.kind == "wellness":
        plan.append(rng.choice(("age-appropriate screening reviewed", "preventive care and immunizations reviewed")))
    if ctx.problems and ctx.kind != "acute":
        plan.append(rng.choice(("chronic conditions stable, continue current regimen", "medications reconciled, no changes")))
    if plan:
        lines.append("Assessment and plan: " + "; ".join(plan) + ".")
    closing = {"AMB": ("Follow up as scheduled.", "Return in 3 months or sooner as needed.", "Follow up in 6 months."),
               "ED": ("Discharged home with return precautions.", "Discharge instructions reviewed; follow up with primary care."),
               "IMP": ("Admit to medicine.", "Admit for further management.")}
    lines.append(rng.choice(closing[ctx.setting]))
    return "\n".join(lines)


def radiology_report(rng: random.Random, date: str, exam: str, indication: str | None, findings: list[str], impression: str) -> str:
    """A radiology report: exam, indication, findings and impression."""
    lines = ["RADIOLOGY REPORT", f"Exam: {exam}", f"Date: {date}"]
    if indication:
        lines.append(f"Indication: {indication}.")
    lines.append(rng.choice(("Comparison: none available.", "Comparison: prior imaging reviewed.", "Comparison: none.")))
    lines.append("Findings: " + " ".join(findings))
    lines.append(f"Impression: {impression}")
    return "\n".join(lines)


def pathology_report(rng: random.Random, date: str, specimen: str, diagnosis: str, details: list[str]) -> str:
    """A surgical pathology report: specimen, final diagnosis and comments."""
    lines = ["SURGICAL PATHOLOGY REPORT", f"Date: {date}", f"Specimen: {specimen}", f"Final diagnosis: {diagnosis}"]
    if details:
        lines.append(rng.choice(("Comment: ", "Microscopic description: ")) + " ".join(details))
    lines.append(rng.choice(("Electronically signed by the attending pathologist.", "Diagnosis reviewed at intradepartmental consensus.")))
    return "\n".join(lines)


# ---------------------------------------------------------------- background imaging and pathology


def background_radiology(rng: random.Random, proc: str, reason: str | None, extra: dict) -> tuple[list[str], str]:
    """Findings and impression of a non-cancer imaging study (mostly normal or benign)."""
    u = rng.random()
    if proc == "chest_xray":
        if reason == "pneumonia":
            side = rng.choice(("right lower lobe", "left lower lobe", "right middle lobe"))
            return [f"Patchy airspace opacity in the {side}. No pleural effusion."], f"Findings consistent with {side} pneumonia."
        if reason in ("chf",):
            return ["Cardiomegaly with pulmonary vascular congestion. Small bilateral effusions."], "Findings compatible with volume overload."
        if u < 0.85:
            return ["Lungs are clear. Heart size normal. No pleural effusion or pneumothorax."], "No acute cardiopulmonary process."
        return ["Mild hyperinflation. No focal consolidation."], "No acute disease; mild hyperinflation."
    if proc in ("ct_chest", "ct_chest_contrast"):
        if reason == "pulmonary_embolism":
            return ["Filling defects in segmental pulmonary arteries of the right lower lobe."], "Acute segmental pulmonary embolism."
        if reason in ("lung_nodule", "abnormal_lung_imaging"):
            size = rng.choice((4, 5, 6, 7))
            if extra.get("followup"):
                return [f"The previously noted {size} mm nodule is stable in size."], "Stable pulmonary nodule, likely benign."
            return [f"{size} mm solid nodule in the {rng.choice(('right upper lobe', 'left lower lobe', 'right lower lobe'))}."], \
                "Small pulmonary nodule; follow-up CT recommended per Fleischner guidelines."
        if u < 0.8:
            return ["No suspicious pulmonary nodule or mass. No lymphadenopathy."], "No acute intrathoracic abnormality."
        return ["Scattered 2-3 mm calcified granulomas. Mild emphysematous change."], "No suspicious findings."
    if proc == "ldct":
        if extra.get("nodule"):
            return ["6 mm solid nodule in the right upper lobe."], "Lung-RADS category 3, probably benign; 6-month LDCT recommended."
        return ["No suspicious pulmonary nodules." if u < 0.6 else "Few small benign-appearing nodules under 6 mm."], \
            "Lung-RADS category 1, negative." if u < 0.6 else "Lung-RADS category 2, benign appearance; continue annual screening."
    if proc == "mammo_screen":
        dense = "Heterogeneously dense breast tissue, which may obscure small masses. " if extra.get("dense") else "Scattered fibroglandular densities. "
        if extra.get("callback"):
            return [dense + "Possible asymmetry in the upper outer quadrant of the left breast."], \
                "BI-RADS 0: incomplete; additional imaging evaluation recommended."
        if u < 0.75:
            return [dense + "No suspicious mass, calcification or architectural distortion."], "BI-RADS 1: negative. Routine annual screening."
        return [dense + "Stable benign-appearing calcifications."], "BI-RADS 2: benign finding. Routine annual screening."
    if proc in ("mammo_diag", "us_breast"):
        return ["Corresponding to the palpable area there is a 1.2 cm oval circumscribed anechoic structure."], "Simple cyst. BI-RADS 2: benign."
    if proc in ("us_abdomen",):
        if extra.get("cirrhosis"):
            return ["Nodular liver contour with coarsened echotexture. No focal hepatic lesion. Patent portal vein."], \
                "Cirrhotic liver morphology without focal lesion (LI-RADS US-1)."
        if u < 0.5:
            return ["Normal liver size and echotexture. Gallbladder without stones. No biliary dilatation."], "Unremarkable abdominal ultrasound."
        return ["Diffusely increased hepatic echogenicity. Gallbladder unremarkable."], "Hepatic steatosis."
    if proc in ("ct_abd_pelvis", "ct_abdomen"):
        if reason == "acute_pancreatitis":
            return ["Peripancreatic fat stranding without necrosis or fluid collection."], "Acute interstitial pancreatitis."
        if u < 0.5:
            return ["No acute abnormality of the abdomen or pelvis. Normal appendix."], "No acute findings."
        return ["Sigmoid diverticulosis without inflammation. Small simple renal cyst."], "No acute findings; incidental diverticulosis."
    if proc == "ct_urogram":
        return ["No filling defect in the collecting systems, ureters or bladder. Simple left renal cyst."], "No urothelial lesion identified."
    if proc in ("us_pelvis", "us_transvaginal"):
        if reason == "ovarian_cyst":
            return ["2.8 cm simple cyst of the right ovary."], "Simple ovarian cyst, likely physiologic (O-RADS 2)."
        return [f"Uterus normal in size. Endometrial stripe {rng.choice((3, 4, 5))} mm. Ovaries unremarkable."], "Normal pelvic ultrasound."
    return ["No acute abnormality."], "Unremarkable study."


def background_pathology(rng: random.Random, proc: str) -> tuple[str, str, list[str]]:
    """(specimen, diagnosis, details) of a benign biopsy done outside a cancer work-up."""
    u = rng.random()
    if proc in ("colonoscopy", "colonoscopy_polypectomy", "colonoscopy_biopsy", "screening_colonoscopy"):
        if u < 0.6:
            return "Colon, sigmoid, polypectomy", "Tubular adenoma, negative for high-grade dysplasia.", ["Margins appear free of adenoma."]
        return "Colon, random biopsies", "Colonic mucosa with no significant pathologic abnormality.", []
    if proc == "egd_biopsy":
        if u < 0.4:
            return "Stomach, antrum, biopsy", "Chronic active gastritis; Helicobacter pylori organisms identified.", []
        if u < 0.6:
            return "Distal esophagus, biopsy", "Columnar mucosa with intestinal metaplasia, negative for dysplasia.", []
        return "Stomach, biopsy", "Mild chronic gastritis; no Helicobacter pylori identified.", []
    if proc == "breast_biopsy":
        return "Breast, core needle biopsy", rng.choice(("Fibroadenoma.", "Fibrocystic changes with apocrine metaplasia.")), ["No atypia or malignancy identified."]
    if proc == "prostate_biopsy":
        return "Prostate, 12-core needle biopsy", "Benign prostatic tissue in all cores.", ["Focal chronic inflammation."]
    if proc == "endometrial_biopsy":
        return "Endometrium, biopsy", rng.choice(("Proliferative endometrium.", "Atrophic endometrium.")), ["No hyperplasia or malignancy."]
    if proc == "colposcopy_biopsy":
        return "Cervix, biopsy", rng.choice(("Low-grade squamous intraepithelial lesion (CIN 1).", "Benign squamous mucosa.")), []
    return "Tissue, biopsy", "Benign tissue; no malignancy identified.", []


# ---------------------------------------------------------------- oncology findings


def tumor_size_cm(t: str | None, rng: random.Random) -> float:
    """A primary tumour size compatible with a T category."""
    ranges = {"T1a": (0.6, 1.0), "T1b": (1.1, 2.0), "T1c": (2.1, 3.0), "T1": (1.0, 2.5), "T2a": (3.1, 4.0), "T2b": (4.1, 5.0), "T2": (2.5, 5.0),
              "T3": (5.1, 7.0), "T3a": (4.0, 6.0), "T3b": (5.0, 7.0), "T4": (7.1, 9.5), "T4a": (6.0, 8.5), "T4b": (7.0, 9.5)}
    lo, hi = ranges.get(t or "", (1.5, 4.5))
    return round(rng.uniform(lo, hi), 1)


_PRIMARY = {
    "lung": "{size} cm spiculated mass in the {site}",
    "breast": "irregular {size} cm mass with spiculated margins in the {site}",
    "prostate": "{size} cm lesion in the peripheral zone with restricted diffusion (PI-RADS {pirads})",
    "colorectal": "{size} cm circumferential mass in the {site}",
    "bladder": "{size} cm enhancing papillary lesion in the {site}",
    "cervical": "{size} cm enhancing cervical mass",
    "esophageal": "{size} cm segment of circumferential wall thickening in the {site}",
    "endometrial": "thickened heterogeneous endometrium measuring {mm} mm",
    "gastric": "irregular wall thickening of the {site} measuring {size} cm",
    "ovarian": "{size} cm complex solid and cystic mass of the {site}",
    "pancreatic": "{size} cm hypoenhancing mass in the {site} with upstream ductal dilatation",
    "liver": "{size} cm arterially enhancing hepatic lesion with washout and capsule (LI-RADS 5)",
    "leukemia": "",
    "myeloma": "multiple small lytic lesions of the axial skeleton",
    "lymphoma": "enlarged lymph nodes, the largest {size} cm",
}
_NODES = {
    "lung": "enlarged {side} mediastinal and hilar lymph nodes", "breast": "abnormal ipsilateral axillary lymph nodes",
    "prostate": "enlarged pelvic lymph nodes", "colorectal": "several enlarged pericolonic lymph nodes", "bladder": "enlarged perivesical lymph nodes",
    "cervical": "enlarged pelvic lymph nodes", "esophageal": "enlarged periesophageal lymph nodes", "endometrial": "enlarged pelvic lymph nodes",
    "gastric": "enlarged perigastric lymph nodes", "ovarian": "enlarged retroperitoneal lymph nodes", "pancreatic": "enlarged peripancreatic lymph nodes",
    "liver": "enlarged porta hepatis lymph nodes",
}
METASTASIS_FINDINGS = {
    "mets_liver": "multiple hypoattenuating hepatic lesions consistent with metastases",
    "mets_bone": "osseous lesions in the spine and pelvis consistent with metastases",
    "mets_brain": "an enhancing lesion in the brain with surrounding edema consistent with metastasis",
    "mets_lung": "multiple bilateral pulmonary nodules consistent with metastases",
    "mets_peritoneum": "peritoneal nodularity and ascites consistent with carcinomatosis",
    "mets_nodes_thoracic": "bulky mediastinal adenopathy",
    "mets_nodes_abdominal": "retroperitoneal adenopathy",
    "mets_nodes_axillary": "axillary adenopathy",
}


def primary_finding(cancer: str, site: str, size: float, rng: random.Random) -> str:
    return _PRIMARY[cancer].format(size=size, site=site, mm=int(size * 6 + 8), pirads=rng.choice((4, 5)))


def staging_findings(cancer: str, site: str, size: float, n: str | None, mets: list[str], laterality: str | None, rng: random.Random) -> list[str]:
    """Findings sentences consistent with the primary, nodal status and metastatic sites."""
    out = []
    prim = primary_finding(cancer, site, size, rng)
    if prim:
        out.append(prim[0].upper() + prim[1:] + ".")
    if n and n not in ("N0", "N0(i-)") and cancer in _NODES:
        out.append(_NODES[cancer].format(side=laterality or "ipsilateral").capitalize() + ".")
    elif cancer in _NODES:
        out.append("No pathologically enlarged lymph nodes.")
    for m in mets:
        out.append(METASTASIS_FINDINGS[m].capitalize() + ".")
    if not mets and cancer not in ("leukemia", "myeloma", "lymphoma"):
        out.append("No evidence of distant metastatic disease.")
    return out


RESPONSE_IMPRESSION = {
    "CR": "Complete response: no residual measurable disease.",
    "PR": "Partial response: interval decrease in the size of known disease.",
    "SD": "Stable disease without new lesions.",
    "PD": "Progressive disease: interval growth of known disease and new lesions.",
    "NED": "No evidence of recurrent or metastatic disease.",
    "REC": "New findings consistent with recurrent disease.",
}


# ---------------------------------------------------------------- oncology progress notes


def oncology_consult(rng: random.Random, date: str, age: int, female: bool, cancer_name: str, histology: str, site: str, workup: list[str],
                     smoking: str | None, ecog: int) -> str:
    lines = ["Hematology/Oncology consultation", f"Date: {date}",
             f"{age}-year-old {sex_word(female)} referred for newly diagnosed {histology} of the {site}."]
    if workup:
        lines.append("Work-up to date: " + "; ".join(workup) + ".")
    if smoking:
        lines.append(f"Social history: {smoking}.")
    lines.append(f"ECOG performance status {ecog}.")
    lines.append(f"Assessment: {cancer_name.lower()} ({histology}). " + rng.choice(
        ("Staging studies ordered; will discuss at multidisciplinary tumor board.", "Complete staging, then review treatment options.")))
    return "\n".join(lines)


def treatment_plan_note(rng: random.Random, date: str, cancer_name: str, histology: str, stage_text: str, biomarkers: list[tuple[str, str]],
                        plan_name: str, intent: str, ecog: int, mets: list[str]) -> str:
    lines = ["Oncology follow-up: treatment planning", f"Date: {date}",
             f"Diagnosis: {cancer_name.lower()}, {histology}, {stage_text}."]
    if mets:
        lines.append("Sites of metastatic disease: " + _join(mets) + ".")
    if biomarkers:
        lines.append("Biomarkers: " + "; ".join(f"{n}: {r}" for n, r in biomarkers) + ".")
    lines.append(f"ECOG {ecog}.")
    lines.append(f"Plan: {plan_name} with {intent} intent. " + rng.choice(
        ("Risks and benefits reviewed; patient agrees to proceed.", "Consent obtained; treatment start scheduled.")))
    return "\n".join(lines)


def treatment_visit_note(rng: random.Random, date: str, label: str, cycle: int | None, ecog: int, toxicity: str | None) -> str:
    head = f"Cycle {cycle} of {label}" if cycle else f"On {label}"
    lines = ["Oncology treatment visit", f"Date: {date}", f"{head}. ECOG {ecog}."]
    lines.append(toxicity or rng.choice(("Tolerating treatment without significant toxicity.", "Mild fatigue, no other complaints.",
                                          "Grade 1 nausea controlled with antiemetics.")))
    lines.append(rng.choice(("Labs reviewed and adequate to proceed.", "Proceed with treatment as planned.")))
    return "\n".join(lines)


def radiation_note(rng: random.Random, date: str, label: str, week: int, weeks: int) -> str:
    if week == weeks:
        return "\n".join(["Radiation oncology: completion of treatment", f"Date: {date}", f"Completed {label} over {weeks} weeks.",
                          rng.choice(("Tolerated well with mild skin erythema.", "Grade 1 fatigue; no treatment breaks."))])
    return "\n".join(["Radiation oncology: on-treatment visit", f"Date: {date}", f"Week {week} of {weeks} of {label}.",
                      rng.choice(("Tolerating treatment.", "Mild fatigue; continue as planned."))])


def surgery_note(date: str, label: str, cancer_name: str) -> str:
    return "\n".join(["Operative summary", f"Date: {date}", f"Procedure: {label} for {cancer_name.lower()}.",
                      "Uncomplicated procedure; specimen sent to pathology."])


def progression_note(rng: random.Random, date: str, cancer_name: str, line: int, new_sites: list[str], next_plan: str | None, ecog: int) -> str:
    lines = ["Oncology follow-up", f"Date: {date}", f"Restaging shows progression of {cancer_name.lower()} on line {line} therapy."]
    if new_sites:
        lines.append("New sites: " + _join(new_sites) + ".")
    lines.append(f"ECOG {ecog}.")
    lines.append(f"Plan: change treatment to {next_plan}." if next_plan else "Plan: discussed goals of care; focus on comfort.")
    return "\n".join(lines)


def surveillance_note(rng: random.Random, date: str, cancer_name: str, months: int) -> str:
    return "\n".join(["Oncology survivorship visit", f"Date: {date}",
                      f"{months} months since diagnosis of {cancer_name.lower()}; no clinical evidence of recurrence.",
                      rng.choice(("Continue surveillance imaging and labs.", "Return in 6 months with surveillance studies."))])


def hospice_note(rng: random.Random, date: str, cancer_name: str) -> str:
    return "\n".join(["Goals of care / hospice referral", f"Date: {date}",
                      f"Progressive {cancer_name.lower()} despite therapy; performance status declining.",
                      rng.choice(("Patient and family elect home hospice.", "Transition to comfort-focused care with home hospice."))])


def suspicion_note(rng: random.Random, date: str, cancer_name: str) -> str:
    return "\n".join(["Office visit", f"Date: {date}", f"Clinical findings suspicious for {cancer_name.lower()}; diagnosis added to the problem list.",
                      rng.choice(("Patient declined further work-up at this time.", "Patient will consider biopsy and follow up.")),
                      "Problem list updated."])
